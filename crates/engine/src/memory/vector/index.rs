//! `VectorIndex`: the public surface (insert, filtered search, sizes), its parameters, and the
//! exact scan that answers small indexes and selective filters.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::VectorError;
use super::arena::{Arena, CHUNK};
use super::quantize::{dot_i8, quantize_into};

/// Construction parameters. They shape the graph, so a snapshot keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexParams {
    /// Links a node gets on each upper layer; layer 0 keeps up to `2 * m`.
    pub m: usize,
    /// Candidates kept while linking a new node (the paper's `efConstruction`).
    pub ef_construction: usize,
    /// Seeds the level of each node; the same seed and the same inserts build the same graph
    /// on every platform (levels are drawn with integer arithmetic only).
    pub seed: u64,
}

impl IndexParams {
    /// The measured defaults (ARCHITECTURE.md, "Vector index") with the given seed.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            m: DEFAULT_M,
            ef_construction: DEFAULT_EF_CONSTRUCTION,
            seed,
        }
    }
}

pub(super) const DEFAULT_M: usize = 16;
pub(super) const DEFAULT_EF_CONSTRUCTION: usize = 128;
/// Candidates kept while searching layer 0 (at least `k`).
pub(super) const DEFAULT_EF_SEARCH: usize = 64;
/// At or below this many vectors a search scans them all.
pub(super) const DEFAULT_EXACT_THRESHOLD: usize = 1024;
/// The largest `m` (layer-0 records of `2m + 1` u32 stay small, and counts fit a byte).
pub(super) const MAX_M: usize = 64;
/// The largest dimension count a snapshot may declare.
pub(super) const MAX_DIMS: usize = 1 << 16;
/// Ids the filter is asked about to estimate how much of the index it allows.
const FILTER_SAMPLE: usize = 512;
/// Dot products one graph search costs per unit of `ef` when every node is allowed; a filter
/// that allows a share `p` of the nodes makes it about `1/p` times more (measured, BENCHMARKS.md).
const GRAPH_DOTS_PER_EF: f64 = 24.0;

/// A node id with its similarity to the query. Ordered by similarity, ties by the lower id,
/// so every search and every build is deterministic.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scored {
    pub(super) sim: f32,
    pub(super) id: u32,
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sim
            .total_cmp(&other.sim)
            .then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

/// The `k` best of what it is offered.
pub(super) struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Scored>>,
}

impl TopK {
    pub(super) fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    #[inline]
    pub(super) fn offer(&mut self, s: Scored) {
        if self.heap.len() < self.k {
            self.heap.push(Reverse(s));
        } else if let Some(mut worst) = self.heap.peek_mut()
            && s > worst.0
        {
            *worst = Reverse(s);
        }
    }

    /// The worst of the kept ones.
    pub(super) fn worst(&self) -> Option<Scored> {
        self.heap.peek().map(|r| r.0)
    }

    /// Best first.
    pub(super) fn into_sorted(self) -> Vec<Scored> {
        // Ascending `Reverse` is descending similarity.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| r.0)
            .collect()
    }
}

/// An approximate nearest-neighbour index of L2-normalised vectors by cosine similarity (dot
/// product): a hierarchical navigable small world graph (HNSW) over int8-quantized vectors,
/// searched exactly below a size threshold and for selective filters.
///
/// Ids are dense (`0..len()`), assigned by the caller in insertion order. Nothing is ever
/// deleted: a hidden entry is excluded by the search filter.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorIndex {
    pub(super) dims: usize,
    pub(super) m: usize,
    pub(super) ef_construction: usize,
    /// SplitMix64 state; draws node levels.
    pub(super) rng: u64,
    /// Quantized components, `dims` per node.
    pub(super) vectors: Arena<i8>,
    /// Per-node quantization scale.
    pub(super) scales: Vec<f32>,
    /// Top layer of each node.
    pub(super) levels: Vec<u8>,
    /// Layer-0 links: per node `[count, link × 2m]`.
    pub(super) links0: Arena<u32>,
    /// Where a node's upper-layer records start in `upper` (`u32::MAX` for level 0 nodes).
    pub(super) upper_start: Vec<u32>,
    /// Upper-layer links: per node and layer 1..=level, `[count, link × m]`.
    pub(super) upper: Vec<u32>,
    pub(super) entry: Option<u32>,
    pub(super) max_level: u8,
    pub(super) ef_search: usize,
    pub(super) exact_threshold: usize,
}

/// How one search runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    Exact,
    Graph { ef: usize },
}

