//! `search_memory` for an instance that lives for one request (Spin makes a new one for every
//! request): it answers from the stored segments without loading the org's index, reading only
//! what its query uses, so what it ranks stays bounded as the org grows.
//!
//! What one probe reads (see ARCHITECTURE.md, "What one Spin request reads"):
//! 1. the org's event sequence number and the segment manifest (two point reads);
//! 2. the events past the last segment (one scan, one read; normally fewer than
//!    [`SEGMENT_EVENTS`], as saves write segments; a longer tail is written as a segment at the
//!    request's end, and past [`MAX_PROBE_TAIL`] the request loads the index instead);
//! 3. per bucket of the query's terms, one scan of that bucket's parts in every segment (a
//!    few kilobytes per segment; only the query's terms are decoded);
//! 4. with an embedder: the segments' vector sketches under its model (one scan, one bit per
//!    dimension and the event's ULID: 52 bytes per memory of a small segment, centroids of a
//!    large one's clusters), the query's embedding, the clusters nearest it up to the probe's
//!    share of sketches (one read; none while the clusters are few: the scan brought them),
//!    and the int8 vectors of the best [`RERANK_PER_RESULT`] × depth candidates by Hamming
//!    distance (one read), ranked exactly;
//! 5. the ids of keyword candidates (from the sketches and clusters read; others from one read
//!    of their id pages, 64 ids each), and one read of their supersession markers;
//! 6. the hits' events (one read).
//!
//! The keyword ranking is the loaded index's exactly (the same BM25 statistics over every
//! segment and the tail, the same order and ties); the vector ranking is a binary-sketch
//! search reranked on the stored int8 vectors instead of the graph. Filtered queries (kinds,
//! entities, author, time) load the index: their filters need every document's metadata.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};

use super::codec::{self, ID_PAGE};
use super::event::Event;
use super::fusion::{Hit, depth_for, fuse, ranked_order, rounded};
use super::inputs::SearchInput;
use super::keyword::{KeywordIndex, average_len, best_first, idf, term_score};
use super::refresh::{current_seq, events_after_at_most};
use super::segments::{self, SEGMENT_EVENTS, SegmentHead, read_parts};
use super::semantic::{embed_all, model_key};
use super::service::{MemoryService, Ranking};
use super::sketch::{self, Cluster, Sketch};
use super::vector::{Exact, QuerySketch, RERANK_PER_RESULT, nearest_of};
use lore_base::error::Result;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_directory::Caller;

/// Events past the stored segments that a probe reads and indexes itself; past them the
/// request loads the index.
const MAX_PROBE_TAIL: usize = 256;
/// Rounds of reading more candidates when the first ones were superseded; past them the
/// request loads the index.
const MAX_ROUNDS: usize = 8;

/// An org's stored segments as one probe sees them.
struct Stored<'a> {
    keys: &'a OrgKeys,
    /// Where a part that does not open is recorded (`MemoryService::broken_parts`).
    broken: &'a RefCell<HashSet<String>>,
    segments: &'a [SegmentHead],
    /// The global number of each segment's first document.
    starts: Vec<u32>,
    /// Documents in segments; the tail's are numbered from here on.
    covered: u32,
    tail: KeywordIndex,
    /// Each segment's sketch under the embedder's model when it is flat and was read.
    sketches: Vec<Option<Sketch>>,
    /// The clusters of sketches read from clustered segments.
    clusters: Vec<Cluster>,
    /// Per segment, the numbers of its clusters read (in `clusters`).
    in_segment: Vec<Vec<u32>>,
    /// Id pages read so far, by key: their bodies, checked against their checksums (an id
    /// is decoded when it is asked for).
    id_pages: HashMap<String, Vec<u8>>,
    /// Whether any stored document supersedes another (else no marker needs reading).
    supersessions: bool,
}

