//! Fault injection for tests: [`FaultyStorage`] wraps any backend and fails the Nth read,
//! the batch holding the Nth write, or the Nth commit, as a backend error would. A failed
//! batch changes nothing (the inner store never sees it), as the port promises.
//!
//! Armed at run time and one-shot: `fail_commit_at(2)` fails the second commit from now and
//! then lets everything through again, so a test can check that the next request succeeds.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use async_trait::async_trait;

use lore_base::storage::{Batch, ScanPage, Storage, StorageError};

/// The message of every injected failure starts with this; the operation and its (first) key
/// follow.
pub const INJECTED: &str = "injected fault";

/// Counts operations and fails the armed ones.
#[derive(Default)]
struct Trigger {
    seen: Cell<u64>,
    /// The value of `seen` at which to fail, once.
    at: Cell<Option<u64>>,
}

impl Trigger {
    fn arm(&self, n: u64) {
        self.at.set(Some(self.seen.get() + n.max(1)));
    }

    /// Counts `count` operations; true when the armed one is among them (then disarms).
    fn hit(&self, count: u64) -> bool {
        let before = self.seen.get();
        self.seen.set(before + count);
        match self.at.get() {
            Some(at) if at > before && at <= before + count => {
                self.at.set(None);
                true
            }
            _ => false,
        }
    }
}

/// A storage wrapper that fails chosen operations. Reads are `get` and `scan` calls; writes are
/// the puts and deletes inside batches (`put`/`delete` are one-write batches); commits are
/// batches.
pub struct FaultyStorage {
    inner: Rc<dyn Storage>,
    reads: Trigger,
    writes: Trigger,
    commits: Trigger,
    /// Commits answered as if another writer had won the race (a failed check).
    races: Trigger,
    injected: Cell<u64>,
    last: RefCell<Option<String>>,
}

impl FaultyStorage {
    pub fn new(inner: Rc<dyn Storage>) -> Self {
        Self {
            inner,
            reads: Trigger::default(),
            writes: Trigger::default(),
            commits: Trigger::default(),
            races: Trigger::default(),
            injected: Cell::new(0),
            last: RefCell::new(None),
        }
    }

    /// Fails the `n`th read (`get` or `scan`) from now (1 is the next one).
    pub fn fail_read_at(&self, n: u64) {
        self.reads.arm(n);
    }

    /// Fails the batch that holds the `n`th write (put or delete) from now.
    pub fn fail_write_at(&self, n: u64) {
        self.writes.arm(n);
    }

    /// Fails the `n`th commit from now.
    pub fn fail_commit_at(&self, n: u64) {
        self.commits.arm(n);
    }

    /// Answers the `n`th commit from now with `Conflict`, as when a concurrent writer changed
    /// a key the batch checks; nothing is written.
    pub fn lose_race_at(&self, n: u64) {
        self.races.arm(n);
    }

    /// Disarms every trigger.
    pub fn heal(&self) {
        for t in [&self.reads, &self.writes, &self.commits, &self.races] {
            t.at.set(None);
        }
    }

    /// Reads, writes and commits seen so far (failed ones included).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.reads.seen.get(),
            self.writes.seen.get(),
            self.commits.seen.get(),
        )
    }

    /// How many failures were injected.
    pub fn injected(&self) -> u64 {
        self.injected.get()
    }

    /// The message of the last injected failure.
    pub fn last_error(&self) -> Option<String> {
        self.last.borrow().clone()
    }

    fn fail(&self, what: &str) -> StorageError {
        self.injected.set(self.injected.get() + 1);
        let message = format!("{INJECTED}: {what}");
        *self.last.borrow_mut() = Some(message.clone());
        StorageError::Backend(message)
    }
}

#[async_trait(?Send)]
impl Storage for FaultyStorage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        if self.reads.hit(1) {
            return Err(self.fail(&format!("get {key}")));
        }
        self.inner.get(key).await
    }

    /// One read, as the SQL backends make it.
    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        if self.reads.hit(1) {
            return Err(self.fail(&format!("get_many of {} keys", keys.len())));
        }
        self.inner.get_many(keys).await
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        if self.reads.hit(1) {
            return Err(self.fail(&format!("scan {prefix}")));
        }
        self.inner.scan(prefix, after, limit).await
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        if self.races.hit(1) {
            self.injected.set(self.injected.get() + 1);
            let key = batch.keys().next().unwrap_or_default().to_string();
            return Err(StorageError::Conflict { key });
        }
        let write_hit = self.writes.hit(batch.writes.len() as u64);
        if self.commits.hit(1) || write_hit {
            let first = batch.keys().next().unwrap_or_default();
            return Err(self.fail(&format!(
                "commit of {} writes ({first}…)",
                batch.writes.len()
            )));
        }
        self.inner.commit(batch).await
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use futures_executor::block_on;

    use super::{FaultyStorage, INJECTED};
    use lore_base::storage::memory::MemoryStorage;
    use lore_base::storage::{Batch, Storage, StorageError};

    fn injected(r: Result<impl std::fmt::Debug, StorageError>) -> bool {
        matches!(r, Err(StorageError::Backend(m)) if m.starts_with(INJECTED))
    }

    #[test]
    fn each_trigger_fails_once_and_a_failed_batch_writes_nothing() {
        let inner = Rc::new(MemoryStorage::new());
        let s = FaultyStorage::new(inner.clone());
        block_on(s.put("a", b"1".to_vec())).unwrap();

        s.fail_read_at(2);
        assert!(block_on(s.get("a")).unwrap().is_some());
        assert!(injected(block_on(s.scan("", None, 10))));
        assert_eq!(block_on(s.scan("", None, 10)).unwrap().entries.len(), 1);

        s.fail_commit_at(1);
        let mut batch = Batch::new();
        batch.put("b", b"2".to_vec()).delete("a");
        assert!(injected(block_on(s.commit(batch.clone()))));
        assert_eq!(block_on(inner.scan_all("")).unwrap().len(), 1);
        assert_eq!(block_on(inner.get("b")).unwrap(), None);

        // The third write from now is the second one of the second batch.
        s.fail_write_at(3);
        block_on(s.put("c", b"3".to_vec())).unwrap();
        assert!(injected(block_on(s.commit(batch.clone()))));
        assert_eq!(block_on(inner.get("b")).unwrap(), None);
        block_on(s.commit(batch)).unwrap();
        assert_eq!(block_on(inner.get("a")).unwrap(), None);

        s.fail_commit_at(1);
        s.heal();
        block_on(s.put("d", b"4".to_vec())).unwrap();
        assert_eq!(s.injected(), 3);
        assert_eq!(s.counts(), (3, 9, 6));
    }
}
