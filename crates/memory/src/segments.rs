//! The keyword index as stored segments, so that a fresh instance (a Spin request, a new
//! isolate, a restarted server) loads an org's index in a bounded number of reads instead of
//! reading and tokenizing every event again, and a per-request instance reads only the
//! postings of its query's terms (`probe.rs`).
//!
//! An org's index is a list of segments, each a range of its documents in the order the index
//! holds them, and a manifest (`o/{org}/kidx/manifest`) that names them in order with each
//! one's document count, total length, the event sequence number it reaches, and its parts.
//! A segment is stored as parts (`codec.rs`, each sealed with its own checksum): pages of its
//! documents under `o/{org}/kidx/p/k/d/{segment}/{page}` and buckets of its postings under
//! `o/{org}/kidx/p/k/t/{bucket}/{segment}/{chunk}`. The bucket comes first in the key, so one
//! scan of a bucket's prefix reads a term's lists in every segment. For per-request searches
//! it also has small pages of its document ids alone (`kidx/p/i/{segment}/{page}`) and the
//! sketches of its vectors (`kidx/p/v/{model}/d/{segment}/{chunk}`, a large segment's in
//! clusters beside them under `v/{model}/c/`, `sketch/`). Loading the whole index is one
//! read of the manifest and one scan of the `k/` parts; the events past the last segment's
//! sequence number are then read as a warm instance reads new events.
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

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::hash::Hash;

use serde::{Deserialize, Serialize};

use super::codec::{self, TermList};
use super::keyword::KeywordIndex;
use super::sketch;
use lore_base::error::Result;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};

/// Documents past the stored segments that make a new segment. A fresh instance reads at most
/// this many events one by one after the segments.
pub const SEGMENT_EVENTS: u32 = 32;
/// How many segments of one size tier merge into one.
pub const TIER: usize = 4;
/// The largest stored chunk of a part (see `lore_base::storage::VALUE_CHUNK`).
pub const PART_BYTES: usize = lore_base::storage::VALUE_CHUNK;
/// The manifest's format; every part carries its own magic. 3: id pages, sketches in columns,
/// the loaded parts under `k/`; 4: large segments' sketches in clusters; 5: parts checked by
/// XXH3 instead of CRC-32; 6: sketches of the rotated vectors (`sketch::sign_bits`), which the
/// loaded index ranks too.
pub const FORMAT: u32 = 6;
/// Rows per scan page when the parts are read (one round trip for most orgs).
const SCAN_PAGE: usize = 4096;

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
    /// The sum of its documents' lengths in terms.
    pub total_len: u64,
    /// Pages of documents (128 each, `codec::DOC_PAGE`).
    pub pages: u32,
    /// The buckets that hold postings, each with the number of chunks it is stored in.
    pub buckets: Vec<(u32, u32)>,
    /// Stored bytes of all its parts.
    pub bytes: u64,
    /// The models whose vector sketches it has (`sketch/`).
    #[serde(default)]
    pub sketches: Vec<SketchHead>,
    /// How many of its documents supersede another (none: a reader of it needs no
    /// supersession markers).
    #[serde(default)]
    pub supersedes: u32,
}

/// A segment's vector sketch under one model, as its manifest names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SketchHead {
    pub model: String,
    /// Chunks of its part (the sketches, or a clustered segment's centroids).
    pub chunks: u32,
    /// Its clusters, each a part of one chunk (0: flat).
    #[serde(default)]
    pub clusters: u32,
}

/// The vectors of an index's documents under one model, for the segments' sketches.
pub struct Vectors<'a> {
    pub model_key: &'a str,
    pub dims: usize,
    /// The sketch of a document's vector, if it has one.
    pub bits: &'a dyn Fn(u32) -> Option<Vec<u8>>,
}

