//! Native SQLite storage (rusqlite, bundled SQLite) on the shared schema. One connection per
//! worker thread for reads; WAL lets them run beside the one writer thread per database file,
//! which commits the batches of every thread, many in one transaction when they arrive together
//! (`group_commit`).
//!
//! Reads of small values are kept per connection and answered again without a read transaction
//! while the file's change counters say nobody has written their keys since (`kept`), whichever
//! process wrote them. The counters live beside the database in `<file>-changes`.
//!
//! Durability: `journal_mode=WAL` with `synchronous=FULL` ([`configure`]). Every commit appends
//! its pages to the WAL and fsyncs the WAL before `COMMIT` returns, so a write is on disk before
//! the request that made it is answered: it survives `kill -9` (the WAL is replayed at the next
//! open) and a power cut. `synchronous=NORMAL` would fsync only at checkpoints: still safe
//! against a process kill (the OS holds the written pages), but the last commits could vanish
//! in a power cut.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use crate::group_commit::beside;
pub use crate::group_commit::changes_path;
use crate::group_commit::{Writer, commit_group};
use crate::kept::Kept;
use lore_base::storage::{
    Batch, GET_MANY_CHUNK, SCAN_BACK_SQL, SQL_SCHEMA, ScanPage, Storage, StorageError,
    get_many_sql, in_key_order, page_from_rows, scan_back_bounds, scan_bounds, scan_sql,
    validate_key,
};
use lore_changes::Changes;

/// The journal mode every lore connection runs in (stored in the file once set).
pub const JOURNAL_MODE: &str = "WAL";
/// The `synchronous` level every lore connection runs with (per connection, not stored):
/// FULL, so each commit fsyncs the WAL before it returns.
pub const SYNCHRONOUS: &str = "FULL";
/// `PRAGMA synchronous` reads back FULL as 2.
pub const SYNCHRONOUS_FULL: i64 = 2;

/// The files kept beside the database at `db`: SQLite's WAL and shared memory (`-wal`, `-shm`)
/// and the change counters (`-changes`). Once every connection to `db` has closed cleanly none
/// holds data (SQLite checkpoints the WAL into the file at the last close), so a database is
/// moved, replaced or removed with them.
pub fn side_files(db: &Path) -> [PathBuf; 3] {
    ["-wal", "-shm", "-changes"].map(|suffix| beside(db, suffix))
}

/// The settings every connection to a lore database gets: a 10 s busy timeout (one writer at a
/// time; the others wait), WAL, and `synchronous=FULL`.
pub fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", JOURNAL_MODE)?;
    conn.pragma_update(None, "synchronous", SYNCHRONOUS)
}

/// A handle to one SQLite connection. Not `Send`: each worker thread opens its own, for reads;
/// commits to a database file go to the process's writer for it (`group_commit`), which
/// commits concurrent batches together.
pub struct SqliteStorage {
    conn: Rc<Connection>,
    /// `None` for a private in-memory database, which commits on its own connection.
    writer: Option<Arc<Writer>>,
    /// Small values read, answered again while their keys are unchanged.
    kept: Kept,
    /// Statements this connection ran to read (tests count them).
    reads: Cell<u64>,
}

