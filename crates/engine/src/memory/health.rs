//! What `lore doctor` and `lore reindex` do to an org's stored memory index: report the
//! keyword index segments and the vector index snapshot as a fresh instance would find them,
//! and rebuild both from the events (which are the truth).

use serde_json::{Value, json};

use super::refresh::stored_seq;
use super::segments;
use super::semantic::{clear_snapshot, model_key, snapshot_health};
use super::service::MemoryService;
use lore_base::error::Result;
use lore_base::ports::Ports;
use lore_directory::Caller;

impl MemoryService {
    /// The caller's org's stored index, checked part by part; changes nothing.
    pub async fn health(&self, ports: &Ports, caller: &Caller) -> Result<Value> {
        let keys = caller.keys();
        let (seq, _) = stored_seq(ports, keys).await?;
        let model = ports
            .embedder
            .as_ref()
            .map(|e| (model_key(e.model_id()), e.dimensions()));
        let model = model.as_ref().map(|(k, d)| (k.as_str(), *d));
        let keyword = segments::inspect(ports, keys, seq, model).await?;
        let vectors = match &ports.embedder {
            Some(embedder) => json!({
                "model": embedder.model_id(),
                "snapshot": snapshot_health(ports, keys, &model_key(embedder.model_id())).await?,
            }),
            None => Value::Null,
        };
        let healthy = keyword.state != "unusable" && vectors["snapshot"]["state"] != "unusable";
        Ok(json!({
            "org": caller.org(),
            "healthy": healthy,
            "events": seq,
            "keyword_segments": keyword,
            "vectors": vectors,
        }))
    }

    /// Deletes the org's stored segments and vector snapshot, builds the index again from the
    /// events, stores it, and reports the result.
    pub async fn reindex(&self, ports: &Ports, caller: &Caller) -> Result<Value> {
        let keys = caller.keys();
        self.indexes.borrow_mut().remove(caller.org());
        segments::clear(ports, keys).await?;
        if let Some(embedder) = &ports.embedder {
            clear_snapshot(ports, keys, &model_key(embedder.model_id())).await?;
        }
        self.refresh(ports, caller).await?;
        self.persist_segments(ports, caller).await;
        self.health(ports, caller).await
    }
}
