//! The storage port on Spin SQLite, over the same `lore_kv` schema as native SQLite and D1.
//!
//! Spin's `execute` runs one statement at a time on a connection. A [`Batch`] becomes one
//! `BEGIN IMMEDIATE … COMMIT` on this instance's connection; its preconditions run first inside
//! that transaction as inserts into `lore_guard` (as on D1), whose `CHECK (ok = 1)` fails when a
//! condition does not hold, and any failure rolls the whole transaction back.
//!
//! Every statement is a round trip between the component and the host, and the transaction
//! holds the database's write lock across all of them, while other requests' writers poll for
//! it (SQLite's busy handler is not a queue: under load a poller can lose the race for many
//! seconds). So the checks and writes go as multi-row statements, up to [`ROWS_PER_STATEMENT`]
//! keys each: a batch holds the lock for a handful of round trips, whatever its size. A
//! `BEGIN IMMEDIATE` that still finds the database locked after the host's busy timeout is tried
//! again, a few times: nothing was done yet.
//!
//! A component instance serves one request, so the schema check runs once per request: one
//! read of `lore_meta`, and the schema itself only when that read finds no table.

use std::cell::Cell;

use async_trait::async_trait;
use lore_base::storage::{
    Batch, Check, GET_MANY_CHUNK, SCAN_BACK_SQL, ScanPage, Storage, StorageError, Write,
    failing_check, get_many_sql, in_key_order, page_from_rows, scan_back_bounds, scan_bounds,
    scan_sql, schema_statements, validate_key,
};
use spin_sdk::sqlite::{Connection, Value};

const GET: &str = "SELECT v FROM lore_kv WHERE k = ?1";

/// The Spin SQLite database lore uses (`sqlite_databases` in `spin.toml`).
pub const DATABASE: &str = "default";

/// Keys per multi-row statement of a batch (SQLite allows 32,766 parameters).
const ROWS_PER_STATEMENT: usize = 100;
/// How many times a `BEGIN IMMEDIATE` refused as locked is made in all.
const BEGIN_ATTEMPTS: u32 = 3;
const GUARD_CLEAR: &str = "DELETE FROM lore_guard";
const SCHEMA_PROBE: &str = "SELECT value FROM lore_meta WHERE name = 'schema_version'";
/// What SQLite reports when a guard row fails its CHECK.
const GUARD_FAILED: &str = "CHECK constraint failed";