impl Stored<'_> {
    /// Records that one of the org's per-request parts does not open, so that the index load
    /// this search falls back to rebuilds the segments.
    fn broke(&self, why: &str) {
        tracing::warn!(
            why,
            "a segment part is unusable; loading the index, which rebuilds it"
        );
        self.broken
            .borrow_mut()
            .insert(self.keys.root().to_string());
    }

    /// The segment of global document `doc` and its number inside it.
    fn locate(&self, doc: u32) -> (usize, u32) {
        let s = self.starts.partition_point(|&start| start <= doc) - 1;
        (s, doc - self.starts[s])
    }

    /// The event ids of `docs`: from the sketches when they were read, else from the id pages
    /// not read yet (one read). `None` when a page is missing or corrupt.
    async fn ids(&mut self, ports: &Ports, docs: &[u32]) -> Result<Option<Vec<String>>> {
        let mut wanted: Vec<String> = Vec::new();
        for &doc in docs {
            if doc >= self.covered || self.known_id(doc).is_some() {
                continue;
            }
            let key = self.id_page_key(doc);
            if !self.id_pages.contains_key(&key) && !wanted.contains(&key) {
                wanted.push(key);
            }
        }
        for (key, bytes) in wanted.iter().zip(ports.storage.get_many(&wanted).await?) {
            let Some(bytes) = bytes else {
                self.broke("an id page is missing");
                return Ok(None);
            };
            match codec::unseal(key, &bytes) {
                Ok(_) => {
                    let mut body = bytes;
                    body.drain(..codec::SEAL_HEAD);
                    self.id_pages.insert(key.clone(), body);
                }
                Err(why) => {
                    self.broke(&why);
                    return Ok(None);
                }
            }
        }
        let mut out = Vec::with_capacity(docs.len());
        for &doc in docs {
            let id = if doc >= self.covered {
                self.tail.doc_id(doc - self.covered).to_string()
            } else if let Some(id) = self.known_id(doc) {
                id
            } else {
                let (_, local) = self.locate(doc);
                let page = &self.id_pages[&self.id_page_key(doc)];
                match codec::id_in_page(page, (local % ID_PAGE) as usize) {
                    Ok(id) => id,
                    Err(why) => {
                        self.broke(&why);
                        return Ok(None);
                    }
                }
            };
            out.push(id);
        }
        Ok(Some(out))
    }

    /// Document `doc`'s id from its segment's sketch or its cluster, when they were read.
    fn known_id(&self, doc: u32) -> Option<String> {
        let (s, local) = self.locate(doc);
        // A cluster's documents are in order: a search of each cluster read from its segment.
        for &c in self.in_segment.get(s).into_iter().flatten() {
            let cluster = &self.clusters[c as usize];
            if let Ok(member) = cluster.docs.binary_search(&local) {
                return cluster.sketch.id(member as u32);
            }
        }
        self.sketches.get(s)?.as_ref()?.id(local)
    }

    fn id_page_key(&self, doc: u32) -> String {
        let (s, local) = self.locate(doc);
        self.keys
            .keyword_id_page(&self.segments[s].id, local / ID_PAGE)
    }
}

