//! The cache port on Spin key-value (`key_value_stores` in `spin.toml`). Spin's key-value has
//! no expiry, so each value carries its own: eight bytes of expiry time (ms since the epoch,
//! big-endian) before the cached bytes. An expired entry reads as a miss and is deleted.
//!
//! The store is opened on first use, so a request that never touches the cache (health
//! checks, tokenless requests) makes no key-value call.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;
use lore::ports::{Cache, Clock, PortError};
use spin_sdk::key_value::Store;

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
