//! One org's memory, below its records (`lore-records`) and the org engine (`lore-engine`):
//! `save_memory` appends events (and their embeddings); `search_memory` fuses keyword ranking
//! (BM25, `keyword.rs`) with vector similarity (`semantic.rs`, `vector.rs`) under the same
//! filters. Superseded events stay stored and are hidden unless asked for.
//!
//! Every batch of new events also bumps the org's event sequence number (with a precondition,
//! so concurrent batches are ordered by commit) and records `evseq/{n} → event`. A core instance
//! keeps one keyword index per org and catches up by reading only the sequence entries past the
//! one it has seen; an unchanged org costs one point read per search. A repeated search over an
//! unchanged index is answered with the text its first answer was serialized to.

mod browse;
mod cache;
mod codec;
mod embed_queue;
pub mod event;
mod fusion;
mod health;
mod inputs;
pub mod keyword;
mod probe;
mod refresh;
mod save;
pub mod schemas;
mod search;
pub mod segments;
pub mod semantic;
mod service;
mod sketch;
mod tail;
pub mod vector;

pub use embed_queue::{DRAIN_MEMORIES, INLINE_TAIL};
pub use inputs::{ListInput, MemoryBatch, MemoryInput, SaveInput, SearchInput};
pub use refresh::first_reads;
pub use save::FeedItem;
pub use search::event_json;
pub use service::{MemoryService, Ranking};
pub use tail::MAX_TAIL_EVENTS;
