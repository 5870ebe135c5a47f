//! The storage a script run writes to: reads go through to the real store, writes are buffered
//! in memory and become one batch when the run succeeds (SPEC 4.3). Reads see the run's own
//! earlier writes, prefix scans included. A handler's batch checks are evaluated against what
//! the run sees; those about keys the run had not written yet are kept and checked again,
//! atomically, in the final batch, so a concurrent writer makes the run fail with `conflict`
//! instead of being overwritten.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;

use async_trait::async_trait;

use lore_base::storage::{
    Batch, Check, ScanPage, Storage, StorageError, Write, page_from_rows, prefix_end,
};

/// Buffered writes over a base store.
pub struct Overlay {
    base: Rc<dyn Storage>,
    /// `Some(value)` for a put, `None` for a delete.
    writes: RefCell<BTreeMap<String, Option<Vec<u8>>>>,
    /// Checks against the base store, in order, at most one per key.
    checks: RefCell<Vec<Check>>,
    max_writes: usize,
    /// Set when a batch was refused for exceeding `max_writes`.
    over_cap: Cell<bool>,
}

impl Overlay {
    pub fn new(base: Rc<dyn Storage>, max_writes: usize) -> Self {
        Self {
            base,
            writes: RefCell::default(),
            checks: RefCell::default(),
            max_writes,
            over_cap: Cell::new(false),
        }
    }

    /// How many keys the run has written (puts and deletes).
    pub fn write_count(&self) -> usize {
        self.writes.borrow().len()
    }

    /// Whether a batch was refused because the run wrote too much.
    pub fn over_cap(&self) -> bool {
        self.over_cap.get()
    }

    /// The one batch that commits the run: the kept checks and every buffered write.
    pub fn to_batch(&self) -> Batch {
        let mut batch = Batch::new();
        batch.checks = self.checks.borrow().clone();
        for (key, value) in self.writes.borrow().iter() {
            batch.writes.push(match value {
                Some(v) => Write::Put(key.clone(), v.clone()),
                None => Write::Delete(key.clone()),
            });
        }
        batch
    }

    fn buffered(&self, key: &str) -> Option<Option<Vec<u8>>> {
        self.writes.borrow().get(key).cloned()
    }
}

fn holds(check: &Check, current: Option<&[u8]>) -> bool {
    match check {
        Check::Absent(_) => current.is_none(),
        Check::Equals(_, v) => current == Some(v.as_slice()),
    }
}

fn check_key(check: &Check) -> &str {
    match check {
        Check::Absent(k) | Check::Equals(k, _) => k,
    }
}

#[async_trait(?Send)]
impl Storage for Overlay {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        match self.buffered(key) {
            Some(value) => Ok(value),
            None => self.base.get(key).await,
        }
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let mut out: Vec<Option<Option<Vec<u8>>>> = keys.iter().map(|k| self.buffered(k)).collect();
        let missing: Vec<String> = keys
            .iter()
            .zip(&out)
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        let mut base = self.base.get_many(&missing).await?.into_iter();
        for slot in out.iter_mut().filter(|v| v.is_none()) {
            *slot = Some(base.next().flatten());
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let end = match prefix_end(prefix) {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        // The run's own entries in range, in key order (deletes included, to hide base rows).
        let mine: Vec<(String, Option<Vec<u8>>)> = self
            .writes
            .borrow()
            .range((start, end))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut mine = mine.into_iter().peekable();
        let want = limit.saturating_add(1);
        let mut rows: Vec<(String, Vec<u8>)> = Vec::new();
        let mut base_after = after.map(str::to_string);
        let mut base_page: std::vec::IntoIter<(String, Vec<u8>)> = Vec::new().into_iter();
        let mut base_more = true;
        let mut base_next: Option<(String, Vec<u8>)> = None;
        while rows.len() < want {
            if base_next.is_none() {
                base_next = base_page.next();
                if base_next.is_none() && base_more {
                    let page = self
                        .base
                        .scan(prefix, base_after.as_deref(), limit.max(16))
                        .await?;
                    base_more = page.cursor.is_some();
                    base_after = page.cursor.clone();
                    base_page = page.entries.into_iter();
                    base_next = base_page.next();
                }
            }
            let take_mine = match (&base_next, mine.peek()) {
                (None, None) => break,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some((bk, _)), Some((mk, _))) => mk <= bk,
            };
            if take_mine {
                let (key, value) = mine.next().expect("peeked");
                if base_next.as_ref().is_some_and(|(bk, _)| *bk == key) {
                    base_next = None; // the run's write replaces the stored row
                }
                if let Some(v) = value {
                    rows.push((key, v));
                }
            } else if let Some(row) = base_next.take() {
                rows.push(row);
            }
        }
        Ok(page_from_rows(rows, limit))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
        // Read what the checks need from the base store first (this may yield), then decide and
        // apply without yielding, so concurrent calls of one run cannot interleave in between.
        let mut base_values = Vec::with_capacity(batch.checks.len());
        for check in &batch.checks {
            let key = check_key(check);
            if self.buffered(key).is_none() {
                base_values.push(Some(self.base.get(key).await?));
            } else {
                base_values.push(None);
            }
        }
        let mut writes = self.writes.borrow_mut();
        let mut kept = Vec::new();
        for (check, base) in batch.checks.iter().zip(base_values) {
            let key = check_key(check);
            let ok = match writes.get(key) {
                Some(mine) => holds(check, mine.as_deref()),
                None => {
                    let base = match base {
                        Some(v) => v,
                        // Written by this run when we looked, deleted from the buffer since:
                        // cannot happen (the buffer only grows), but fail safe.
                        None => return Err(StorageError::Conflict { key: key.into() }),
                    };
                    let ok = holds(check, base.as_deref());
                    if ok {
                        kept.push(check.clone());
                    }
                    ok
                }
            };
            if !ok {
                return Err(StorageError::Conflict { key: key.into() });
            }
        }
        let new_keys = batch
            .writes
            .iter()
            .filter(|w| {
                let (Write::Put(k, _) | Write::Delete(k)) = w;
                !writes.contains_key(k)
            })
            .count();
        if writes.len() + new_keys > self.max_writes {
            self.over_cap.set(true);
            return Err(StorageError::Backend(format!(
                "the script's writes exceed the buffered_writes cap of {} writes",
                self.max_writes
            )));
        }
        let mut checks = self.checks.borrow_mut();
        for check in kept {
            if !checks.iter().any(|c| check_key(c) == check_key(&check)) {
                checks.push(check);
            }
        }
        for write in batch.writes {
            match write {
                Write::Put(k, v) => writes.insert(k, Some(v)),
                Write::Delete(k) => writes.insert(k, None),
            };
        }
        Ok(())
    }
}

