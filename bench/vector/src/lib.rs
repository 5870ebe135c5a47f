//! The vector search comparison (bench/vector.sh): lore's sketch scan with exact reranking
//! beside the HNSW graphs of `hnsw_rs` 0.3.5 (native only) and rust-cv `hnsw` 0.11, on the same
//! seeded data, in one binary, natively and as wasm32 under V8 (node). Prints markdown tables.

pub mod candidates;
pub mod data;
pub mod quantize;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use candidates::Candidate;
use data::{Distribution, Generator};

/// Counts the bytes allocated and not yet freed, so every candidate's memory is measured the
/// same way (the indexes that cannot report their own size included).
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// What differs between native and wasm: the clock and where lines go.
pub trait Env {
    /// Seconds of CPU time this thread (natively) or process (under node) has used.
    fn now(&self) -> f64;
    fn emit(&self, line: &str);
}

pub const DIMS: usize = 384;
pub const K: usize = 10;
const SEED: u64 = 42;
const EFS: [usize; 6] = [16, 32, 64, 128, 256, 512];

fn mb(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

/// p50 and p99 of `times` (seconds), in µs.
fn percentiles(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)] * 1e6;
    (at(50), at(99))
}

/// Base vectors flattened, for the f32 brute force.
struct Flat {
    values: Vec<f32>,
}

impl Flat {
    fn new(data: &[Vec<f32>]) -> Self {
        Self {
            values: data.iter().flatten().copied().collect(),
        }
    }

    /// Exact top `k` by f32 dot product (8 accumulators so it vectorises), allowed ids only.
    fn top(&self, q: &[f32], k: usize, allowed: &dyn Fn(u32) -> bool) -> Vec<u32> {
        let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
        for (id, v) in self.values.chunks_exact(q.len()).enumerate() {
            if !allowed(id as u32) {
                continue;
            }
            let mut acc = [0f32; 8];
            for (a, b) in v.chunks_exact(8).zip(q.chunks_exact(8)) {
                for i in 0..8 {
                    acc[i] += a[i] * b[i];
                }
            }
            let sim: f32 = acc.iter().sum();
            if best.len() < k || sim > best[best.len() - 1].0 {
                let at = best.partition_point(|&(s, _)| s >= sim);
                best.insert(at, (sim, id as u32));
                best.truncate(k);
            }
        }
        best.into_iter().map(|(_, id)| id).collect()
    }
}

fn recall(truth: &[Vec<u32>], got: &[Vec<u32>]) -> f64 {
    let hits: usize = truth
        .iter()
        .zip(got)
        .map(|(t, g)| g.iter().filter(|id| t.contains(id)).count())
        .sum();
    hits as f64 / (truth.len() * K) as f64
}

/// Data and the exact answers every candidate is held to.
struct Setup {
    data: Vec<Vec<f32>>,
    queries: Vec<Vec<f32>>,
    truth: Vec<Vec<u32>>,
    brute_p50: f64,
    brute_p99: f64,
}

fn setup(env: &dyn Env, dist: Distribution, n: usize, queries: usize) -> Setup {
    let mut generator = Generator::new(dist, DIMS, SEED);
    let data = generator.take(n);
    // Held out: later draws of the same distribution.
    let queries = generator.take(queries);
    let flat = Flat::new(&data);
    let mut times = Vec::new();
    let truth = queries
        .iter()
        .map(|q| {
            let start = env.now();
            let top = flat.top(q, K, &|_| true);
            times.push(env.now() - start);
            top
        })
        .collect();
    let (brute_p50, brute_p99) = percentiles(&mut times);
    Setup {
        data,
        queries,
        truth,
        brute_p50,
        brute_p99,
    }
}

