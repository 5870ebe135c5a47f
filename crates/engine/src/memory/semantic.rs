//! The semantic half of memory search: each event's embedding, stored once beside the event,
//! and a per-org vector index over them.
//!
//! - `save_memory` embeds the new memories before it commits and stores each vector in the
//!   same batch as its event (`vec/{model}/{ulid}`, int8 with one scale), so no instance has to
//!   embed it again. An event without a vector for the current model (saved while the
//!   embedder failed, delivered by a feed, or saved under another model) is embedded lazily on
//!   the next refresh: changing the model re-embeds without a migration.
//! - An instance that meets an org for the first time loads the stored index snapshot
//!   (`vsnap/{model}/…`: the index bytes and which event each vector is) and then only the
//!   vectors of events newer than the snapshot, so a cold start neither re-embeds nor rebuilds
//!   the graph. Whoever has indexed enough new vectors since the last snapshot writes a new one.
//! - Failures of the embedder never fail a save or a search: the keyword ranking still answers
//!   and the missing vectors are retried after a pause.

use std::collections::HashMap;

use super::keyword::KeywordIndex;
use super::vector::VectorIndex;
use lore_base::error::Result;
use lore_base::keys::{OrgKeys, sha256_hex, sha256_hex_bytes};
use lore_base::ports::{Embedder, Ports};
use lore_base::storage::Batch;

/// Texts sent to the embedder in one call.
pub const EMBED_BATCH: usize = 64;
/// How long an instance waits before asking a failing embedder again for an org's backlog.
pub(super) const RETRY_AFTER_MS: i64 = 30_000;
/// Most texts one refresh embeds; a larger backlog (a model change in a big org) is worked off
/// over the following requests while the keyword ranking answers.
pub(super) const MAX_EMBED_PER_REFRESH: usize = 4_096;
/// Vectors an index needs before it is worth a stored snapshot.
pub(super) const SNAPSHOT_MIN: usize = 1_000;
/// Bytes per stored snapshot part (well under every backend's value limit).
const SNAPSHOT_PART: usize = lore_base::storage::VALUE_CHUNK;
const SNAPSHOT_MAGIC: &[u8; 4] = b"LVS1";
const VECTOR_VERSION: u8 = 1;

/// The storage key segment of a model: a short hash of its id (ids hold `/` and `@`).
pub fn model_key(model_id: &str) -> String {
    sha256_hex(model_id)[..16].to_string()
}

/// A vector as stored: version, dimension count, scale, then one signed byte per dimension.
/// Embeddings are unit length, so int8 with one scale per vector keeps cosine ranking intact
/// to well under a percent while taking a quarter of the bytes.
pub fn encode(v: &[f32]) -> Vec<u8> {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    let mut out = Vec::with_capacity(7 + v.len());
    out.push(VECTOR_VERSION);
    out.extend_from_slice(&(v.len() as u16).to_le_bytes());
    out.extend_from_slice(&scale.to_le_bytes());
    out.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8 as u8),
    );
    out
}