impl MemoryService {
    /// The hits of a search answered from the stored segments, or `None` when this search
    /// needs the loaded index (filters, no usable segments, a long tail, a part that does not
    /// open), which the caller then loads.
    pub(super) async fn search_probe(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: &SearchInput,
        limit: usize,
    ) -> Result<Option<Vec<Hit>>> {
        let filtered = input.kinds.is_some()
            || input.entity_ids.is_some()
            || input.author.is_some()
            || input.since.is_some()
            || input.until.is_some()
            || input.as_of.is_some();
        if filtered {
            return Ok(None);
        }
        let keys = caller.keys();
        let seq = current_seq(ports, caller).await?;
        let Ok((manifest, _)) = segments::read_manifest(ports, keys, seq).await? else {
            return Ok(None);
        };
        let last_seq = manifest.segments.last().map_or(0, |s| s.to_seq);
        // A tail of a segment or more (its write lost a race, or failed) is written at this
        // request's end; up to MAX_PROBE_TAIL events the probe indexes them itself.
        if seq - last_seq >= u64::from(SEGMENT_EVENTS) {
            self.mark_tail(keys);
        }
        if seq - last_seq > MAX_PROBE_TAIL as u64 {
            return Ok(None);
        }
        let tail_events: Vec<Event> = if last_seq == seq {
            Vec::new()
        } else {
            events_after_at_most(ports, keys, last_seq, MAX_PROBE_TAIL)
                .await?
                .0
        };
        let mut tail = KeywordIndex::default();
        for e in &tail_events {
            tail.insert(&self.tokenizer, e);
        }
        let mut starts = Vec::with_capacity(manifest.segments.len());
        let mut covered = 0u32;
        for s in &manifest.segments {
            starts.push(covered);
            covered += s.docs;
        }
        let mut stored = Stored {
            keys,
            broken: &self.broken_parts,
            segments: &manifest.segments,
            starts,
            covered,
            tail,
            sketches: Vec::new(),
            clusters: Vec::new(),
            in_segment: Vec::new(),
            id_pages: HashMap::new(),
            supersessions: manifest.segments.iter().any(|s| s.supersedes > 0)
                || tail_events.iter().any(|e| e.supersedes_event_id.is_some()),
        };
        let ranking = self.ranking.get();
        let depth = depth_for(limit);
        let mut terms = self.tokenizer.terms(&input.query);
        terms.sort();
        terms.dedup();

        let keyword = if ranking == Ranking::Vector || terms.is_empty() {
            Vec::new()
        } else {
            match self.probe_keyword(ports, &stored, &terms, depth).await? {
                Some(k) => k,
                None => return Ok(None),
            }
        };
        let (vector, embedded) = if ranking == Ranking::Keyword || input.query.trim().is_empty() {
            (Vec::new(), false)
        } else {
            match self
                .probe_vectors(ports, &mut stored, &tail_events, &input.query, depth)
                .await?
            {
                Some(v) => v,
                None => return Ok(None),
            }
        };
        let include = input.include_superseded;
        let hits = match (keyword.is_empty(), vector.is_empty()) {
            (true, true) => {
                if terms.is_empty() && !embedded {
                    // No words: the newest memories.
                    let total = stored.covered + stored.tail.len() as u32;
                    let newest: Vec<(u32, f64)> = (0..total).rev().map(|d| (d, 0.0)).collect();
                    match resolve(ports, &mut stored, &newest, limit, include).await? {
                        Some(r) => r,
                        None => return Ok(None),
                    }
                } else {
                    Vec::new()
                }
            }
            (false, true) | (true, false) => {
                let list = if vector.is_empty() { &keyword } else { &vector };
                let Some(mut r) = resolve(ports, &mut stored, list, limit, include).await? else {
                    return Ok(None);
                };
                for hit in &mut r {
                    hit.1 = rounded(hit.1, 1e4);
                }
                r.sort_by(|a, b| ranked_order((a.1, &a.2), (b.1, &b.2)));
                r
            }
            (false, false) => {
                let Some(k) = resolve(ports, &mut stored, &keyword, depth, include).await? else {
                    return Ok(None);
                };
                let Some(v) = resolve(ports, &mut stored, &vector, depth, include).await? else {
                    return Ok(None);
                };
                fuse_resolved(&k, &v, depth, limit)
            }
        };
        Ok(Some(
            hits.into_iter().map(|(_, s, id, by)| (id, s, by)).collect(),
        ))
    }

