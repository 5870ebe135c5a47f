//! The vector half of a loaded index: every document's binary sketch (one bit per dimension,
//! the sign of its embedding's component: `sketch::sign_bits`) held in memory and ranked by
//! Hamming distance to the query's, then the nearest [`RERANK_PER_RESULT`] × depth ranked
//! exactly on their stored int8 vectors ([`encode`]). A long memory has several vectors (one
//! per window of its text: `semantic::pieces`): its sketch is their mean's, and its exact
//! score the best of them.
//!
//! The sketches are the ones the keyword index segments store (`sketch/`), so a fresh instance
//! reads them in the same scan as the rest of the segments, and nothing is built from the
//! vectors when it loads: what a load reads grows by 52 bytes per memory, and what it computes
//! does not grow at all. A per-request search (`probe.rs`) ranks the same sketches the same
//! way from storage, so the two agree wherever the probe reads every sketch. Why a scan of
//! sketches and not a graph: ARCHITECTURE.md, "Vector index".

pub use super::sketch::{QuerySketch, cluster, cluster_cap, sign_bits};

/// Sketch candidates whose int8 vectors a per-request search reads and ranks exactly, per
/// ranked result wanted.
pub const RERANK_PER_RESULT: usize = 4;
/// The same for a loaded index, which keeps the vectors it read: twice as many, for recall
/// (`bench/vector.sh`: on the clustered set at 10,000 vectors the exact top 10 is found 0.90 of
/// the time among the nearest 128 sketches, 0.94 among 256).
pub const LOADED_RERANK_PER_RESULT: usize = 8;
/// Orgs with at most this many vectors are ranked exactly, every vector: a loaded index reads
/// them all when it loads (one scan, at most 1.6 MB at 384 dimensions) and keeps them; an
/// exact ranking of 4,096 int8 vectors costs about what ranking 100,000 sketches does
/// (`bench/vector.sh`, "threshold"), and the sketches alone find the exact top 10 less often
/// in small orgs, whose neighbourhoods are sparse.
pub const EXACT_BELOW: usize = 4_096;
/// A search whose filters allow at most this many documents ranks them all exactly (their
/// vectors read in one `get_many` where this instance lacks them): the sketches of a few
/// documents scattered through a large org are as sparse as a small org's.
pub const FILTERED_EXACT: usize = 1_024;

/// The sketches of an index's documents under one model, by document number.
pub struct Codes {
    code_len: usize,
    /// `code_len` bytes per document (zeros where it has none).
    codes: Vec<u8>,
    /// Whether each document has a sketch.
    present: Vec<bool>,
    count: usize,
    /// Clusters of documents by sketch, as the segments store them (`sketch::cluster`): each
    /// centroid with its members. Past [`GROUPED_SCAN`] members a search ranks the centroids
    /// and reads only the nearest clusters' sketches, and every sketch no cluster holds.
    groups: Vec<Group>,
    /// Whether each document is a member of a group, and how many are.
    in_group: Vec<bool>,
    grouped: usize,
    /// Documents given a sketch outside any group, in the order they were (some may have
    /// joined a group since).
    loose: Vec<u32>,
}

/// A cluster of sketches: its centroid, its members and their sketches side by side (a copy,
/// so that a search reads a cluster in one sweep rather than one sketch here and one there:
/// scattered, a quarter of a million sketches cost as much as the sweep of all of them).
struct Group {
    centroid: Vec<u8>,
    docs: Vec<u32>,
    codes: Vec<u8>,
}

/// Grouped sketches up to which a search still ranks every sketch. Past it, sweeping them all
/// is what a search costs (memory bound: `bench/vector.sh` at 1,000,000 clustered vectors,
/// 20 ms a query, recall@10 0.979 at 256 ranked exactly), so it ranks the clusters' centroids
/// by the query's closer score and sweeps the nearest until they hold a [`GROUPED_SHARE`]th
/// of the grouped sketches (5.5 ms, recall@10 0.955; a quarter, 4.0 ms and 0.937).
pub const GROUPED_SCAN: usize = 262_144;
/// The share of the grouped sketches a search past [`GROUPED_SCAN`] ranks: 1 / this.
pub const GROUPED_SHARE: usize = 3;