fn backend(e: rusqlite::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

/// A connection to `path` with the settings and the schema.
fn connect(path: &Path) -> Result<Connection, StorageError> {
    set_up(Connection::open(path).map_err(backend)?)
}

/// `conn` with the settings every connection gets and the schema.
fn set_up(conn: Connection) -> Result<Connection, StorageError> {
    configure(&conn).map_err(backend)?;
    conn.execute_batch(SQL_SCHEMA).map_err(backend)?;
    Ok(conn)
}

impl SqliteStorage {
    /// One page of a range query (`scan_sql` or `SCAN_BACK_SQL`): rows between `lower` and
    /// `upper`, at most `limit` and one more that only signals more.
    fn range(
        &self,
        sql: &str,
        lower: &str,
        upper: &str,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        self.reads.set(self.reads.get() + 1);
        let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(sql).map_err(backend)?;
        let rows = stmt
            .query_map(params![lower, upper, fetch], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(backend)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend)?;
        Ok(page_from_rows(rows, limit))
    }

    /// Opens (creating if needed) the database file and applies the schema.
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        let conn = connect(path)?;
        // The writer and the change counters are per file, whatever path names it.
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let writer = Writer::for_path(&canonical, SYNCHRONOUS, || connect(path))?;
        Ok(Self::new(conn, Some(writer)))
    }

    /// A private in-memory database, for tests.
    pub fn open_in_memory() -> Result<Self, StorageError> {
        let conn = set_up(Connection::open_in_memory().map_err(backend)?)?;
        Ok(Self::new(conn, None))
    }

    fn new(conn: Connection, writer: Option<Arc<Writer>>) -> Self {
        Self {
            conn: Rc::new(conn),
            writer,
            kept: Kept::default(),
            reads: Cell::new(0),
        }
    }

    /// How many statements this connection has run to read: kept values are answered without.
    pub fn reads(&self) -> u64 {
        self.reads.get()
    }

    /// The file's change counters, when this connection may keep values.
    fn changes(&self) -> Option<&Changes> {
        self.writer.as_ref()?.changes.as_deref()
    }

    /// One key from the database.
    fn read_one(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.reads.set(self.reads.get() + 1);
        let mut stmt = self
            .conn
            .prepare_cached("SELECT v FROM lore_kv WHERE k = ?1")
            .map_err(backend)?;
        stmt.query_row(params![key], |r| r.get(0))
            .optional()
            .map_err(backend)
    }

    /// Keys from the database, one statement per [`GET_MANY_CHUNK`] of them.
    fn read_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let mut rows = Vec::new();
        for chunk in keys.chunks(GET_MANY_CHUNK) {
            self.reads.set(self.reads.get() + 1);
            let mut stmt = self
                .conn
                .prepare_cached(&get_many_sql(chunk.len()))
                .map_err(backend)?;
            let found = stmt
                .query_map(rusqlite::params_from_iter(chunk), |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .map_err(backend)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend)?;
            rows.extend(found);
        }
        Ok(in_key_order(keys, rows))
    }

    /// `PRAGMA integrity_check`, `"ok"` when the file is sound.
    pub fn integrity_check(&self) -> Result<String, StorageError> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(backend)
    }
}

