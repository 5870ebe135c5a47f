//! The semantic half of memory search: each event's embedding, stored once beside the event,
//! and a per-org vector index over them.
//!
//! - `save_memory` embeds the new memories before it commits and stores each vector in the
//!   same batch as its event (`vec/{model}/{ulid}`, int8 with one scale), so no instance has to
//!   embed it again. An event without a vector for the current model (saved while the
//!   embedder failed, delivered by a feed, or saved under another model) is embedded lazily on
//!   the next refresh: changing the model re-embeds without a migration.
//! - An instance that meets an org for the first time reads the sketches of its vectors from the
//!   stored segments (`sketch/`, one scan) and then only the vectors of events past them, so a
//!   cold start neither re-embeds nor builds anything; a search reads the stored vectors of its
//!   nearest candidates to rank them exactly (`vector.rs`).
//! - Failures of the embedder never fail a save or a search: the keyword ranking still answers
//!   and the missing vectors are retried after a pause.

use std::collections::HashMap;

use super::keyword::KeywordIndex;
use super::sketch::sign_bits;
use super::vector::{Codes, decode, encode, normalize, stored_length};
use lore_base::error::Result;
use lore_base::keys::{OrgKeys, sha256_hex};
use lore_base::ports::{Embedder, Ports};
use lore_base::storage::Batch;

/// Texts sent to the embedder in one call.
pub const EMBED_BATCH: usize = 64;
/// How long an instance waits before asking a failing embedder again for an org's backlog.
pub(super) const RETRY_AFTER_MS: i64 = 30_000;
/// Most texts one refresh embeds; a larger backlog (a model change in a big org) is worked off
/// over the following requests while the keyword ranking answers.
pub(super) const MAX_EMBED_PER_REFRESH: usize = 4_096;

/// The storage key segment of a model: a short hash of its id (ids hold `/` and `@`).
pub fn model_key(model_id: &str) -> String {
    sha256_hex(model_id)[..16].to_string()
}

/// Embeds `texts` in batches; every vector is checked for the model's dimensions and
/// normalized.
pub async fn embed_all(embedder: &dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
    let dims = embedder.dimensions();
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(EMBED_BATCH) {
        let vectors = embedder.embed(chunk).await.map_err(|e| e.to_string())?;
        if vectors.len() != chunk.len() {
            return Err(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                chunk.len()
            ));
        }
        for mut v in vectors {
            if v.len() != dims || v.iter().any(|x| !x.is_finite()) {
                return Err(format!(
                    "the embedder returned a vector of {} dimensions (or not finite); {} expected",
                    v.len(),
                    dims
                ));
            }
            normalize(&mut v);
            out.push(v);
        }
    }
    Ok(out)
}

/// Stored vectors one instance keeps in memory for exact ranking, per org; past it the cache
/// starts over (a loaded search reads the vectors it lacks in one read).
const CACHED_VECTORS: usize = 32_768;

/// One org's vectors under one model: every document's sketch (`vector.rs`), and the stored
/// int8 vectors of those this instance has ranked exactly or embedded lately.
pub struct Semantic {
    pub model: String,
    pub model_key: String,
    pub dims: usize,
    pub codes: Codes,
    /// Stored vectors (`encode`) by keyword document number, each with its length
    /// (`stored_length`), so an exact ranking computes one product per vector.
    vectors: HashMap<u32, (Vec<u8>, f64)>,
    /// When this instance may next try to embed the backlog (after a failure).
    pub retry_after_ms: i64,
    /// Whether the segments' sketches were read yet, and whether a request is reading them.
    pub sketches_read: bool,
    pub sketches_reading: bool,
}

impl Semantic {
    /// `None` when the embedder's dimension count cannot be stored (0, or absurdly many).
    pub fn new(model: &str, dims: usize) -> Option<Self> {
        if dims == 0 || dims > usize::from(u16::MAX) {
            tracing::warn!(dims, model, "cannot index this embedder's vectors");
            return None;
        }
        Some(Self {
            model: model.to_string(),
            model_key: model_key(model),
            dims,
            codes: Codes::new(dims),
            vectors: HashMap::new(),
            retry_after_ms: 0,
            sketches_read: false,
            sketches_reading: false,
        })
    }

