//! The event record: one memory, append-only.

use serde::{Deserialize, Serialize};

/// The kinds `save_memory` accepts. Feed deliveries bring their own kinds later.
pub const MEMORY_KINDS: &[&str] = &["fact", "preference", "decision", "observation", "note"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// `evt_{ulid}`.
    pub id: String,
    pub kind: String,
    pub content: String,
    /// Optional structured data saved with the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    #[serde(default)]
    pub entity_ids: Vec<String>,
    /// Principal id of the writer.
    pub author: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_event_id: Option<String>,
    /// Dedupe key of a feed item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_id: Option<String>,
    pub created_at_ms: i64,
    /// The time the memory describes (`occurred_at` on save), when the writer gave one; the
    /// time filters and "as of" searches use it, else `created_at_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at_ms: Option<i64>,
}

impl Event {
    /// The time the memory is about: when it happened if the writer said, else when it was saved.
    pub fn at_ms(&self) -> i64 {
        self.occurred_at_ms.unwrap_or(self.created_at_ms)
    }
}