/// Joins the chunks of a stored value and opens it: `part` looks a stored part up by key,
/// `key(c)` names chunk `c`; the whole was sealed under chunk 0's key.
fn joined<'a>(
    chunks: u32,
    key: impl Fn(u32) -> String,
    part: impl Fn(&str) -> Option<&'a [u8]>,
) -> std::result::Result<Cow<'a, [u8]>, String> {
    let missing = || "a segment part is missing".to_string();
    if chunks == 1 {
        // Most parts are one chunk: opened where they were read, not copied.
        let first = key(0);
        return codec::unseal(&first, part(&first).ok_or_else(missing)?).map(Cow::Borrowed);
    }
    let mut pieces = Vec::with_capacity(chunks as usize);
    for c in 0..chunks {
        pieces.push(part(&key(c)).ok_or_else(missing)?);
    }
    let mut sealed = pieces.concat();
    codec::unseal(&key(0), &sealed)?;
    sealed.drain(..codec::SEAL_HEAD);
    Ok(Cow::Owned(sealed))
}

/// Seals `body` under chunk 0's key and puts it in chunks of at most [`PART_BYTES`]; the
/// number of chunks and the bytes stored.
fn put_chunked(batch: &mut Batch, body: &[u8], key: impl Fn(u32) -> String) -> (u32, u64) {
    let sealed = codec::seal(&key(0), body);
    let mut n = 0;
    for (c, chunk) in sealed.chunks(PART_BYTES).enumerate() {
        batch.put(key(c as u32), chunk.to_vec());
        n += 1;
    }
    (n, sealed.len() as u64)
}

impl SegmentHead {
    /// This segment's sketch under `model_key`, if it has one.
    pub fn sketch_head(&self, model_key: &str) -> Option<&SketchHead> {
        self.sketches.iter().find(|s| s.model == model_key)
    }

    /// This segment's sketch under `model_key` taken out of `parts` (the stored parts by key)
    /// and decoded where it was read: `None` when it has none.
    pub fn take_sketch<K: Borrow<str> + Hash + Eq>(
        &self,
        keys: &OrgKeys,
        model_key: &str,
        dims: usize,
        parts: &mut HashMap<K, Vec<u8>>,
    ) -> std::result::Result<Option<sketch::Stored>, String> {
        let Some(head) = self.sketch_head(model_key) else {
            return Ok(None);
        };
        let chunks = head.chunks;
        let key = |c| keys.keyword_sketch(model_key, &self.id, c);
        let missing = || "a segment part is missing".to_string();
        let sealed = if chunks == 1 {
            parts.remove(key(0).as_str()).ok_or_else(missing)?
        } else {
            let mut sealed = Vec::with_capacity(chunks as usize * PART_BYTES);
            for c in 0..chunks {
                sealed.extend_from_slice(&parts.remove(key(c).as_str()).ok_or_else(missing)?);
            }
            sealed
        };
        codec::unseal(&key(0), &sealed)?;
        let stored = sketch::decode(sealed, codec::SEAL_HEAD, self.docs, dims)?;
        match &stored {
            sketch::Stored::Clustered(d) if d.clusters() != head.clusters => {
                Err("a vector sketch holds other clusters than its manifest says".into())
            }
            sketch::Stored::Flat(_) if head.clusters != 0 => {
                Err("a vector sketch is flat where its manifest says clustered".into())
            }
            _ => Ok(Some(stored)),
        }
    }

    /// Cluster `cluster` of this segment's sketch under `model_key` (of `size` sketches, as
    /// its directory says), opened from its stored bytes `sealed`.
    pub fn open_cluster(
        &self,
        keys: &OrgKeys,
        model_key: &str,
        dims: usize,
        (cluster, size): (u32, u32),
        sealed: Vec<u8>,
    ) -> std::result::Result<sketch::Cluster, String> {
        codec::unseal(
            &keys.keyword_sketch_cluster(model_key, &self.id, cluster),
            &sealed,
        )?;
        sketch::decode_cluster(sealed, codec::SEAL_HEAD, size, self.docs, dims)
    }

