//! In-memory storage: a `BTreeMap` behind a mutex. Used by tests and as a scratch store; it is a
//! full backend and passes the shared suite.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Batch, Check, ScanPage, Storage, StorageError, Write, page_from_rows, validate_key};

#[derive(Clone, Default)]
pub struct MemoryStorage {
    map: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        // A panic while holding the lock cannot leave a half-applied batch (batches apply after
        // all checks pass, with no fallible step), so a poisoned map is still consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait(?Send)]
impl Storage for MemoryStorage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        validate_key(key)?;
        Ok(self.lock().get(key).cloned())
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let map = self.lock();
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let rows = map
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit.saturating_add(1))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(page_from_rows(rows, limit))
    }

    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let map = self.lock();
        let end = super::scan_back_bounds(prefix, before);
        if end.as_str() <= prefix {
            return Ok(ScanPage::default());
        }
        let rows = map
            .range::<str, _>((Bound::Included(prefix), Bound::Excluded(end.as_str())))
            .rev()
            .take(limit.saturating_add(1))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(page_from_rows(rows, limit))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
        let mut map = self.lock();
        for check in &batch.checks {
            let holds = match check {
                Check::Absent(k) => !map.contains_key(k),
                Check::Equals(k, v) => map.get(k) == Some(v),
            };
            if !holds {
                let (Check::Absent(key) | Check::Equals(key, _)) = check;
                return Err(StorageError::Conflict { key: key.clone() });
            }
        }
        for write in batch.writes {
            match write {
                Write::Put(k, v) => {
                    map.insert(k, v);
                }
                Write::Delete(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }
}