    /// Every document the query's terms occur in, with its BM25 score over the whole org,
    /// best first. `None`: a bucket does not open.
    async fn probe_keyword(
        &self,
        ports: &Ports,
        stored: &Stored<'_>,
        terms: &[String],
        depth: usize,
    ) -> Result<Option<Vec<(u32, f64)>>> {
        let mut by_bucket: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for t in terms {
            by_bucket
                .entry(codec::bucket_of(t))
                .or_default()
                .push(t.clone());
        }
        // Per term: (document, count, length).
        let mut lists: HashMap<&str, Vec<(u32, u32, u32)>> = HashMap::new();
        for (bucket, wanted) in &by_bucket {
            let parts = read_parts(ports, &stored.keys.keyword_bucket_parts(*bucket)).await?;
            let part = |k: &str| parts.get(k).map(Vec::as_slice);
            for (s, segment) in stored.segments.iter().enumerate() {
                let found = match segment.bucket_lists(stored.keys, *bucket, Some(wanted), part) {
                    Ok(found) => found,
                    Err(why) => {
                        tracing::warn!(
                            why,
                            "a keyword index bucket is unusable; loading the index"
                        );
                        return Ok(None);
                    }
                };
                for (term, postings) in found {
                    let Some(t) = terms.iter().find(|t| **t == term) else {
                        continue;
                    };
                    let base = stored.starts[s];
                    lists
                        .entry(t.as_str())
                        .or_default()
                        .extend(postings.into_iter().map(|p| (base + p.doc, p.tf, p.len)));
                }
            }
        }
        let tail = &stored.tail;
        for t in terms {
            if let Some(postings) = tail.postings.get(t) {
                let list = lists.entry(t.as_str()).or_default();
                for &(doc, tf) in postings {
                    list.push((stored.covered + doc, tf, tail.docs[doc as usize].len));
                }
            }
        }
        let docs = stored.covered as usize + tail.len();
        let total_len: u64 =
            stored.segments.iter().map(|s| s.total_len).sum::<u64>() + tail.total_len;
        let avg_len = average_len(total_len, docs);
        // Each term's share of each document's score, in the query's term order, as the loaded
        // index adds them (equal sums, equal bits): a stable sort by document keeps that order,
        // and each list is already in document order (runs the sort merges).
        let mut shares: Vec<(u32, f64)> = Vec::with_capacity(lists.values().map(Vec::len).sum());
        for t in terms {
            let Some(list) = lists.get(t.as_str()) else {
                continue;
            };
            let idf = idf(docs as f64, list.len() as f64);
            shares.extend(list.iter().map(|&(doc, tf, len)| {
                (doc, term_score(idf, f64::from(tf), f64::from(len), avg_len))
            }));
        }
        shares.sort_by_key(|&(doc, _)| doc);
        let mut ranked: Vec<(u32, f64)> = shares
            .chunk_by(|a, b| a.0 == b.0)
            .map(|run| (run[0].0, run.iter().fold(0.0, |sum, &(_, s)| sum + s)))
            .collect();
        best_of(&mut ranked, resolvable(depth));
        Ok(Some(ranked))
    }

