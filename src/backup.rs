//! `lore backup`, `lore restore` and `lore doctor`: operating on the SQLite file itself.
//!
//! A backup is taken with SQLite's online backup API in one step, inside one read transaction:
//! in WAL mode that reads a consistent snapshot while `lore serve` keeps writing (readers never
//! block the writer). The copy is written to a temporary file beside the destination, switched
//! to a self-contained rollback-journal file, checked, fsynced, and renamed into place, so a
//! backup path holds either nothing or a complete backup. A restore checks the backup
//! (`integrity_check`, lore's schema) before anything else, refuses a database that is open
//! elsewhere (a running server), and replaces the target the same way: temporary file, fsync,
//! rename, fsync of the directory.
#![allow(clippy::disallowed_methods)] // a backup that is busy waits on the OS clock

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use crate::group_commit::beside;
use crate::sqlite::{JOURNAL_MODE, SYNCHRONOUS, SYNCHRONOUS_FULL, configure, side_files};

/// The schema version this build reads and writes (`lore_meta.schema_version`).
pub const SCHEMA_VERSION: &str = "1";

/// How long a backup step may keep meeting a busy source before giving up.
const BUSY_PATIENCE: Duration = Duration::from_secs(60);

/// `lore backup <file>`.
#[derive(clap::Args)]
pub struct BackupArgs {
    /// Where to write the backup (a single self-contained SQLite file).
    pub file: PathBuf,
    #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
    pub db: PathBuf,
    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

/// `lore restore <file>`.
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// A backup written by `lore backup` (or any lore database file).
    pub file: PathBuf,
    /// The database to restore into; nothing may have it open.
    #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
    pub db: PathBuf,
    /// Replace the database if it exists.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

/// `lore doctor`.
#[derive(clap::Args)]
pub struct DoctorArgs {
    #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
    pub db: PathBuf,
    #[arg(long)]
    pub json: bool,
}

/// What `backup` and `restore` copied.
#[derive(Debug, Serialize)]
pub struct Copied {
    pub from: PathBuf,
    pub to: PathBuf,
    /// Rows of `lore_kv` in the copy.
    pub keys: u64,
    pub bytes: u64,
}

/// One check of `lore doctor`.
#[derive(Debug, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// `lore doctor`'s report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub db: PathBuf,
    pub ok: bool,
    pub checks: Vec<Finding>,
    /// Sizes and counts, when the file could be read.
    pub stats: Option<Stats>,
}

#[derive(Debug, Serialize)]
pub struct Stats {
    pub keys: u64,
    pub page_size: u64,
    pub page_count: u64,
    pub freelist_count: u64,
    pub file_bytes: u64,
    pub wal_bytes: u64,
}

