//! The storage port on Cloudflare D1, over the same `lore_kv` schema as native SQLite.
//!
//! D1 has no interactive transactions; a [`Batch`] becomes one D1 `batch` (one SQL transaction:
//! a failing statement rolls every statement back). Preconditions run first inside that batch
//! as inserts into `lore_guard`, whose `CHECK (ok = 1)` fails when the condition does not hold,
//! which aborts the whole batch; a final `DELETE` leaves the guard table empty.

use async_trait::async_trait;
use js_sys::{Array, ArrayBuffer, Uint8Array};
use lore_base::storage::{
    Batch, Check, GET_MANY_CHUNK, SCAN_BACK_SQL, ScanPage, Storage, StorageError, Write,
    failing_check, get_many_sql, in_key_order, page_from_rows, scan_back_bounds, scan_bounds,
    scan_sql, validate_key,
};
use wasm_bindgen::{JsCast, JsValue};
use worker::{D1Database, D1PreparedStatement};

/// Values are read as `hex(v)`: D1 hands a BLOB column to the Worker as a JS array of numbers
/// (serialized number by number on the way from the database), which cost ~110 ms per 2 MB
/// under workerd in a JS-only check, against ~20 ms for the same bytes as one hex string.
const GET: &str = "SELECT hex(v) FROM lore_kv WHERE k = ?1";
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
    subrequests: crate::ports::Subrequests,
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

/// A value column as read by [`GET`] and [`hex_values`] queries: the hex of the stored bytes.
fn bytes_of_hex(value: &JsValue) -> Result<Vec<u8>, StorageError> {
    match value.as_string() {
        Some(s) => {
            unhex(s.as_bytes()).ok_or_else(|| backend("a value column is not upper-case hex"))
        }
        None => bytes_of(value),
    }
}

/// Decodes SQLite's `hex()` (upper case), a table lookup per digit. Written here rather than
/// taken from the `hex` crate: its general decoder made a 1.6 MB snapshot cost more to decode
/// in wasm than the BLOB's array of numbers did to read.
fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    const fn table() -> [u8; 256] {
        let mut t = [0xff; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    }
    const DIGIT: [u8; 256] = table();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 2);
    let mut bad = 0u8;
    for pair in text.chunks_exact(2) {
        let (hi, lo) = (DIGIT[pair[0] as usize], DIGIT[pair[1] as usize]);
        bad |= (hi | lo) & 0xf0;
        out.push((hi << 4) | (lo & 0x0f));
    }
    (bad == 0).then_some(out)
}

/// A shared query (`scan_sql`, `get_many_sql`) reading each value as `hex(v)` (in every
/// `SELECT` of a `UNION ALL`).
fn hex_values(sql: &str) -> String {
    debug_assert!(sql.starts_with("SELECT k, v FROM"));
    sql.replace("SELECT k, v FROM", "SELECT k, hex(v) FROM")
}

/// `(key, value)` rows of a query selecting `k, hex(v)`.
fn key_value_rows(rows: Vec<JsValue>) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        let row: Array = row.unchecked_into();
        let key = row
            .get(0)
            .as_string()
            .ok_or_else(|| backend("a key column is not text"))?;
        entries.push((key, bytes_of_hex(&row.get(1))?));
    }
    Ok(entries)
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
        Self::counted(db, crate::ports::Subrequests::default())
    }

    /// A store that counts each query it sends in `subrequests`.
    pub fn counted(db: D1Database, subrequests: crate::ports::Subrequests) -> Self {
        Self { db, subrequests }
    }

    fn statement(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StorageError> {
        self.db.prepare(sql).bind(args).map_err(backend)
    }

    /// The rows of one query (one subrequest, counted).
    async fn query(&self, sql: &str, args: &[JsValue]) -> Result<Vec<JsValue>, StorageError> {
        let statement = self.statement(sql, args)?;
        self.subrequests.made().await;
        statement.raw_js_value().await.map_err(backend)
    }
}

#[async_trait(?Send)]
impl Storage for D1Storage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        validate_key(key)?;
        let rows = self.query(GET, &[text(key)]).await?;
        match rows.first() {
            Some(row) => {
                let row: &Array = row.unchecked_ref();
                Ok(Some(bytes_of_hex(&row.get(0))?))
            }
            None => Ok(None),
        }
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let mut found = Vec::new();
        for chunk in keys.chunks(GET_MANY_CHUNK) {
            let mut args = Vec::with_capacity(chunk.len());
            for key in chunk {
                validate_key(key)?;
                args.push(text(key));
            }
            let rows = self
                .query(&hex_values(&get_many_sql(chunk.len())), &args)
                .await?;
            found.extend(key_value_rows(rows)?);
        }
        Ok(in_key_order(keys, found))
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
            .query(
                &hex_values(scan_sql(after_cursor)),
                &[text(lower), text(&upper), JsValue::from_f64(fetch)],
            )
            .await?;
        Ok(page_from_rows(key_value_rows(rows)?, limit))
    }

    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let upper = scan_back_bounds(prefix, before);
        let fetch = f64::from(u32::try_from(limit.saturating_add(1)).unwrap_or(u32::MAX));
        let rows = self
            .query(
                &hex_values(SCAN_BACK_SQL),
                &[text(prefix), text(&upper), JsValue::from_f64(fetch)],
            )
            .await?;
        Ok(page_from_rows(key_value_rows(rows)?, limit))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
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
        self.subrequests.made().await;
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
