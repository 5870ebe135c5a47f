//! The storage port on Cloudflare D1, over the same `lore_kv` schema as native SQLite.
//!
//! D1 has no interactive transactions; a [`Batch`] becomes one D1 `batch` (one SQL transaction:
//! a failing statement rolls every statement back). Preconditions run first inside that batch
//! as inserts into `lore_guard`, whose `CHECK (ok = 1)` fails when the condition does not hold,
//! which aborts the whole batch; a final `DELETE` leaves the guard table empty.

use async_trait::async_trait;
use js_sys::{Array, ArrayBuffer, Uint8Array};
use lore_base::storage::{
    Batch, Check, ScanPage, Storage, StorageError, Write, failing_check, page_from_rows,
    scan_bounds, scan_sql, validate_key,
};
use wasm_bindgen::{JsCast, JsValue};
use worker::{D1Database, D1PreparedStatement};

const GET: &str = "SELECT v FROM lore_kv WHERE k = ?1";
const PUT: &str =
    "INSERT INTO lore_kv (k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v";
const DELETE: &str = "DELETE FROM lore_kv WHERE k = ?1";
const GUARD_ABSENT: &str =
    "INSERT INTO lore_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM lore_kv WHERE k = ?1)";
const GUARD_EQUALS: &str =
    "INSERT INTO lore_guard (ok) SELECT EXISTS (SELECT 1 FROM lore_kv WHERE k = ?1 AND v = ?2)";
const GUARD_CLEAR: &str = "DELETE FROM lore_guard";
/// What SQLite (and so D1) reports when a guard row fails its CHECK.
const GUARD_FAILED: &str = "CHECK constraint failed";

/// A D1 database as lore storage.
pub struct D1Storage {
    db: D1Database,
}

fn backend(e: impl std::fmt::Display) -> StorageError {
    StorageError::Backend(format!("D1: {e}"))
}

/// A key as a bound TEXT parameter.
fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

/// Bytes as a bound BLOB parameter (a `Uint8Array`; a JS array of numbers would not be a BLOB).
fn blob(bytes: &[u8]) -> JsValue {
    Uint8Array::from(bytes).into()
}

/// A BLOB column as D1 returns it: an array of numbers, or an `ArrayBuffer`/typed array.
fn bytes_of(value: &JsValue) -> Result<Vec<u8>, StorageError> {
    if let Some(array) = value.dyn_ref::<Uint8Array>() {
        return Ok(array.to_vec());
    }
    if let Some(buffer) = value.dyn_ref::<ArrayBuffer>() {
        return Ok(Uint8Array::new(buffer).to_vec());
    }
    if value.is_instance_of::<Array>() {
        // One conversion on the JS side and one copy, rather than a boundary crossing per byte
        // (which made loading a 10,000-event org several times slower).
        return Ok(Uint8Array::new(value).to_vec());
    }
    if let Some(s) = value.as_string() {
        // A value written as TEXT by another tool (for example `wrangler d1 execute`).
        return Ok(s.into_bytes());
    }
    Err(backend(format!("unexpected value column {value:?}")))
}

impl D1Storage {
    pub fn new(db: D1Database) -> Self {
        Self { db }
    }

    fn statement(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StorageError> {
        self.db.prepare(sql).bind(args).map_err(backend)
    }
}

#[async_trait(?Send)]
impl Storage for D1Storage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        validate_key(key)?;
        let rows = self
            .statement(GET, &[text(key)])?
            .raw_js_value()
            .await
            .map_err(backend)?;
        match rows.first() {
            Some(row) => {
                let row: &Array = row.unchecked_ref();
                Ok(Some(bytes_of(&row.get(0))?))
            }
            None => Ok(None),
        }
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let (after_cursor, lower, upper) = scan_bounds(prefix, after);
        // D1 binds JS numbers. (A `1 << 40` cap here was 256 on wasm32, where usize is 32 bits
        // and the shift wraps: every scan stopped after 256 rows.)
        let fetch = f64::from(u32::try_from(limit.saturating_add(1)).unwrap_or(u32::MAX));
        let rows = self
            .statement(
                scan_sql(after_cursor),
                &[text(lower), text(&upper), JsValue::from_f64(fetch)],
            )?
            .raw_js_value()
            .await
            .map_err(backend)?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let row: Array = row.unchecked_into();
            let key = row
                .get(0)
                .as_string()
                .ok_or_else(|| backend("a key column is not text"))?;
            entries.push((key, bytes_of(&row.get(1))?));
        }
        Ok(page_from_rows(entries, limit))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        for key in batch.keys() {
            validate_key(key)?;
        }
        if batch.is_empty() {
            return Ok(());
        }
        let mut statements = Vec::with_capacity(batch.checks.len() + batch.writes.len() + 1);
        for check in &batch.checks {
            statements.push(match check {
                Check::Absent(k) => self.statement(GUARD_ABSENT, &[text(k)])?,
                Check::Equals(k, v) => self.statement(GUARD_EQUALS, &[text(k), blob(v)])?,
            });
        }
        for write in &batch.writes {
            statements.push(match write {
                Write::Put(k, v) => self.statement(PUT, &[text(k), blob(v)])?,
                Write::Delete(k) => self.statement(DELETE, &[text(k)])?,
            });
        }
        if !batch.checks.is_empty() {
            statements.push(self.db.prepare(GUARD_CLEAR));
        }
        match self.db.batch(statements).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let message = e.to_string();
                if message.contains(GUARD_FAILED) {
                    Err(StorageError::Conflict {
                        key: failing_check(self, &batch.checks).await?,
                    })
                } else {
                    Err(backend(message))
                }
            }
        }
    }
}