    /// How many id pages it has (`codec::ID_PAGE` documents each).
    pub fn id_pages(&self) -> u32 {
        self.docs.div_ceil(codec::ID_PAGE)
    }

    /// The storage keys of every part of this segment.
    pub fn part_keys(&self, keys: &OrgKeys) -> Vec<String> {
        let ids = (0..self.id_pages()).map(|p| keys.keyword_id_page(&self.id, p));
        let pages = (0..self.pages).map(|p| keys.keyword_doc_page(&self.id, p));
        let buckets = self
            .buckets
            .iter()
            .flat_map(|&(b, chunks)| (0..chunks).map(move |c| (b, c)))
            .map(|(b, c)| keys.keyword_bucket(b, &self.id, c));
        let sketches = self.sketches.iter().flat_map(|s| {
            let parts = (0..s.chunks).map(|c| keys.keyword_sketch(&s.model, &self.id, c));
            let clusters =
                (0..s.clusters).map(|c| keys.keyword_sketch_cluster(&s.model, &self.id, c));
            parts.chain(clusters)
        });
        pages.chain(buckets).chain(ids).chain(sketches).collect()
    }

    /// The chunks of bucket `bucket` joined and opened: its body, `None` when the segment has
    /// no term in it. `part` looks a stored part up by key.
    pub fn bucket<'a>(
        &self,
        keys: &OrgKeys,
        bucket: u32,
        part: impl Fn(&str) -> Option<&'a [u8]>,
    ) -> std::result::Result<Option<Cow<'a, [u8]>>, String> {
        let Some(&(_, chunks)) = self.buckets.iter().find(|(b, _)| *b == bucket) else {
            return Ok(None);
        };
        joined(chunks, |c| keys.keyword_bucket(bucket, &self.id, c), part).map(Some)
    }

    /// The term lists of bucket `bucket` (only `only`'s, when given).
    pub fn bucket_lists<'a>(
        &self,
        keys: &OrgKeys,
        bucket: u32,
        only: Option<&[String]>,
        part: impl Fn(&str) -> Option<&'a [u8]>,
    ) -> std::result::Result<Vec<TermList>, String> {
        match self.bucket(keys, bucket, part)? {
            Some(body) => codec::decode_bucket(&body, bucket, self.docs, only),
            None => Ok(Vec::new()),
        }
    }
}

/// Every stored part under the org's segment prefix, by key.
pub async fn read_parts(ports: &Ports, prefix: &str) -> Result<HashMap<String, Vec<u8>>> {
    let mut out = HashMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = ports
            .storage
            .scan(prefix, after.as_deref(), SCAN_PAGE)
            .await?;
        out.extend(page.entries);
        match page.cursor {
            Some(c) => after = Some(c),
            None => return Ok(out),
        }
    }
}

/// The org's manifest if one of this format is stored: `Err` says why it cannot be used
/// (`None`: none is stored), with the raw bytes when there are some.
pub async fn read_manifest(
    ports: &Ports,
    keys: &OrgKeys,
    stored_seq: u64,
) -> Result<std::result::Result<(Manifest, Vec<u8>), Unusable>> {
    let Some(raw) = ports.storage.get(&keys.keyword_manifest()).await? else {
        return Ok(Err(Unusable {
            persisted: Persisted::default(),
            why: None,
        }));
    };
    let why = match serde_json::from_slice::<Manifest>(&raw) {
        Ok(m) if m.format != FORMAT => "the manifest is of another format",
        Ok(m) => match m.segments.last() {
            None => "the manifest names no segment",
            Some(last) if last.to_seq > stored_seq => "the segments reach past the stored events",
            Some(_) => return Ok(Ok((m, raw))),
        },
        Err(_) => "the manifest does not parse",
    };
    Ok(Err(Unusable {
        persisted: Persisted {
            raw: Some(raw),
            ..Persisted::default()
        },
        why: Some(why.to_string()),
    }))
}

