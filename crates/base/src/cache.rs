//! An in-memory [`Cache`] for one instance (natively, a process's; on Cloudflare, an org
//! object's): entries expire on the clock, and at most [`MemoryCache::CAPACITY`] are kept (when
//! full, the expired go first, then everything; every entry is a copy that can be read again).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use async_trait::async_trait;

use crate::ports::{Cache, Clock, PortError};

pub struct MemoryCache {
    clock: Rc<dyn Clock>,
    entries: RefCell<HashMap<String, (Vec<u8>, i64)>>,
    /// How many reads it answered (tests count them).
    pub hits: Cell<usize>,
}

impl MemoryCache {
    /// The most entries kept at once.
    pub const CAPACITY: usize = 10_000;

    pub fn new(clock: Rc<dyn Clock>) -> Self {
        Self {
            clock,
            entries: RefCell::new(HashMap::new()),
            hits: Cell::new(0),
        }
    }

    /// Whether `key` holds an entry (expired or not).
    pub fn contains(&self, key: &str) -> bool {
        self.entries.borrow().contains_key(key)
    }
}

#[async_trait(?Send)]
impl Cache for MemoryCache {
    async fn get(&self, key: &str) -> Option<Vec<u8>> {
        let now = self.clock.now_ms();
        let mut entries = self.entries.borrow_mut();
        match entries.get(key) {
            Some((_, expires)) if *expires <= now => {
                entries.remove(key);
                None
            }
            Some((bytes, _)) => {
                self.hits.set(self.hits.get() + 1);
                Some(bytes.clone())
            }
            None => None,
        }
    }

    async fn put(&self, key: &str, bytes: Vec<u8>, ttl_secs: u32) {
        let now = self.clock.now_ms();
        let expires = now + i64::from(ttl_secs) * 1000;
        let mut entries = self.entries.borrow_mut();
        if entries.len() >= Self::CAPACITY && !entries.contains_key(key) {
            entries.retain(|_, (_, at)| *at > now);
            if entries.len() >= Self::CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key.to_string(), (bytes, expires));
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.entries.borrow_mut().remove(key);
        Ok(())
    }
}
