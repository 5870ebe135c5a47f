//! The three vector searches under comparison, behind one small trait, all ranking by the
//! cosine similarity of int8 vectors (one scale per vector).

use crate::quantize::{dot_i8, quantize};
use lore_memory::vector::{
    Codes, Exact, GROUPED_SCAN, candidates, cluster, cluster_cap, encode, sign_bits,
};

pub trait Candidate {
    fn search(&mut self, query: &[f32], k: usize, ef: usize) -> Vec<u32>;
    /// Bytes through which the index persists, with the time it takes to restore them
    /// (`None` when it cannot persist to bytes).
    fn snapshot_restore(&self, now: &dyn Fn() -> f64) -> Option<(usize, f64)>;
    /// What the index says it holds, when it can say.
    fn reported_heap(&self) -> Option<usize> {
        None
    }
}

pub const M: usize = 16;
/// Documents per segment when lore's sketches are grouped (the product's segments grow by
/// tiers of 4 from 32 events; their sizes vary).
const SEGMENT: usize = 131_072;
pub const EF_CONSTRUCTION: usize = 128;

/// lore's vector half (crates/engine/src/memory/vector.rs): one sign bit per dimension per
/// vector, every sketch ranked by Hamming distance to the query's, the nearest `ef` ranked
/// exactly on their int8 vectors as lore stores them. (A search for 10 results in lore reranks
/// 4 × 30 = 120.)
pub struct Lore {
    codes: Codes,
    stored: Vec<Vec<u8>>,
}

impl Lore {
    pub fn build(dims: usize, data: &[Vec<f32>]) -> Self {
        let mut codes = Codes::new(dims);
        let mut stored = Vec::with_capacity(data.len());
        for (id, v) in data.iter().enumerate() {
            codes.set(id as u32, &sign_bits(v));
            stored.push(encode(std::slice::from_ref(v)));
        }
        // Past the size where lore reads only the nearest clusters, group the sketches as the
        // segments store them: each segment's clustered apart (here segments of 131,072).
        if data.len() > GROUPED_SCAN {
            let code_len = dims.div_ceil(8);
            for start in (0..data.len()).step_by(SEGMENT) {
                let end = (start + SEGMENT).min(data.len());
                let refs: Vec<&[u8]> = (start..end)
                    .map(|d| codes.get(d as u32).expect("set above"))
                    .collect();
                for (centroid, members) in cluster(&refs, cluster_cap(code_len)) {
                    let docs: Vec<u32> = members.iter().map(|i| start as u32 + i).collect();
                    codes.add_group(&centroid, &docs);
                }
            }
            codes.settle();
        }
        Self { codes, stored }
    }

    /// The `k` best of the `ef` nearest sketches allowed by `filter`, best first.
    pub fn search_filtered(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        filter: &dyn Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let near = candidates(&self.codes, query, ef.max(k), filter);
        let exact = Exact::new(query);
        let mut ranked: Vec<(u32, f32)> = near
            .into_iter()
            .filter_map(|id| {
                exact
                    .similarity(&self.stored[id as usize])
                    .map(|s| (id, s as f32))
            })
            .collect();
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0));
        if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, order);
            ranked.truncate(k);
        }
        ranked.sort_by(order);
        ranked
    }
}

impl Candidate for Lore {
    fn search(&mut self, query: &[f32], k: usize, ef: usize) -> Vec<u32> {
        self.search_filtered(query, k, ef, &|_| true)
            .into_iter()
            .map(|h| h.0)
            .collect()
    }

    fn snapshot_restore(&self, _: &dyn Fn() -> f64) -> Option<(usize, f64)> {
        // lore stores the sketches in its index segments and each vector beside its event;
        // nothing is restored, the sketches are read as they are.
        None
    }

    fn reported_heap(&self) -> Option<usize> {
        Some(self.codes.heap_bytes() + self.stored.iter().map(Vec::capacity).sum::<usize>())
    }
}