fn backend(e: impl std::fmt::Debug) -> StorageError {
    StorageError::Backend(format!("Spin SQLite: {e:?}"))
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// A Spin SQLite database as lore storage.
pub struct SpinSqliteStorage {
    db: Connection,
    schema_ready: Cell<bool>,
}

impl SpinSqliteStorage {
    /// Opens the database `label` (`"default"` unless `spin.toml` names another).
    pub async fn open(label: &str) -> Result<Self, StorageError> {
        let db = Connection::open(label).await.map_err(backend)?;
        Ok(Self {
            db,
            schema_ready: Cell::new(false),
        })
    }

    async fn rows(&self, sql: &str, args: Vec<Value>) -> Result<Vec<Vec<Value>>, StorageError> {
        let result = self.db.execute(sql, args).await.map_err(backend)?;
        let rows = result.collect().await.map_err(backend)?;
        Ok(rows.into_iter().map(|r| r.values).collect())
    }

    async fn run(&self, sql: &str, args: Vec<Value>) -> Result<(), StorageError> {
        self.rows(sql, args).await.map(drop)
    }

    /// Creates the schema when this database has none yet.
    pub async fn ensure_schema(&self) -> Result<(), StorageError> {
        if self.schema_ready.get() {
            return Ok(());
        }
        if self.rows(SCHEMA_PROBE, Vec::new()).await.is_err() {
            for statement in schema_statements() {
                self.run(&statement, Vec::new()).await?;
            }
        }
        self.schema_ready.set(true);
        Ok(())
    }

    /// Deletes every record (test build: each suite case starts empty).
    pub async fn clear(&self) -> Result<(), StorageError> {
        self.ensure_schema().await?;
        self.run("DELETE FROM lore_kv", Vec::new()).await
    }

    async fn apply(&self, batch: &Batch) -> Result<(), StorageError> {
        for chunk in batch.checks.chunks(ROWS_PER_STATEMENT) {
            let (sql, args) = guards_statement(chunk);
            self.run(&sql, args).await?;
        }
        for run in write_runs(&batch.writes) {
            for chunk in run.chunks(ROWS_PER_STATEMENT) {
                let (sql, args) = writes_statement(chunk);
                self.run(&sql, args).await?;
            }
        }
        if !batch.checks.is_empty() {
            self.run(GUARD_CLEAR, Vec::new()).await?;
        }
        Ok(())
    }

    /// `BEGIN IMMEDIATE`, tried again while the host answers that the database is locked.
    async fn begin(&self) -> Result<(), StorageError> {
        let mut attempt = 1;
        loop {
            match self.db.execute("BEGIN IMMEDIATE", Vec::new()).await {
                Ok(result) => return result.collect().await.map(drop).map_err(backend),
                Err(e) if attempt < BEGIN_ATTEMPTS && is_locked(&e) => attempt += 1,
                Err(e) => return Err(backend(e)),
            }
        }
    }
}

/// Whether a Spin SQLite error is SQLite's "database is locked" (`SQLITE_BUSY`).
fn is_locked(e: &spin_sdk::sqlite::Error) -> bool {
    matches!(e, spin_sdk::sqlite::Error::Io(message) if message.contains("database is locked"))
}

/// One statement inserting a guard row per check: `ok` is whether the check holds.
fn guards_statement(checks: &[Check]) -> (String, Vec<Value>) {
    let mut rows = Vec::with_capacity(checks.len());
    let mut args = Vec::with_capacity(checks.len() * 2);
    for check in checks {
        match check {
            Check::Absent(k) => {
                args.push(text(k));
                rows.push(format!(
                    "(NOT EXISTS (SELECT 1 FROM lore_kv WHERE k = ?{}))",
                    args.len()
                ));
            }
            Check::Equals(k, v) => {
                args.push(text(k));
                args.push(Value::Blob(v.clone()));
                rows.push(format!(
                    "(EXISTS (SELECT 1 FROM lore_kv WHERE k = ?{} AND v = ?{}))",
                    args.len() - 1,
                    args.len()
                ));
            }
        }
    }
    let sql = format!("INSERT INTO lore_guard (ok) VALUES {}", rows.join(", "));
    (sql, args)
}

/// The writes in order, cut into runs of puts and runs of deletes: each run's keys can go in
/// multi-row statements without reordering a put and a delete of one key.
fn write_runs(writes: &[Write]) -> Vec<&[Write]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=writes.len() {
        let ends = i == writes.len()
            || matches!(writes[i], Write::Put(..)) != matches!(writes[i - 1], Write::Put(..));
        if ends {
            runs.push(&writes[start..i]);
            start = i;
        }
    }
    runs
}

/// One statement for a run of puts (an upsert; a key put twice ends with its last value) or of
/// deletes.
fn writes_statement(run: &[Write]) -> (String, Vec<Value>) {
    let mut rows = Vec::with_capacity(run.len());
    let mut args = Vec::with_capacity(run.len() * 2);
    let mut puts = false;
    for write in run {
        match write {
            Write::Put(k, v) => {
                puts = true;
                args.push(text(k));
                args.push(Value::Blob(v.clone()));
                rows.push(format!("(?{}, ?{})", args.len() - 1, args.len()));
            }
            Write::Delete(k) => {
                args.push(text(k));
                rows.push(format!("?{}", args.len()));
            }
        }
    }
    let sql = if puts {
        format!(
            "INSERT INTO lore_kv (k, v) VALUES {} ON CONFLICT(k) DO UPDATE SET v = excluded.v",
            rows.join(", ")
        )
    } else {
        format!("DELETE FROM lore_kv WHERE k IN ({})", rows.join(", "))
    };
    (sql, args)
}

