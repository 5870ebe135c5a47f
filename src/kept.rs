//! Values a connection read and keeps, answered again without a read transaction while the
//! database file's change counters (`lore_changes`) say nobody has written their keys since.
//!
//! A warm request reads the same few small keys every time (an org's auth stamp, its event
//! sequence number, its records version), and a read transaction costs more than the rest of a
//! repeated search together (WAL read lock and release). Any process that writes the file
//! bumps the counters of the keys it writes, so a kept value is dropped at the next read after
//! any write of its key, wherever it was made. Revocations and demotions therefore still hold
//! at the next request.
//!
//! Only small values are kept ([`KEEP_BYTES`]), and at most [`KEEP_KEYS`] per connection. When
//! full, the whole set is dropped, and a value is always read again from the database.

use std::cell::RefCell;
use std::collections::HashMap;

use lore_changes::{Changes, Slot};

/// The largest value kept: the stamps and counters a warm request reads are tens of bytes,
/// and records worth keeping are small.
pub const KEEP_BYTES: usize = 1024;

/// The most keys kept per connection (one per worker thread).
pub const KEEP_KEYS: usize = 4096;

/// One connection's kept values: by key, the slot's number when the value was read and the
/// value (`None` for an absent key).
#[derive(Default)]
pub struct Kept {
    values: RefCell<HashMap<String, Value>>,
}

/// A kept value: the slot's number when it was read, and the value (`None`: absent).
type Value = (u64, Option<Vec<u8>>);

/// A key about to be read from the database: its slot's number taken before the read, when no
/// write of it was under way (the value may then be kept).
pub struct Reading {
    settled: Option<u64>,
}

impl Kept {
    /// The kept value of `key` when nobody has written it since it was read.
    pub fn get(&self, changes: &Changes, key: &str) -> Option<Option<Vec<u8>>> {
        let values = self.values.borrow();
        let (at, value) = values.get(key)?;
        changes
            .unchanged(Slot::of(key.as_bytes()), *at)
            .then(|| value.clone())
    }

    /// To be called before `key` is read from the database.
    pub fn before_read(changes: &Changes, key: &str) -> Reading {
        Reading {
            settled: changes.settled(Slot::of(key.as_bytes())),
        }
    }

    /// Keeps `value`, read after `reading` was taken, when it may be kept.
    pub fn keep(&self, reading: Reading, key: &str, value: &Option<Vec<u8>>) {
        let Some(at) = reading.settled else { return };
        if value.as_ref().is_some_and(|v| v.len() > KEEP_BYTES) {
            return;
        }
        let mut values = self.values.borrow_mut();
        if values.len() >= KEEP_KEYS && !values.contains_key(key) {
            values.clear();
        }
        values.insert(key.to_owned(), (at, value.clone()));
    }
}