/// The int8 exact scan: every vector quantized with one scale, the true top `k` under that
/// similarity (the speed baseline).
pub struct Int8Scan {
    dims: usize,
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl Int8Scan {
    pub fn build(data: &[Vec<f32>]) -> Self {
        let dims = data.first().map_or(0, Vec::len);
        let mut values = Vec::with_capacity(data.len() * dims);
        let mut scales = Vec::with_capacity(data.len());
        for v in data {
            let (scale, q) = quantize(v);
            values.extend_from_slice(&q);
            scales.push(scale);
        }
        Self {
            dims,
            values,
            scales,
        }
    }

    pub fn search(&self, query: &[f32], k: usize, filter: &dyn Fn(u32) -> bool) -> Vec<(u32, f32)> {
        let (qs, q) = quantize(query);
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
        for (id, v) in self.values.chunks_exact(self.dims).enumerate() {
            let id = id as u32;
            if !filter(id) {
                continue;
            }
            let sim = dot_i8(&q, v) as f32 * qs * self.scales[id as usize];
            if best.len() < k || sim > best[best.len() - 1].1 {
                let at = best.partition_point(|&(_, s)| s >= sim);
                best.insert(at, (id, sim));
                best.truncate(k);
            }
        }
        best
    }
}

/// A quantized vector as one owned value (what rust-cv `hnsw` stores per feature).
#[derive(Clone)]
pub struct Quantized {
    scale: f32,
    v: Box<[i8]>,
}

impl Quantized {
    pub fn new(vector: &[f32]) -> Self {
        let (scale, v) = quantize(vector);
        Self {
            scale,
            v: v.into_boxed_slice(),
        }
    }
}

/// `1 - cosine` as the bits of a non-negative float, which order like the floats.
pub struct CosineBits;

impl space::Metric<Quantized> for CosineBits {
    type Unit = u32;
    fn distance(&self, a: &Quantized, b: &Quantized) -> u32 {
        let sim = dot_i8(&a.v, &b.v) as f32 * a.scale * b.scale;
        (1.0 - sim).max(0.0).to_bits()
    }
}

type RustCvHnsw = hnsw::Hnsw<CosineBits, Quantized, rand_pcg::Pcg64, 16, 32>;

/// rust-cv `hnsw` 0.11 (builds for every target).
pub struct RustCv {
    index: RustCvHnsw,
    searcher: hnsw::Searcher<u32>,
}

impl RustCv {
    pub fn build(data: &[Vec<f32>], seed: u64) -> Self {
        let params = hnsw::Params::new().ef_construction(EF_CONSTRUCTION);
        let mut index = RustCvHnsw::new_params_and_prng(
            CosineBits,
            params,
            rand_pcg::Pcg64::new(u128::from(seed), 0x0a02_bdbf_7bb3_c0a7_ac28_fa16_a64a_bf96),
        );
        let mut searcher = hnsw::Searcher::default();
        for v in data {
            index.insert(Quantized::new(v), &mut searcher);
        }
        Self { index, searcher }
    }
}

impl Candidate for RustCv {
    fn search(&mut self, query: &[f32], k: usize, ef: usize) -> Vec<u32> {
        let q = Quantized::new(query);
        let mut dest = vec![
            space::Neighbor {
                index: !0,
                distance: !0
            };
            k
        ];
        self.index
            .nearest(&q, ef.max(k), &mut self.searcher, &mut dest)
            .iter()
            .map(|n| n.index as u32)
            .collect()
    }

    fn snapshot_restore(&self, _: &dyn Fn() -> f64) -> Option<(usize, f64)> {
        // Only through serde (feature "serde") and a format crate of one's choice.
        None
    }
}

/// `hnsw_rs` 0.3.5 (native only) with an int8 cosine distance; each stored vector carries its
/// scale in its first four bytes.
#[cfg(not(target_arch = "wasm32"))]
pub mod hnsw_rs_candidate {
    use super::*;
    use hnsw_rs::prelude::{Distance, Hnsw};

    pub struct DotI8;

    fn split(v: &[i8]) -> (f32, &[i8]) {
        let bytes = [v[0] as u8, v[1] as u8, v[2] as u8, v[3] as u8];
        (f32::from_le_bytes(bytes), &v[4..])
    }

    impl Distance<i8> for DotI8 {
        fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
            let ((sa, va), (sb, vb)) = (split(a), split(b));
            (1.0 - dot_i8(va, vb) as f32 * sa * sb).max(0.0)
        }
    }

    fn encode(vector: &[f32]) -> Vec<i8> {
        let (scale, q) = quantize(vector);
        let mut out: Vec<i8> = scale.to_le_bytes().iter().map(|&b| b as i8).collect();
        out.extend_from_slice(&q);
        out
    }

    pub struct HnswRs(Hnsw<'static, i8, DotI8>);

    impl HnswRs {
        pub fn build(data: &[Vec<f32>]) -> Self {
            let index = Hnsw::new(M, data.len(), 16, EF_CONSTRUCTION, DotI8);
            for (id, v) in data.iter().enumerate() {
                index.insert_slice((&encode(v), id));
            }
            Self(index)
        }
    }

    impl Candidate for HnswRs {
        fn search(&mut self, query: &[f32], k: usize, ef: usize) -> Vec<u32> {
            self.0
                .search(&encode(query), k, ef.max(k))
                .into_iter()
                .map(|n| n.d_id as u32)
                .collect()
        }

        fn snapshot_restore(&self, _: &dyn Fn() -> f64) -> Option<(usize, f64)> {
            // `file_dump` writes two files; there is no dump to bytes.
            None
        }
    }
}