impl VectorIndex {
    /// An empty index of `dims`-dimensional vectors with the default parameters.
    pub fn new(dims: usize, seed: u64) -> Result<Self, VectorError> {
        Self::with_params(dims, IndexParams::with_seed(seed))
    }

    pub fn with_params(dims: usize, params: IndexParams) -> Result<Self, VectorError> {
        if dims == 0 || dims > MAX_DIMS {
            return Err(VectorError::Params(format!(
                "dims must be 1..={MAX_DIMS}, not {dims}"
            )));
        }
        if !(2..=MAX_M).contains(&params.m) {
            return Err(VectorError::Params(format!(
                "m must be 2..={MAX_M}, not {}",
                params.m
            )));
        }
        if params.ef_construction == 0 {
            return Err(VectorError::Params(
                "ef_construction must be positive".into(),
            ));
        }
        Ok(Self {
            dims,
            m: params.m,
            ef_construction: params.ef_construction,
            rng: params.seed,
            vectors: Arena::new(dims),
            scales: Vec::new(),
            levels: Vec::new(),
            links0: Arena::new(2 * params.m + 1),
            upper_start: Vec::new(),
            upper: Vec::new(),
            entry: None,
            max_level: 0,
            ef_search: DEFAULT_EF_SEARCH,
            exact_threshold: DEFAULT_EXACT_THRESHOLD,
        })
    }

    pub fn len(&self) -> usize {
        self.scales.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Candidates a graph search keeps (default 64; raised to `k` when `k` is larger). Not part
    /// of a snapshot.
    pub fn set_ef_search(&mut self, ef: usize) {
        self.ef_search = ef.max(1);
    }

    /// Indexes of at most this many vectors are searched exactly (default 1024). Not part of a
    /// snapshot.
    pub fn set_exact_threshold(&mut self, threshold: usize) {
        self.exact_threshold = threshold;
    }

    /// Bytes this index holds on the heap (capacities, not lengths).
    pub fn heap_bytes(&self) -> usize {
        self.vectors.heap_bytes()
            + self.links0.heap_bytes()
            + self.scales.capacity() * 4
            + self.levels.capacity()
            + self.upper_start.capacity() * 4
            + self.upper.capacity() * 4
    }

    /// The signs of node `id`'s components, one bit each (bit `i % 8` of byte `i / 8` set when
    /// component `i` is positive): the binary sketch per-request searches rank by.
    pub fn sign_bits(&self, id: u32) -> Option<Vec<u8>> {
        if id as usize >= self.len() {
            return None;
        }
        let mut out = vec![0u8; self.dims.div_ceil(8)];
        for (i, &q) in self.vectors.get(id as usize).iter().enumerate() {
            if q > 0 {
                out[i / 8] |= 1 << (i % 8);
            }
        }
        Some(out)
    }

    /// Adds the vector with the next id, which must be `len()`.
    pub fn insert(&mut self, id: u32, vector: &[f32]) -> Result<(), VectorError> {
        self.check(vector)?;
        if id as usize != self.len() || id == u32::MAX {
            return Err(VectorError::IdOutOfOrder {
                expected: self.len() as u32,
                got: id,
            });
        }
        let level = self.random_level();
        let upper_start = if level == 0 {
            u32::MAX
        } else {
            let start = self.upper.len();
            let end = start + usize::from(level) * (self.m + 1);
            if end >= u32::MAX as usize {
                return Err(VectorError::Params(
                    "the index is full (upper-layer links past 2^32)".into(),
                ));
            }
            self.upper.resize(end, 0);
            start as u32
        };
        let quantized = self.vectors.push_default();
        let scale = quantize_into(vector, quantized);
        self.scales.push(scale);
        self.levels.push(level);
        self.links0.push_default();
        self.upper_start.push(upper_start);
        self.link_new_node(id, level);
        Ok(())
    }

    /// `query` checked and quantized for a search of `k`; `None` when nothing can be found
    /// (`k` is 0 or the index is empty).
    fn quantized_query(
        &self,
        query: &[f32],
        k: usize,
    ) -> Result<Option<(Vec<i8>, f32)>, VectorError> {
        self.check(query)?;
        if k == 0 || self.is_empty() {
            return Ok(None);
        }
        let mut q = vec![0; self.dims];
        let scale = quantize_into(query, &mut q);
        Ok(Some((q, scale)))
    }

    /// The `k` allowed entries most similar to `query`, best first, as `(id, similarity)`.
    ///
    /// The filter applies before the limit: the result holds `k` entries whenever the filter
    /// allows that many. A filter that allows few entries (estimated from a sample of ids) is
    /// answered by an exact scan over them, so the result is the true top `k`; a looser one is
    /// applied inside the graph search, which walks through excluded nodes but keeps only
    /// allowed ones. Indexes at or below the exact threshold are always scanned.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<(u32, f32)>, VectorError> {
        let Some((q, scale)) = self.quantized_query(query, k)? else {
            return Ok(Vec::new());
        };
        let hits = match self.plan(k, filter) {
            Plan::Exact => self.scan(&q, scale, k, filter),
            Plan::Graph { ef } => {
                let hits = self.graph_search(&q, scale, k, ef, Some(filter));
                if hits.len() < k {
                    // Fewer allowed nodes were reachable than asked for: the scan finds all.
                    self.scan(&q, scale, k, filter)
                } else {
                    hits
                }
            }
        };
        Ok(hits.into_iter().map(|s| (s.id, s.sim)).collect())
    }