impl Codes {
    /// Sketches of `dims`-dimensional vectors.
    pub fn new(dims: usize) -> Self {
        Self {
            code_len: dims.div_ceil(8),
            codes: Vec::new(),
            present: Vec::new(),
            count: 0,
            groups: Vec::new(),
            in_group: Vec::new(),
            grouped: 0,
            loose: Vec::new(),
        }
    }

    /// Adds a cluster: `centroid` and those of `docs` that have a sketch and are in no group
    /// yet. A cluster whose centroid is of another length is ignored.
    pub fn add_group(&mut self, centroid: &[u8], docs: &[u32]) {
        if centroid.len() != self.code_len {
            return;
        }
        if self.in_group.len() < self.present.len() {
            self.in_group.resize(self.present.len(), false);
        }
        let members: Vec<u32> = docs
            .iter()
            .copied()
            .filter(|&d| self.has(d) && !self.in_group[d as usize])
            .collect();
        if members.is_empty() {
            return;
        }
        let mut codes = Vec::with_capacity(members.len() * self.code_len);
        for &d in &members {
            self.in_group[d as usize] = true;
            codes.extend_from_slice(self.get(d).expect("has a sketch"));
        }
        self.grouped += members.len();
        self.groups.push(Group {
            centroid: centroid.to_vec(),
            docs: members,
            codes,
        });
    }

    /// Forgets the documents that joined a group since they were given a sketch (after a
    /// load has added its groups), so that a search does not pass over them.
    pub fn settle(&mut self) {
        let in_group = &self.in_group;
        self.loose
            .retain(|&d| !in_group.get(d as usize).copied().unwrap_or(false));
    }

    fn grouped(&self, doc: u32) -> bool {
        self.in_group.get(doc as usize).copied().unwrap_or(false)
    }

    /// How many documents have a sketch.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn has(&self, doc: u32) -> bool {
        self.present.get(doc as usize).copied().unwrap_or(false)
    }

    /// Document `doc`'s sketch, if it has one.
    pub fn get(&self, doc: u32) -> Option<&[u8]> {
        self.has(doc).then(|| {
            let at = doc as usize * self.code_len;
            &self.codes[at..at + self.code_len]
        })
    }

    /// Gives document `doc` the sketch `code`; `false` (and nothing changes) when it has one
    /// already or `code` is of another length.
    pub fn set(&mut self, doc: u32, code: &[u8]) -> bool {
        if code.len() != self.code_len || self.has(doc) {
            return false;
        }
        let slot = doc as usize;
        if self.present.len() <= slot {
            self.present.resize(slot + 1, false);
            self.codes.resize((slot + 1) * self.code_len, 0);
        }
        let at = slot * self.code_len;
        self.codes[at..at + self.code_len].copy_from_slice(code);
        self.present[slot] = true;
        self.count += 1;
        self.loose.push(doc);
        true
    }

    /// Every document with a sketch, with it, in document order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.codes
            .chunks_exact(self.code_len)
            .enumerate()
            .filter(|(d, _)| self.present[*d])
            .map(|(d, c)| (d as u32, c))
    }

    /// The `keep` documents allowed by `filter` whose sketches are nearest `query`, nearest
    /// first ([`nearest_of`]).
    pub fn nearest(
        &self,
        query: &QuerySketch,
        keep: usize,
        filter: &dyn Fn(u32) -> bool,
    ) -> Vec<u32> {
        if query.bits.len() != self.code_len {
            return Vec::new();
        }
        if self.grouped <= GROUPED_SCAN {
            return nearest_of(query, self.iter(), keep, filter);
        }
        // The clusters whose centroids are nearest, until they hold their share.
        let mut order: Vec<(f32, usize)> = self
            .groups
            .iter()
            .enumerate()
            .map(|(g, group)| (query.score(&group.centroid), g))
            .collect();
        order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let want = self.grouped / GROUPED_SHARE;
        let mut held = 0;
        let near = order.into_iter().take_while(|&(_, g)| {
            let more = held < want;
            held += self.groups[g].docs.len();
            more
        });
        let members = near.flat_map(|(_, g)| {
            let group = &self.groups[g];
            group
                .docs
                .iter()
                .copied()
                .zip(group.codes.chunks_exact(self.code_len))
        });
        let loose = self.loose.iter().copied().filter(|&d| !self.grouped(d));
        let code = |d: u32| {
            let at = d as usize * self.code_len;
            (d, &self.codes[at..at + self.code_len])
        };
        nearest_of(query, members.chain(loose.map(code)), keep, filter)
    }

    /// Bytes this holds.
    pub fn heap_bytes(&self) -> usize {
        self.codes.capacity()
            + self.present.capacity()
            + self.in_group.capacity()
            + 4 * self.loose.capacity()
            + self
                .groups
                .iter()
                .map(|g| g.centroid.capacity() + 4 * g.docs.capacity() + g.codes.capacity())
                .sum::<usize>()
    }
}

