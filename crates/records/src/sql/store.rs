//! The store GlueSQL executes over: a snapshot of the tables one query names, loaded through
//! the storage port beforehand (GlueSQL's store traits are synchronous, the port is not).
//!
//! It implements the read traits only. The write traits are there because the executor's
//! signature asks for them, with no method of their own: every write GlueSQL could attempt
//! fails with its "not supported" error, and none is ever reached, since anything but a
//! `SELECT` is refused before execution. Every row GlueSQL reads passes `Guard::visit`, which
//! stops the query past its row, time or memory budget.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use gluesql_core::ast::{ColumnDef, DataType};
use gluesql_core::data::{Key, Schema, Value};
use gluesql_core::error::{Error, Result};
use gluesql_core::store::{
    AlterTable, CustomFunction, CustomFunctionMut, Index, IndexMut, Metadata, Planner, RowIter,
    Store, StoreMut, Transaction,
};

use super::catalog::Table;
use lore_base::ports::Clock;

/// Rows read between two looks at the clock (a row can cost a pattern's compilation).
const CLOCK_EVERY: u64 = 64;

/// Why the guard stopped a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trip {
    Rows,
    Time,
    Memory,
}

/// Counts the rows the engine reads and watches the clock.
pub struct Guard {
    clock: Rc<dyn Clock>,
    deadline_ms: i64,
    max_visits: u64,
    visits: Cell<u64>,
    tripped: Cell<Option<Trip>>,
    /// Bytes the query may hold while it runs (rows it keeps for a sort or a group, the values
    /// it builds), counted by the memory meter from `memory_base`.
    pub max_bytes: usize,
    memory_base: Cell<usize>,
}

impl Guard {
    pub fn new(clock: Rc<dyn Clock>, deadline_ms: i64, max_visits: u64, max_bytes: usize) -> Self {
        Self {
            clock,
            deadline_ms,
            max_visits,
            visits: Cell::new(0),
            tripped: Cell::new(None),
            max_bytes,
            memory_base: Cell::new(0),
        }
    }

    /// Starts counting the query's memory from what the thread holds now, once for the whole
    /// query; call inside a metered section (`lore_meter`), which execution runs in.
    pub fn start_memory(&self) {
        self.memory_base.set(lore_meter::live());
    }

    pub fn tripped(&self) -> Option<Trip> {
        self.tripped.get()
    }

    pub fn visits(&self) -> u64 {
        self.visits.get()
    }

    /// Whether the deadline has passed (looked at between the steps of a query).
    pub fn past_deadline(&self) -> bool {
        if self.clock.now_ms() > self.deadline_ms {
            self.tripped.set(Some(Trip::Time));
        }
        self.tripped.get().is_some()
    }

    fn visit(&self) -> Result<()> {
        let n = self.visits.get() + 1;
        self.visits.set(n);
        if n > self.max_visits {
            self.tripped.set(Some(Trip::Rows));
        } else if n.is_multiple_of(CLOCK_EVERY) && self.clock.now_ms() > self.deadline_ms {
            self.tripped.set(Some(Trip::Time));
        } else if lore_meter::live().saturating_sub(self.memory_base.get()) > self.max_bytes {
            // At every row (a thread-local read): between two, the engine builds at most one
            // row's values, each bounded before the query ran (`bound`).
            self.tripped.set(Some(Trip::Memory));
        }
        match self.tripped.get() {
            Some(_) => Err(Error::StorageMsg("query budget exceeded".into())),
            None => Ok(()),
        }
    }
}

/// A table's rows, shared with the instance's table cache when it keeps them.
type Rows = std::sync::Arc<Vec<Vec<Value>>>;

/// The tables of one query, read-only.
pub struct SnapshotStore {
    tables: BTreeMap<String, (Schema, Rows)>,
    /// Schemas of the org's tables this query did not load (for `GLUE_TABLES`).
    others: Vec<Schema>,
    pub guard: Guard,
}

pub fn schema(name: &str, columns: &[(String, DataType)]) -> Schema {
    Schema {
        table_name: name.to_string(),
        column_defs: Some(
            columns
                .iter()
                .map(|(n, t)| ColumnDef {
                    name: n.clone(),
                    data_type: t.clone(),
                    nullable: true,
                    default: None,
                    unique: None,
                    comment: None,
                })
                .collect(),
        ),
        indexes: Vec::new(),
        engine: None,
        foreign_keys: Vec::new(),
        comment: None,
    }
}

impl SnapshotStore {
    pub fn new(guard: Guard, others: Vec<Schema>) -> Self {
        Self {
            tables: BTreeMap::new(),
            others,
            guard,
        }
    }

    /// Adds (or, for a CTE of the same name, replaces) a table.
    pub fn insert(&mut self, table: Table) {
        self.others.retain(|s| s.table_name != table.name);
        let schema = schema(&table.name, &table.columns);
        self.tables.insert(table.name, (schema, table.rows));
    }

    pub fn columns(&self, name: &str) -> Option<Vec<String>> {
        self.tables.get(name).map(|(s, _)| {
            s.column_defs
                .iter()
                .flatten()
                .map(|c| c.name.clone())
                .collect()
        })
    }

    pub fn loaded(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }
}

impl Store for SnapshotStore {
    fn fetch_schema(&self, table_name: &str) -> Result<Option<Schema>> {
        Ok(self.tables.get(table_name).map(|(s, _)| s.clone()))
    }

    fn fetch_all_schemas(&self) -> Result<Vec<Schema>> {
        let mut all: Vec<Schema> = self.tables.values().map(|(s, _)| s.clone()).collect();
        all.extend(self.others.iter().cloned());
        all.sort_by(|a, b| a.table_name.cmp(&b.table_name));
        Ok(all)
    }

    fn fetch_data(&self, table_name: &str, key: &Key) -> Result<Option<Vec<Value>>> {
        let Some((_, rows)) = self.tables.get(table_name) else {
            return Ok(None);
        };
        let Key::I64(i) = key else { return Ok(None) };
        self.guard.visit()?;
        Ok(usize::try_from(*i).ok().and_then(|i| rows.get(i)).cloned())
    }

    fn scan_data<'a>(&'a self, table_name: &str) -> Result<RowIter<'a>> {
        let rows: &'a [Vec<Value>] = self
            .tables
            .get(table_name)
            .map_or(&[], |(_, rows)| rows.as_slice());
        let guard = &self.guard;
        Ok(Box::new(rows.iter().enumerate().map(move |(i, row)| {
            guard.visit()?;
            Ok((Key::I64(i as i64), row.clone()))
        })))
    }
}

impl Index for SnapshotStore {}
impl Metadata for SnapshotStore {}
impl CustomFunction for SnapshotStore {}
impl Planner for SnapshotStore {}

// The executor's signature needs the write traits; their default methods all fail.
impl StoreMut for SnapshotStore {}
impl IndexMut for SnapshotStore {}
impl AlterTable for SnapshotStore {}
impl Transaction for SnapshotStore {}
impl CustomFunctionMut for SnapshotStore {}