/// The vector stored by [`encode`], renormalized; `None` when the bytes are not one.
pub fn decode(bytes: &[u8], dims: usize) -> Option<Vec<f32>> {
    if bytes.len() != 7 + dims || bytes[0] != VECTOR_VERSION {
        return None;
    }
    if usize::from(u16::from_le_bytes([bytes[1], bytes[2]])) != dims {
        return None;
    }
    let scale = f32::from_le_bytes(bytes[3..7].try_into().ok()?);
    let mut v: Vec<f32> = bytes[7..]
        .iter()
        .map(|&b| f32::from(b as i8) * scale)
        .collect();
    normalize(&mut v);
    Some(v)
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
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

/// One org's vectors under one model.
pub struct Semantic {
    pub model: String,
    pub model_key: String,
    pub dims: usize,
    pub index: VectorIndex,
    /// The keyword index's document number of each vector.
    pub doc_of: Vec<u32>,
    /// Per keyword document: its vector's id in `index` (`u32::MAX`: none yet).
    vector_of: Vec<u32>,
    /// When this instance may next try to embed the backlog (after a failure).
    pub retry_after_ms: i64,
    /// Whether the stored snapshot was looked for yet.
    pub snapshot_checked: bool,
    /// Vectors the newest snapshot this instance knows of covers.
    pub snapshot_len: usize,
}

impl Semantic {
    /// `None` when the embedder's dimension count cannot be indexed (0, or absurdly many).
    pub fn new(model: &str, dims: usize, seed: u64) -> Option<Self> {
        let index = match VectorIndex::new(dims, seed) {
            Ok(index) => index,
            Err(e) => {
                tracing::warn!(error = %e, model, "cannot index this embedder's vectors");
                return None;
            }
        };
        Some(Self {
            model: model.to_string(),
            model_key: model_key(model),
            dims,
            index,
            doc_of: Vec::new(),
            vector_of: Vec::new(),
            retry_after_ms: 0,
            snapshot_checked: false,
            snapshot_len: 0,
        })
    }

    pub fn len(&self) -> usize {
        self.doc_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_of.is_empty()
    }

    pub fn has(&self, doc: u32) -> bool {
        self.vector_of
            .get(doc as usize)
            .is_some_and(|&v| v != u32::MAX)
    }

    /// The binary sketch of document `doc`'s vector, if it has one (`sketch/`).
    pub fn sign_bits(&self, doc: u32) -> Option<Vec<u8>> {
        let id = *self.vector_of.get(doc as usize)?;
        self.index.sign_bits(id)
    }

    /// Documents of `keyword` that have no vector yet, oldest first.
    pub fn missing(&self, keyword: &KeywordIndex) -> Vec<u32> {
        (0..keyword.len() as u32)
            .filter(|&d| !self.has(d))
            .collect()
    }

    /// Adds document `doc`'s vector (no-op when it has one or the dimensions differ).
    pub fn add(&mut self, doc: u32, vector: &[f32]) {
        if self.has(doc) || vector.len() != self.dims {
            return;
        }
        let id = self.doc_of.len() as u32;
        if self.index.insert(id, vector).is_err() {
            return;
        }
        self.doc_of.push(doc);
        let slot = doc as usize;
        if self.vector_of.len() <= slot {
            self.vector_of.resize(slot + 1, u32::MAX);
        }
        self.vector_of[slot] = id;
    }

    /// Whether enough vectors arrived since the last snapshot to write a new one.
    pub fn snapshot_due(&self) -> bool {
        let n = self.len();
        n >= SNAPSHOT_MIN && n >= self.snapshot_len + SNAPSHOT_MIN.max(self.snapshot_len / 4)
    }

    /// The snapshot bytes: magic, vector count, each vector's event ulid, then the index.
    pub fn snapshot(&self, keyword: &KeywordIndex) -> Vec<u8> {
        let index = self.index.snapshot();
        let mut out = Vec::with_capacity(8 + self.doc_of.len() * 26 + index.len());
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&(self.doc_of.len() as u32).to_le_bytes());
        for &doc in &self.doc_of {
            let id = keyword.doc_id(doc);
            let ulid = id.strip_prefix("evt_").unwrap_or(id);
            let mut fixed = [b' '; 26];
            let n = ulid.len().min(26);
            fixed[..n].copy_from_slice(&ulid.as_bytes()[..n]);
            out.extend_from_slice(&fixed);
        }
        out.extend_from_slice(&index);
        out
    }

    /// Replaces this (empty) state with a stored snapshot, mapping its events onto `keyword`'s
    /// document numbers. Errors leave `self` unchanged.
    pub fn restore(&mut self, bytes: &[u8], keyword: &KeywordIndex) -> Result<(), String> {
        let bad = || "the stored vector index snapshot is corrupt".to_string();
        if bytes.len() < 8 || &bytes[..4] != SNAPSHOT_MAGIC {
            return Err(bad());
        }
        let n = u32::from_le_bytes(bytes[4..8].try_into().map_err(|_| bad())?) as usize;
        let ids_end = n
            .checked_mul(26)
            .and_then(|l| l.checked_add(8))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(bad)?;
        let mut doc_of = Vec::with_capacity(n);
        for raw in bytes[8..ids_end].chunks(26) {
            let ulid = std::str::from_utf8(raw).map_err(|_| bad())?.trim_end();
            let doc = keyword.doc_of(&format!("evt_{ulid}")).ok_or_else(|| {
                format!("the snapshot names event evt_{ulid}, which is not loaded")
            })?;
            doc_of.push(doc);
        }
        let index = VectorIndex::restore(&bytes[ids_end..]).map_err(|e| e.to_string())?;
        if index.len() != n || index.dims() != self.dims {
            return Err(bad());
        }
        let mut vector_of = vec![u32::MAX; keyword.len()];
        for (id, &doc) in doc_of.iter().enumerate() {
            vector_of[doc as usize] = id as u32;
        }
        self.index = index;
        self.doc_of = doc_of;
        self.vector_of = vector_of;
        self.snapshot_len = n;
        Ok(())
    }
}