/// Opens an existing database (never creates one) for reading and writing, as a server would.
fn open_existing(path: &Path) -> anyhow::Result<Connection> {
    if !path.is_file() {
        bail!("{} does not exist", path.display());
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .with_context(|| format!("cannot open {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(conn)
}

/// `PRAGMA integrity_check`: `Ok(())`, or the problems it lists.
fn integrity(conn: &Connection) -> Result<(), String> {
    let rows: Result<Vec<String>, _> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect());
    match rows {
        Ok(rows) if rows == ["ok"] => Ok(()),
        Ok(rows) => Err(rows.join("; ")),
        Err(e) => Err(e.to_string()),
    }
}

/// The file holds lore's tables at a schema version this build knows.
fn schema(conn: &Connection) -> Result<String, String> {
    let table = |name: &str| -> Result<bool, String> {
        conn.query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n == 1)
        .map_err(|e| e.to_string())
    };
    for name in ["lore_kv", "lore_meta"] {
        if !table(name)? {
            return Err(format!("no {name} table: not a lore database"));
        }
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM lore_meta WHERE name = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .ok();
    match version.as_deref() {
        Some(SCHEMA_VERSION) => Ok(format!("lore schema version {SCHEMA_VERSION}")),
        Some(v) => Err(format!(
            "schema version {v}; this build knows version {SCHEMA_VERSION}"
        )),
        None => Err("lore_meta has no schema_version".into()),
    }
}

fn count_keys(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT count(*) FROM lore_kv", [], |r| r.get::<_, i64>(0))
        .map(|n| u64::try_from(n).unwrap_or(0))
}

/// Copies the whole of `from` into `to` in one step (one read transaction on `from`), retrying
/// while the source is busy.
fn copy_database(from: &Connection, to: &mut Connection) -> anyhow::Result<()> {
    let backup = Backup::new(from, to)?;
    let started = Instant::now();
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            _ if started.elapsed() > BUSY_PATIENCE => {
                bail!("the database stayed busy for {BUSY_PATIENCE:?}; try again")
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A temporary file beside `target` (same directory, so the rename is atomic), removed with its
/// journal unless it was renamed into place.
struct Temp {
    path: PathBuf,
    kept: bool,
}

impl Temp {
    fn beside(target: &Path) -> anyhow::Result<Self> {
        let dir = parent_dir(target);
        let name = target
            .file_name()
            .with_context(|| format!("{} is not a file path", target.display()))?
            .to_string_lossy();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(".{name}.tmp-{}-{nanos}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Ok(Self { path, kept: false })
    }

    /// fsyncs the file, renames it over `target` and fsyncs the directory.
    fn persist(mut self, target: &Path) -> anyhow::Result<()> {
        File::open(&self.path)?.sync_all()?;
        std::fs::rename(&self.path, target)
            .with_context(|| format!("cannot move the new file to {}", target.display()))?;
        self.kept = true;
        File::open(parent_dir(target))?.sync_all()?;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.kept {
            for suffix in ["", "-journal", "-wal", "-shm"] {
                let _ = std::fs::remove_file(beside(&self.path, suffix));
            }
        }
    }
}

/// Copying a database onto itself would replace the file under its own connections.
fn refuse_same_file(a: &Path, b: &Path) -> anyhow::Result<()> {
    if let (Ok(a), Ok(b)) = (a.canonicalize(), b.canonicalize())
        && a == b
    {
        bail!("{} is the database itself; name another file", b.display());
    }
    Ok(())
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes a consistent copy of the database at `db` to `dest`, while a server may be serving
/// and writing it. The copy is a self-contained file (rollback journal, no `-wal`), checked
/// with `integrity_check` before it is renamed into place.
pub fn backup(db: &Path, dest: &Path, force: bool) -> anyhow::Result<Copied> {
    refuse_same_file(db, dest)?;
    if dest.exists() && !force {
        bail!("{} exists; pass --force to replace it", dest.display());
    }
    let source = open_existing(db)?;
    schema(&source).map_err(|e| anyhow::anyhow!("{}: {e}", db.display()))?;
    let temp = Temp::beside(dest)?;
    let mut copy = Connection::open(&temp.path)
        .with_context(|| format!("cannot create {}", temp.path.display()))?;
    copy_database(&source, &mut copy).context("the backup failed")?;
    drop(source);
    let mode: String = copy.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("delete") {
        bail!("the backup could not leave WAL mode ({mode})");
    }
    integrity(&copy).map_err(|e| anyhow::anyhow!("the backup fails its integrity check: {e}"))?;
    let keys = count_keys(&copy)?;
    copy.close().map_err(|(_, e)| e)?;
    let bytes = std::fs::metadata(&temp.path)?.len();
    temp.persist(dest)?;
    Ok(Copied {
        from: db.to_path_buf(),
        to: dest.to_path_buf(),
        keys,
        bytes,
    })
}

/// Replaces the database at `db` with the backup `from`: the backup is checked first, a
/// database that exists needs `force` and must not be open anywhere else (a running server).
pub fn restore(from: &Path, db: &Path, force: bool) -> anyhow::Result<Copied> {
    refuse_same_file(from, db)?;
    if !from.is_file() {
        bail!("{} does not exist", from.display());
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let source = Connection::open_with_flags(from, flags)
        .with_context(|| format!("cannot open {}", from.display()))?;
    integrity(&source).map_err(|e| {
        anyhow::anyhow!(
            "{} fails its integrity check, nothing was restored: {e}",
            from.display()
        )
    })?;
    schema(&source)
        .map_err(|e| anyhow::anyhow!("{}: {e}; nothing was restored", from.display()))?;
    let replacing = db.exists();
    if replacing && !force {
        bail!(
            "{} exists; pass --force to replace it with {}",
            db.display(),
            from.display()
        );
    }
    let temp = Temp::beside(db)?;
    let mut copy = Connection::open(&temp.path)
        .with_context(|| format!("cannot create {}", temp.path.display()))?;
    copy_database(&source, &mut copy).context("the restore failed")?;
    drop(source);
    configure(&copy)?;
    integrity(&copy).map_err(|e| anyhow::anyhow!("the restored copy fails its check: {e}"))?;
    let keys = count_keys(&copy)?;
    copy.close().map_err(|(_, e)| e)?;
    let bytes = std::fs::metadata(&temp.path)?.len();
    if replacing {
        retire(db)?;
    }
    temp.persist(db)?;
    Ok(Copied {
        from: from.to_path_buf(),
        to: db.to_path_buf(),
        keys,
        bytes,
    })
}

/// Makes sure nothing else has `db` open and leaves it as one self-contained file: leaving WAL
/// mode checkpoints the WAL and needs the only connection, so it fails while a server runs.
/// Without this a stale `-wal` beside the restored file would be replayed into it.
fn retire(db: &Path) -> anyhow::Result<()> {
    let conn = open_existing(db)?;
    conn.busy_timeout(Duration::ZERO)?;
    match conn.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0)) {
        Ok(mode) if mode.eq_ignore_ascii_case("delete") => {}
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            bail!(
                "{} is open in another process (is `lore serve` running?); stop it and try again",
                db.display()
            )
        }
        Ok(mode) => bail!(
            "{} stays in {mode} mode, so something else has it open; stop it and try again",
            db.display()
        ),
        // A damaged file cannot be checkpointed; it is being replaced, so its WAL goes too.
        Err(e) => {
            tracing::warn!(db = %db.display(), error = %e, "replacing an unreadable database")
        }
    }
    drop(conn);
    for side in side_files(db) {
        let _ = std::fs::remove_file(side);
    }
    Ok(())
}

/// Checks the database at `db` without changing its data: integrity, foreign keys, lore's
/// schema, WAL mode, and the `synchronous` level lore's connections run with.
pub fn doctor(db: &Path) -> Report {
    let mut checks = Vec::new();
    let mut stats = None;
    let mut add = |check: &'static str, result: Result<String, String>| {
        let ok = result.is_ok();
        let detail = result.unwrap_or_else(|e| e);
        checks.push(Finding { check, ok, detail });
    };
    match open_existing(db) {
        Err(e) => add("open", Err(format!("{e:#}"))),
        Ok(conn) => {
            add("open", Ok("readable".into()));
            add("integrity", integrity(&conn).map(|()| "ok".into()));
            add("foreign_keys", foreign_keys(&conn));
            add("schema", schema(&conn));
            add("journal_mode", journal_mode(&conn));
            add("synchronous", synchronous(&conn));
            stats = read_stats(&conn, db).ok();
        }
    }
    Report {
        db: db.to_path_buf(),
        ok: checks.iter().all(|c| c.ok),
        checks,
        stats,
    }
}

fn foreign_keys(conn: &Connection) -> Result<String, String> {
    let violations: Result<Vec<String>, _> = conn
        .prepare("PRAGMA foreign_key_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect());
    match violations {
        Ok(v) if v.is_empty() => Ok("no violations".into()),
        Ok(v) => Err(format!("violations in {}", v.join(", "))),
        Err(e) => Err(e.to_string()),
    }
}

/// WAL is stored in the file: a database that is not in WAL mode was changed by something
/// other than lore (which sets it at every open).
fn journal_mode(conn: &Connection) -> Result<String, String> {
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if mode.eq_ignore_ascii_case(JOURNAL_MODE) {
        Ok(mode)
    } else {
        Err(format!(
            "{mode}, expected {JOURNAL_MODE} (lore sets it again at its next start)"
        ))
    }
}

/// `synchronous` is per connection: this applies lore's setting and reads it back, so a build
/// whose SQLite would not honour it is caught.
fn synchronous(conn: &Connection) -> Result<String, String> {
    conn.pragma_update(None, "synchronous", SYNCHRONOUS)
        .map_err(|e| e.to_string())?;
    let level: i64 = conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if level == SYNCHRONOUS_FULL {
        Ok(format!(
            "{SYNCHRONOUS}: lore's connections fsync the WAL at every commit"
        ))
    } else {
        Err(format!(
            "{level}, expected {SYNCHRONOUS} ({SYNCHRONOUS_FULL})"
        ))
    }
}

fn read_stats(conn: &Connection, db: &Path) -> anyhow::Result<Stats> {
    let pragma = |name: &str| -> rusqlite::Result<u64> {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
    };
    let mut wal = db.to_path_buf().into_os_string();
    wal.push("-wal");
    Ok(Stats {
        keys: count_keys(conn)?,
        page_size: pragma("page_size")?,
        page_count: pragma("page_count")?,
        freelist_count: pragma("freelist_count")?,
        file_bytes: std::fs::metadata(db)?.len(),
        wal_bytes: std::fs::metadata(wal).map_or(0, |m| m.len()),
    })
}

/// Prints a report for people.
pub fn print_report(report: &Report) {
    println!("lore doctor: {}", report.db.display());
    for c in &report.checks {
        let mark = if c.ok { "ok  " } else { "FAIL" };
        println!("  {mark}  {:<13} {}", c.check, c.detail);
    }
    if let Some(s) = &report.stats {
        println!(
            "  {} keys; {} bytes ({} pages of {} bytes, {} free); WAL {} bytes",
            s.keys, s.file_bytes, s.page_count, s.page_size, s.freelist_count, s.wal_bytes
        );
    }
    if report.ok {
        println!("healthy");
    } else {
        let failed = report.checks.iter().filter(|c| !c.ok).count();
        println!("{failed} check(s) failed");
    }
}
