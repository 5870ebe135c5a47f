//! The cache port on Spin key-value (`key_value_stores` in `spin.toml`). Spin's key-value has
//! no expiry, so each value carries its own: eight bytes of expiry time (ms since the epoch,
//! big-endian) before the cached bytes. An expired entry reads as a miss and is deleted.
//!
//! The store is opened on first use, so a request that never touches the cache (health
//! checks, tokenless requests) makes no key-value call.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;
use lore_base::ports::{Cache, Clock, PortError};
use spin_sdk::key_value::Store;

/// The Spin key-value store lore caches in (`key_value_stores` in `spin.toml`).
pub const KV_STORE: &str = "default";

/// A Spin key-value store as lore's cache.
pub struct SpinKvCache {
    label: &'static str,
    clock: Rc<dyn Clock>,
    store: RefCell<Option<Rc<Store>>>,
}

impl SpinKvCache {
    pub fn new(label: &'static str, clock: Rc<dyn Clock>) -> Self {
        Self {
            label,
            clock,
            store: RefCell::new(None),
        }
    }

    async fn store(&self) -> Result<Rc<Store>, PortError> {
        if let Some(store) = self.store.borrow().clone() {
            return Ok(store);
        }
        let store = Rc::new(
            Store::open(self.label)
                .await
                .map_err(|e| PortError(format!("Spin key-value {:?}: {e:?}", self.label)))?,
        );
        *self.store.borrow_mut() = Some(store.clone());
        Ok(store)
    }
}

fn failed(e: impl std::fmt::Debug) -> PortError {
    PortError(format!("Spin key-value: {e:?}"))
}

#[async_trait(?Send)]
impl Cache for SpinKvCache {
    async fn get(&self, key: &str) -> Option<Vec<u8>> {
        let store = self.store().await.ok()?;
        let value = store.get(key).await.ok()??;
        let (expires, bytes) = value.split_first_chunk::<8>()?;
        if i64::from_be_bytes(*expires) <= self.clock.now_ms() {
            let _ = store.delete(key).await;
            return None;
        }
        Some(bytes.to_vec())
    }

    async fn put(&self, key: &str, bytes: Vec<u8>, ttl_secs: u32) {
        let Ok(store) = self.store().await else {
            return;
        };
        let expires = self
            .clock
            .now_ms()
            .saturating_add(i64::from(ttl_secs) * 1000);
        let mut value = Vec::with_capacity(8 + bytes.len());
        value.extend_from_slice(&expires.to_be_bytes());
        value.extend_from_slice(&bytes);
        let _ = store.set(key, value).await;
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.store().await?.delete(key).await.map_err(failed)
    }
}

/// The rate-limiter port on Spin key-value: each bucket is a JSON value under `rl/{key}`.
/// Spin key-value has no compare-and-swap, so requests racing on one bucket may each see the
/// same count: the limit is approximate under such races (never more than the racing
/// requests over it). A store that cannot be reached lets the request through.
pub struct SpinKvLimiter {
    cache: SpinKvCache,
}

impl SpinKvLimiter {
    pub fn new(label: &'static str, clock: Rc<dyn Clock>) -> Self {
        Self {
            cache: SpinKvCache::new(label, clock),
        }
    }
}

impl lore_base::ratelimit::RateLimiter for SpinKvLimiter {
    fn take(
        &self,
        _scope: &str,
        buckets: &[(String, u32)],
        now_ms: i64,
    ) -> lore_base::ratelimit::DecisionFuture<'_> {
        let buckets = buckets.to_vec();
        Box::pin(async move {
            let Ok(store) = self.cache.store().await else {
                return lore_base::ratelimit::Decision::ALLOWED;
            };
            let mut old = Vec::with_capacity(buckets.len());
            for (key, _) in &buckets {
                let value = store.get(format!("rl/{key}")).await.ok().flatten();
                old.push(value.and_then(|v| serde_json::from_slice(&v).ok()));
            }
            let rates: Vec<u32> = buckets.iter().map(|(_, r)| *r).collect();
            let (states, decision) = lore_base::ratelimit::take(&old, &rates, now_ms);
            for ((key, _), state) in buckets.iter().zip(states) {
                if let Ok(bytes) = serde_json::to_vec(&state) {
                    let _ = store.set(format!("rl/{key}"), bytes).await;
                }
            }
            decision
        })
    }
}
