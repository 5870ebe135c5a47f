//! Decoded tables kept between queries by one core instance, so that repeating a query over
//! the same data skips the storage scan and the JSON decoding.
//!
//! Only tables whose rows are the same for every member of an org are kept: `entities`, the
//! typed tables and `relationships` (never `actions`, whose rows depend on the caller, nor a
//! virtual feed, which is read live). An entry belongs to one org and is found only under that
//! org's id, so no query sees another org's rows.
//!
//! An entry is valid for one value of the org's records version (`OrgKeys::records_version`),
//! which every write of an entity or a relationship replaces in the same storage batch with a
//! value no other write uses. An org without that key (no such write since it was
//! introduced, or a deleted org made again under the same name) is not cached. A query reads the version before it reads any row: if a write
//! commits during the scan, the entry is stored under the version read before it and never
//! matches again. Since the version is read from storage, writes by other instances and
//! processes invalidate the entry too.
//!
//! A write of this instance's keeps its copies instead (`records::commit_records`): the write's
//! batch requires the version the copies were read at, and once it commits, the copies take
//! its writes (each record under a table's key prefixes decoded into its row, in key order) and
//! its new version. A write that finds another version (someone else wrote first) commits
//! without that condition, and the copies go stale as before.
//!
//! Memory is bounded by an estimate of the entries' bytes; the least recently used entries go
//! first. A capacity of 0 turns the cache off, and then the version is not even read: hosts
//! that start an instance per request (Spin), or whose isolates are small (Workers), run so.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

use gluesql_core::ast::DataType;
use gluesql_core::data::Value as Sql;

use lore_base::storage::Write;

use super::catalog::{Needed, Source, Table};
use super::rows::Keyed;
use crate::RecordsCopies;

/// One cached table.
struct Entry {
    org: String,
    table: String,
    columns: Vec<(String, DataType)>,
    entity_types: Option<BTreeSet<String>>,
    version: Vec<u8>,
    /// The columns decoded (the others hold `NULL`).
    decoded: BTreeSet<String>,
    rows: Arc<Vec<Vec<Sql>>>,
    /// Where each row is stored, and how a stored record becomes a row.
    keyed: Keyed,
    bytes: usize,
    used: u64,
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    bytes: usize,
    tick: u64,
    hits: u64,
    misses: u64,
}

/// The decoded tables of one core instance, or of every instance of a process that share one
/// (`lore serve`'s workers), at most `max_bytes` (estimated) of them.
pub struct TableCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

/// What identifies a table's rows in the cache, besides the org's records version.
pub struct Lookup<'a> {
    pub org: &'a str,
    pub table: &'a str,
    pub columns: &'a [(String, DataType)],
    pub needed: &'a Needed<'a>,
}

impl Lookup<'_> {
    fn entity_types(&self) -> Option<&BTreeSet<String>> {
        self.needed
            .entity_types
            .filter(|_| self.table == "entities")
    }

    fn matches(&self, e: &Entry, version: &[u8]) -> bool {
        e.org == self.org
            && e.table == self.table
            && e.version == version
            && e.columns == self.columns
            && e.entity_types.as_ref() == self.entity_types()
            && self
                .columns
                .iter()
                .all(|(c, _)| !self.needed.wants(c) || e.decoded.contains(c))
    }
}

impl TableCache {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            inner: Mutex::default(),
        }
    }

    /// Never held across an await: every use is synchronous.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// Whether rows of `source` may be cached: the same for every member of the org and
    /// covered by the records version.
    pub fn keeps(&self, source: &Source) -> bool {
        self.enabled()
            && matches!(
                source,
                Source::Entities | Source::Typed(_) | Source::Relationships
            )
    }

    /// The table's rows, if cached for this org at this version with every column the query
    /// needs. Entries of the org at another version are dropped.
    pub fn get(&self, lookup: &Lookup<'_>, version: &[u8]) -> Option<Table> {
        let mut inner = self.lock();
        let stale: usize = inner
            .entries
            .iter()
            .filter(|e| e.org == lookup.org && e.version != version)
            .map(|e| e.bytes)
            .sum();
        if stale > 0 {
            inner
                .entries
                .retain(|e| e.org != lookup.org || e.version == version);
            inner.bytes -= stale;
        }
        inner.tick += 1;
        let tick = inner.tick;
        let found = inner
            .entries
            .iter_mut()
            .find(|e| lookup.matches(e, version));
        let table = found.map(|e| {
            e.used = tick;
            Table {
                name: e.table.clone(),
                columns: e.columns.clone(),
                rows: e.rows.clone(),
            }
        });
        if table.is_some() {
            inner.hits += 1;
        } else {
            inner.misses += 1;
        }
        table
    }

    /// Keeps `table` (just loaded at `version`, with where its rows are stored, from
    /// [`super::catalog::Catalog::load`]), evicting the least recently used entries to stay
    /// within the capacity; a table larger than the capacity is not kept.
    pub fn put(&self, lookup: &Lookup<'_>, version: &[u8], table: &Table, keyed: Keyed) {
        let bytes =
            estimate(&table.rows) + keyed.sort_keys.iter().map(|k| key_bytes(k)).sum::<usize>();
        if bytes > self.max_bytes {
            return;
        }
        let mut inner = self.lock();
        let entity_types = lookup.entity_types().cloned();
        let mut freed = 0;
        inner.entries.retain(|e| {
            let same =
                e.org == lookup.org && e.table == lookup.table && e.entity_types == entity_types;
            if same {
                freed += e.bytes;
            }
            !same
        });
        inner.bytes -= freed;
        Self::evict_to_capacity(&mut inner, self.max_bytes - bytes);
        inner.tick += 1;
        let used = inner.tick;
        inner.bytes += bytes;
        inner.entries.push(Entry {
            org: lookup.org.to_string(),
            table: lookup.table.to_string(),
            columns: lookup.columns.to_vec(),
            entity_types,
            version: version.to_vec(),
            decoded: lookup
                .columns
                .iter()
                .filter(|(c, _)| lookup.needed.wants(c))
                .map(|(c, _)| c.clone())
                .collect(),
            rows: table.rows.clone(),
            keyed,
            bytes,
            used,
        });
    }

    fn evict_to_capacity(inner: &mut Inner, max_bytes: usize) {
        while inner.bytes > max_bytes {
            let Some(oldest) = (0..inner.entries.len()).min_by_key(|&i| inner.entries[i].used)
            else {
                break;
            };
            let gone = inner.entries.swap_remove(oldest);
            inner.bytes -= gone.bytes;
        }
    }

    /// Entries, estimated bytes, hits and misses so far (tests and the bench).
    pub fn stats(&self) -> (usize, usize, u64, u64) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes, inner.hits, inner.misses)
    }
}

