//! What `lore doctor` and `lore reindex` do to an org's stored memory index: report the
//! keyword index segments (with their vector sketches, and the parts only per-request searches
//! read) as a fresh instance would find them, and rebuild them from the events (which are the
//! truth).

use serde::Serialize;
use serde_json::{Value, json};

use super::codec;
use super::refresh::stored_seq;
use super::segments::{self, Loaded, SegmentHead, Unusable};
use super::semantic::{clear_old_snapshots, model_key};
use super::service::MemoryService;
use super::sketch;
use lore_base::error::Result;
use lore_base::keys::OrgKeys;
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
        let keyword = inspect(ports, keys, seq, model).await?;
        let vectors = match &ports.embedder {
            Some(embedder) => json!({
                "model": embedder.model_id(),
                "queued": super::embed_queue::queued(ports, keys).await?,
            }),
            None => Value::Null,
        };
        let healthy = keyword.state != "unusable";
        Ok(json!({
            "org": caller.org(),
            "healthy": healthy,
            "events": seq,
            "keyword_segments": keyword,
            "vectors": vectors,
        }))
    }

    /// Deletes the org's stored segments (and any vector index snapshot an earlier version
    /// stored), builds the index again from the events, stores it, and reports the result.
    pub async fn reindex(&self, ports: &Ports, caller: &Caller) -> Result<Value> {
        let keys = caller.keys();
        self.indexes.borrow_mut().remove(caller.org());
        segments::clear(ports, keys).await?;
        clear_old_snapshots(ports, keys).await?;
        self.refresh(ports, caller).await?;
        self.persist_segments(ports, caller).await;
        self.health(ports, caller).await
    }
}

/// What `lore doctor` reports of an org's keyword index segments.
#[derive(Debug, Clone, Serialize)]
struct Health {
    /// `healthy`, `none` (not written yet: the org is small, or new) or `unusable` (the next
    /// request rebuilds them from the events).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub segments: usize,
    pub documents: u32,
    pub bytes: u64,
    /// The event sequence number the segments reach, and the org's.
    pub covers_seq: u64,
    pub stored_seq: u64,
}

/// Reads and checks the org's segments as a fresh instance would (every checksum, every
/// decode), and the parts only per-request searches read (id pages; the sketches and their
/// clusters under `model`, its key and dimensions), without changing anything.
async fn inspect(
    ports: &Ports,
    keys: &OrgKeys,
    stored_seq: u64,
    model: Option<(&str, usize)>,
) -> Result<Health> {
    Ok(match segments::read(ports, keys, stored_seq).await? {
        Ok(Loaded { index, persisted }) => {
            let why = per_request_parts(ports, keys, &persisted.segments, model).await?;
            Health {
                state: if why.is_some() { "unusable" } else { "healthy" },
                why,
                segments: persisted.segments.len(),
                documents: persisted.covered(),
                bytes: persisted.segments.iter().map(|s| s.bytes).sum(),
                covers_seq: index.seq,
                stored_seq,
            }
        }
        Err(Unusable { why, .. }) => Health {
            state: if why.is_some() { "unusable" } else { "none" },
            why,
            segments: 0,
            documents: 0,
            bytes: 0,
            covers_seq: 0,
            stored_seq,
        },
    })
}

/// Why a part that only per-request searches read does not open, if one does not: every id
/// page (each id decoded) and, under `model`, every segment's sketch and clusters.
async fn per_request_parts(
    ports: &Ports,
    keys: &OrgKeys,
    heads: &[SegmentHead],
    model: Option<(&str, usize)>,
) -> Result<Option<String>> {
    let ids = heads
        .iter()
        .flat_map(|s| (0..s.id_pages()).map(move |p| (s, p)));
    let pages: Vec<String> = ids
        .clone()
        .map(|(s, p)| keys.keyword_id_page(&s.id, p))
        .collect();
    for (((segment, page), key), bytes) in
        ids.zip(&pages).zip(ports.storage.get_many(&pages).await?)
    {
        let Some(bytes) = bytes else {
            return Ok(Some(format!("id page {key} is missing")));
        };
        let body = match codec::unseal(key, &bytes) {
            Ok(body) => body,
            Err(why) => return Ok(Some(why)),
        };
        let first = page * codec::ID_PAGE;
        for n in 0..codec::ID_PAGE.min(segment.docs - first) {
            if let Err(why) = codec::id_in_page(body, n as usize) {
                return Ok(Some(why));
            }
        }
    }
    let Some((model_key, dims)) = model else {
        return Ok(None);
    };
    let mut parts =
        segments::read_parts(ports, &keys.keyword_sketches_and_clusters(model_key)).await?;
    for segment in heads {
        let directory = match segment.take_sketch(keys, model_key, dims, &mut parts) {
            Ok(Some(sketch::Stored::Clustered(d))) => d,
            Ok(_) => continue,
            Err(why) => return Ok(Some(why)),
        };
        for c in 0..directory.clusters() {
            let key = keys.keyword_sketch_cluster(model_key, &segment.id, c);
            let Some(sealed) = parts.remove(&key) else {
                return Ok(Some(format!("sketch cluster {key} is missing")));
            };
            let size = (c, directory.size(c));
            if let Err(why) = segment.open_cluster(keys, model_key, dims, size, sealed) {
                return Ok(Some(why));
            }
        }
    }
    Ok(None)
}