#[async_trait(?Send)]
impl Storage for SqliteStorage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        validate_key(key)?;
        let Some(changes) = self.changes() else {
            return self.read_one(key);
        };
        if let Some(value) = self.kept.get(changes, key) {
            return Ok(value);
        }
        let reading = Kept::before_read(changes, key);
        let value = self.read_one(key)?;
        self.kept.keep(reading, key, &value);
        Ok(value)
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        for key in keys {
            validate_key(key)?;
        }
        let Some(changes) = self.changes() else {
            return self.read_many(keys);
        };
        let mut out: Vec<Option<Option<Vec<u8>>>> =
            keys.iter().map(|k| self.kept.get(changes, k)).collect();
        let missing: Vec<usize> = (0..keys.len()).filter(|i| out[*i].is_none()).collect();
        if missing.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        let readings: Vec<_> = missing
            .iter()
            .map(|i| Kept::before_read(changes, &keys[*i]))
            .collect();
        let unread: Vec<String> = missing.iter().map(|i| keys[*i].clone()).collect();
        let values = self.read_many(&unread)?;
        for ((i, reading), value) in missing.into_iter().zip(readings).zip(values) {
            self.kept.keep(reading, &keys[i], &value);
            out[i] = Some(value);
        }
        Ok(out.into_iter().flatten().collect())
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let (after_cursor, lower, upper) = scan_bounds(prefix, after);
        self.range(scan_sql(after_cursor), lower, &upper, limit)
    }

    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let upper = scan_back_bounds(prefix, before);
        self.range(SCAN_BACK_SQL, prefix, &upper, limit)
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
        if let Some(writer) = &self.writer {
            return writer.commit(batch).await;
        }
        // A private in-memory database: on its own connection. A relaxed batch commits without
        // an fsync; the connection is durable again after it.
        if batch.relaxed {
            self.conn
                .pragma_update(None, "synchronous", "NORMAL")
                .map_err(backend)?;
        }
        let result = commit_group(&self.conn, std::iter::once(&batch))
            .pop()
            .expect("one outcome per batch");
        if batch.relaxed {
            self.conn
                .pragma_update(None, "synchronous", SYNCHRONOUS)
                .map_err(backend)?;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    /// A relaxed batch commits without an fsync and leaves the connection durable.
    #[test]
    fn a_relaxed_batch_leaves_the_connection_durable() {
        use lore_base::storage::{Batch, Storage};
        let store = super::SqliteStorage::open_in_memory().unwrap();
        let mut batch = Batch::new();
        batch.relaxed().put("rx/k", b"v".to_vec());
        futures_executor::block_on(store.commit(batch)).unwrap();
        let level: i64 = store
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!(level, 2, "FULL");
    }

    /// Regression: the scan query had two lower bounds (`k >= prefix AND k > cursor`); SQLite
    /// seeked by the prefix and filtered its way to the cursor, so deep pages cost O(n) (a page
    /// after entity 90,000 of 100,000 took ~0.4 s). The plan must seek by both bounds.
    #[test]
    fn scans_seek_to_the_cursor() {
        let store = super::SqliteStorage::open_in_memory().unwrap();
        for after_cursor in [true, false] {
            let plan: String = store
                .conn
                .query_row(
                    &format!(
                        "EXPLAIN QUERY PLAN {}",
                        lore_base::storage::scan_sql(after_cursor)
                    ),
                    rusqlite::params!["a", "b", 10],
                    |r| r.get(3),
                )
                .unwrap();
            assert!(
                plan.contains("(k>? AND k<?)") || plan.contains("(k>=? AND k<?)"),
                "{plan}"
            );
        }
        let plan: String = store
            .conn
            .query_row(
                &format!("EXPLAIN QUERY PLAN {}", lore_base::storage::SCAN_BACK_SQL),
                rusqlite::params!["a", "b", 10],
                |r| r.get(3),
            )
            .unwrap();
        assert!(
            plan.contains("(k>? AND k<?)") || plan.contains("(k>=? AND k<?)"),
            "{plan}"
        );
    }

    /// Regression: with `LIMIT ?3` SQLite planned the scan's statement again at every run (a
    /// bound `LIMIT` parameter is read as a constant at planning time, so binding it expires
    /// the plan). Scans of every shape, with different bounds and limits, through the cached
    /// statements must never be re-prepared.
    #[test]
    fn scans_are_planned_once() {
        use lore_base::storage::{Batch, Storage};
        use rusqlite::StatementStatus;
        let store = super::SqliteStorage::open_in_memory().unwrap();
        let mut batch = Batch::default();
        for i in 0..20 {
            batch.put(format!("p/{i:02}"), vec![1]);
        }
        futures_executor::block_on(store.commit(batch)).unwrap();
        for limit in [1, 5, 3, 50] {
            futures_executor::block_on(async {
                store.scan("p/", None, limit).await.unwrap();
                store.scan("p/", Some("p/03"), limit).await.unwrap();
                store.scan_back("p/", None, limit).await.unwrap();
                store.scan_back("q/", Some("q/9"), limit).await.unwrap();
            });
        }
        let sqls = [
            lore_base::storage::scan_sql(false),
            lore_base::storage::scan_sql(true),
            lore_base::storage::SCAN_BACK_SQL,
        ];
        for sql in sqls {
            let stmt = store.conn.prepare_cached(sql).unwrap();
            assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0, "{sql}");
            assert!(stmt.get_status(StatementStatus::Run) >= 4, "{sql}");
        }
    }

    /// The settings the durability promise rests on (ARCHITECTURE.md, "Durability"): WAL,
    /// stored in the file, and `synchronous=FULL` on the connection that writes.
    #[test]
    fn connections_run_in_wal_mode_with_full_syncs() {
        let dir = std::env::temp_dir().join(format!("lore-sqlite-sync-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = super::SqliteStorage::open(&dir.join("sync.db")).unwrap();
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let level: i64 = store
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!(level, super::SYNCHRONOUS_FULL);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_survives_reopening_the_file() {
        use lore_base::storage::Storage;
        let dir = std::env::temp_dir().join(format!("lore-sqlite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("reopen.db");
        let _ = std::fs::remove_file(&path);
        {
            let s = super::SqliteStorage::open(&path).unwrap();
            futures_executor::block_on(s.put("k/1", b"v".to_vec())).unwrap();
        }
        let s = super::SqliteStorage::open(&path).unwrap();
        assert_eq!(
            futures_executor::block_on(s.get("k/1")).unwrap(),
            Some(b"v".to_vec())
        );
        assert_eq!(s.integrity_check().unwrap(), "ok");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A kept value is answered without a statement until its key is written: by this
    /// connection, by another one of the process, or by another process (a second mapping of
    /// the counters and a connection of its own stand for one here; `tests/it/processes.rs` runs
    /// real ones).
    #[test]
    fn kept_values_are_read_again_after_any_write_of_their_key() {
        use futures_executor::block_on;
        use lore_base::storage::Storage;
        use rusqlite::Connection;
        let dir = std::env::temp_dir().join(format!("lore-sqlite-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kept.db");
        let s = super::SqliteStorage::open(&path).unwrap();
        block_on(s.put("o/a/stamp", b"1".to_vec())).unwrap();
        let keys = ["o/a/stamp".to_string(), "o/a/absent".to_string()];
        assert_eq!(
            block_on(s.get_many(&keys)).unwrap(),
            [Some(b"1".to_vec()), None]
        );
        let before = s.reads();
        for _ in 0..3 {
            assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"1".to_vec()));
            assert_eq!(block_on(s.get("o/a/absent")).unwrap(), None);
            assert_eq!(
                block_on(s.get_many(&keys)).unwrap(),
                [Some(b"1".to_vec()), None]
            );
        }
        assert_eq!(
            s.reads(),
            before,
            "kept values, absent keys too, need no statement"
        );

        // This connection writes: its next read sees it.
        block_on(s.put("o/a/stamp", b"2".to_vec())).unwrap();
        assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"2".to_vec()));
        assert_eq!(s.reads(), before + 1);
        // A write of another key leaves the kept value alone.
        block_on(s.put("o/a/other", b"x".to_vec())).unwrap();
        assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"2".to_vec()));
        assert_eq!(s.reads(), before + 1);

        // Another connection of this process (another worker thread's).
        let t = super::SqliteStorage::open(&path).unwrap();
        block_on(t.put("o/a/absent", b"now".to_vec())).unwrap();
        assert_eq!(
            block_on(s.get_many(&keys)).unwrap(),
            [Some(b"2".to_vec()), Some(b"now".to_vec())]
        );
        assert_eq!(s.reads(), before + 2, "only the written key is read");

        // Another process: its own counters mapping and connection, writing by the protocol.
        let other =
            lore_changes::Changes::open(&super::changes_path(&path.canonicalize().unwrap()))
                .unwrap();
        let conn = Connection::open(&path).unwrap();
        let writing = other.begin([b"o/a/stamp".as_slice()]);
        // While the write is under way the value is read, and not kept.
        assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"2".to_vec()));
        conn.execute("UPDATE lore_kv SET v = X'33' WHERE k = 'o/a/stamp'", [])
            .unwrap();
        assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"3".to_vec()));
        drop(writing);
        let reads = s.reads();
        assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"3".to_vec()));
        assert_eq!(block_on(s.get("o/a/stamp")).unwrap(), Some(b"3".to_vec()));
        assert_eq!(s.reads(), reads + 1, "kept again once the write has ended");

        // Large values are never kept.
        let big = vec![7u8; super::super::kept::KEEP_BYTES + 1];
        block_on(s.put("o/a/big", big.clone())).unwrap();
        let reads = s.reads();
        assert_eq!(block_on(s.get("o/a/big")).unwrap(), Some(big.clone()));
        assert_eq!(block_on(s.get("o/a/big")).unwrap(), Some(big));
        assert_eq!(s.reads(), reads + 2);
        drop((s, t, conn));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
