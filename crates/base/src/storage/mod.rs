//! The storage port: an ordered key-value store with prefix scans, point reads and atomic,
//! conditional batches of writes. Every backend (in-memory, native SQLite, D1, Spin SQLite)
//! implements [`Storage`] and passes the shared storage suite (in `lore-testing`).
//!
//! Keys are printable ASCII and compare bytewise; values are opaque bytes (JSON in practice).

pub mod expiring;
pub mod memory;
pub mod split;

use async_trait::async_trait;

/// The SQL schema shared by every SQL backend (native SQLite, D1, Spin SQLite).
pub const SQL_SCHEMA: &str = include_str!("schema.sql");

/// The statements of [`SQL_SCHEMA`], comments dropped, for hosts that run one statement per
/// call (Spin SQLite, a Durable Object's SQLite).
pub fn schema_statements() -> Vec<String> {
    let sql: String = SQL_SCHEMA
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    sql.split(';')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// A batch precondition did not hold; nothing was written.
    #[error("conflict on key {key}: the stored value changed")]
    Conflict { key: String },
    #[error("invalid storage key {key:?}: keys are printable ASCII, 1..=512 bytes")]
    InvalidKey { key: String },
    #[error("storage backend failed: {0}")]
    Backend(String),
}

/// A condition checked atomically with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The key must not exist.
    Absent(String),
    /// The key must hold exactly this value.
    Equals(String, Vec<u8>),
}

impl Check {
    /// The key the condition is about.
    pub fn key(&self) -> &str {
        match self {
            Check::Absent(k) | Check::Equals(k, _) => k,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Put(String, Vec<u8>),
    Delete(String),
}

impl Write {
    /// The key written.
    pub fn key(&self) -> &str {
        match self {
            Write::Put(k, _) | Write::Delete(k) => k,
        }
    }
}

/// Writes applied all together or not at all, after every check holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    pub checks: Vec<Check>,
    pub writes: Vec<Write>,
    /// Whether the batch may be lost to a power cut (never torn, never lost to a crash of the
    /// process): a backend that can commit it without waiting for the disk does (see
    /// [`Batch::relaxed`]).
    pub relaxed: bool,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn put(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.writes.push(Write::Put(key.into(), value.into()));
        self
    }
    pub fn delete(&mut self, key: impl Into<String>) -> &mut Self {
        self.writes.push(Write::Delete(key.into()));
        self
    }
    pub fn require_absent(&mut self, key: impl Into<String>) -> &mut Self {
        self.checks.push(Check::Absent(key.into()));
        self
    }
    pub fn require_equals(
        &mut self,
        key: impl Into<String>,
        value: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.checks.push(Check::Equals(key.into(), value.into()));
        self
    }
    /// Marks the batch as one a power cut may lose: counts and statistics, and the Action of a
    /// script run that changed nothing (the audit entry of reads); never a record a write made.
    /// The SQLite backends commit it without an fsync (`synchronous=NORMAL` for that
    /// transaction, the WAL synced at the next durable commit or checkpoint); the others commit
    /// it as any batch.
    pub fn relaxed(&mut self) -> &mut Self {
        self.relaxed = true;
        self
    }
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.checks.is_empty()
    }
    /// Every key named by the batch.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        let checks = self.checks.iter().map(Check::key);
        checks.chain(self.writes.iter().map(Write::key))
    }
    /// Checks every key the batch names against [`validate_key`], as each backend does before
    /// it commits.
    pub fn validate_keys(&self) -> Result<(), StorageError> {
        self.keys().try_for_each(validate_key)
    }
}

/// One page of a prefix scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanPage {
    pub entries: Vec<(String, Vec<u8>)>,
    /// Pass as `after` to continue; `None` when the prefix is exhausted.
    pub cursor: Option<String>,
}

#[async_trait(?Send)]
pub trait Storage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;

    /// The values of `keys`, in their order (`None` where a key is absent). The SQL backends
    /// read them in one query per [`GET_MANY_CHUNK`] keys; this default reads one by one.
    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(self.get(key).await?);
        }
        Ok(out)
    }

    /// Entries whose key starts with `prefix` and sorts strictly after `after`, ascending,
    /// at most `limit` of them.
    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError>;

    /// Entries whose key starts with `prefix` and sorts strictly before `before`, descending
    /// (newest first for keys that end in a ULID), at most `limit` of them; the cursor is the
    /// last key of the page when more remain, to pass as `before`. This default is correct on
    /// every store but reads the whole prefix; the SQL and memory stores override it with one
    /// range read ([`SCAN_BACK_SQL`]).
    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let mut all = self.scan_all(prefix).await?;
        all.retain(|(k, _)| before.is_none_or(|b| k.as_str() < b));
        all.reverse();
        all.truncate(limit.saturating_add(1));
        Ok(page_from_rows(all, limit))
    }

    /// Applies the batch atomically: all checks hold and every write lands, or nothing changes.
    async fn commit(&self, batch: Batch) -> Result<(), StorageError>;

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StorageError> {
        let mut batch = Batch::new();
        batch.put(key, value);
        self.commit(batch).await
    }

    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        let mut batch = Batch::new();
        batch.delete(key);
        self.commit(batch).await
    }

    /// Every entry under `prefix`, read page by page.
    async fn scan_all(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.scan(prefix, after.as_deref(), 512).await?;
            out.extend(page.entries);
            match page.cursor {
                Some(c) => after = Some(c),
                None => return Ok(out),
            }
        }
    }
}

