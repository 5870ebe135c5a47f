//! The keyword index as stored segments, so that a fresh instance (a Spin request, a new
//! isolate, a restarted server) loads an org's index in a bounded number of reads instead of
//! reading and tokenizing every event again.
//!
//! An org's index is a list of segments, each a range of its documents in the order the index
//! holds them (`codec.rs`), stored in parts of at most [`PART_BYTES`] under
//! `o/{org}/kidx/seg/{segment}/{n}`, and a manifest (`o/{org}/kidx/manifest`) that names them in
//! order with each one's document count, the event sequence number it reaches, its size and
//! SHA-256. Loading is one read of the manifest and one scan of the parts; the events past the
//! last segment's sequence number are then read as a warm instance reads new events.
//!
//! Writing never rewrites the whole index: once [`SEGMENT_EVENTS`] documents are past the
//! stored segments, they become one new segment, and whenever the newest [`TIER`] segments are
//! of one size tier they merge into one (a size-tiered merge, as in an LSM tree), so the
//! segments stay few and each document is rewritten about log₄(n / 32) times in all. The parts
//! and the manifest commit in one batch, conditional on the manifest this instance knew, so two
//! instances never interleave their segments and a reader sees one manifest or the other.
//!
//! The events stay the truth. A manifest of another format, a part missing, a checksum or a
//! decode that fails, or a sequence number past the stored events makes the segments unusable:
//! the index is built from the events as before and the next write replaces every segment. A
//! crash between the events' commit and a segment's costs nothing but a longer replay.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::keyword::KeywordIndex;
use lore_base::error::Result;
use lore_base::keys::{OrgKeys, sha256_hex_bytes};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};

/// Documents past the stored segments that make a new segment. A fresh instance reads at most
/// this many events one by one after the segments.
pub const SEGMENT_EVENTS: u32 = 32;
/// How many segments of one size tier merge into one.
pub const TIER: usize = 4;
/// The largest stored part of a segment (every backend's values may be larger).
pub const PART_BYTES: usize = 512 * 1024;
/// The manifest's format; a segment's body carries its own magic.
pub const FORMAT: u32 = 1;

/// The stored list of an org's segments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub segments: Vec<SegmentHead>,
}

/// One stored segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentHead {
    /// Names its parts.
    pub id: String,
    /// How many documents it holds.
    pub docs: u32,
    /// The org's event sequence number the index had reached when its last document was in.
    pub to_seq: u64,
    pub parts: u32,
    pub bytes: u64,
    pub sha256: String,
}

/// What an instance knows of an org's stored segments.
#[derive(Debug, Clone, Default)]
pub struct Persisted {
    /// The manifest as this instance last read or wrote it; `None`: none is stored.
    pub raw: Option<Vec<u8>>,
    /// The segments the index's first documents are, in order. Empty when the index was built
    /// from the events: the next write then replaces whatever is stored.
    pub segments: Vec<SegmentHead>,
}

impl Persisted {
    /// How many of the index's documents the stored segments hold.
    pub fn covered(&self) -> u32 {
        self.segments.iter().map(|s| s.docs).sum()
    }

    /// Whether the next write must replace what is stored (the index was built from the events
    /// over segments it could not use).
    fn replaces(&self) -> bool {
        self.segments.is_empty() && self.raw.is_some()
    }
}

/// An index loaded from its segments.
pub struct Loaded {
    pub index: KeywordIndex,
    pub persisted: Persisted,
}

/// Why stored segments cannot be used.
pub struct Unusable {
    /// What is stored, for the rebuild to replace.
    pub persisted: Persisted,
    /// `None`: no segments are stored.
    pub why: Option<String>,
}

/// Loads the org's index from its segments: one read of the manifest and one scan of the
/// parts. `Err` when there are no usable segments (none stored, or unusable, which is logged),
/// with what is stored, for the rebuild from the events to replace.
pub async fn load(
    ports: &Ports,
    keys: &OrgKeys,
    stored_seq: u64,
) -> Result<std::result::Result<Loaded, Persisted>> {
    Ok(match read(ports, keys, stored_seq).await? {
        Ok(loaded) => Ok(loaded),
        Err(Unusable { persisted, why }) => {
            if let Some(why) = why {
                tracing::warn!(
                    why,
                    "the keyword index segments are unusable; rebuilding from the events"
                );
            }
            Err(persisted)
        }
    })
}

