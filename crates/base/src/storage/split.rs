//! Storage split by org: each org's keys (`o/{org}/…`) in a store of that org's own, every other
//! key (the directory: orgs, principals, tokens, OAuth) in one shared store. On Cloudflare an
//! org's store is its Durable Object's SQLite and the shared store is D1; the split is decided
//! by the key layout alone ([`crate::keys::org_of_key`]), so every caller of the port works
//! unchanged over it.
//!
//! A batch is atomic within one store. A batch that writes to several (a token issued: its
//! hash in the directory, its summary in the org; an org created) commits the directory's part
//! first, with its checks, and then each org's part: a directory check that fails leaves
//! everything unwritten, and a failure after that leaves the directory's part written and says
//! so in the error. Such batches are operator and admin actions, never a tool call's data.

use std::rc::Rc;

use async_trait::async_trait;

use super::{Batch, ScanPage, Storage, StorageError};
use crate::keys::{OrgSpan, org_of_key, org_of_prefix};

/// Where each org's store is.
pub trait OrgStores {
    /// The store holding `org`'s keys.
    fn store(&self, org: &str) -> Result<Rc<dyn Storage>, StorageError>;
}

/// The directory in one store, each org in its own.
pub struct SplitStorage {
    directory: Rc<dyn Storage>,
    orgs: Rc<dyn OrgStores>,
}

impl SplitStorage {
    pub fn new(directory: Rc<dyn Storage>, orgs: Rc<dyn OrgStores>) -> Self {
        Self { directory, orgs }
    }

    /// The store of `org`'s keys, or the directory's for `None`.
    fn store_of(&self, org: Option<&str>) -> Result<Rc<dyn Storage>, StorageError> {
        match org {
            Some(org) => self.orgs.store(org),
            None => Ok(self.directory.clone()),
        }
    }
}

/// The parts of a batch, each for one store: the directory's (`None`) first, then each org's
/// in the order the batch first names it.
fn split(batch: Batch) -> Vec<(Option<String>, Batch)> {
    fn part_of<'a>(parts: &'a mut Vec<(Option<String>, Batch)>, key: &str) -> &'a mut Batch {
        let org = org_of_key(key);
        let i = match parts.iter().position(|(o, _)| o.as_deref() == org) {
            Some(i) => i,
            None => {
                parts.push((org.map(str::to_string), Batch::new()));
                parts.len() - 1
            }
        };
        &mut parts[i].1
    }
    let mut parts: Vec<(Option<String>, Batch)> = vec![(None, Batch::new())];
    for check in batch.checks {
        part_of(&mut parts, check.key()).checks.push(check);
    }
    for write in batch.writes {
        part_of(&mut parts, write.key()).writes.push(write);
    }
    for (_, part) in &mut parts {
        part.relaxed = batch.relaxed;
    }
    parts.retain(|(_, part)| !part.is_empty());
    parts
}

impl SplitStorage {
    /// The one store that holds every key under `prefix`.
    fn store_of_prefix(&self, prefix: &str) -> Result<Rc<dyn Storage>, StorageError> {
        match org_of_prefix(prefix) {
            OrgSpan::Directory => self.store_of(None),
            OrgSpan::Org(org) => self.store_of(Some(org)),
            OrgSpan::Several => Err(StorageError::Backend(format!(
                "a scan of {prefix:?} would cross the stores of several orgs; scan one org's keys (o/{{org}}/…) or the directory's"
            ))),
        }
    }
}

