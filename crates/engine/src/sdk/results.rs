//! What some SDK methods return that no record type is: memory hits and saved ids as the SDK
//! shows them, and `search_sdk`'s entries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One memory as SDK reads return it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MemoryHit {
    /// `evt_…`
    pub id: String,
    pub content: String,
    pub kind: String,
    /// Relevance (search results only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    pub entity_ids: Vec<String>,
    pub author: String,
    pub created_at: String,
    /// When what the memory describes happened, if its writer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_event_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// `memory.search` results.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MemoryResults {
    pub results: Vec<MemoryHit>,
    /// How many of the org's memories have no vectors yet (the background embedder is on
    /// them): this search ranked them by keywords alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_vectors: Option<u64>,
}

/// `memory.list`: one page of memories, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MemoryPage {
    pub items: Vec<MemoryHit>,
    /// Pass as `cursor` for the older memories; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `memory.versions`: a memory's versions, oldest first; `superseded_by` links each to the next.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MemoryVersions {
    pub versions: Vec<MemoryHit>,
}

/// `memory.save` result: the ids in input order, new or (deduplicated, or an idempotent
/// retry) existing.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SavedIds {
    pub ids: Vec<String>,
    /// Whether a memory was not stored again because a current memory with the same text,
    /// entities, kind, payload and author exists (its id is in `ids`).
    pub deduplicated: bool,
    /// Which memories (0-based, input order) were deduplicated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deduplicated_indexes: Vec<usize>,
    /// `pending`: the new memories are durable and found by keywords, and their vectors are
    /// stored shortly (`wait_for_vectors` waits for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<String>,
}

/// One SDK method, as `search_sdk` returns it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SdkMethod {
    /// e.g. `entities.create` or `Ticket.list`.
    pub path: String,
    /// The TypeScript signature.
    pub signature: String,
    pub description: String,
    /// `read`, `write` or `admin`.
    pub access: String,
    /// Default mode: `try`, `send` or `do`.
    pub mode: String,
}