/// [`load`] without the log: the index, or why there is none.
pub async fn read(
    ports: &Ports,
    keys: &OrgKeys,
    stored_seq: u64,
) -> Result<std::result::Result<Loaded, Unusable>> {
    let Some(raw) = ports.storage.get(&keys.keyword_manifest()).await? else {
        return Ok(Err(Unusable {
            persisted: Persisted::default(),
            why: None,
        }));
    };
    let unusable = |why: &str| {
        Ok(Err(Unusable {
            persisted: Persisted {
                raw: Some(raw.clone()),
                segments: Vec::new(),
            },
            why: Some(why.to_string()),
        }))
    };
    let manifest: Manifest = match serde_json::from_slice(&raw) {
        Ok(m @ Manifest { format: FORMAT, .. }) => m,
        Ok(_) => return unusable("the manifest is of another format"),
        Err(_) => return unusable("the manifest does not parse"),
    };
    let Some(last) = manifest.segments.last() else {
        return unusable("the manifest names no segment");
    };
    if last.to_seq > stored_seq {
        return unusable("the segments reach past the stored events");
    }
    let parts: HashMap<String, Vec<u8>> = ports
        .storage
        .scan_all(&keys.keyword_segments())
        .await?
        .into_iter()
        .collect();
    let mut index = KeywordIndex::default();
    for segment in &manifest.segments {
        let mut bytes = Vec::with_capacity(usize::try_from(segment.bytes).unwrap_or(0));
        for n in 0..segment.parts as usize {
            match parts.get(&keys.keyword_segment_part(&segment.id, n)) {
                Some(part) => bytes.extend_from_slice(part),
                None => return unusable("a segment part is missing"),
            }
        }
        if bytes.len() as u64 != segment.bytes || sha256_hex_bytes(&bytes) != segment.sha256 {
            return unusable("a segment does not match its checksum");
        }
        let before = index.len();
        if let Err(e) = index.append_encoded(&bytes) {
            return unusable(&e);
        }
        if index.len() - before != segment.docs as usize {
            return unusable("a segment holds another number of documents than its manifest says");
        }
    }
    index.seq = last.to_seq;
    Ok(Ok(Loaded {
        index,
        persisted: Persisted {
            raw: Some(raw),
            segments: manifest.segments,
        },
    }))
}

