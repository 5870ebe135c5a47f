//! The compact profile (SPEC 1.2): three tools, `search`, `fetch` and `do`, over the same SDK,
//! sandbox and data as the workspace profile. Its shape is also what ChatGPT's connectors
//! expect: `search` answers `{results: [{id, title, url, ...}]}` and `fetch` answers
//! `{id, title, text, url, metadata}`, each also as one JSON text content item.
//!
//! - [`search`] finds records (entities, memories), Nouns (entity types), Verbs (SDK methods
//!   and operations) and docs, by keyword and meaning;
//! - [`fetch`] returns one of them by path, a list, or `/$.d.ts`, the caller's declarations;
//! - [`docs`] holds the short topic pages shipped with lore;
//! - `do` runs a program through the sandbox with a dispatch mode ([`crate::runs::modes`]).

pub mod catalog;
pub mod docs;
pub mod fetch;
mod rank;
pub mod search_all;

use serde::Deserialize;

use lore_base::error::LoreError;
use lore_base::model::Mode;

/// `search` arguments (the seed's schema; see `crate::tools`).
#[derive(Debug, Clone, Deserialize)]
pub struct SearchArgs {
    pub query: String,
    pub limit: Option<usize>,
}

/// `fetch` arguments.
#[derive(Debug, Clone, Deserialize)]
pub struct FetchArgs {
    pub id: String,
}

/// `do` arguments. The seed's schema declares `code` and `mode`; `idempotency_key` is an
/// extra property that schema allows (it may also come in the call's `_meta`).
#[derive(Debug, Clone, Deserialize)]
pub struct DoArgs {
    pub code: String,
    pub mode: Option<Mode>,
    pub idempotency_key: Option<String>,
}

/// The `_meta` keys a client may put a `do` run's idempotency key under.
pub const META_IDEMPOTENCY_KEYS: &[&str] = &["io.lore/idempotency_key", "idempotency_key"];

/// Runs `do` with already-validated arguments; the idempotency key comes from the arguments
/// or the call's `_meta`.
pub async fn run_do(
    engine: &crate::instance::Engine,
    caller: &lore_directory::Caller,
    args: serde_json::Value,
    meta: Option<&serde_json::Value>,
    progress: Option<&dyn Fn(&str)>,
) -> Result<serde_json::Value, LoreError> {
    let args: DoArgs =
        serde_json::from_value(args).map_err(|e| LoreError::invalid("arguments", e.to_string()))?;
    let from_meta = meta.and_then(|m| {
        META_IDEMPOTENCY_KEYS
            .iter()
            .find_map(|k| m.get(*k).and_then(serde_json::Value::as_str))
    });
    let key = match (args.idempotency_key.as_deref(), from_meta) {
        (Some(a), Some(m)) if a != m => {
            return Err(LoreError::invalid(
                "idempotency_key",
                "the argument and _meta give different idempotency keys; give one",
            ));
        }
        (Some(k), _) | (None, Some(k)) => Some(k),
        (None, None) => None,
    };
    if let Some(k) = key
        && (k.is_empty() || k.len() > 200)
    {
        return Err(LoreError::invalid(
            "idempotency_key",
            "give 1 to 200 characters",
        ));
    }
    crate::runs::run_do(engine, caller, &args.code, args.mode, key, progress).await
}