/// The run's outbound HTTP: notes whether a request that may change something outside lore
/// (anything but `GET` and `HEAD`) went out, so that a run that lost a commit race is run
/// again only when nothing outside saw it.
pub struct Outbound {
    inner: Rc<dyn lore_base::ports::HttpClient>,
    effect: Cell<bool>,
}

impl Outbound {
    pub fn new(inner: Rc<dyn lore_base::ports::HttpClient>) -> Self {
        Self {
            inner,
            effect: Cell::new(false),
        }
    }

    /// Whether a request that may have changed something went out.
    pub fn reached_outside(&self) -> bool {
        self.effect.get()
    }
}

#[async_trait(?Send)]
impl lore_base::ports::HttpClient for Outbound {
    async fn send(
        &self,
        request: lore_base::ports::OutboundRequest,
    ) -> Result<lore_base::ports::OutboundResponse, lore_base::ports::PortError> {
        if !matches!(request.method.as_str(), "GET" | "HEAD") {
            self.effect.set(true);
        }
        self.inner.send(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_executor::block_on;
    use lore_base::storage::memory::MemoryStorage;

    fn setup() -> (Rc<MemoryStorage>, Overlay) {
        let base = Rc::new(MemoryStorage::new());
        block_on(async {
            base.put("a/1", b"one".to_vec()).await.unwrap();
            base.put("a/3", b"three".to_vec()).await.unwrap();
            base.put("a/5", b"five".to_vec()).await.unwrap();
            base.put("b/1", b"other".to_vec()).await.unwrap();
        });
        let overlay = Overlay::new(base.clone(), 100);
        (base, overlay)
    }

    #[test]
    fn reads_see_own_writes_and_base_is_untouched() {
        let (base, o) = setup();
        block_on(async {
            o.put("a/2", b"two".to_vec()).await.unwrap();
            o.delete("a/3").await.unwrap();
            o.put("a/5", b"FIVE".to_vec()).await.unwrap();
            assert_eq!(o.get("a/2").await.unwrap(), Some(b"two".to_vec()));
            assert_eq!(o.get("a/3").await.unwrap(), None);
            let all = o.scan_all("a/").await.unwrap();
            let keys: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["a/1", "a/2", "a/5"]);
            assert_eq!(all[2].1, b"FIVE");
            // Paging one at a time gives the same rows.
            let mut after = None;
            let mut paged = Vec::new();
            loop {
                let page = o.scan("a/", after.as_deref(), 1).await.unwrap();
                paged.extend(page.entries.into_iter().map(|(k, _)| k));
                match page.cursor {
                    Some(c) => after = Some(c),
                    None => break,
                }
            }
            assert_eq!(paged, ["a/1", "a/2", "a/5"]);
            assert_eq!(
                base.get("a/2").await.unwrap(),
                None,
                "nothing reached the base"
            );
            assert_eq!(base.get("a/3").await.unwrap(), Some(b"three".to_vec()));
        });
    }

    #[test]
    fn final_batch_keeps_base_checks_and_fails_on_a_concurrent_change() {
        let (base, o) = setup();
        block_on(async {
            let mut b = Batch::new();
            b.require_equals("a/1", b"one".to_vec())
                .put("a/1", b"uno".to_vec());
            o.commit(b).await.unwrap();
            // A check against the run's own write is decided in the overlay.
            let mut b = Batch::new();
            b.require_equals("a/1", b"uno".to_vec())
                .put("a/1", b"eins".to_vec());
            o.commit(b).await.unwrap();
            let mut bad = Batch::new();
            bad.require_absent("a/5").put("a/5", b"x".to_vec());
            assert!(matches!(
                o.commit(bad).await,
                Err(StorageError::Conflict { .. })
            ));
            let batch = o.to_batch();
            assert_eq!(
                batch.checks,
                vec![Check::Equals("a/1".into(), b"one".to_vec())]
            );
            // Someone else changes a/1 before the run commits: the run's batch is refused.
            base.put("a/1", b"changed".to_vec()).await.unwrap();
            assert!(base.commit(batch).await.is_err());
            assert_eq!(base.get("a/1").await.unwrap(), Some(b"changed".to_vec()));
        });
    }

    #[test]
    fn refuses_past_the_write_cap() {
        let base: Rc<dyn Storage> = Rc::new(MemoryStorage::new());
        let o = Overlay::new(base, 2);
        block_on(async {
            o.put("k/1", vec![1]).await.unwrap();
            o.put("k/2", vec![1]).await.unwrap();
            o.put("k/1", vec![2]).await.unwrap();
            assert!(o.put("k/3", vec![1]).await.is_err());
            assert!(o.over_cap());
        });
    }
}