/// What `lore doctor` reports of an org's keyword index segments.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
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
/// decode), without changing anything.
pub async fn inspect(ports: &Ports, keys: &OrgKeys, stored_seq: u64) -> Result<Health> {
    Ok(match read(ports, keys, stored_seq).await? {
        Ok(Loaded { index, persisted }) => Health {
            state: "healthy",
            why: None,
            segments: persisted.segments.len(),
            documents: persisted.covered(),
            bytes: persisted.segments.iter().map(|s| s.bytes).sum(),
            covers_seq: index.seq,
            stored_seq,
        },
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

/// Deletes every stored segment of the org and its manifest (for `lore reindex`).
pub async fn clear(ports: &Ports, keys: &OrgKeys) -> Result<()> {
    let mut batch = Batch::new();
    batch.delete(keys.keyword_manifest());
    for (key, _) in ports.storage.scan_all(&keys.keyword_segments()).await? {
        batch.delete(key);
    }
    ports.storage.commit(batch).await?;
    Ok(())
}

/// The size tier of a segment of `docs` documents: 0 up to [`SEGMENT_EVENTS`] × [`TIER`], 1 up
/// to that × [`TIER`] again, ...
fn tier(docs: u32) -> u32 {
    let mut t = 0;
    let mut bound = u64::from(SEGMENT_EVENTS) * TIER as u64;
    while u64::from(docs) >= bound {
        t += 1;
        bound *= TIER as u64;
    }
    t
}

/// Whether a write of segments is due for `index` (see [`plan`]).
pub fn due(index: &KeywordIndex, persisted: &Persisted) -> bool {
    let Ok(len) = u32::try_from(index.len()) else {
        return false;
    };
    if persisted.replaces() {
        return len > 0;
    }
    len.checked_sub(persisted.covered())
        .is_some_and(|past| past >= SEGMENT_EVENTS)
}

/// A write of segments, planned from the index as it is now.
pub struct Plan {
    batch: Batch,
    /// The manifest after the write, and its bytes.
    persisted: Persisted,
    /// Whether every part under the org's segment prefix that the new manifest does not name
    /// must go (the write replaces segments this instance could not read).
    sweep: bool,
}

/// The write that brings the stored segments up to `index`, if one is due: a new segment of
/// the documents past the stored ones (at least [`SEGMENT_EVENTS`] of them), merged with the
/// newest segments of its size tier; or, when the index was built over unusable segments,
/// segments of the whole index replacing them. `id` names the new segment.
pub fn plan(index: &KeywordIndex, persisted: &Persisted, keys: &OrgKeys, id: &str) -> Option<Plan> {
    if !due(index, persisted) {
        return None;
    }
    let len = u32::try_from(index.len()).ok()?;
    let replaces = persisted.replaces();
    let covered = if replaces { 0 } else { persisted.covered() };
    let mut kept: Vec<SegmentHead> = if replaces {
        Vec::new()
    } else {
        persisted.segments.clone()
    };
    let mut merged: Vec<SegmentHead> = Vec::new();
    let mut start = covered;
    loop {
        let t = tier(len - start);
        let same = kept
            .iter()
            .rev()
            .take(TIER - 1)
            .take_while(|s| tier(s.docs) == t)
            .count();
        if same < TIER - 1 {
            break;
        }
        for _ in 0..same {
            let s = kept.pop().expect("counted");
            start -= s.docs;
            merged.push(s);
        }
    }
    let bytes = index.encode_range(start, len);
    let parts: Vec<&[u8]> = bytes.chunks(PART_BYTES).collect();
    let head = SegmentHead {
        id: id.to_string(),
        docs: len - start,
        to_seq: index.seq,
        parts: parts.len() as u32,
        bytes: bytes.len() as u64,
        sha256: sha256_hex_bytes(&bytes),
    };
    let mut batch = Batch::new();
    for old in &merged {
        for n in 0..old.parts as usize {
            batch.delete(keys.keyword_segment_part(&old.id, n));
        }
    }
    for (n, part) in parts.iter().enumerate() {
        batch.put(keys.keyword_segment_part(id, n), part.to_vec());
    }
    kept.push(head);
    let manifest = Manifest {
        format: FORMAT,
        segments: kept,
    };
    let raw = serde_json::to_vec(&manifest).ok()?;
    let key = keys.keyword_manifest();
    match &persisted.raw {
        Some(old) => batch.require_equals(&key, old.clone()),
        None => batch.require_absent(&key),
    };
    batch.put(&key, raw.clone());
    Some(Plan {
        batch,
        persisted: Persisted {
            raw: Some(raw),
            segments: manifest.segments,
        },
        sweep: replaces,
    })
}

/// Makes a planned write. `Ok(None)`: another instance changed the manifest first (its
/// segments stand; this instance's next fresh load uses them).
pub async fn write(ports: &Ports, keys: &OrgKeys, plan: Plan) -> Result<Option<Persisted>> {
    let Plan {
        mut batch,
        persisted,
        sweep,
    } = plan;
    if sweep {
        let named: Vec<String> = persisted
            .segments
            .iter()
            .flat_map(|s| (0..s.parts as usize).map(|n| keys.keyword_segment_part(&s.id, n)))
            .collect();
        for (key, _) in ports.storage.scan_all(&keys.keyword_segments()).await? {
            if !named.contains(&key) {
                batch.delete(key);
            }
        }
    }
    match ports.storage.commit(batch).await {
        Ok(()) => Ok(Some(persisted)),
        Err(StorageError::Conflict { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_grow_by_the_merge_factor() {
        assert_eq!(tier(1), 0);
        assert_eq!(tier(SEGMENT_EVENTS), 0);
        assert_eq!(tier(SEGMENT_EVENTS * 4 - 1), 0);
        assert_eq!(tier(SEGMENT_EVENTS * 4), 1);
        assert_eq!(tier(SEGMENT_EVENTS * 16), 2);
    }
}