    /// The documents nearest the query's embedding, best first: every sketch ranked by Hamming
    /// distance, the best few read and ranked exactly, with the tail's vectors; and whether the
    /// query was embedded. Empty without an embedder or when it fails (keyword ranking
    /// answers); `None` when a segment has no sketch under the model or one does not open.
    async fn probe_vectors(
        &self,
        ports: &Ports,
        stored: &mut Stored<'_>,
        tail_events: &[Event],
        query: &str,
        depth: usize,
    ) -> Result<Option<(Vec<(u32, f64)>, bool)>> {
        let Some(embedder) = ports.embedder.clone() else {
            return Ok(Some((Vec::new(), false)));
        };
        let (mkey, dims) = (model_key(embedder.model_id()), embedder.dimensions());
        if stored
            .segments
            .iter()
            .any(|s| s.sketch_head(&mkey).is_none())
        {
            return Ok(None);
        }
        // While the clustered segments hold at most twice the sketches a probe ranks, it ranks
        // them all, their clusters read in the same scan as the segments' sketches: the read of
        // chosen clusters by key, one more round trip, pays for itself only past that.
        let clustered: u64 = stored
            .segments
            .iter()
            .filter(|s| s.sketch_head(&mkey).is_some_and(|h| h.clusters > 0))
            .map(|s| u64::from(s.docs))
            .sum();
        let probe_codes = self.probe_codes.get();
        let all = clustered <= 2 * probe_codes as u64;
        let prefix = if all {
            stored.keys.keyword_sketches_and_clusters(&mkey)
        } else {
            stored.keys.keyword_sketches(&mkey)
        };
        let mut parts = read_parts(ports, &prefix).await?;
        let mut directories = Vec::new();
        for (s, segment) in stored.segments.iter().enumerate() {
            let sketch = segment
                .take_sketch(stored.keys, &mkey, dims, &mut parts)
                .and_then(|s| s.ok_or_else(|| "a segment has no sketch".to_string()));
            match sketch {
                Ok(sketch::Stored::Flat(s)) => stored.sketches.push(Some(s)),
                Ok(sketch::Stored::Clustered(d)) => {
                    stored.sketches.push(None);
                    directories.push((s, d));
                }
                Err(why) => {
                    stored.broke(&why);
                    return Ok(None);
                }
            }
        }
        let query_vector = match embed_all(embedder.as_ref(), &[query.to_string()]).await {
            Ok(mut v) => match v.pop() {
                Some(v) => v,
                None => return Ok(Some((Vec::new(), false))),
            },
            Err(e) => {
                tracing::warn!(error = %e, "could not embed the query; keyword ranking only");
                return Ok(Some((Vec::new(), false)));
            }
        };
        let sketched = QuerySketch::new(&query_vector);
        let bits = &sketched.bits;
        // The clustered segments' nearest clusters, each segment's share of PROBE_CODES by its
        // size, in one read (or all of them, read already).
        let mut wanted: Vec<(usize, u32, u32)> = Vec::new();
        for (s, directory) in &directories {
            let docs = u64::from(stored.segments[*s].docs);
            let share = (probe_codes as u64 * docs).div_ceil(clustered.max(1)) as usize;
            for c in directory.nearest(bits, share) {
                wanted.push((*s, c, directory.size(c)));
            }
        }
        let cluster_keys: Vec<String> = wanted
            .iter()
            .map(|&(s, c, _)| {
                stored
                    .keys
                    .keyword_sketch_cluster(&mkey, &stored.segments[s].id, c)
            })
            .collect();
        let read = if all {
            cluster_keys.iter().map(|k| parts.remove(k)).collect()
        } else {
            ports.storage.get_many(&cluster_keys).await?
        };
        drop(parts);
        for (&(s, c, size), bytes) in wanted.iter().zip(read) {
            let segment = &stored.segments[s];
            let opened = bytes
                .ok_or_else(|| "a vector sketch cluster is missing".to_string())
                .and_then(|b| segment.open_cluster(stored.keys, &mkey, dims, (c, size), b));
            match opened {
                Ok(cluster) => {
                    if stored.in_segment.len() <= s {
                        stored.in_segment.resize(s + 1, Vec::new());
                    }
                    stored.in_segment[s].push(stored.clusters.len() as u32);
                    stored.clusters.push(cluster);
                }
                Err(why) => {
                    stored.broke(&why);
                    return Ok(None);
                }
            }
        }
        let ranked = stored
            .sketches
            .iter()
            .flatten()
            .map(Sketch::len)
            .sum::<usize>()
            + stored.clusters.iter().map(|c| c.docs.len()).sum::<usize>();
        let mut codes: Vec<(u32, &[u8])> = Vec::with_capacity(ranked);
        for (s, sk) in stored.sketches.iter().enumerate() {
            let Some(sk) = sk else { continue };
            let base = stored.starts[s];
            codes.extend(sk.codes().map(|(local, code)| (base + local, code)));
        }
        for (&(s, _, _), cluster) in wanted.iter().zip(&stored.clusters) {
            let base = stored.starts[s];
            codes.extend(
                cluster
                    .sketch
                    .codes()
                    .map(|(member, code)| (base + cluster.docs[member as usize], code)),
            );
        }
        let near = nearest_of(
            &sketched,
            codes.into_iter(),
            depth * RERANK_PER_RESULT,
            &|_| true,
        );

        let Some(ids) = stored.ids(ports, &near).await? else {
            return Ok(None);
        };
        let mut candidates: Vec<(u32, String)> = near.into_iter().zip(ids).collect();
        for (i, e) in tail_events.iter().enumerate() {
            if let Some(doc) = stored.tail.doc_of(&e.id) {
                debug_assert_eq!(doc as usize, i);
                candidates.push((stored.covered + doc, e.id.clone()));
            }
        }
        let vector_keys: Vec<String> = candidates
            .iter()
            .map(|(_, id)| {
                stored
                    .keys
                    .vector(&mkey, id.strip_prefix("evt_").unwrap_or(id))
            })
            .collect();
        let vectors = ports.storage.get_many(&vector_keys).await?;
        let exact = Exact::new(&query_vector);
        let mut ranked: Vec<(u32, f64)> = Vec::with_capacity(candidates.len());
        for ((doc, _), bytes) in candidates.iter().zip(vectors) {
            if let Some(sim) = bytes.and_then(|b| exact.similarity(&b)) {
                ranked.push((*doc, sim));
            }
        }
        ranked.sort_by(best_first);
        Ok(Some((ranked, true)))
    }
}