    /// [`search`](Self::search) by scanning every allowed entry: the exact top `k` under the
    /// quantized similarity.
    pub fn search_exact(
        &self,
        query: &[f32],
        k: usize,
        filter: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<(u32, f32)>, VectorError> {
        let Some((q, scale)) = self.quantized_query(query, k)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .scan(&q, scale, k, filter)
            .into_iter()
            .map(|s| (s.id, s.sim))
            .collect())
    }

    /// The graph search alone, with `ef` candidates: no exact scan for small indexes or
    /// selective filters, no fallback when it finds fewer than `k`. For measurements;
    /// [`search`](Self::search) picks the method.
    pub fn search_graph(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        filter: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<(u32, f32)>, VectorError> {
        self.check(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut q = vec![0; self.dims];
        let scale = quantize_into(query, &mut q);
        Ok(self
            .graph_search(&q, scale, k, ef.max(1), Some(filter))
            .into_iter()
            .map(|s| (s.id, s.sim))
            .collect())
    }

    fn check(&self, vector: &[f32]) -> Result<(), VectorError> {
        if vector.len() != self.dims {
            return Err(VectorError::Dimensions {
                expected: self.dims,
                got: vector.len(),
            });
        }
        match vector.iter().position(|x| !x.is_finite()) {
            Some(index) => Err(VectorError::NotFinite { index }),
            None => Ok(()),
        }
    }

    /// Exact when the index is small, or when scanning the entries the filter allows costs
    /// fewer dot products than a graph search that has to walk past the excluded ones.
    fn plan(&self, k: usize, filter: &dyn Fn(u32) -> bool) -> Plan {
        let n = self.len();
        let ef = self.ef_search.max(k);
        if n <= self.exact_threshold || n <= ef {
            return Plan::Exact;
        }
        let sample = n.min(FILTER_SAMPLE);
        let allowed = (0..sample)
            .filter(|&i| filter((i * n / sample) as u32))
            .count();
        if allowed == 0 {
            return Plan::Exact;
        }
        let share = allowed as f64 / sample as f64;
        let scan_cost = share * n as f64;
        let graph_cost = GRAPH_DOTS_PER_EF * ef as f64 / share;
        if scan_cost <= graph_cost {
            Plan::Exact
        } else {
            Plan::Graph { ef }
        }
    }

    /// Similarity of a quantized query (`q`, `scale`) to node `id`.
    #[inline]
    pub(super) fn sim(&self, q: &[i8], scale: f32, id: u32) -> f32 {
        let i = id as usize;
        dot_i8(q, self.vectors.get(i)) as f32 * self.scales[i] * scale
    }

    /// Similarity of two stored nodes.
    #[inline]
    pub(super) fn sim_nodes(&self, a: u32, b: u32) -> f32 {
        self.sim(self.vectors.get(a as usize), self.scales[a as usize], b)
    }

    fn scan(&self, q: &[i8], scale: f32, k: usize, filter: &dyn Fn(u32) -> bool) -> Vec<Scored> {
        let mut top = TopK::new(k);
        for (c, chunk) in self.vectors.chunks().enumerate() {
            let base = c * CHUNK;
            for (j, v) in chunk.chunks_exact(self.dims).enumerate() {
                let id = (base + j) as u32;
                if filter(id) {
                    let sim = dot_i8(q, v) as f32 * self.scales[base + j] * scale;
                    top.offer(Scored { sim, id });
                }
            }
        }
        top.into_sorted()
    }
}