/// The head of a stored snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SnapshotHead {
    vectors: usize,
    parts: usize,
    bytes: usize,
    sha256: String,
}

/// Reads the org's stored snapshot for `model`; `None` when there is none or it is unusable.
pub async fn load_snapshot(ports: &Ports, keys: &OrgKeys, model: &str) -> Option<Vec<u8>> {
    let head: SnapshotHead = match ports.record(&keys.vector_snapshot(model)).await {
        Ok(Some(h)) => h,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the vector index snapshot");
            return None;
        }
    };
    // One scan for every part, whatever the snapshot's size.
    let parts: HashMap<String, Vec<u8>> = match ports
        .storage
        .scan_all(&keys.vector_snapshot_parts(model))
        .await
    {
        Ok(parts) => parts.into_iter().collect(),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the vector index snapshot");
            return None;
        }
    };
    let mut bytes = Vec::with_capacity(head.bytes);
    for part in 0..head.parts {
        match parts.get(&keys.vector_snapshot_part(model, part)) {
            Some(b) => bytes.extend_from_slice(b),
            None => return None,
        }
    }
    if bytes.len() != head.bytes || sha256_hex_bytes(&bytes) != head.sha256 {
        tracing::warn!("the vector index snapshot does not match its head; rebuilding");
        return None;
    }
    Some(bytes)
}

/// Stores `bytes` as the org's snapshot for `model`, parts and head in one batch (readers see
/// the old snapshot or the new one, never a mix).
pub async fn store_snapshot(
    ports: &Ports,
    keys: &OrgKeys,
    model: &str,
    vectors: usize,
    bytes: &[u8],
) -> Result<()> {
    let old: Option<SnapshotHead> = ports.record(&keys.vector_snapshot(model)).await?;
    let parts: Vec<&[u8]> = bytes.chunks(SNAPSHOT_PART).collect();
    let mut batch = Batch::new();
    for (i, part) in parts.iter().enumerate() {
        batch.put(keys.vector_snapshot_part(model, i), part.to_vec());
    }
    if let Some(old) = old {
        for i in parts.len()..old.parts {
            batch.delete(keys.vector_snapshot_part(model, i));
        }
    }
    let head = SnapshotHead {
        vectors,
        parts: parts.len(),
        bytes: bytes.len(),
        sha256: sha256_hex_bytes(bytes),
    };
    batch.put(keys.vector_snapshot(model), serde_json::to_vec(&head)?);
    ports.storage.commit(batch).await?;
    Ok(())
}

/// What `lore doctor` reports of the org's vector index snapshot for `model`: `none`,
/// `healthy` (every part present and the checksum right) or `unusable` (rebuilt when due).
pub async fn snapshot_health(
    ports: &Ports,
    keys: &OrgKeys,
    model: &str,
) -> Result<serde_json::Value> {
    let head: Option<SnapshotHead> = ports.record(&keys.vector_snapshot(model)).await?;
    Ok(match head {
        None => serde_json::json!({ "state": "none" }),
        Some(head) => {
            let ok = load_snapshot(ports, keys, model).await.is_some();
            serde_json::json!({
                "state": if ok { "healthy" } else { "unusable" },
                "vectors": head.vectors,
                "parts": head.parts,
                "bytes": head.bytes,
            })
        }
    })
}

/// Deletes the org's vector index snapshot for `model` (for `lore reindex`).
pub async fn clear_snapshot(ports: &Ports, keys: &OrgKeys, model: &str) -> Result<()> {
    let mut batch = Batch::new();
    batch.delete(keys.vector_snapshot(model));
    for (key, _) in ports
        .storage
        .scan_all(&keys.vector_snapshot_parts(model))
        .await?
    {
        batch.delete(key);
    }
    ports.storage.commit(batch).await?;
    Ok(())
}

/// The stored vectors under `model` for the given event ulids: one read each when few are
/// wanted, else a scan of the org's vectors from the oldest ulid wanted on (ulids grow with
/// time, so after a snapshot the wanted ones are mostly the newest; the scan stops once it has
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_encoding_within_a_percent() {
        let mut v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        normalize(&mut v);
        let back = decode(&encode(&v), 384).unwrap();
        let cos: f32 = v.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert!(cos > 0.999, "{cos}");
        assert!(decode(&encode(&v), 256).is_none());
        assert!(decode(&[9, 0, 0], 0).is_none());
    }
}