/// What an instance knows of an org's stored segments.
#[derive(Debug, Clone, Default)]
pub struct Persisted {
    /// The manifest as this instance last read or wrote it; `None`: none is stored.
    pub raw: Option<Vec<u8>>,
    /// The segments the index's first documents are, in order. Empty when the index was built
    /// from the events: the next write then replaces whatever is stored.
    pub segments: Vec<SegmentHead>,
    /// Another instance changed the manifest after this one read it, so this instance's index
    /// may hold its documents in another order than the stored segments: it writes no more
    /// segments (tail writes, `tail.rs`, carry on from the events).
    pub gave_way: bool,
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
    let (manifest, raw) = match read_manifest(ports, keys, stored_seq).await? {
        Ok(m) => m,
        Err(unusable) => return Ok(Err(unusable)),
    };
    let unusable = |why: &str| {
        Ok(Err(Unusable {
            persisted: Persisted {
                raw: Some(raw.clone()),
                ..Persisted::default()
            },
            why: Some(why.to_string()),
        }))
    };
    let parts = read_parts(ports, &keys.keyword_load_parts()).await?;
    let part = |key: &str| parts.get(key).map(Vec::as_slice);
    let mut index = KeywordIndex::default();
    for segment in &manifest.segments {
        if let Err(why) = append_segment(&mut index, keys, segment, part) {
            return unusable(&why);
        }
    }
    index.seq = manifest.segments.last().map_or(0, |s| s.to_seq);
    Ok(Ok(Loaded {
        index,
        persisted: Persisted {
            raw: Some(raw),
            segments: manifest.segments,
            gave_way: false,
        },
    }))
}

/// Appends one stored segment to `index`, checking every part against its checksum and the
/// manifest's counts.
pub(super) fn append_segment<'a>(
    index: &mut KeywordIndex,
    keys: &OrgKeys,
    segment: &SegmentHead,
    part: impl Fn(&str) -> Option<&'a [u8]> + Copy,
) -> std::result::Result<(), String> {
    let base = u32::try_from(index.len()).map_err(|_| "too many documents")?;
    let len_before = index.total_len;
    for page in 0..segment.pages {
        let key = keys.keyword_doc_page(&segment.id, page);
        let bytes = part(&key).ok_or("a segment part is missing")?;
        let docs = codec::decode_doc_page(codec::unseal(&key, bytes)?)?;
        index.append_docs(docs)?;
    }
    if index.len() - base as usize != segment.docs as usize
        || index.total_len - len_before != segment.total_len
    {
        return Err("a segment holds other documents than its manifest says".into());
    }
    for &(bucket, _) in &segment.buckets {
        let lists = segment.bucket_lists(keys, bucket, None, part)?;
        index.append_postings(base, lists);
    }
    Ok(())
}