fn bytes_of(value: &Value) -> Result<Vec<u8>, StorageError> {
    match value {
        Value::Blob(b) => Ok(b.clone()),
        // A value written as TEXT by another tool (`sqlite3`, `spin up --sqlite`).
        Value::Text(s) => Ok(s.clone().into_bytes()),
        other => Err(backend(format!("unexpected value column {other:?}"))),
    }
}

#[async_trait(?Send)]
impl Storage for SpinSqliteStorage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        validate_key(key)?;
        self.ensure_schema().await?;
        let rows = self.rows(GET, vec![text(key)]).await?;
        match rows.first().and_then(|r| r.first()) {
            Some(v) => Ok(Some(bytes_of(v)?)),
            None => Ok(None),
        }
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.ensure_schema().await?;
        let mut found = Vec::new();
        for chunk in keys.chunks(GET_MANY_CHUNK) {
            for key in chunk {
                validate_key(key)?;
            }
            let params = chunk.iter().map(|k| text(k)).collect();
            for row in self.rows(&get_many_sql(chunk.len()), params).await? {
                let key = match row.first() {
                    Some(Value::Text(k)) => k.clone(),
                    _ => return Err(backend("a key column is not text")),
                };
                let value = row
                    .get(1)
                    .ok_or_else(|| backend("a row has no value column"))?;
                found.push((key, bytes_of(value)?));
            }
        }
        Ok(in_key_order(keys, found))
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        self.ensure_schema().await?;
        let (after_cursor, lower, upper) = scan_bounds(prefix, after);
        let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                scan_sql(after_cursor),
                vec![text(lower), Value::Text(upper), Value::Integer(fetch)],
            )
            .await?;
        Ok(page_from_rows(key_values(rows)?, limit))
    }

    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        self.ensure_schema().await?;
        let upper = scan_back_bounds(prefix, before);
        let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                SCAN_BACK_SQL,
                vec![text(prefix), Value::Text(upper), Value::Integer(fetch)],
            )
            .await?;
        Ok(page_from_rows(key_values(rows)?, limit))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.ensure_schema().await?;
        // A relaxed batch commits without an fsync; the connection is durable again after it.
        // A host that refuses the pragma commits it durably.
        let relaxed = batch.relaxed
            && self
                .run("PRAGMA synchronous = NORMAL", Vec::new())
                .await
                .is_ok();
        let result = self.commit_batch(&batch).await;
        if relaxed {
            let _ = self.run("PRAGMA synchronous = FULL", Vec::new()).await;
        }
        result
    }
}

impl SpinSqliteStorage {
    /// One transaction: the batch's checks, then its writes.
    async fn commit_batch(&self, batch: &Batch) -> Result<(), StorageError> {
        self.begin().await?;
        match self.apply(batch).await {
            Ok(()) => match self.run("COMMIT", Vec::new()).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    let _ = self.run("ROLLBACK", Vec::new()).await;
                    Err(e)
                }
            },
            Err(e) => {
                let _ = self.run("ROLLBACK", Vec::new()).await;
                match e {
                    StorageError::Backend(message) if message.contains(GUARD_FAILED) => {
                        Err(StorageError::Conflict {
                            key: failing_check(self, &batch.checks).await?,
                        })
                    }
                    other => Err(other),
                }
            }
        }
    }
}

/// The `(key, value)` rows of a scan.
fn key_values(rows: Vec<Vec<Value>>) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        let key = match row.first() {
            Some(Value::Text(k)) => k.clone(),
            _ => return Err(backend("a key column is not text")),
        };
        let value = row
            .get(1)
            .ok_or_else(|| backend("a row has no value column"))?;
        entries.push((key, bytes_of(value)?));
    }
    Ok(entries)
}