/// The most candidates [`resolve`] reads for `want` results (its rounds at their largest), and
/// one more, so that a list cut there still runs out only where the whole would.
fn resolvable(want: usize) -> usize {
    MAX_ROUNDS * (want * 2).max(16) + 1
}

/// Keeps the best `k` of `ranked`, best first (the whole list's first `k`: the order is total).
fn best_of(ranked: &mut Vec<(u32, f64)>, k: usize) {
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k - 1, best_first);
        ranked.truncate(k);
    }
    ranked.sort_by(best_first);
}

/// A ranked document with its id and the event that superseded it.
type Resolved = (u32, f64, String, Option<String>);

/// The first `want` of `ranked` that are not superseded (or all, with `include`), with their
/// ids and supersession: candidates are read in rounds (their ids, then their markers, one
/// read each). `None` when a page does not open or the rounds run out.
async fn resolve(
    ports: &Ports,
    stored: &mut Stored<'_>,
    ranked: &[(u32, f64)],
    want: usize,
    include: bool,
) -> Result<Option<Vec<Resolved>>> {
    let mut out: Vec<Resolved> = Vec::with_capacity(want);
    let mut next = 0;
    for _ in 0..MAX_ROUNDS {
        if out.len() >= want || next >= ranked.len() {
            return Ok(Some(out));
        }
        let take = ((want - out.len()) * 2).max(16);
        let batch = &ranked[next..(next + take).min(ranked.len())];
        next += batch.len();
        let docs: Vec<u32> = batch.iter().map(|(d, _)| *d).collect();
        let Some(ids) = stored.ids(ports, &docs).await? else {
            return Ok(None);
        };
        let superseded = if stored.supersessions {
            let markers: Vec<String> = ids
                .iter()
                .map(|id| {
                    stored
                        .keys
                        .superseded(id.strip_prefix("evt_").unwrap_or(id))
                })
                .collect();
            ports.storage.get_many(&markers).await?
        } else {
            vec![None; ids.len()]
        };
        for (((doc, score), id), by) in batch.iter().zip(ids).zip(superseded) {
            let by = by.map(|b| String::from_utf8_lossy(&b).into_owned());
            if by.is_some() && !include {
                continue;
            }
            out.push((*doc, *score, id, by));
            if out.len() == want {
                break;
            }
        }
    }
    Ok((out.len() >= want || next >= ranked.len()).then_some(out))
}

/// The weighted fusion of two resolved lists (`fusion.rs`), as the loaded index fuses
/// (`search.rs`): the best `limit`, equal scores by event id.
fn fuse_resolved(
    keyword: &[Resolved],
    vector: &[Resolved],
    depth: usize,
    limit: usize,
) -> Vec<Resolved> {
    let by_doc: HashMap<u32, &Resolved> = keyword.iter().chain(vector).map(|r| (r.0, r)).collect();
    let scores = |list: &[Resolved]| list.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>();
    let mut out: Vec<Resolved> = fuse(&scores(keyword), &scores(vector), depth, &|_| false)
        .into_iter()
        .map(|(d, s)| {
            let r = by_doc[&d];
            (d, s, r.2.clone(), r.3.clone())
        })
        .collect();
    out.sort_by(|a, b| ranked_order((a.1, &a.2), (b.1, &b.2)));
    out.truncate(limit);
    out
}
