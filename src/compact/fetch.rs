//! `fetch`: one record, list or definition by id or path, and `/$.d.ts`.

use serde_json::Value;

use crate::Lore;
use crate::auth::Caller;
use crate::error::LoreError;

/// Runs `fetch` for `caller`; `base_url` (when known) makes the answer's `url`.
pub async fn fetch(
    lore: &Lore,
    caller: &Caller,
    id: &str,
    base_url: Option<&str>,
) -> Result<Value, LoreError> {
    let _ = (lore, caller, id, base_url);
    Err(LoreError::Internal("fetch is not built yet".into()))
}
