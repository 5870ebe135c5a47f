//! `lore backup`, `lore restore` and `lore doctor`: a backup taken while another connection
//! keeps writing is consistent (no half batch) and clean; a restore checks the backup first,
//! refuses an existing database without `--force` and one that is open elsewhere, and leaves
//! no stale WAL behind; the doctor finds a damaged file and a file not in WAL mode; and the
//! CLI's exit codes.
#![allow(clippy::disallowed_methods)] // a writer thread and the OS clock

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_executor::block_on;
use lore::backup::{backup, doctor, restore};
use lore::sqlite::SqliteStorage;
use lore_base::storage::{Batch, Storage};

use crate::common;
use common::Dir;

/// Writes `n` pairs `a/{i}`, `b/{i}`, each pair in one batch.
fn write_pairs(store: &SqliteStorage, from: usize, n: usize) {
    for i in from..from + n {
        let mut batch = Batch::new();
        batch
            .put(format!("a/{i:08}"), vec![b'x'; 200])
            .put(format!("b/{i:08}"), vec![b'y'; 200]);
        block_on(store.commit(batch)).unwrap();
    }
}

fn keys(db: &Path, prefix: &str) -> Vec<String> {
    let store = SqliteStorage::open(db).unwrap();
    block_on(store.scan_all(prefix))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k[prefix.len()..].to_string())
        .collect()
}

fn seeded(dir: &Dir, name: &str, pairs: usize) -> PathBuf {
    let db = dir.join(name);
    write_pairs(&SqliteStorage::open(&db).unwrap(), 0, pairs);
    db
}

#[test]
fn a_backup_taken_while_another_connection_writes_is_consistent_and_clean() {
    let dir = Dir::new("online");
    let db = seeded(&dir, "live.db", 100);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let store = SqliteStorage::open(&db).unwrap();
            let mut i = 100;
            while !stop.load(Ordering::Relaxed) {
                write_pairs(&store, i, 1);
                i += 1;
            }
            i
        })
    };
    let mut seen = Vec::new();
    for round in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(60));
        let copy = dir.join(&format!("copy-{round}.db"));
        let copied = backup(&db, &copy, false).unwrap();
        let report = doctor(&copy);
        // A backup is a self-contained rollback-journal file: only journal_mode differs.
        let failed: Vec<_> = report.checks.iter().filter(|c| !c.ok).collect();
        assert!(
            failed.len() == 1 && failed[0].check == "journal_mode",
            "{report:?}"
        );
        assert!(!dir.join(&format!("copy-{round}.db-wal")).exists());
        let (a, b) = (keys(&copy, "a/"), keys(&copy, "b/"));
        assert_eq!(a, b, "every pair is whole in the backup");
        assert_eq!(copied.keys as usize, a.len() * 2);
        seen.push(a.len());
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(
        seen[0] >= 100 && seen.windows(2).all(|w| w[0] <= w[1]),
        "{seen:?}"
    );
    assert!(*seen.last().unwrap() <= written);
    assert!(doctor(&db).ok);
}

#[test]
fn backup_refuses_to_replace_a_file_without_force_and_needs_a_lore_database() {
    let dir = Dir::new("refuse");
    let db = seeded(&dir, "lore.db", 3);
    let copy = dir.join("copy.db");
    std::fs::write(&copy, b"precious").unwrap();
    let e = backup(&db, &copy, false).unwrap_err().to_string();
    assert!(e.contains("--force"), "{e}");
    assert_eq!(std::fs::read(&copy).unwrap(), b"precious");
    backup(&db, &copy, true).unwrap();
    assert_eq!(keys(&copy, "a/").len(), 3);

    for e in [
        backup(&db, &db, true).unwrap_err(),
        restore(&db, &dir.join(".").join("lore.db"), true).unwrap_err(),
    ] {
        assert!(e.to_string().contains("the database itself"), "{e}");
    }
    let e = backup(&dir.join("missing.db"), &dir.join("x.db"), false).unwrap_err();
    assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
    let other = dir.join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let e = backup(&other, &dir.join("y.db"), false).unwrap_err();
    assert!(format!("{e:#}").contains("not a lore database"), "{e:#}");
    assert!(!dir.join("y.db").exists());
}

