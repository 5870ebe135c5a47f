//! The storage port on a Durable Object's own SQLite (`ctx.storage.sql`), over the same
//! `lore_kv` schema as every SQL backend. The object's database is beside it, so a read is a
//! call into SQLite, not a round trip.
//!
//! `sql.exec` is synchronous and an object runs one piece of code at a time, so a batch's
//! checks and writes run with nothing interleaved; they run inside `transactionSync` so that a
//! failing statement rolls back those before it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use async_trait::async_trait;
use js_sys::{Function, Reflect};
use lore_base::storage::{
    Batch, Check, GET_MANY_CHUNK, SCAN_BACK_SQL, ScanPage, Storage, StorageError, Write,
    get_many_sql, in_key_order, page_from_rows, scan_back_bounds, scan_bounds, scan_sql,
    schema_statements, validate_key,
};
use wasm_bindgen::JsValue;
use wasm_bindgen::closure::Closure;
use worker::{SqlCursor, SqlStorage, SqlStorageValue};

const GET: &str = "SELECT v FROM lore_kv WHERE k = ?";
const PUT: &str =
    "INSERT INTO lore_kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v";
const DELETE: &str = "DELETE FROM lore_kv WHERE k = ?";
const HAS_SCHEMA: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'lore_kv'";

fn backend(e: impl std::fmt::Display) -> StorageError {
    StorageError::Backend(format!("object SQLite: {e}"))
}

/// One Durable Object's SQLite database as lore storage.
pub struct ObjectStorage {
    sql: SqlStorage,
    /// `ctx.storage`, for `transactionSync`.
    raw: JsValue,
    /// Whether `lore_kv` is known to exist. The schema is created by the first write, so an
    /// object that is only ever asked about (a request for an org that does not exist) stores
    /// nothing.
    ready: Cell<bool>,
}

fn text(s: &str) -> SqlStorageValue {
    SqlStorageValue::String(s.to_string())
}

fn rows(cursor: &SqlCursor) -> Result<Vec<Vec<SqlStorageValue>>, StorageError> {
    cursor
        .raw()
        .map(|row| row.map_err(backend))
        .collect::<Result<_, _>>()
}

fn key_value(row: Vec<SqlStorageValue>) -> Result<(String, Vec<u8>), StorageError> {
    let mut cells = row.into_iter();
    match (cells.next(), cells.next()) {
        (Some(SqlStorageValue::String(k)), Some(v)) => Ok((k, bytes(v)?)),
        _ => Err(backend("a row is not (text, blob)")),
    }
}

fn bytes(value: SqlStorageValue) -> Result<Vec<u8>, StorageError> {
    match value {
        SqlStorageValue::Blob(b) => Ok(b),
        // A value written as TEXT by another tool.
        SqlStorageValue::String(s) => Ok(s.into_bytes()),
        other => Err(backend(format!("unexpected value column {other:?}"))),
    }
}

/// The value stored under `key`, if any.
fn stored(sql: &SqlStorage, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
    let found = rows(&sql.exec(GET, vec![text(key)]).map_err(backend)?)?;
    found
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next())
        .map(bytes)
        .transpose()
}

impl ObjectStorage {
    pub fn new(storage: &worker::Storage) -> Self {
        Self {
            sql: storage.sql(),
            raw: AsRef::<JsValue>::as_ref(storage.as_raw()).clone(),
            ready: Cell::new(false),
        }
    }

    fn exec(&self, sql: &str, args: Vec<SqlStorageValue>) -> Result<SqlCursor, StorageError> {
        self.sql.exec(sql, args).map_err(backend)
    }

    /// Whether the schema exists (looked up until it does).
    fn ready(&self) -> Result<bool, StorageError> {
        if !self.ready.get() {
            let found = rows(&self.exec(HAS_SCHEMA, Vec::new())?)?;
            let exists = matches!(
                found.first().and_then(|r| r.first()),
                Some(SqlStorageValue::Integer(n)) if *n > 0
            );
            self.ready.set(exists);
        }
        Ok(self.ready.get())
    }

    fn create_schema(&self) -> Result<(), StorageError> {
        if self.ready()? {
            return Ok(());
        }
        for statement in schema_statements() {
            rows(&self.exec(&statement, Vec::new())?)?;
        }
        self.ready.set(true);
        Ok(())
    }