impl RecordsCopies for TableCache {
    fn version(&self, org: &str) -> Option<Vec<u8>> {
        let inner = self.lock();
        inner
            .entries
            .iter()
            .filter(|e| e.org == org)
            .max_by_key(|e| e.used)
            .map(|e| e.version.clone())
    }

    fn committed(&self, org: &str, from: &[u8], to: &[u8], writes: &[Write]) {
        let mut inner = self.lock();
        inner.entries.retain_mut(|e| {
            if e.org != org {
                return true;
            }
            // Copies at another version are stale; one a record fails to patch is dropped.
            if e.version != from || e.apply(writes).is_err() {
                return false;
            }
            e.version = to.to_vec();
            true
        });
        inner.bytes = inner.entries.iter().map(|e| e.bytes).sum();
        Self::evict_to_capacity(&mut inner, self.max_bytes);
    }

    fn stale(&self, org: &str) {
        let mut inner = self.lock();
        inner.entries.retain(|e| e.org != org);
        inner.bytes = inner.entries.iter().map(|e| e.bytes).sum();
    }
}

impl Entry {
    /// Applies a committed batch's writes to the rows: a record put under one of the table's
    /// prefixes replaces its row or is inserted in key order, a deleted one's row goes. An
    /// error (a record that does not decode) leaves the entry to be dropped.
    fn apply(&mut self, writes: &[Write]) -> lore_base::error::Result<()> {
        for write in writes {
            let Some((which, suffix)) = self
                .keyed
                .prefixes
                .iter()
                .enumerate()
                .find_map(|(i, p)| write.key().strip_prefix(p.as_str()).map(|s| (i, s)))
            else {
                continue;
            };
            let row = match write {
                Write::Put(_, bytes) => self.keyed.decoder.row(which, bytes)?,
                Write::Delete(_) => None,
            };
            let sort_keys = &mut self.keyed.sort_keys;
            let at = sort_keys.binary_search_by(|k| k.as_str().cmp(suffix));
            let rows = Arc::make_mut(&mut self.rows);
            match (at, row) {
                (Ok(i), Some(row)) => {
                    self.bytes = (self.bytes + row_bytes(&row)).saturating_sub(row_bytes(&rows[i]));
                    rows[i] = row;
                }
                (Ok(i), None) => {
                    self.bytes = self
                        .bytes
                        .saturating_sub(row_bytes(&rows[i]) + key_bytes(suffix));
                    rows.remove(i);
                    sort_keys.remove(i);
                }
                (Err(i), Some(row)) => {
                    self.bytes += row_bytes(&row) + key_bytes(suffix);
                    rows.insert(i, row);
                    sort_keys.insert(i, suffix.to_string());
                }
                (Err(_), None) => {}
            }
        }
        Ok(())
    }
}

/// An estimate of the memory `rows` hold.
fn estimate(rows: &[Vec<Sql>]) -> usize {
    rows.iter().map(row_bytes).sum()
}

/// An estimate of the memory a kept sort key holds.
fn key_bytes(key: &str) -> usize {
    std::mem::size_of::<String>() + key.len()
}

fn row_bytes(r: &Vec<Sql>) -> usize {
    std::mem::size_of::<Vec<Sql>>()
        + r.capacity() * std::mem::size_of::<Sql>()
        + r.iter().map(heap).sum::<usize>()
}

fn heap(v: &Sql) -> usize {
    match v {
        Sql::Str(s) => s.capacity(),
        Sql::Bytea(b) => b.capacity(),
        Sql::List(l) => l.iter().map(|x| std::mem::size_of::<Sql>() + heap(x)).sum(),
        Sql::Map(m) => m
            .iter()
            .map(|(k, x)| 48 + k.capacity() + std::mem::size_of::<Sql>() + heap(x))
            .sum(),
        _ => 0,
    }
}