/// The largest value lore stores in one key: larger ones (index segments, snapshots) are cut
/// into chunks of this size. The SQL backends keep `lore_kv` as a `WITHOUT ROWID` table, whose
/// b-tree compares whole records: a lookup that lands beside a 500 KB value read all of it
/// (measured: 60 absent keys next to one cost 1.6 ms in SQLite against 0.06 ms elsewhere).
pub const VALUE_CHUNK: usize = 32 * 1024;

/// Values of keys read ahead of their use, in the same storage call as another read of the
/// same request (an org's auth stamp, `lore_directory::callers`): one read transaction instead
/// of one per key. Each value is taken at most once, by the read it stands in for, so a later
/// read in the request (after a write of its own, say) goes to storage. Clones share the values.
#[derive(Clone, Default)]
pub struct ReadAhead(std::sync::Arc<std::sync::Mutex<KeyValues>>);

/// Keys with their values as read (`None` where absent).
pub type KeyValues = Vec<(String, Option<Vec<u8>>)>;

impl ReadAhead {
    /// Values read together, by key (`None` where the key was absent).
    pub fn new(values: KeyValues) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(values)))
    }

    /// The value read ahead for `key`, once: `Some(None)` when it was read and absent, `None`
    /// when it was not read ahead (or was taken already).
    pub fn take(&self, key: &str) -> Option<Option<Vec<u8>>> {
        let mut values = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = values.iter().position(|(k, _)| k == key)?;
        Some(values.swap_remove(at).1)
    }

    /// How many values are still to be taken.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |v| v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadAhead({} values)", self.len())
    }
}

/// Keys per query of [`Storage::get_many`] on the SQL backends (D1 binds at most 100
/// parameters per statement).
pub const GET_MANY_CHUNK: usize = 100;

/// Up to this many keys, [`get_many_sql`] is one point read per key joined by `UNION ALL`:
/// SQLite answers `IN (…)` through a temporary b-tree of the keys, which costs more than the
/// reads themselves when they are few. workerd's SQLite (D1, a Durable Object's storage)
/// refuses a compound `SELECT` of more than 5 terms.
pub const GET_FEW: usize = 4;

/// The query of a [`Storage::get_many`] chunk of `n` keys on the SQL backends (`?1` … `?n`):
/// one statement, so one read transaction, whatever `n`.
pub fn get_many_sql(n: usize) -> std::borrow::Cow<'static, str> {
    static FEW: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        (0..=GET_FEW)
            .map(|n| {
                let reads: Vec<String> = (1..=n)
                    .map(|i| format!("SELECT k, v FROM lore_kv WHERE k = ?{i}"))
                    .collect();
                reads.join(" UNION ALL ")
            })
            .collect()
    });
    if let Some(few) = FEW.get(n).filter(|_| n > 0) {
        return std::borrow::Cow::Borrowed(few.as_str());
    }
    let params: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
    std::borrow::Cow::Owned(format!(
        "SELECT k, v FROM lore_kv WHERE k IN ({})",
        params.join(", ")
    ))
}

/// The rows of a [`get_many_sql`] query as [`Storage::get_many`] answers: `keys`' values in
/// their order.
pub fn in_key_order(keys: &[String], rows: Vec<(String, Vec<u8>)>) -> Vec<Option<Vec<u8>>> {
    let found: std::collections::HashMap<String, Vec<u8>> = rows.into_iter().collect();
    keys.iter().map(|k| found.get(k).cloned()).collect()
}

/// Checks a key against the rules every backend enforces.
pub fn validate_key(key: &str) -> Result<(), StorageError> {
    let ok = !key.is_empty() && key.len() <= 512 && key.bytes().all(|b| (0x21..0x7f).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(StorageError::InvalidKey {
            key: key.to_string(),
        })
    }
}

/// The smallest string greater than every string starting with `prefix` (keys are ASCII), or
/// `None` when the prefix is empty and the range is unbounded.
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut bytes = prefix.as_bytes().to_vec();
    while let Some(last) = bytes.pop() {
        if last < 0x7f {
            bytes.push(last + 1);
            return String::from_utf8(bytes).ok();
        }
    }
    None
}