#[async_trait(?Send)]
impl Storage for SplitStorage {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.store_of(org_of_key(key))?.get(key).await
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        // Almost always one store: group by store and put the answers back in order.
        let mut groups: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let org = org_of_key(key);
            match groups.iter_mut().find(|(o, _)| *o == org) {
                Some((_, members)) => members.push(i),
                None => groups.push((org, vec![i])),
            }
        }
        let mut out = vec![None; keys.len()];
        for (org, members) in groups {
            let store = self.store_of(org)?;
            let wanted: Vec<String> = members.iter().map(|&i| keys[i].clone()).collect();
            let values = store.get_many(&wanted).await?;
            for (i, value) in members.into_iter().zip(values) {
                out[i] = value;
            }
        }
        Ok(out)
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        self.store_of_prefix(prefix)?
            .scan(prefix, after, limit)
            .await
    }

    async fn scan_back(
        &self,
        prefix: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        self.store_of_prefix(prefix)?
            .scan_back(prefix, before, limit)
            .await
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.validate_keys()?;
        for (i, (org, part)) in split(batch).into_iter().enumerate() {
            let result = match self.store_of(org.as_deref()) {
                Ok(store) => store.commit(part).await,
                Err(e) => Err(e),
            };
            // The first part's failure left nothing written: it is the batch's error as it is.
            result.map_err(|e| match i {
                0 => e,
                _ => StorageError::Backend(format!(
                    "the batch's first part was written, then org {}'s part failed: {e}",
                    org.unwrap_or_default()
                )),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::*;
    use crate::storage::memory::MemoryStorage;

    #[derive(Default)]
    struct Orgs(RefCell<HashMap<String, Rc<MemoryStorage>>>);

    impl OrgStores for Orgs {
        fn store(&self, org: &str) -> Result<Rc<dyn Storage>, StorageError> {
            Ok(self
                .0
                .borrow_mut()
                .entry(org.to_string())
                .or_insert_with(|| Rc::new(MemoryStorage::new()))
                .clone())
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures_executor::block_on(f)
    }

    #[test]
    fn keys_land_in_their_orgs_store_and_the_rest_in_the_directory() {
        let directory = Rc::new(MemoryStorage::new());
        let orgs = Rc::new(Orgs::default());
        let split = SplitStorage::new(directory.clone(), orgs.clone());
        block_on(async {
            let mut batch = Batch::new();
            batch
                .put("auth/token/h", b"t".to_vec())
                .put("o/acme/token/1", b"a".to_vec())
                .put("o/beta/x", b"b".to_vec());
            split.commit(batch).await.unwrap();
            assert_eq!(directory.get("auth/token/h").await.unwrap().unwrap(), b"t");
            assert!(directory.get("o/acme/token/1").await.unwrap().is_none());
            let acme = orgs.store("acme").unwrap();
            assert_eq!(acme.get("o/acme/token/1").await.unwrap().unwrap(), b"a");
            assert!(acme.get("o/beta/x").await.unwrap().is_none());
            let keys =
                ["o/beta/x", "auth/token/h", "o/acme/token/1", "o/acme/none"].map(String::from);
            let values = split.get_many(&keys).await.unwrap();
            assert_eq!(
                values,
                vec![
                    Some(b"b".to_vec()),
                    Some(b"t".to_vec()),
                    Some(b"a".to_vec()),
                    None
                ]
            );
            let page = split.scan("o/acme/", None, 10).await.unwrap();
            assert_eq!(page.entries.len(), 1);
            assert!(split.scan("o/", None, 10).await.is_err());
            assert!(split.scan("", None, 10).await.is_err());
            assert_eq!(
                split.scan("auth/", None, 10).await.unwrap().entries.len(),
                1
            );
        });
    }

    #[test]
    fn a_failing_directory_check_writes_nothing_anywhere() {
        let directory = Rc::new(MemoryStorage::new());
        let orgs = Rc::new(Orgs::default());
        let split = SplitStorage::new(directory.clone(), orgs.clone());
        block_on(async {
            directory.put("org/acme", b"x".to_vec()).await.unwrap();
            let mut batch = Batch::new();
            batch
                .require_absent("org/acme")
                .put("org/acme", b"y".to_vec())
                .put("o/acme/member/p", b"m".to_vec());
            assert!(matches!(
                split.commit(batch).await,
                Err(StorageError::Conflict { .. })
            ));
            assert!(
                orgs.store("acme")
                    .unwrap()
                    .get("o/acme/member/p")
                    .await
                    .unwrap()
                    .is_none()
            );
        });
    }
}
