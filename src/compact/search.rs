//! `search`: records, Nouns, Verbs and docs by keyword and meaning.

use serde_json::Value;

use super::SearchArgs;
use crate::Lore;
use crate::auth::Caller;
use crate::error::LoreError;

/// Runs `search` for `caller`; `base_url` (when known) makes each hit's `url`.
pub async fn search(
    lore: &Lore,
    caller: &Caller,
    args: SearchArgs,
    base_url: Option<&str>,
) -> Result<Value, LoreError> {
    let _ = (lore, caller, args, base_url);
    Err(LoreError::Internal("search is not built yet".into()))
}