    /// How many documents have a vector.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    pub fn has(&self, doc: u32) -> bool {
        self.codes.has(doc)
    }

    /// The binary sketch of document `doc`'s vector, if it has one (`sketch/`).
    pub fn sign_bits(&self, doc: u32) -> Option<Vec<u8>> {
        self.codes.get(doc).map(<[u8]>::to_vec)
    }

    /// Documents of `keyword` that have no vector yet, oldest first.
    pub fn missing(&self, keyword: &KeywordIndex) -> Vec<u32> {
        (0..keyword.len() as u32)
            .filter(|&d| !self.has(d))
            .collect()
    }

    /// Adds document `doc`'s vector (no-op when it has one or the dimensions differ).
    pub fn add(&mut self, doc: u32, vector: &[f32]) {
        if vector.len() == self.dims && self.codes.set(doc, &sign_bits(vector)) {
            self.keep_vector(doc, encode(vector));
        }
    }

    /// The stored vector of document `doc` and its length, if this instance holds it.
    pub fn vector(&self, doc: u32) -> Option<(&[u8], f64)> {
        self.vectors.get(&doc).map(|(v, l)| (v.as_slice(), *l))
    }

    /// Keeps document `doc`'s stored vector for the next exact ranking (not when the bytes are
    /// not a vector of this model's dimensions).
    pub fn keep_vector(&mut self, doc: u32, stored: Vec<u8>) {
        let Some(length) = stored_length(&stored, self.dims) else {
            return;
        };
        if self.vectors.len() >= CACHED_VECTORS {
            self.vectors.clear();
        }
        self.vectors.insert(doc, (stored, length));
    }
}

/// Deletes the vector index snapshots earlier versions stored (`vsnap/`, for `lore reindex`):
/// the sketches in the segments took their place.
pub async fn clear_old_snapshots(ports: &Ports, keys: &OrgKeys) -> Result<()> {
    let mut batch = Batch::new();
    for (key, _) in ports.storage.scan_all(&keys.old_vector_snapshots()).await? {
        batch.delete(key);
    }
    if !batch.is_empty() {
        ports.storage.commit(batch).await?;
    }
    Ok(())
}

/// The stored vectors under `model` for the given event ulids: one read each when few are
/// wanted, else a scan of the org's vectors from the oldest ulid wanted on (ulids grow with
/// time, so after the sketches the wanted ones are mostly the newest; the scan stops once it has
/// them all).
pub async fn stored_vectors(
    ports: &Ports,
    keys: &OrgKeys,
    model: &str,
    dims: usize,
    ulids: &[String],
) -> Result<HashMap<String, Vec<f32>>> {
    let mut out = HashMap::new();
    if ulids.len() > 64 {
        let wanted: std::collections::HashSet<&str> = ulids.iter().map(String::as_str).collect();
        let oldest = ulids.iter().min().expect("more than 64");
        let prefix = keys.vectors(model);
        if let Some(bytes) = ports.storage.get(&keys.vector(model, oldest)).await?
            && let Some(v) = decode(&bytes, dims)
        {
            out.insert(oldest.clone(), v);
        }
        let mut after = Some(keys.vector(model, oldest));
        while out.len() < wanted.len() {
            let page = ports.storage.scan(&prefix, after.as_deref(), 512).await?;
            for (key, bytes) in &page.entries {
                let ulid = &key[prefix.len()..];
                if wanted.contains(ulid)
                    && let Some(v) = decode(bytes, dims)
                {
                    out.insert(ulid.to_string(), v);
                }
            }
            match page.cursor {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        return Ok(out);
    }
    for ulid in ulids {
        if let Some(bytes) = ports.storage.get(&keys.vector(model, ulid)).await?
            && let Some(v) = decode(&bytes, dims)
        {
            out.insert(ulid.clone(), v);
        }
    }
    Ok(out)
}
