//! Memory: `save_memory` appends events (and their embeddings); `search_memory` fuses keyword
//! ranking (BM25, `keyword.rs`) with vector similarity (`semantic.rs`, `vector/`) under the
//! same filters. Superseded events stay stored and are hidden unless asked for.
//!
//! Every batch of new events also bumps the org's event sequence number (with a precondition,
//! so concurrent batches are ordered by commit) and records `evseq/{n} → event`. A core instance
//! keeps one keyword index per org and catches up by reading only the sequence entries past the
//! one it has seen; an unchanged org costs one point read per search.

mod cache;
pub mod event;
pub mod keyword;
mod save;
pub mod schemas;
pub use save::FeedItem;
mod search;
pub use search::{Ranking, event_json};
pub mod semantic;
pub mod vector;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use serde::Deserialize;
use serde_json::Value;

use lore_directory::Caller;
use crate::error::Result;
use crate::ids::OrgId;
use crate::keys::OrgKeys;
use crate::ports::Ports;
use event::Event;
use keyword::{KeywordIndex, Tokenizer};

/// Orgs whose index one core instance keeps in memory; the least recently used goes first.
const MAX_CACHED_ORGS: usize = 256;
/// Bytes of events one core instance keeps to answer search hits without a storage read.
const EVENT_CACHE_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryInput {
    pub content: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub entity_ids: Vec<String>,
    #[serde(default)]
    pub supersedes_event_id: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub payload: Option<Value>,
}

/// `{memories: [...]}`: nothing else may stand beside the list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryBatch {
    pub memories: Vec<MemoryInput>,
}

/// `save_memory` arguments: one memory, or `{memories: [...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SaveInput {
    Batch(MemoryBatch),
    One(MemoryInput),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    pub query: String,
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    #[serde(default)]
    pub entity_ids: Option<Vec<String>>,
    #[serde(default)]
    pub author: Option<String>,
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub until: Option<String>,
    #[serde(default)]
    pub include_superseded: bool,
}

/// An org's indexes and when this instance last used them.
struct CachedIndex {
    index: KeywordIndex,
    /// The vectors of the index's documents under the current embedder, if there is one.
    semantic: Option<semantic::Semantic>,
    last_used: u64,
    /// Tells this entry from one that replaced it after an eviction (work that awaited in
    /// between must not land in the wrong one).
    generation: u64,
}

/// Vectors this instance embedded when saving, kept until its next refresh indexes them.
const RECENT_VECTORS: usize = 4_096;

/// Per-instance memory state: the keyword indexes of the orgs it has served, and recently
/// read events.
pub struct MemoryService {
    tokenizer: Tokenizer,
    indexes: RefCell<HashMap<OrgId, CachedIndex>>,
    clock: Cell<u64>,
    events: RefCell<cache::EventCache>,
    recent_vectors: RefCell<HashMap<String, Vec<f32>>>,
    ranking: Cell<search::Ranking>,
}

impl Default for MemoryService {
    fn default() -> Self {
        Self {
            tokenizer: Tokenizer::default(),
            indexes: RefCell::default(),
            clock: Cell::default(),
            events: RefCell::new(cache::EventCache::new(EVENT_CACHE_BYTES)),
            recent_vectors: RefCell::default(),
            ranking: Cell::default(),
        }
    }
}

/// The org's event sequence number as stored (0 before the first event).
async fn stored_seq(ports: &Ports, keys: &OrgKeys) -> Result<(u64, Option<Vec<u8>>)> {
    let raw = ports.storage.get(&keys.events_seq()).await?;
    let seq = match &raw {
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                crate::error::LoreError::Internal("the event sequence number is corrupt".into())
            })?,
        None => 0,
    };
    Ok((seq, raw))
}

impl MemoryService {
    /// Brings the caller's org index up to date with storage.
    ///
    /// A new index loads every event with one scan, starting from the sequence number read
    /// before the scan (events committed during the scan are seen twice, and inserting is
    /// idempotent). A known index reads the sequence entries past its own and loads those events.
    async fn refresh(&self, ports: &Ports, caller: &Caller) -> Result<()> {
        let org = caller.org();
        let (seq, _) = stored_seq(ports, caller.keys()).await?;
        let known = self.indexes.borrow().get(org).map(|c| c.index.seq);
        let mut fresh: Vec<Event> = Vec::new();
        let caught_up = match known {
            Some(known) if known == seq => seq,
            Some(known) => {
                let keys = caller.keys();
                let mut after = Some(keys.event_seq(known));
                let mut last = known;
                loop {
                    let page = ports
                        .storage
                        .scan(&keys.event_seqs(), after.as_deref(), 1000)
                        .await?;
                    for (key, ulid) in &page.entries {
                        last = key
                            .rsplit('/')
                            .next()
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(last);
                        let ulid = String::from_utf8_lossy(ulid);
                        if let Some(bytes) = ports.storage.get(&keys.event(&ulid)).await? {
                            fresh.push(serde_json::from_slice(&bytes)?);
                        }
                    }
                    match page.cursor {
                        Some(c) => after = Some(c),
                        None => break,
                    }
                }
                last
            }
            None => {
                for (_, bytes) in ports.storage.scan_all(&caller.keys().events()).await? {
                    fresh.push(serde_json::from_slice(&bytes)?);
                }
                seq
            }
        };
        let tick = self.clock.get() + 1;
        self.clock.set(tick);
        let (generation, fresh) = {
            let mut indexes = self.indexes.borrow_mut();
            if !indexes.contains_key(org) && indexes.len() >= MAX_CACHED_ORGS {
                let oldest = indexes
                    .iter()
                    .min_by_key(|(_, c)| c.last_used)
                    .map(|(o, _)| o.clone());
                if let Some(oldest) = oldest {
                    indexes.remove(&oldest);
                }
            }
            let cached = indexes.entry(org.clone()).or_insert_with(|| CachedIndex {
                index: KeywordIndex::default(),
                semantic: None,
                last_used: tick,
                generation: tick,
            });
            cached.last_used = tick;
            let generation = cached.generation;
            let mut events = self.events.borrow_mut();
            let fresh: Vec<Rc<Event>> = fresh.into_iter().map(Rc::new).collect();
            for event in &fresh {
                cached.index.insert(&self.tokenizer, event);
                events.insert(event.clone());
            }
            cached.index.seq = cached.index.seq.max(caught_up);
            (generation, fresh)
        };
        self.refresh_vectors(ports, caller, generation, &fresh)
            .await;
        Ok(())
    }

    /// Keeps vectors embedded at save time for this instance's next refresh.
    fn remember_vectors(&self, vectors: impl IntoIterator<Item = (String, Vec<f32>)>) {
        let mut recent = self.recent_vectors.borrow_mut();
        for (ulid, v) in vectors {
            if recent.len() >= RECENT_VECTORS {
                recent.clear();
            }
            recent.insert(ulid, v);
        }
    }
}