/// Hands every sketch `segments` hold under `model_key` to `found`, as (the index's document
/// number, sketch), the segments being the index's first documents in order, and each
/// cluster of a clustered segment to `group` (its centroid and members' numbers) after its
/// members: one scan of the sketches and their clusters. A segment without a sketch under the
/// model is skipped (its documents' vectors come from storage instead); `Err` says which part
/// does not open.
pub async fn read_sketches(
    ports: &Ports,
    keys: &OrgKeys,
    segments: &[SegmentHead],
    (model_key, dims): (&str, usize),
    found: &mut dyn FnMut(u32, &[u8]),
    group: &mut dyn FnMut(&[u8], &[u32]),
) -> Result<std::result::Result<(), String>> {
    if segments.iter().all(|s| s.sketch_head(model_key).is_none()) {
        return Ok(Ok(()));
    }
    let mut parts = read_parts(ports, &keys.keyword_sketches_and_clusters(model_key)).await?;
    let mut base = 0u32;
    for segment in segments {
        let stored = segment.take_sketch(keys, model_key, dims, &mut parts);
        match stored {
            Ok(None) => {}
            Ok(Some(sketch::Stored::Flat(s))) => {
                s.codes().for_each(|(doc, code)| found(base + doc, code));
            }
            Ok(Some(sketch::Stored::Clustered(directory))) => {
                for c in 0..directory.clusters() {
                    let key = keys.keyword_sketch_cluster(model_key, &segment.id, c);
                    let Some(sealed) = parts.remove(&key) else {
                        return Ok(Err("a vector sketch cluster is missing".into()));
                    };
                    let cluster = match segment.open_cluster(
                        keys,
                        model_key,
                        dims,
                        (c, directory.size(c)),
                        sealed,
                    ) {
                        Ok(cluster) => cluster,
                        Err(why) => return Ok(Err(why)),
                    };
                    let mut members = Vec::with_capacity(cluster.docs.len());
                    for (member, code) in cluster.sketch.codes() {
                        let doc = base + cluster.docs[member as usize];
                        found(doc, code);
                        members.push(doc);
                    }
                    group(directory.centroid(c), &members);
                }
            }
            Err(why) => return Ok(Err(why)),
        }
        base += segment.docs;
    }
    Ok(Ok(()))
}

