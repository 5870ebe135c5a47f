//! What `save_memory` and `search_memory` take, as their JSON arguments decode.

use serde::Deserialize;
use serde_json::Value;

use lore_base::error::{LoreError, Result};
use lore_base::time::parse_time;

/// A time argument (`field`) as milliseconds since the epoch.
pub(super) fn input_time(value: &Option<String>, field: &str) -> Result<Option<i64>> {
    value
        .as_deref()
        .map(|s| {
            parse_time(s).ok_or_else(|| {
                LoreError::invalid(
                    field,
                    format!(
                        "{s:?} is not a time; use RFC 3339 (2026-01-31T09:00:00Z) or YYYY-MM-DD"
                    ),
                )
            })
        })
        .transpose()
}

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
    /// When what the memory describes happened (RFC 3339 or YYYY-MM-DD), if not when it is saved.
    #[serde(default)]
    pub occurred_at: Option<String>,
    /// Answer only once the vectors are stored too (a call's top level only; the schema keeps
    /// it out of a batch's items).
    #[serde(default)]
    pub wait_for_vectors: bool,
}

/// `{memories: [...]}`: nothing else may stand beside the list but `wait_for_vectors`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryBatch {
    pub memories: Vec<MemoryInput>,
    #[serde(default)]
    pub wait_for_vectors: bool,
}

/// `save_memory` arguments: one memory, or `{memories: [...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SaveInput {
    Batch(MemoryBatch),
    One(MemoryInput),
}

impl SaveInput {
    /// Whether the caller asked for the vectors before the answer.
    pub fn waits_for_vectors(&self) -> bool {
        match self {
            Self::Batch(b) => b.wait_for_vectors,
            Self::One(m) => m.wait_for_vectors,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
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
    /// Answer as lore knew it then: memories saved by this time, superseded only by memories
    /// saved by it.
    #[serde(default)]
    pub as_of: Option<String>,
}

/// `memory.list`: the org's memories newest first (by when they were saved), with the search's
/// filters, a page at a time.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Only these kinds (fact, preference, decision, observation, note, or a feed item kind).
    pub kinds: Option<Vec<String>>,
    /// Only memories about one of these entities.
    pub entity_ids: Option<Vec<String>>,
    /// Only memories by this principal id.
    pub author: Option<String>,
    /// Only memories about this time or later (RFC 3339 or YYYY-MM-DD).
    pub since: Option<String>,
    /// Only memories about this time or earlier.
    pub until: Option<String>,
    /// Also list memories a newer one replaced (each says which).
    #[serde(default)]
    pub include_superseded: bool,
    /// Page size, 1-100 (default 50).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page: the memories saved before it.
    pub cursor: Option<String>,
}