#[test]
fn restore_checks_the_backup_and_replaces_the_database_without_its_old_wal() {
    let dir = Dir::new("restore");
    let db = seeded(&dir, "lore.db", 10);
    let saved = dir.join("saved.db");
    backup(&db, &saved, false).unwrap();

    // Later writes sit in the WAL of a server that is killed: the files as they are then.
    let late = SqliteStorage::open(&db).unwrap();
    write_pairs(&late, 10, 5);
    let crashed = dir.join("crashed.db");
    let probe = dir.join("probe.db");
    for (to, suffix) in [
        (&crashed, ""),
        (&crashed, "-wal"),
        (&probe, ""),
        (&probe, "-wal"),
    ] {
        let with = |p: &Path| PathBuf::from(format!("{}{suffix}", p.display()));
        std::fs::copy(with(&db), with(to)).unwrap();
    }
    drop(late);
    assert_eq!(
        keys(&probe, "a/").len(),
        15,
        "the WAL holds the late writes"
    );
    let db = crashed;

    let e = restore(&saved, &db, false).unwrap_err().to_string();
    assert!(e.contains("--force"), "{e}");
    let restored = restore(&saved, &db, true).unwrap();
    assert_eq!(restored.keys, 20);
    assert_eq!(keys(&db, "a/").len(), 10, "the old WAL was not replayed");
    assert!(doctor(&db).ok, "{:?}", doctor(&db));

    // Into a new path: no --force needed.
    let fresh = dir.join("fresh.db");
    restore(&saved, &fresh, false).unwrap();
    assert_eq!(keys(&fresh, "b/").len(), 10);
    assert!(doctor(&fresh).ok);

    // A backup that is not a lore database, or is damaged, is refused before anything changes.
    let other = dir.join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let e = restore(&other, &db, true).unwrap_err().to_string();
    assert!(e.contains("not a lore database"), "{e}");
    let damaged = damaged_copy(&dir, &saved);
    let e = format!("{:#}", restore(&damaged, &db, true).unwrap_err());
    assert!(e.contains("nothing was restored"), "{e}");
    assert_eq!(keys(&db, "a/").len(), 10);
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn restore_refuses_a_database_that_is_open_elsewhere() {
    let dir = Dir::new("busy");
    let db = seeded(&dir, "lore.db", 4);
    let saved = dir.join("saved.db");
    backup(&db, &saved, false).unwrap();
    let server = SqliteStorage::open(&db).unwrap();
    write_pairs(&server, 4, 2);
    let e = restore(&saved, &db, true).unwrap_err().to_string();
    assert!(e.contains("open in another process"), "{e}");
    assert_eq!(
        block_on(server.scan_all("a/")).unwrap().len(),
        6,
        "the open database is untouched"
    );
    drop(server);
    restore(&saved, &db, true).unwrap();
    assert_eq!(keys(&db, "a/").len(), 4);
}

/// A copy of `db` with a page in the middle overwritten.
fn damaged_copy(dir: &Dir, db: &Path) -> PathBuf {
    let mut bytes = std::fs::read(db).unwrap();
    let page = 4096;
    assert!(bytes.len() > 4 * page, "{} bytes", bytes.len());
    bytes[2 * page..3 * page].fill(0xA5);
    let damaged = dir.join("damaged.db");
    std::fs::write(&damaged, bytes).unwrap();
    damaged
}

#[test]
fn doctor_finds_a_damaged_file_and_a_file_out_of_wal_mode() {
    let dir = Dir::new("doctor");
    let db = seeded(&dir, "lore.db", 200);
    let report = doctor(&db);
    assert!(report.ok, "{report:?}");
    assert_eq!(report.stats.as_ref().unwrap().keys, 400);
    let names: Vec<_> = report.checks.iter().map(|c| c.check).collect();
    assert_eq!(
        names,
        [
            "open",
            "integrity",
            "foreign_keys",
            "schema",
            "journal_mode",
            "synchronous"
        ]
    );

    let damaged = doctor(&damaged_copy(&dir, &db));
    assert!(!damaged.ok);
    let integrity = damaged
        .checks
        .iter()
        .find(|c| c.check == "integrity")
        .unwrap();
    assert!(!integrity.ok, "{damaged:?}");

    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    let report = doctor(&db);
    let failed: Vec<_> = report.checks.iter().filter(|c| !c.ok).collect();
    assert!(
        failed.len() == 1 && failed[0].check == "journal_mode",
        "{report:?}"
    );
}

#[test]
fn the_cli_backs_up_restores_and_exits_non_zero_on_a_problem() {
    let dir = Dir::new("cli");
    let lore = env!("CARGO_BIN_EXE_lore");
    let db = dir.join("lore.db");
    let run = |args: &[&str]| {
        let out = Command::new(lore)
            .args(args)
            .env_remove("LORE_DB")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let db_s = db.to_str().unwrap();
    let (code, _, err) = run(&["init", "--db", db_s, "--org", "acme", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let copy = dir.join("copy.db");
    let copy_s = copy.to_str().unwrap();
    let (code, out, err) = run(&["backup", copy_s, "--db", db_s, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let copied: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(copied["keys"].as_u64().unwrap() > 3, "{copied}");

    let (code, out, _) = run(&["doctor", "--db", db_s, "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["ok"],
        true
    );

    let (code, _, err) = run(&["restore", copy_s, "--db", db_s]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--force"), "{err}");
    let (code, out, err) = run(&["restore", copy_s, "--db", db_s, "--force"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("integrity ok"), "{out}");

    let damaged = damaged_copy(&dir, &seeded(&dir, "big.db", 200));
    let (code, out, err) = run(&["doctor", "--db", damaged.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL  integrity"), "{out}");
    assert!(err.contains("has problems"), "{err}");

    // Against a running `lore serve`: backup works, restore is refused and changes nothing.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Command::new(lore)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--db",
            db_s,
        ])
        .env_remove("LORE_DB")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    let _server = KillOnDrop(server);
    let mut line = String::new();
    while !line.contains("lore listening") {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0);
    }
    let live = dir.join("live.db");
    let (code, _, err) = run(&["backup", live.to_str().unwrap(), "--db", db_s]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&["restore", copy_s, "--db", db_s, "--force"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("open in another process"), "{err}");
    let (code, _, err) = run(&["doctor", "--db", db_s]);
    assert_eq!(code, Some(0), "{err}");
}