/// Cosine of random pairs and of each query's nearest neighbour: what the data looks like.
fn describe(env: &dyn Env, s: &Setup, dist: Distribution) {
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let pairs = 2000.min(s.data.len() / 2);
    let random: f32 = (0..pairs)
        .map(|i| dot(&s.data[2 * i], &s.data[2 * i + 1]))
        .sum::<f32>()
        / pairs as f32;
    let nearest: f32 = s
        .queries
        .iter()
        .zip(&s.truth)
        .map(|(q, t)| dot(q, &s.data[t[0] as usize]))
        .sum::<f32>()
        / s.queries.len() as f32;
    let tenth: f32 = s
        .queries
        .iter()
        .zip(&s.truth)
        .map(|(q, t)| dot(q, &s.data[t[K - 1] as usize]))
        .sum::<f32>()
        / s.queries.len() as f32;
    env.emit(&format!(
        "\n{} n={}: mean cosine of random pairs {random:.3}, query to its nearest {nearest:.3}, to its 10th {tenth:.3}",
        dist.name(),
        s.data.len()
    ));
}

struct Built<C> {
    index: C,
    build_secs: f64,
    heap: usize,
}

fn build<C>(env: &dyn Env, make: impl FnOnce() -> C) -> Built<C> {
    let before = live_bytes();
    let start = env.now();
    let index = make();
    let build_secs = env.now() - start;
    let heap = live_bytes().saturating_sub(before);
    Built {
        index,
        build_secs,
        heap,
    }
}

fn measure<C: Candidate>(env: &dyn Env, name: &str, s: &Setup, built: Built<C>, scan_p50: f64) {
    let Built {
        mut index,
        build_secs,
        heap,
    } = built;
    let n = s.data.len();
    let own = index
        .reported_heap()
        .map_or(String::new(), |b| format!(" (own count {} MB)", mb(b)));
    let snapshot = index
        .snapshot_restore(&|| env.now())
        .map_or("no byte snapshot".to_string(), |(bytes, secs)| {
            format!("snapshot {} MB, restore {:.0} ms", mb(bytes), secs * 1e3)
        });
    env.emit(&format!(
        "BUILD | {name} | {n} | build {build_secs:.2} s | heap {} MB{own} | {snapshot}",
        mb(heap)
    ));
    for ef in EFS {
        for q in s.queries.iter().take(50) {
            index.search(q, K, ef);
        }
        let mut times = Vec::with_capacity(s.queries.len());
        let got: Vec<Vec<u32>> = s
            .queries
            .iter()
            .map(|q| {
                let start = env.now();
                let r = index.search(q, K, ef);
                times.push(env.now() - start);
                r
            })
            .collect();
        let (p50, p99) = percentiles(&mut times);
        env.emit(&format!(
            "| {name} | {n} | {ef} | {p50:.1} | {p99:.1} | {:.3} | {:.0}× | {:.0}× |",
            recall(&s.truth, &got),
            scan_p50 / p50,
            s.brute_p50 / p50,
        ));
    }
}

/// Which candidates to run.
#[derive(Debug, Clone, Copy)]
pub struct Only {
    pub lore: bool,
    pub hnsw_rs: bool,
    pub rust_cv: bool,
}

/// Every candidate on one distribution and size: build, memory, snapshot, then search at
/// several `ef` against the f32 brute force of the same binary.
pub fn compare(env: &dyn Env, dist: Distribution, n: usize, queries: usize, only: Only) {
    let s = setup(env, dist, n, queries);
    describe(env, &s, dist);
    env.emit(&format!(
        "| f32 brute force | {n} | – | {:.1} | {:.1} | 1.000 | | 1× |",
        s.brute_p50, s.brute_p99
    ));
    // The int8 exact scan: the speed baseline.
    let scan = candidates::Int8Scan::build(&s.data);
    let mut times = Vec::new();
    let got: Vec<Vec<u32>> = s
        .queries
        .iter()
        .map(|q| {
            let start = env.now();
            let r = scan.search(q, K, &|_| true);
            times.push(env.now() - start);
            r.into_iter().map(|h| h.0).collect()
        })
        .collect();
    drop(scan);
    let (scan_p50, scan_p99) = percentiles(&mut times);
    env.emit(&format!(
        "| int8 exact scan | {n} | – | {scan_p50:.1} | {scan_p99:.1} | {:.3} | 1× | {:.0}× |",
        recall(&s.truth, &got),
        s.brute_p50 / scan_p50
    ));
    if only.lore {
        let lore = build(env, || candidates::Lore::build(DIMS, &s.data));
        measure(env, "lore", &s, lore, scan_p50);
    }
    if only.rust_cv {
        let built = build(env, || candidates::RustCv::build(&s.data, SEED));
        measure(env, "hnsw 0.11", &s, built, scan_p50);
    }
    #[cfg(not(target_arch = "wasm32"))]
    if only.hnsw_rs {
        let built = build(env, || {
            candidates::hnsw_rs_candidate::HnswRs::build(&s.data)
        });
        measure(env, "hnsw_rs 0.3.5", &s, built, scan_p50);
    }
}