/// The documents of `codes` allowed by `filter` that a loaded search ranks exactly: all of
/// them in an org of at most [`EXACT_BELOW`] vectors, all of them when at most
/// [`FILTERED_EXACT`] are allowed, else the `keep` whose sketches are nearest `query`
/// ([`Codes::nearest`]; the sketch of the query is made only then).
pub fn candidates(
    codes: &Codes,
    query: &[f32],
    keep: usize,
    filter: &dyn Fn(u32) -> bool,
) -> Vec<u32> {
    let allowed = |most: usize| -> Vec<u32> {
        codes
            .iter()
            .map(|(doc, _)| doc)
            .filter(|&doc| filter(doc))
            .take(most)
            .collect()
    };
    if codes.len() <= EXACT_BELOW {
        return allowed(usize::MAX);
    }
    let few = allowed(FILTERED_EXACT + 1);
    if few.len() <= FILTERED_EXACT {
        return few;
    }
    codes.nearest(&QuerySketch::new(query), keep, filter)
}

/// Sketches kept by Hamming distance for the closer score, per document wanted.
const PREFILTER_PER_KEPT: usize = 16;

/// The `keep` documents of `items` (document, sketch) allowed by `filter` whose sketches are
/// nearest `query`, nearest first: the nearest `PREFILTER_PER_KEPT` × `keep` by Hamming
/// distance (6 popcounts a sketch of 384 bits), then those by the query's closer score
/// ([`QuerySketch::score`]); ties go to the newer (higher-numbered) document. The loaded index
/// and the per-request probe both rank this way, so they agree wherever they see the same
/// sketches.
pub fn nearest_of<'a>(
    query: &QuerySketch,
    items: impl Iterator<Item = (u32, &'a [u8])>,
    keep: usize,
    filter: &dyn Fn(u32) -> bool,
) -> Vec<u32> {
    if keep == 0 {
        return Vec::new();
    }
    let first = keep.saturating_mul(PREFILTER_PER_KEPT);
    // Nearest first; ties to the newer document.
    let by_distance =
        |a: &(u32, u32, &[u8]), b: &(u32, u32, &[u8])| a.0.cmp(&b.0).then(b.1.cmp(&a.1));
    let mut near: Vec<(u32, u32, &[u8])> = Vec::new();
    let mut worst = u32::MAX;
    for (doc, code) in items {
        let d = super::sketch::hamming(&query.bits, code);
        // Once `first` are held, a farther sketch cannot enter; the filter (which looks at
        // the document's metadata) runs only for those that could.
        if d > worst || !filter(doc) {
            continue;
        }
        near.push((d, doc, code));
        if near.len() >= first * 2 {
            cut(&mut near, first, by_distance);
            worst = near.iter().map(|n| n.0).max().unwrap_or(u32::MAX);
        }
    }
    cut(&mut near, first, by_distance);
    let mut scored: Vec<(f32, u32)> = near
        .into_iter()
        .map(|(_, doc, code)| (query.score(code), doc))
        .collect();
    let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1));
    cut(&mut scored, keep, order);
    scored.sort_unstable_by(order);
    scored.into_iter().map(|(_, doc)| doc).collect()
}

/// Keeps the first `keep` of `items` in `order` (unordered).
fn cut<T>(items: &mut Vec<T>, keep: usize, order: impl Fn(&T, &T) -> std::cmp::Ordering) {
    if items.len() > keep {
        items.select_nth_unstable_by(keep - 1, order);
        items.truncate(keep);
    }
}

const VECTOR_VERSION: u8 = 1;
/// Several vectors of one memory: its text's windows' (`semantic::pieces`).
const VECTORS_VERSION: u8 = 2;