    /// Empties the store (the test build's suites start each case on an empty one).
    pub fn clear(&self) -> Result<(), StorageError> {
        if self.ready()? {
            rows(&self.exec("DELETE FROM lore_kv", Vec::new())?)?;
        }
        Ok(())
    }

    /// Runs `body` inside `ctx.storage.transactionSync`: if it fails, nothing it wrote stays.
    fn transaction(
        &self,
        body: impl FnOnce() -> Result<(), StorageError> + 'static,
    ) -> Result<(), StorageError> {
        let outcome: Rc<RefCell<Option<Result<(), StorageError>>>> = Rc::default();
        let out = outcome.clone();
        let closure = Closure::once_into_js(move || -> Result<JsValue, JsValue> {
            let result = body();
            let failed = result.is_err();
            *out.borrow_mut() = Some(result);
            // Throwing rolls the transaction back.
            if failed {
                Err(JsValue::from_str("lore: batch rolled back"))
            } else {
                Ok(JsValue::UNDEFINED)
            }
        });
        let run: Function = Reflect::get(&self.raw, &"transactionSync".into())
            .map_err(|e| backend(format!("{e:?}")))?
            .into();
        let thrown = run.call1(&self.raw, &closure);
        match outcome.borrow_mut().take() {
            Some(result) => result,
            None => Err(backend(format!("transactionSync did not run: {thrown:?}"))),
        }
    }
}

#[async_trait(?Send)]
impl Storage for ObjectStorage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        validate_key(key)?;
        if !self.ready()? {
            return Ok(None);
        }
        stored(&self.sql, key)
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        for key in keys {
            validate_key(key)?;
        }
        if !self.ready()? {
            return Ok(vec![None; keys.len()]);
        }
        let mut found = Vec::new();
        for chunk in keys.chunks(GET_MANY_CHUNK) {
            let args = chunk.iter().map(|k| text(k)).collect();
            for row in rows(&self.exec(&get_many_sql(chunk.len()), args)?)? {
                found.push(key_value(row)?);
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
        if !self.ready()? {
            return Ok(ScanPage {
                entries: Vec::new(),
                cursor: None,
            });
        }
        let (after_cursor, lower, upper) = scan_bounds(prefix, after);
        let fetch = i64::try_from(limit.saturating_add(1))
            .unwrap_or(i64::MAX)
            .min(1 << 40);
        let found = rows(&self.exec(
            scan_sql(after_cursor),
            vec![text(lower), text(&upper), SqlStorageValue::Integer(fetch)],
        )?)?;
        let entries = found.into_iter().map(key_value).collect::<Result<_, _>>()?;
        Ok(page_from_rows(entries, limit))
    }

    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        if !self.ready()? {
            return Ok(ScanPage::default());
        }
        let upper = scan_back_bounds(prefix, before);
        let fetch = i64::try_from(limit.saturating_add(1))
            .unwrap_or(i64::MAX)
            .min(1 << 40);
        let found = rows(&self.exec(
            SCAN_BACK_SQL,
            vec![text(prefix), text(&upper), SqlStorageValue::Integer(fetch)],
        )?)?;
        let entries = found.into_iter().map(key_value).collect::<Result<_, _>>()?;
        Ok(page_from_rows(entries, limit))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.create_schema()?;
        let sql = self.sql.clone();
        self.transaction(move || {
            let exec = |q: &str, args: Vec<SqlStorageValue>| sql.exec(q, args).map_err(backend);
            for check in &batch.checks {
                let holds = match check {
                    Check::Absent(k) => stored(&sql, k)?.is_none(),
                    Check::Equals(k, v) => stored(&sql, k)?.as_ref() == Some(v),
                };
                if !holds {
                    return Err(StorageError::Conflict {
                        key: check.key().to_string(),
                    });
                }
            }
            for write in batch.writes {
                let cursor = match write {
                    Write::Put(k, v) => exec(PUT, vec![text(&k), SqlStorageValue::Blob(v)])?,
                    Write::Delete(k) => exec(DELETE, vec![text(&k)])?,
                };
                rows(&cursor)?;
            }
            Ok(())
        })
    }
}