/// lore's search beside the int8 exact scan at growing sizes (120 sketches reranked, as lore
/// does for 10 results): how the cost of the sketch scan grows with the org.
pub fn threshold(env: &dyn Env, dist: Distribution, queries: usize) {
    env.emit(&format!(
        "\nthreshold, {}: | n | int8 scan p50 µs | lore p50 µs (120 reranked) | lore recall@10 |",
        dist.name()
    ));
    for n in [500, 1000, 2000, 4000, 8000, 16000, 32000] {
        let s = setup(env, dist, n, queries);
        let scan = candidates::Int8Scan::build(&s.data);
        let lore = candidates::Lore::build(DIMS, &s.data);
        let time = |f: &dyn Fn(&[f32]) -> Vec<u32>| {
            let mut times = Vec::new();
            let got: Vec<Vec<u32>> = s
                .queries
                .iter()
                .map(|q| {
                    let start = env.now();
                    let r = f(q);
                    times.push(env.now() - start);
                    r
                })
                .collect();
            (percentiles(&mut times).0, recall(&s.truth, &got))
        };
        let ids = |hits: Vec<(u32, f32)>| hits.into_iter().map(|h| h.0).collect::<Vec<_>>();
        let (scan_p50, _) = time(&|q| ids(scan.search(q, K, &|_| true)));
        let (lore_p50, r) = time(&|q| ids(lore.search_filtered(q, K, 120, &|_| true)));
        env.emit(&format!("| {n} | {scan_p50:.1} | {lore_p50:.1} | {r:.3} |"));
    }
}

/// One way of searching, as the filter suite times it.
type Search<'a> = dyn Fn(&[f32]) -> Vec<(u32, f32)> + 'a;

/// A filter allowing about `per_mille`/1000 of the ids, spread like a hash.
fn allows(id: u32, per_mille: u64) -> bool {
    let h = (u64::from(id) ^ 0x5851_F42D_4C95_7F2D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) % 1000 < per_mille
}

/// Filtered search at several selectivities: lore (the filter applied before the sketches are
/// cut, 120 reranked) and the int8 exact scan, against the filtered f32 brute force.
pub fn filters(env: &dyn Env, dist: Distribution, n: usize, queries: usize) {
    let s = setup(env, dist, n, queries);
    let lore = candidates::Lore::build(DIMS, &s.data);
    let scan = candidates::Int8Scan::build(&s.data);
    let flat = Flat::new(&s.data);
    env.emit(&format!(
        "\nfilters, {} n={n}: | allowed | lore p50 µs | recall | int8 scan p50 µs | recall |",
        dist.name()
    ));
    for per_mille in [500, 200, 100, 50, 20, 10, 2] {
        let filter = move |id: u32| allows(id, per_mille);
        let truth: Vec<Vec<u32>> = s.queries.iter().map(|q| flat.top(q, K, &filter)).collect();
        let time = |f: &Search| {
            let mut times = Vec::new();
            let got: Vec<Vec<u32>> = s
                .queries
                .iter()
                .map(|q| {
                    let start = env.now();
                    let r = f(q);
                    times.push(env.now() - start);
                    assert!(r.iter().all(|h| filter(h.0)));
                    r.into_iter().map(|h| h.0).collect()
                })
                .collect();
            (percentiles(&mut times).0, recall(&truth, &got))
        };
        let (lore_p50, lore_recall) = time(&|q| lore.search_filtered(q, K, 120, &filter));
        let (scan_p50, scan_recall) = time(&|q| scan.search(q, K, &filter));
        env.emit(&format!(
            "| {:.1}% | {lore_p50:.1} | {lore_recall:.3} | {scan_p50:.1} | {scan_recall:.3} |",
            per_mille as f64 / 10.0
        ));
    }
}

#[cfg(target_arch = "wasm32")]
mod wasm;