/// The range query of a scan on the SQL backends (native SQLite, D1, Spin SQLite), with
/// `?1` the lower bound, `?2` the upper bound and `?3` the row limit. There is exactly one
/// lower bound so SQLite seeks straight to the page: with `k >= prefix AND k > after` it may
/// seek to the prefix and filter its way to the cursor, which made deep pages O(n).
///
/// The limit is written `+?3`, not `?3`: SQLite (3.45 and later) reads a bare parameter in
/// `LIMIT` as a constant when it plans the statement, and so marks the statement to be planned
/// again whenever that parameter is bound. Every scan through a cached statement then parsed
/// and planned its SQL anew (on `lore serve`, 60% of the scan of an org's behaviors after each
/// commit, itself a tenth of a save's worker time). The unary plus makes the limit an
/// expression evaluated when it runs.
pub fn scan_sql(after_cursor: bool) -> &'static str {
    if after_cursor {
        "SELECT k, v FROM lore_kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT +?3"
    } else {
        "SELECT k, v FROM lore_kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT +?3"
    }
}

/// The range query of a backward scan ([`Storage::scan_back`]) on the SQL backends, with `?1`
/// the prefix, `?2` the exclusive upper bound from [`scan_back_bounds`] and `?3` the row limit
/// (`+?3`: see [`scan_sql`]).
pub const SCAN_BACK_SQL: &str =
    "SELECT k, v FROM lore_kv WHERE k >= ?1 AND k < ?2 ORDER BY k DESC LIMIT +?3";

/// The exclusive upper bound of a backward scan: `before` when it sorts inside the prefix's
/// range, else the end of the prefix (DEL, 0x7f, for an empty one).
pub fn scan_back_bounds(prefix: &str, before: Option<&str>) -> String {
    let end = prefix_end(prefix).unwrap_or_else(|| "\u{7f}".to_string());
    match before {
        Some(b) if b < end.as_str() => b.to_string(),
        _ => end,
    }
}

/// The bounds of a scan for [`scan_sql`]: `(after_cursor, lower, upper)`. A cursor before the
/// prefix is clamped to it; the upper bound of an empty prefix is DEL (0x7f), above every key.
pub fn scan_bounds<'a>(prefix: &'a str, after: Option<&'a str>) -> (bool, &'a str, String) {
    let upper = prefix_end(prefix).unwrap_or_else(|| "\u{7f}".to_string());
    match after {
        Some(a) if a >= prefix => (true, a, upper),
        _ => (false, prefix, upper),
    }
}

/// Builds a scan page from up to `limit + 1` fetched rows: the extra row only signals more.
pub fn page_from_rows(mut rows: Vec<(String, Vec<u8>)>, limit: usize) -> ScanPage {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let cursor = if more {
        rows.last().map(|(k, _)| k.clone())
    } else {
        None
    };
    ScanPage {
        entries: rows,
        cursor,
    }
}

/// After a batch failed on a guard: the key of the first check that does not hold now (or,
/// when every check holds again because a concurrent writer changed it back, the first one),
/// for the `Conflict` error a SQL backend reports.
pub async fn failing_check<S: Storage + ?Sized>(
    storage: &S,
    checks: &[Check],
) -> Result<String, StorageError> {
    for check in checks {
        let (key, holds) = match check {
            Check::Absent(k) => (k, storage.get(k).await?.is_none()),
            Check::Equals(k, v) => (k, storage.get(k).await?.as_ref() == Some(v)),
        };
        if !holds {
            return Ok(key.clone());
        }
    }
    Ok(checks
        .first()
        .map(|c| match c {
            Check::Absent(k) | Check::Equals(k, _) => k.clone(),
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::{ReadAhead, get_many_sql};

    /// A value read ahead stands in for one read only, and clones share it.
    #[test]
    fn a_value_read_ahead_is_taken_once() {
        let ahead = ReadAhead::new(vec![
            ("o/a/seq".into(), Some(b"7".to_vec())),
            ("o/a/gone".into(), None),
        ]);
        let clone = ahead.clone();
        assert_eq!(clone.take("o/a/seq"), Some(Some(b"7".to_vec())));
        assert_eq!(ahead.take("o/a/seq"), None, "taken already");
        assert_eq!(ahead.take("o/a/gone"), Some(None), "read, and absent");
        assert_eq!(ahead.take("o/a/other"), None, "never read ahead");
        assert!(ahead.is_empty());
    }

    /// Few keys are point reads joined in one statement; many are one `IN` query.
    #[test]
    fn few_keys_are_point_reads_in_one_statement() {
        assert_eq!(
            get_many_sql(2),
            "SELECT k, v FROM lore_kv WHERE k = ?1 UNION ALL SELECT k, v FROM lore_kv WHERE k = ?2"
        );
        assert_eq!(get_many_sql(super::GET_FEW + 1).matches(" IN (").count(), 1);
    }
}