/// A memory's vectors as stored: with one vector, version 1, its dimension count, then the
/// vector; with several (a long text's windows), version 2, the dimension count,
/// the vector count (u16), then the vectors. Each vector is its scale (f32) and one signed byte
/// per dimension. Embeddings are unit length, so int8 with one scale per vector keeps cosine
/// ranking intact to well under a percent while taking a quarter of the bytes. `vectors` are
/// of one length, at least one and at most `u16::MAX` of them.
pub fn encode(vectors: &[Vec<f32>]) -> Vec<u8> {
    let dims = vectors.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(5 + vectors.len() * (4 + dims));
    if vectors.len() == 1 {
        out.push(VECTOR_VERSION);
        out.extend_from_slice(&(dims as u16).to_le_bytes());
    } else {
        out.push(VECTORS_VERSION);
        out.extend_from_slice(&(dims as u16).to_le_bytes());
        out.extend_from_slice(&(vectors.len() as u16).to_le_bytes());
    }
    for v in vectors {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        out.extend_from_slice(&scale.to_le_bytes());
        out.extend(
            v.iter()
                .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8 as u8),
        );
    }
    out
}

/// The vectors stored by [`encode`] of `dims` dimensions, each its scale's 4 bytes then its
/// signed bytes; `None` when the bytes are not such vectors.
fn stored_parts(bytes: &[u8], dims: usize) -> Option<std::slice::ChunksExact<'_, u8>> {
    let part = 4 + dims;
    let dims_of = |b: &[u8]| usize::from(u16::from_le_bytes([b[1], b[2]]));
    match *bytes.first()? {
        VECTOR_VERSION if bytes.len() == 3 + part && dims_of(bytes) == dims => {
            Some(bytes[3..].chunks_exact(part))
        }
        VECTORS_VERSION if bytes.len() >= 5 => {
            let count = usize::from(u16::from_le_bytes([bytes[3], bytes[4]]));
            (count > 0 && dims_of(bytes) == dims && bytes.len() == 5 + count * part)
                .then(|| bytes[5..].chunks_exact(part))
        }
        _ => None,
    }
}

/// The vectors stored by [`encode`], renormalized; `None` when the bytes are not vectors of
/// `dims` dimensions.
pub fn decode(bytes: &[u8], dims: usize) -> Option<Vec<Vec<f32>>> {
    stored_parts(bytes, dims)?
        .map(|part| {
            let scale = f32::from_le_bytes(part[..4].try_into().ok()?);
            let mut v: Vec<f32> = part[4..]
                .iter()
                .map(|&b| f32::from(b as i8) * scale)
                .collect();
            normalize(&mut v);
            Some(v)
        })
        .collect()
}

/// The sketch of a memory's vectors (`sketch::sign_bits` of their sum, the direction of their
/// mean), which candidate searches rank before the vectors themselves are compared.
pub fn sketch_of(vectors: &[Vec<f32>]) -> Vec<u8> {
    match vectors {
        [one] => sign_bits(one),
        _ => {
            let mut sum = vec![0f32; vectors.first().map_or(0, Vec::len)];
            for v in vectors {
                sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
            }
            sign_bits(&sum)
        }
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// A query as stored vectors are ranked against it exactly: quantized as they are (int8, its
/// largest component at ±127), so that a similarity is integer arithmetic, the same on every
/// platform, and vectorises (16 lanes).
pub struct Exact {
    q: Vec<i8>,
    norm: f64,
}

impl Exact {
    pub fn new(query: &[f32]) -> Self {
        let max = query.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 && max.is_finite() {
            127.0 / max
        } else {
            0.0
        };
        let q: Vec<i8> = query.iter().map(|x| (x * scale).round() as i8).collect();
        let norm = f64::from(q.iter().map(|&x| i32::from(x) * i32::from(x)).sum::<i32>()).sqrt();
        Self { q, norm }
    }

    /// The cosine similarity of the query and a memory's stored vectors ([`encode`]): the
    /// best of them (a long memory's best window); `None` when the bytes are not vectors of the
    /// query's dimensions.
    pub fn similarity(&self, stored: &[u8]) -> Option<f64> {
        let parts = stored_parts(stored, self.q.len())?;
        self.best(parts.map(|part| (part, part_length(part))))
    }

    /// [`Exact::similarity`] of stored vectors whose [`stored_lengths`] are known (kept beside
    /// them), which halves the work.
    pub fn similarity_of_lengths(&self, stored: &[u8], lengths: &[f64]) -> Option<f64> {
        let parts = stored_parts(stored, self.q.len())?;
        if parts.len() != lengths.len() {
            return None;
        }
        self.best(parts.zip(lengths.iter().copied()))
    }

    /// The best cosine of the query and stored vectors ([`stored_parts`]), each with its length.
    fn best<'a>(&self, parts: impl Iterator<Item = (&'a [u8], f64)>) -> Option<f64> {
        // The stored scale cancels out of the cosine.
        parts
            .map(|(part, length)| {
                let dot = dot(&self.q, &part[4..], |x| x);
                let norm = self.norm * length;
                if norm > 0.0 {
                    f64::from(dot) / norm
                } else {
                    0.0
                }
            })
            .reduce(f64::max)
    }
}

