//! Behaviour of the vector index on small seeded data.

use super::*;

const DIMS: usize = 48;

/// SplitMix64, for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// A standard normal (Box–Muller).
    fn normal(&mut self) -> f32 {
        let u = self.unit().max(1e-7);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// `n` unit vectors around 40 random centres.
fn clustered(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed);
    let centres: Vec<Vec<f32>> = (0..40)
        .map(|_| (0..DIMS).map(|_| rng.normal()).collect())
        .collect();
    (0..n)
        .map(|_| {
            let c = &centres[(rng.next() % 40) as usize];
            normalised(c.iter().map(|x| x + 0.7 * rng.normal()).collect())
        })
        .collect()
}

fn build(vectors: &[Vec<f32>], seed: u64) -> VectorIndex {
    let mut index = VectorIndex::with_params(
        DIMS,
        IndexParams {
            m: 8,
            ef_construction: 64,
            seed,
        },
    )
    .unwrap();
    for (id, v) in vectors.iter().enumerate() {
        index.insert(id as u32, v).unwrap();
    }
    index
}

fn all(_: u32) -> bool {
    true
}

fn ids(hits: &[(u32, f32)]) -> Vec<u32> {
    hits.iter().map(|h| h.0).collect()
}

#[test]
fn graph_search_recalls_the_exact_top_10() {
    let data = clustered(2000, 1);
    let mut index = build(&data, 7);
    index.set_exact_threshold(0);
    index.set_ef_search(128);
    let queries = clustered(100, 2);
    let mut hit = 0;
    for q in &queries {
        let exact = ids(&index.search_exact(q, 10, &all).unwrap());
        let approx = ids(&index.search(q, 10, &all).unwrap());
        assert_eq!(approx.len(), 10);
        hit += approx.iter().filter(|id| exact.contains(id)).count();
    }
    let recall = hit as f64 / 1000.0;
    assert!(recall >= 0.95, "recall@10 = {recall}");
}

#[test]
fn results_are_best_first_with_quantized_cosine() {
    let data = clustered(500, 3);
    let index = build(&data, 7);
    let hits = index.search(&data[17], 5, &all).unwrap();
    assert_eq!(hits[0].0, 17);
    assert!((hits[0].1 - 1.0).abs() < 0.01, "{}", hits[0].1);
    assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
}

#[test]
fn a_selective_filter_gives_the_exact_filtered_top_k() {
    let data = clustered(2500, 4);
    let mut index = build(&data, 7);
    index.set_exact_threshold(0);
    let queries = clustered(30, 5);
    for modulus in [7u32, 50, 400, 2499] {
        let filter = move |id: u32| id % modulus == 3;
        for q in &queries {
            let exact = index.search_exact(q, 10, &filter).unwrap();
            let got = index.search(q, 10, &filter).unwrap();
            assert_eq!(got.len(), exact.len().min(10));
            assert!(got.iter().all(|h| filter(h.0)));
            if modulus >= 50 {
                assert_eq!(got, exact, "modulus {modulus}");
            }
        }
    }
}

#[test]
fn a_loose_filter_keeps_k_allowed_results_and_recall() {
    let data = clustered(2500, 6);
    let mut index = build(&data, 7);
    index.set_exact_threshold(0);
    let queries = clustered(50, 8);
    let filter = |id: u32| id.is_multiple_of(2);
    let mut hit = 0;
    for q in &queries {
        let exact = ids(&index.search_exact(q, 10, &filter).unwrap());
        let got = ids(&index.search(q, 10, &filter).unwrap());
        assert_eq!(got.len(), 10);
        assert!(got.iter().all(|&id| filter(id)));
        hit += got.iter().filter(|id| exact.contains(id)).count();
    }
    assert!(
        hit as f64 / 500.0 >= 0.95,
        "recall@10 = {}",
        hit as f64 / 500.0
    );
}

#[test]
fn a_filter_that_allows_nothing_finds_nothing() {
    let data = clustered(1500, 9);
    let mut index = build(&data, 7);
    index.set_exact_threshold(0);
    assert!(index.search(&data[0], 10, &|_| false).unwrap().is_empty());
}

#[test]
fn snapshot_round_trip_restores_an_equal_index() {
    let data = clustered(1500, 10);
    let index = build(&data, 7);
    let bytes = index.snapshot();
    let restored = VectorIndex::restore(&bytes).unwrap();
    assert_eq!(restored, index);
    assert_eq!(restored.snapshot(), bytes);
    assert_eq!(
        restored.search(&data[3], 10, &all).unwrap(),
        index.search(&data[3], 10, &all).unwrap()
    );
    // Inserting after a restore continues exactly as the original would (the seed's state is kept).
    let more = clustered(200, 11);
    let (mut a, mut b) = (index, restored);
    for (i, v) in more.iter().enumerate() {
        let id = (1500 + i) as u32;
        a.insert(id, v).unwrap();
        b.insert(id, v).unwrap();
    }
    assert_eq!(a.snapshot(), b.snapshot());
}

#[test]
fn the_same_seed_builds_the_same_bytes() {
    let data = clustered(800, 12);
    assert_eq!(build(&data, 5).snapshot(), build(&data, 5).snapshot());
    assert_ne!(build(&data, 5).snapshot(), build(&data, 6).snapshot());
}

