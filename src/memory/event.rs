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
}

/// RFC 3339 UTC with milliseconds, the form every surface shows.
pub fn format_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Parses RFC 3339 or a plain `YYYY-MM-DD` (midnight UTC) into milliseconds.
pub fn parse_time(s: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp_millis());
    }
    let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}
