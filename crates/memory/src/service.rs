//! The memory state one engine instance keeps ([`MemoryService`]): per org, the keyword index
//! and the vectors' sketches, and the events read recently. Saving (`save`), searching (`search`)
//! and catching up with storage (`refresh`) are its methods, in those files.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::cache::EventCache;
use super::keyword::{KeywordIndex, Tokenizer};
use super::segments::Persisted;
use super::semantic::Semantic;
use lore_base::ids::OrgId;
use lore_base::reply::Text;

/// Orgs whose index one core instance keeps in memory; the least recently used goes first.
pub(super) const MAX_CACHED_ORGS: usize = 256;
/// Bytes of events one core instance keeps to answer search hits without a storage read.
pub(super) const EVENT_CACHE_BYTES: usize = 16 << 20;

/// An org's indexes and when this instance last used them.
pub(super) struct CachedIndex {
    pub(super) index: KeywordIndex,
    /// What this instance knows of the index's stored segments.
    pub(super) persisted: Persisted,
    /// The vectors of the index's documents under the current embedder, if there is one.
    pub(super) semantic: Option<Semantic>,
    pub(super) last_used: u64,
    /// Tells this entry from one that replaced it after an eviction (work that awaited in
    /// between must not land in the wrong one).
    pub(super) generation: u64,
}

/// The index state a kept ranking was made under (`search.rs`): it holds while the entry is
/// the same, no event was applied and no vector added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RankedUnder {
    pub(super) generation: u64,
    pub(super) seq: u64,
    pub(super) vectors: usize,
}

/// A kept ranking: the state it was made under, its hits, and the answer made from them once
/// it was (events never change, so the same hits answer alike).
pub(super) struct KeptRanking {
    pub(super) under: RankedUnder,
    pub(super) hits: Vec<super::fusion::Hit>,
    pub(super) answer: Option<Rc<Text>>,
}

/// What a kept ranking is found by: the org, the search's arguments and limit, and the
/// rankings fused (hashed as they are: no text is formatted to look one up).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct SearchKey {
    pub(super) org: OrgId,
    pub(super) input: super::inputs::SearchInput,
    pub(super) limit: usize,
    pub(super) ranking: Ranking,
}

/// Rankings one instance keeps (`search.rs`); past it they start over.
pub(super) const RECENT_RANKINGS: usize = 1_024;
/// Bytes of kept answers (serialized and quoted) one instance holds; past it the rankings
/// start over.
pub(super) const KEPT_ANSWER_BYTES: usize = 8 << 20;

/// Vectors this instance embedded when saving, kept until its next refresh indexes them
/// (counting each window of a long memory: at most about 6 MB at 384 dimensions).
pub(super) const RECENT_VECTORS: usize = 4_096;

/// Per-instance memory state: the keyword indexes of the orgs it has served, and recently
/// read events.
pub struct MemoryService {
    pub(super) tokenizer: Tokenizer,
    pub(super) indexes: RefCell<HashMap<OrgId, CachedIndex>>,
    pub(super) clock: Cell<u64>,
    pub(super) events: RefCell<EventCache>,
    pub(super) recent_vectors: RefCell<HashMap<String, Vec<Vec<f32>>>>,
    /// How many vectors `recent_vectors` holds.
    pub(super) recent_count: Cell<usize>,
    pub(super) ranking: Cell<Ranking>,
    /// The sketches a per-request search ranks in clustered segments (`sketch::PROBE_CODES`;
    /// tests lower it to read a share of a small org's).
    pub(super) probe_codes: Cell<usize>,
    /// Whether this instance serves one request and ends (Spin): searches then answer from
    /// the stored segments where they can instead of loading the index (`probe.rs`).
    pub(super) per_request: Cell<bool>,
    /// Orgs (by key root) whose events past the stored segments may make a segment now
    /// (`tail.rs`).
    pub(super) tail_due: RefCell<HashSet<String>>,
    /// Orgs a search answered from the stored segments for, whose index this instance loads
    /// after the answer; and those it is loading.
    pub(super) load_due: RefCell<HashSet<OrgId>>,
    pub(super) loading: RefCell<HashSet<OrgId>>,
    /// Orgs (by key root) where a search found a part that only per-request searches read (a
    /// sketch, an id page) missing or corrupt: their next index load rebuilds every segment
    /// from the events, as a load that finds its own parts unusable does.
    pub(super) broken_parts: RefCell<HashSet<String>>,
    /// Recent loaded rankings by org and search arguments, with the index state they were made
    /// under (`search.rs`).
    pub(super) rankings: RefCell<HashMap<SearchKey, KeptRanking>>,
    /// Bytes of the answers `rankings` keeps.
    pub(super) answer_bytes: Cell<usize>,
    /// Per org (by key root): the sequence number this instance's last batch of events on its
    /// way to storage will write (`save.rs`, `commit_events`).
    pub(super) pending_seq: RefCell<HashMap<String, u64>>,
    /// Orgs whose embedding queue this instance drains after the answer (`embed_queue.rs`),
    /// those it is draining, and when a failed drain may run again.
    pub(super) embed_due: RefCell<HashSet<OrgId>>,
    pub(super) draining: RefCell<HashSet<OrgId>>,
    pub(super) embed_retry: RefCell<HashMap<OrgId, i64>>,
}

impl Default for MemoryService {
    fn default() -> Self {
        Self {
            tokenizer: Tokenizer::default(),
            indexes: RefCell::default(),
            clock: Cell::default(),
            events: RefCell::new(EventCache::new(EVENT_CACHE_BYTES)),
            recent_vectors: RefCell::default(),
            recent_count: Cell::new(0),
            ranking: Cell::default(),
            probe_codes: Cell::new(super::sketch::PROBE_CODES),
            per_request: Cell::default(),
            tail_due: RefCell::default(),
            load_due: RefCell::default(),
            loading: RefCell::default(),
            broken_parts: RefCell::default(),
            rankings: RefCell::default(),
            answer_bytes: Cell::new(0),
            pending_seq: RefCell::default(),
            embed_due: RefCell::default(),
            draining: RefCell::default(),
            embed_retry: RefCell::default(),
        }
    }
}

impl MemoryService {
    /// Marks this instance as serving one request (Spin; tests of that path).
    pub fn set_per_request(&self, per_request: bool) {
        self.per_request.set(per_request);
    }

    /// Sets how many sketches a per-request search ranks in clustered segments.
    pub fn set_probe_codes(&self, codes: usize) {
        self.probe_codes.set(codes.max(1));
    }
}

/// Which rankings `search_memory` fuses. Always `Hybrid` in the product; the retrieval
/// evaluation switches it to compare each ranking alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ranking {
    #[default]
    Hybrid,
    Keyword,
    Vector,
}
