//! The three indexes under comparison, behind one small trait, all on the same int8 vectors
//! (one scale per vector) and the same cosine similarity.

use lore_engine::memory::vector::{IndexParams, VectorIndex, dot_i8, quantize};

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
pub const EF_CONSTRUCTION: usize = 128;

/// `m` and `ef_construction` for lore's index: `M` and `EF_CONSTRUCTION`, or natively the
/// `LORE_BENCH_M` and `LORE_BENCH_EFC` environment variables (for tuning).
fn lore_params() -> (usize, usize) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let var = |name: &str, default: usize| {
            std::env::var(name).map_or(default, |v| v.parse().expect("a number"))
        };
        (
            var("LORE_BENCH_M", M),
            var("LORE_BENCH_EFC", EF_CONSTRUCTION),
        )
    }
    #[cfg(target_arch = "wasm32")]
    {
        (M, EF_CONSTRUCTION)
    }
}

/// lore's own index, graph search only (the exact threshold is off so the graph is measured).
pub struct Lore(pub VectorIndex);

impl Lore {
    pub fn build(dims: usize, data: &[Vec<f32>], seed: u64) -> Self {
        let (m, ef_construction) = lore_params();
        let params = IndexParams {
            m,
            ef_construction,
            seed,
        };
        let mut index = VectorIndex::with_params(dims, params).expect("valid parameters");
        for (id, v) in data.iter().enumerate() {
            index.insert(id as u32, v).expect("valid vector");
        }
        Self(index)
    }
}

impl Candidate for Lore {
    fn search(&mut self, query: &[f32], k: usize, ef: usize) -> Vec<u32> {
        self.0
            .search_graph(query, k, ef, &|_| true)
            .expect("valid query")
            .into_iter()
            .map(|h| h.0)
            .collect()
    }

    fn snapshot_restore(&self, now: &dyn Fn() -> f64) -> Option<(usize, f64)> {
        let bytes = self.0.snapshot();
        let start = now();
        let restored = VectorIndex::restore(&bytes).expect("own snapshot");
        let secs = now() - start;
        assert_eq!(restored.len(), self.0.len());
        Some((bytes.len(), secs))
    }

    fn reported_heap(&self) -> Option<usize> {
        Some(self.0.heap_bytes())
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