/// The lengths of stored vectors' int8 components (their scales left out, as in
/// [`Exact::similarity`]); `None` when the bytes are not vectors of `dims` dimensions.
pub fn stored_lengths(stored: &[u8], dims: usize) -> Option<Vec<f64>> {
    Some(stored_parts(stored, dims)?.map(part_length).collect())
}

/// The length of one stored vector's int8 components ([`stored_parts`]: its scale left out).
fn part_length(part: &[u8]) -> f64 {
    f64::from(dot(&part[4..], &part[4..], |y| y as i8)).sqrt()
}

/// The dot product of `a` and `b` (both read as signed bytes, `a`'s through `signed`), exact in
/// `i32` (384 × 127² fits many times over), in 16 independent lanes (which LLVM turns into SIMD
/// multiply-adds).
#[inline]
#[allow(clippy::needless_range_loop)] // the indexed form is the one LLVM vectorises
fn dot<T: Copy>(a: &[T], b: &[u8], signed: impl Fn(T) -> i8) -> i32 {
    let mut lanes = [0i32; 16];
    let (blocks_a, blocks_b) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = blocks_a
        .remainder()
        .iter()
        .zip(blocks_b.remainder())
        .map(|(&x, &y)| i32::from(signed(x)) * i32::from(y as i8))
        .sum();
    for (x, y) in blocks_a.zip(blocks_b) {
        for i in 0..16 {
            lanes[i] += i32::from(signed(x[i])) * i32::from(y[i] as i8);
        }
    }
    lanes.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_scan_a_search_ranks_the_nearest_clusters_and_every_loose_sketch() {
        let query = QuerySketch::new(&unit(7));
        let near: Vec<u8> = query.bits.clone();
        let far: Vec<u8> = near.iter().map(|b| !b).collect();
        let mut codes = Codes::new(64);
        // A third of the grouped sketches in the cluster nearest the query, the rest far.
        let n = GROUPED_SCAN as u32 + 3;
        let split = n / GROUPED_SHARE as u32;
        for d in 0..n {
            // The far cluster's last member is as near as can be, but its cluster is not read.
            codes.set(d, if d < split || d == n - 1 { &near } else { &far });
        }
        codes.add_group(&far, &(split..n).collect::<Vec<_>>());
        codes.add_group(&near, &(0..split).collect::<Vec<_>>());
        codes.settle();
        // Given a sketch after the load: in no cluster, always ranked.
        codes.set(n, &near);
        let hits = codes.nearest(&query, 5, &|_| true);
        assert_eq!(hits[0], n, "the loose sketch, newest of the nearest");
        assert!(hits[1..].iter().all(|&d| d < split), "{hits:?}");
        // Below the scan size every sketch is ranked.
        let mut small = Codes::new(64);
        small.set(0, &far);
        small.set(1, &near);
        small.add_group(&far, &[0, 1]);
        assert_eq!(small.nearest(&query, 1, &|_| true), vec![1]);
    }

    /// A unit vector of 64 dimensions from a seed.
    fn unit(seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut v: Vec<f32> = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        normalize(&mut v);
        v
    }

    #[test]
    fn codes_hold_one_sketch_per_document() {
        let mut codes = Codes::new(16);
        assert!(codes.set(0, &[0, 0]));
        assert!(codes.set(3, &[1, 0]));
        assert!(!codes.set(3, &[0, 0]), "a document keeps its sketch");
        assert!(!codes.set(6, &[0]), "a sketch of another length is refused");
        assert_eq!(codes.len(), 2);
        assert!(!codes.has(1) && codes.get(1).is_none());
        assert_eq!(codes.get(3), Some(&[1u8, 0][..]));
        let q = QuerySketch::new(&[1.0; 16]);
        assert_eq!(codes.nearest(&q, 5, &|_| true).len(), 2);
        assert!(
            codes
                .nearest(&QuerySketch::new(&[1.0; 8]), 5, &|_| true)
                .is_empty()
        );
    }

    #[test]
    fn nearest_finds_the_vector_itself_and_its_neighbours_first_and_filters_before_the_cut() {
        let mut codes = Codes::new(64);
        let vectors: Vec<Vec<f32>> = (0..3_000).map(unit).collect();
        for (doc, v) in vectors.iter().enumerate() {
            codes.set(doc as u32, &sign_bits(v));
        }
        for target in [7usize, 1_234, 2_999] {
            let q = QuerySketch::new(&vectors[target]);
            let near = codes.nearest(&q, 10, &|_| true);
            assert_eq!(near[0], target as u32);
            let other = codes.nearest(&q, 10, &|d| d != target as u32);
            assert!(!other.contains(&(target as u32)));
            assert_eq!(other.len(), 10);
            // The exact top 5 by cosine are among the 40 nearest sketches.
            let near = codes.nearest(&q, 40, &|_| true);
            let mut exact: Vec<(f32, u32)> = vectors
                .iter()
                .enumerate()
                .map(|(d, v)| {
                    (
                        v.iter().zip(&vectors[target]).map(|(a, b)| a * b).sum(),
                        d as u32,
                    )
                })
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let found = exact[..5].iter().filter(|(_, d)| near.contains(d)).count();
            assert!(found >= 4, "{found} of the top 5 for {target}");
        }
    }

    #[test]
    fn equal_sketches_rank_the_newer_document_first() {
        let mut codes = Codes::new(64);
        let v = unit(5);
        for doc in [2u32, 9, 4] {
            codes.set(doc, &sign_bits(&v));
        }
        assert_eq!(
            codes.nearest(&QuerySketch::new(&v), 2, &|_| true),
            vec![9, 4]
        );
        assert_eq!(
            codes.nearest(&QuerySketch::new(&v), 3, &|d| d != 4),
            vec![9, 2]
        );
    }

    #[test]
    fn a_memory_with_several_vectors_scores_its_best_one() {
        let (a, b, c) = (unit(1), unit(2), unit(3));
        let one = encode(std::slice::from_ref(&a));
        assert_eq!(one.len(), 7 + 64, "one vector keeps the first layout");
        let several = encode(&[a.clone(), b.clone(), c.clone()]);
        assert_eq!(several.len(), 5 + 3 * (4 + 64));
        let back = decode(&several, 64).unwrap();
        assert_eq!(back.len(), 3);
        for (v, w) in [&a, &b, &c].into_iter().zip(&back) {
            let cos: f32 = v.iter().zip(w).map(|(x, y)| x * y).sum();
            assert!(cos > 0.999, "{cos}");
        }
        for query in [&a, &b, &c] {
            let exact = Exact::new(query);
            let best = exact.similarity(&several).unwrap();
            assert!(best > 0.99, "{best}");
            let lengths = stored_lengths(&several, 64).unwrap();
            assert_eq!(exact.similarity_of_lengths(&several, &lengths), Some(best));
            assert_eq!(exact.similarity_of_lengths(&several, &lengths[..2]), None);
        }
        // Cut, padded, or of other dimensions: not vectors.
        for bad in [&several[..several.len() - 1], &[2, 64, 0, 0, 0][..]] {
            assert!(decode(bad, 64).is_none() && stored_lengths(bad, 64).is_none());
        }
        let mut longer = several.clone();
        longer.push(0);
        assert!(decode(&longer, 64).is_none());
        assert!(decode(&several, 32).is_none());
        // The sketch of several vectors is that of their sum (their mean's direction).
        let sum: Vec<f32> = (0..64).map(|i| a[i] + b[i] + c[i]).collect();
        assert_eq!(sketch_of(&[a.clone(), b, c]), sign_bits(&sum));
        assert_eq!(sketch_of(std::slice::from_ref(&a)), sign_bits(&a));
    }

    #[test]
    fn vectors_survive_encoding_within_a_percent() {
        let mut v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        normalize(&mut v);
        let back = decode(&encode(std::slice::from_ref(&v)), 384).unwrap();
        assert_eq!(back.len(), 1);
        let cos: f32 = v.iter().zip(&back[0]).map(|(a, b)| a * b).sum();
        assert!(cos > 0.999, "{cos}");
        assert!(decode(&encode(std::slice::from_ref(&v)), 256).is_none());
        assert!(decode(&[9, 0, 0], 0).is_none());
    }
}
