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
//! Memory is bounded by an estimate of the entries' bytes; the least recently used entries go
//! first. A capacity of 0 turns the cache off, and then the version is not even read: hosts
//! that start an instance per request (Spin), or whose isolates are small (Workers), run so.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;

use gluesql_core::ast::DataType;
use gluesql_core::data::Value as Sql;

use super::catalog::{Needed, Source, Table};

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

/// The decoded tables of one core instance, at most `max_bytes` (estimated) of them.
pub struct TableCache {
    max_bytes: usize,
    inner: RefCell<Inner>,
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
            inner: RefCell::default(),
        }
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
        let mut inner = self.inner.borrow_mut();
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

    /// Keeps `table` (just loaded at `version`), evicting the least recently used entries to
    /// stay within the capacity; a table larger than the capacity is not kept.
    pub fn put(&self, lookup: &Lookup<'_>, version: &[u8], table: &Table) {
        let bytes = estimate(&table.rows);
        if bytes > self.max_bytes {
            return;
        }
        let mut inner = self.inner.borrow_mut();
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
        while inner.bytes + bytes > self.max_bytes {
            let Some(oldest) = (0..inner.entries.len()).min_by_key(|&i| inner.entries[i].used)
            else {
                break;
            };
            let gone = inner.entries.swap_remove(oldest);
            inner.bytes -= gone.bytes;
        }
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
            bytes,
            used,
        });
    }

    /// Entries, estimated bytes, hits and misses so far (tests and the bench).
    pub fn stats(&self) -> (usize, usize, u64, u64) {
        let inner = self.inner.borrow();
        (inner.entries.len(), inner.bytes, inner.hits, inner.misses)
    }
}

/// An estimate of the memory `rows` hold.
fn estimate(rows: &[Vec<Sql>]) -> usize {
    rows.iter()
        .map(|r| {
            std::mem::size_of::<Vec<Sql>>()
                + r.capacity() * std::mem::size_of::<Sql>()
                + r.iter().map(heap).sum::<usize>()
        })
        .sum()
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