#[test]
fn corrupt_snapshots_are_errors_not_panics() {
    let data = clustered(1100, 13);
    let bytes = build(&data, 7).snapshot();
    let is_snapshot_error =
        |b: &[u8]| matches!(VectorIndex::restore(b), Err(VectorError::Snapshot(_)));

    for len in [
        0,
        7,
        8,
        43,
        44,
        51,
        52,
        1000,
        bytes.len() / 2,
        bytes.len() - 1,
    ] {
        assert!(is_snapshot_error(&bytes[..len]), "truncated to {len}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(is_snapshot_error(&longer));
    for at in (0..bytes.len())
        .step_by(997)
        .chain([8, 12, 16, 24, 28, 36, bytes.len() - 1])
    {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x10;
        assert!(is_snapshot_error(&flipped), "bit flipped at {at}");
    }
    let mut future = bytes.clone();
    future[8..12].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(
        VectorIndex::restore(&future),
        Err(VectorError::Snapshot(
            "format version 2, this build reads version 1".into()
        ))
    );
}

/// Bytes with a valid checksum but an impossible graph (a forged or buggy writer).
#[test]
fn forged_snapshots_with_a_valid_checksum_are_errors() {
    let data = clustered(300, 14);
    let index = build(&data, 7);
    let bytes = index.snapshot();
    let reseal = |mut b: Vec<u8>| {
        let body = b.len() - 8;
        let sum = snapshot::checksum(&b[..body]);
        b[body..].copy_from_slice(&sum.to_le_bytes());
        b
    };
    let n = 300;
    let links0 = 44 + n * (4 + 1 + DIMS);
    type Forge = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Forge)> = vec![
        (
            "link past the end",
            Box::new(move |b| b[links0 + 4..links0 + 8].copy_from_slice(&(n as u32).to_le_bytes())),
        ),
        (
            "too many links",
            Box::new(move |b| b[links0..links0 + 4].copy_from_slice(&99u32.to_le_bytes())),
        ),
        (
            "entry out of range",
            Box::new(|b| b[28..32].copy_from_slice(&5000u32.to_le_bytes())),
        ),
        (
            "count larger than the body",
            Box::new(|b| b[24..28].copy_from_slice(&u32::MAX.to_le_bytes())),
        ),
        (
            "huge dims",
            Box::new(|b| b[12..16].copy_from_slice(&u32::MAX.to_le_bytes())),
        ),
        (
            "negative scale",
            Box::new(|b| b[44..48].copy_from_slice(&(-1f32).to_le_bytes())),
        ),
        ("level above the top", Box::new(move |b| b[44 + 4 * n] = 17)),
    ];
    for (what, forge) in cases {
        let mut b = bytes.clone();
        forge(&mut b);
        assert!(
            matches!(
                VectorIndex::restore(&reseal(b)),
                Err(VectorError::Snapshot(_))
            ),
            "{what}"
        );
    }
    assert_eq!(VectorIndex::restore(&reseal(bytes)).unwrap(), index);
}

#[test]
fn an_empty_index_searches_and_snapshots() {
    let index = VectorIndex::new(DIMS, 1).unwrap();
    assert!(index.is_empty());
    assert_eq!(index.len(), 0);
    assert_eq!(index.dims(), DIMS);
    assert!(index.search(&[0.1; DIMS], 10, &all).unwrap().is_empty());
    let restored = VectorIndex::restore(&index.snapshot()).unwrap();
    assert_eq!(restored, index);
    assert!(index.search(&[0.1; DIMS], 0, &all).unwrap().is_empty());
}

#[test]
fn wrong_dimensions_ids_and_values_are_errors() {
    let mut index = VectorIndex::new(DIMS, 1).unwrap();
    let wrong = vec![0.1; DIMS + 1];
    assert_eq!(
        index.insert(0, &wrong),
        Err(VectorError::Dimensions {
            expected: DIMS,
            got: DIMS + 1
        })
    );
    assert!(matches!(
        index.search(&wrong, 3, &all),
        Err(VectorError::Dimensions { .. })
    ));
    assert_eq!(
        index.insert(1, &[0.1; DIMS]),
        Err(VectorError::IdOutOfOrder {
            expected: 0,
            got: 1
        })
    );
    let mut nan = vec![0.1; DIMS];
    nan[5] = f32::NAN;
    assert_eq!(
        index.insert(0, &nan),
        Err(VectorError::NotFinite { index: 5 })
    );
    assert!(index.is_empty());
    index.insert(0, &[0.1; DIMS]).unwrap();
    assert!(matches!(
        index.insert(0, &[0.1; DIMS]),
        Err(VectorError::IdOutOfOrder { .. })
    ));
    assert!(matches!(
        VectorIndex::new(0, 1),
        Err(VectorError::Params(_))
    ));
}

#[test]
fn heap_bytes_counts_vectors_and_links() {
    let data = clustered(1000, 15);
    let index = build(&data, 7);
    // 1,000 × (48 bytes of components + 17 links words) at least.
    assert!(index.heap_bytes() >= 1000 * (DIMS + 17 * 4));
    assert!(index.heap_bytes() < 2 * 1024 * (DIMS + 17 * 4 + 16));
}