/// Deletes every stored segment of the org and its manifest (for `lore reindex`).
pub async fn clear(ports: &Ports, keys: &OrgKeys) -> Result<()> {
    let mut batch = Batch::new();
    batch.delete(keys.keyword_manifest());
    for key in read_parts(ports, &keys.keyword_parts()).await?.into_keys() {
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
    if persisted.gave_way {
        return false;
    }
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

/// The newest of `kept` that merge with a new segment of `docs` documents (size-tiered: while
/// the newest `TIER - 1` are of the new segment's tier, they join it), taken off `kept`, oldest
/// first.
pub fn merging(kept: &mut Vec<SegmentHead>, docs: u32) -> Vec<SegmentHead> {
    let mut merged = Vec::new();
    let mut docs = docs;
    loop {
        let t = tier(docs);
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
            docs += s.docs;
            merged.push(s);
        }
    }
    merged.reverse();
    merged
}

/// Puts the parts of a segment of `index`'s documents `start..len` (reaching event sequence
/// number `to_seq`) into `batch`, named `id`; its head.
fn put_segment(
    batch: &mut Batch,
    index: &KeywordIndex,
    (start, len): (u32, u32),
    keys: &OrgKeys,
    id: &str,
    vectors: Option<&Vectors<'_>>,
) -> SegmentHead {
    let mut bytes = 0u64;
    let pages = index.encode_doc_pages(start, len);
    for (page, body) in pages.iter().enumerate() {
        let key = keys.keyword_doc_page(id, page as u32);
        let sealed = codec::seal(&key, body);
        bytes += sealed.len() as u64;
        batch.put(key, sealed);
    }
    for (page, body) in index.encode_id_pages(start, len).iter().enumerate() {
        let key = keys.keyword_id_page(id, page as u32);
        let sealed = codec::seal(&key, body);
        bytes += sealed.len() as u64;
        batch.put(key, sealed);
    }
    let mut buckets = Vec::new();
    for (bucket, body) in index.encode_buckets(start, len) {
        let (chunks, stored) = put_chunked(batch, &body, |c| keys.keyword_bucket(bucket, id, c));
        bytes += stored;
        buckets.push((bucket, chunks));
    }
    let mut sketches = Vec::new();
    if let Some(v) = vectors {
        let docs = index.docs[start as usize..len as usize]
            .iter()
            .enumerate()
            .map(|(i, d)| (d.meta.id.as_str(), (v.bits)(start + i as u32)));
        let encoded = sketch::encode(v.dims, docs);
        let (chunks, stored) = put_chunked(batch, &encoded.body, |c| {
            keys.keyword_sketch(v.model_key, id, c)
        });
        bytes += stored;
        for (c, body) in encoded.clusters.iter().enumerate() {
            let key = keys.keyword_sketch_cluster(v.model_key, id, c as u32);
            let sealed = codec::seal(&key, body);
            debug_assert!(sealed.len() <= PART_BYTES, "a cluster is one chunk");
            bytes += sealed.len() as u64;
            batch.put(key, sealed);
        }
        sketches.push(SketchHead {
            model: v.model_key.to_string(),
            chunks,
            clusters: encoded.clusters.len() as u32,
        });
    }
    let docs = &index.docs[start as usize..len as usize];
    SegmentHead {
        id: id.to_string(),
        docs: len - start,
        to_seq: index.seq,
        total_len: docs.iter().map(|d| u64::from(d.len)).sum(),
        pages: pages.len() as u32,
        buckets,
        bytes,
        sketches,
        supersedes: docs
            .iter()
            .filter(|d| d.meta.supersedes_event_id.is_some())
            .count() as u32,
    }
}

/// Completes a write: the merged segments' parts deleted, the manifest of `kept` and then
/// `head` put, conditional on the manifest the writer read (`known`).
fn finish(
    mut batch: Batch,
    keys: &OrgKeys,
    mut kept: Vec<SegmentHead>,
    head: SegmentHead,
    merged: &[SegmentHead],
    known: Option<&[u8]>,
    sweep: bool,
) -> Option<Plan> {
    for old in merged {
        for key in old.part_keys(keys) {
            batch.delete(key);
        }
    }
    kept.push(head);
    let manifest = Manifest {
        format: FORMAT,
        segments: kept,
    };
    let raw = serde_json::to_vec(&manifest).ok()?;
    let key = keys.keyword_manifest();
    match known {
        Some(old) => batch.require_equals(&key, old.to_vec()),
        None => batch.require_absent(&key),
    };
    batch.put(&key, raw.clone());
    Some(Plan {
        batch,
        persisted: Persisted {
            raw: Some(raw),
            segments: manifest.segments,
            gave_way: false,
        },
        sweep,
    })
}

/// The write that brings the stored segments up to `index`, if one is due: a new segment of
/// the documents past the stored ones (at least [`SEGMENT_EVENTS`] of them), merged with the
/// newest segments of its size tier; or, when the index was built over unusable segments,
/// segments of the whole index replacing them. `id` names the new segment.
pub fn plan(
    index: &KeywordIndex,
    persisted: &Persisted,
    keys: &OrgKeys,
    id: &str,
    vectors: Option<&Vectors<'_>>,
) -> Option<Plan> {
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
    let merged = merging(&mut kept, len - covered);
    let start = covered - merged.iter().map(|s| s.docs).sum::<u32>();
    let mut batch = Batch::new();
    let head = put_segment(&mut batch, index, (start, len), keys, id, vectors);
    let known = persisted.raw.as_deref();
    finish(batch, keys, kept, head, &merged, known, replaces)
}

/// The write of a new segment built apart from any loaded index (`tail.rs`): `index` holds
/// the documents of `merged` (the stored segments it replaces, in order) and then the new ones.
pub fn plan_apart(
    index: &KeywordIndex,
    kept: Vec<SegmentHead>,
    merged: &[SegmentHead],
    known: Option<&[u8]>,
    keys: &OrgKeys,
    id: &str,
    vectors: Option<&Vectors<'_>>,
) -> Option<Plan> {
    let len = u32::try_from(index.len()).ok()?;
    let mut batch = Batch::new();
    let head = put_segment(&mut batch, index, (0, len), keys, id, vectors);
    finish(batch, keys, kept, head, merged, known, false)
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
        let named: std::collections::HashSet<String> = persisted
            .segments
            .iter()
            .flat_map(|s| s.part_keys(keys))
            .collect();
        for key in read_parts(ports, &keys.keyword_parts()).await?.into_keys() {
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
