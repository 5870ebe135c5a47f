//! Callers an instance resolved lately, kept for the next request with the same bearer token:
//! a request that finds its token here reads the org's auth stamp ([`crate::stamp`]) and nothing
//! else, instead of the credential, the membership and the org record.
//!
//! An entry is trusted only while the org's stamp is the one it was resolved under, and every
//! change that can end or narrow access renews the stamp in the same commit: a token revoked,
//! a grant withdrawn, the org record changed, a member's role changed or the member removed. So a
//! revocation or a demotion holds at the next request, on every instance. Expiry is checked on
//! every use; the token's audience is kept so the front checks it against each request's URL.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::caller::Caller;
use lore_base::error::Result;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_base::storage::ReadAhead;

/// The value of `key`, one of the caller's org keys: as this request read it ahead with the
/// org's auth stamp ([`Caller::read_ahead`]), or from storage.
pub async fn read(ports: &Ports, caller: &Caller, key: &str) -> Result<Option<Vec<u8>>> {
    match caller.read_ahead(key) {
        Some(value) => Ok(value),
        None => Ok(ports.storage.get(key).await?),
    }
}

/// Most entries one instance keeps; past it the cache starts over.
const CAPACITY: usize = 4_096;

/// A resolved caller with what its reuse is checked against.
#[derive(Clone)]
pub struct Cached {
    pub caller: Caller,
    /// The token's audience (an OAuth resource URL), checked against every request's.
    pub audience: Option<String>,
    pub expires_at_ms: Option<i64>,
}

/// One instance's resolved callers, by the hash of the bearer secret and the org of the
/// request's path.
#[derive(Default)]
pub struct CallerCache {
    entries: RefCell<HashMap<(String, Option<String>), Cached>>,
}

impl CallerCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The caller resolved before for this token hash and path org, if the org's auth stamp is
    /// still the one it was resolved under and the token has not expired (else it is dropped
    /// and the caller resolved again). One storage read: the stamp, and with it the keys
    /// `ahead` names for the caller's org (the request's first reads, which its caller then
    /// carries: [`Caller::read_ahead`]), in one call.
    pub async fn get(
        &self,
        ports: &Ports,
        hash: &str,
        path_org: Option<&str>,
        ahead: impl FnOnce(&OrgKeys) -> Vec<String>,
    ) -> Result<Option<Cached>> {
        let key = (hash.to_string(), path_org.map(str::to_string));
        let Some(mut cached) = self.entries.borrow().get(&key).cloned() else {
            return Ok(None);
        };
        let ahead = ahead(cached.caller.keys());
        let (stamp, read_ahead) = if ahead.is_empty() {
            (crate::stamp::read(ports, cached.caller.org()).await?, None)
        } else {
            let mut wanted = Vec::with_capacity(ahead.len() + 1);
            wanted.push(cached.caller.keys().auth_stamp());
            wanted.extend(ahead);
            let mut values = ports.storage.get_many(&wanted).await?.into_iter();
            let stamp = values.next().flatten();
            let read: Vec<_> = wanted.into_iter().skip(1).zip(values).collect();
            (stamp, Some(ReadAhead::new(read)))
        };
        let expired = crate::tokens::expired(ports, cached.expires_at_ms);
        if expired || stamp.as_deref() != cached.caller.auth_stamp() {
            self.entries.borrow_mut().remove(&key);
            return Ok(None);
        }
        if let Some(read_ahead) = read_ahead {
            cached.caller = cached.caller.with_read_ahead(read_ahead);
        }
        Ok(Some(cached))
    }

    /// Keeps a caller just resolved for this token hash and path org.
    pub fn put(&self, hash: &str, path_org: Option<&str>, cached: Cached) {
        let mut entries = self.entries.borrow_mut();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert((hash.to_string(), path_org.map(str::to_string)), cached);
    }

    /// How many callers are kept.
    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.borrow().is_empty()
    }
}
