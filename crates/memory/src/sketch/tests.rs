//! Sketches' formats, clustering and the recall of a clustered read.

use super::*;

/// The body of a flat sketch.
fn flat(e: Encoded) -> Vec<u8> {
    assert!(e.clusters.is_empty());
    e.body
}

/// A flat sketch of 9 dimensions decoded.
fn open(bytes: Vec<u8>, at: usize, docs: u32) -> Sketch {
    match decode(bytes, at, docs, 9).unwrap() {
        Stored::Flat(s) => s,
        Stored::Clustered(_) => panic!("clustered"),
    }
}

#[test]
fn sketches_round_trip_and_rank_by_sign_agreement() {
    let ids = [
        "evt_01jabcdefghjkmnpqrstvwxyz0",
        "custom-id",
        "evt_01jabcdefghjkmnpqrstvwxyz1",
    ];
    let v = [0.5, -0.1, 0.2, -0.3, 0.05, 0.9, -0.2, 0.1, 0.4];
    let a = sign_bits(&v);
    let b = sign_bits(&v.map(|x| -x));
    assert_eq!(a.len(), 2);
    assert_eq!(
        a,
        sign_bits(&v.map(|x| 3.0 * x)),
        "a sketch ignores the length"
    );
    assert_eq!(hamming(&a, &a), 0);
    assert_eq!(
        hamming(&a, &b),
        9,
        "the opposite vector differs in every bit"
    );
    let near = sign_bits(&[0.5, -0.1, 0.2, -0.3, 0.05, 0.9, -0.2, 0.1, 0.35]);
    assert!(hamming(&a, &near) < hamming(&a, &b));
    let docs = [
        (ids[0], Some(a.clone())),
        (ids[1], None),
        (ids[2], Some(b.clone())),
    ];
    let body = flat(encode(9, docs.clone().into_iter()));
    let s = open(body.clone(), 0, 3);
    assert_eq!(s.len(), 3);
    assert_eq!(s.code(0), Some(&a[..]));
    assert_eq!(s.code(1), None);
    assert_eq!(s.code(2), Some(&b[..]));
    assert_eq!(s.code(3), None);
    assert_eq!(s.id(0).as_deref(), Some(ids[0]));
    assert_eq!(s.id(1), None);
    assert_eq!(s.id(2).as_deref(), Some(ids[2]));
    assert_eq!(s.id(3), None);
    let codes: Vec<(u32, &[u8])> = s.codes().collect();
    assert_eq!(codes, vec![(0, &a[..]), (2, &b[..])]);
    // Read in place behind a prefix (a part's seal).
    let mut sealed = vec![9u8; 8];
    sealed.extend_from_slice(&body);
    let behind = open(sealed, 8, 3);
    assert_eq!(behind.code(2), Some(&b[..]));
    assert_eq!(behind.id(2).as_deref(), Some(ids[2]));
    // Every document with a code and an id: no rank tables, the same answers.
    let dense = [(ids[2], Some(b.clone())), (ids[0], Some(a.clone()))];
    let dense = open(flat(encode(9, dense.into_iter())), 0, 2);
    assert!(dense.codes.rank.is_none() && dense.ulids.rank.is_none());
    assert_eq!(dense.code(1), Some(&a[..]));
    assert_eq!(dense.id(1).as_deref(), Some(ids[0]));
    assert!(decode(body.clone(), 0, 4, 9).is_err());
    assert!(decode(body.clone(), 0, 3, 16).is_err());
    for cut in 0..body.len() {
        assert!(
            decode(body[..cut].to_vec(), 0, 3, 9).is_err(),
            "cut at {cut}"
        );
    }
    let mut longer = body.clone();
    longer.push(0);
    assert!(decode(longer, 0, 3, 9).is_err());
    let mut marked = body;
    marked[HEAD] |= 1 << 5;
    assert!(decode(marked, 0, 3, 9).is_err(), "a mark past the end");
}

/// A deterministic stream of numbers (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

#[test]
fn a_large_segment_is_clustered_and_every_sketch_is_in_one_cluster() {
    let dims = 256;
    let code_len = dims / 8;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Codes near one of 40 topics (a tenth of their bits flipped), some documents without
    // one, some ids not ULIDs.
    let topics: Vec<Vec<u8>> = (0..40)
        .map(|_| (0..code_len).map(|_| rng.next() as u8).collect())
        .collect();
    let n = CLUSTER_MIN + 1500;
    let mut ids = Vec::with_capacity(n);
    let mut codes = Vec::with_capacity(n);
    for d in 0..n {
        ids.push(if d % 97 == 5 {
            format!("custom-{d}")
        } else {
            event_id(u128::from(rng.next()) << 40 | d as u128)
        });
        let mut code = topics[(rng.next() % 40) as usize].clone();
        for _ in 0..26 {
            let b = (rng.next() % dims as u64) as usize;
            code[b / 8] ^= 1 << (b % 8);
        }
        codes.push((d % 31 != 3).then_some(code));
    }
    let docs = ids.iter().map(String::as_str).zip(codes.iter().cloned());
    let encoded = encode(dims, docs.clone());
    assert_eq!(encode(dims, docs).body, encoded.body, "deterministic");
    let Stored::Clustered(dir) = decode(encoded.body.clone(), 0, n as u32, dims).unwrap() else {
        panic!("a segment past CLUSTER_MIN is clustered")
    };
    assert_eq!(dir.clusters() as usize, encoded.clusters.len());
    let mut seen = vec![false; n];
    for (c, body) in encoded.clusters.iter().enumerate() {
        assert!(SEAL_HEAD + body.len() <= VALUE_CHUNK, "one stored chunk");
        let size = dir.size(c as u32);
        let cluster = decode_cluster(body.clone(), 0, size, n as u32, dims).unwrap();
        let centroid = &dir.centroids[c * code_len..(c + 1) * code_len];
        for (member, code) in cluster.sketch.codes() {
            let doc = cluster.docs[member as usize] as usize;
            assert!(!seen[doc], "document {doc} in two clusters");
            seen[doc] = true;
            assert_eq!(Some(code), codes[doc].as_deref());
            assert_eq!(
                cluster.sketch.id(member),
                ulid_bytes(&ids[doc]).map(|_| ids[doc].clone())
            );
            // Each sketch is in a cluster whose centroid is nearest it.
            let nearest = dir.nearest(code, 0)[0] as usize;
            let best = &dir.centroids[nearest * code_len..(nearest + 1) * code_len];
            assert_eq!(hamming(code, best), hamming(code, centroid));
        }
        // Wrong sizes, cuts and foreign documents are refused.
        assert!(decode_cluster(body.clone(), 0, size + 1, n as u32, dims).is_err());
        assert!(decode_cluster(body[..body.len() - 1].to_vec(), 0, size, n as u32, dims).is_err());
        assert!(
            decode_cluster(body.clone(), 0, size, cluster.docs[size as usize - 1], dims).is_err()
        );
    }
    for d in 0..n {
        assert_eq!(seen[d], codes[d].is_some(), "document {d}");
    }
    // Topics are found again: far fewer clusters than a random split would need per topic.
    let held = dir.nearest(&topics[7], CLUSTER_MIN / 40);
    assert!(held.len() <= 4, "{} clusters for one topic", held.len());
    let body = &encoded.body;
    for cut in [body.len() - 1, HEAD + 3, 5] {
        assert!(decode(body[..cut].to_vec(), 0, n as u32, dims).is_err());
    }
    assert!(decode(body.clone(), 0, n as u32 - 1, dims).is_err());
}

/// The best `want` of `docs` by their vectors' dot product with `query`, best first.
fn exact(
    vectors: &[Vec<f32>],
    query: &[f32],
    docs: impl Iterator<Item = u32>,
    want: usize,
) -> Vec<u32> {
    let mut ranked: Vec<(f32, u32)> = docs
        .map(|d| {
            let v = &vectors[d as usize];
            (v.iter().zip(query).map(|(a, b)| a * b).sum(), d)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.into_iter().take(want).map(|(_, d)| d).collect()
}

/// The probe's vector ranking (`probe.rs`) over the sketches of `docs`: the `keep` nearest
/// by Hamming distance, then the best `want` of those exactly.
fn probed(
    vectors: &[Vec<f32>],
    codes: &[Vec<u8>],
    query: &[f32],
    docs: impl Iterator<Item = u32>,
    (keep, want): (usize, usize),
) -> Vec<u32> {
    let bits = sign_bits(query);
    let mut near: Vec<(u32, u32)> = docs
        .map(|d| (hamming(&bits, &codes[d as usize]), d))
        .collect();
    near.sort_unstable();
    near.truncate(keep);
    exact(vectors, query, near.into_iter().map(|(_, d)| d), want)
}

/// On the built-in model's vectors of varied memories, a query that reads its nearest
/// clusters up to an eighth of the sketches finds about what a scan of all of them finds.
#[test]
fn clusters_read_up_to_a_share_find_what_the_whole_scan_finds() {
    let people = [
        "Alice", "Bogdan", "Chen", "Dalia", "Emeka", "Farah", "Hiroshi", "Ingrid", "Priya", "Sven",
    ];
    let teams = [
        "billing",
        "payments",
        "search",
        "infrastructure",
        "mobile",
        "growth",
        "security",
        "data platform",
        "identity",
        "analytics",
        "compliance",
        "support",
    ];
    let systems = [
        "the invoice generator",
        "the Postgres primary",
        "the Kafka cluster",
        "the Redis cache",
        "the GraphQL gateway",
        "the nightly ETL job",
        "the feature flag service",
        "the S3 archive",
        "the CI pipeline",
        "the webhook relay",
        "the audit log",
        "the SSO bridge",
        "the email dispatcher",
        "the PDF renderer",
        "the rate limiter",
        "the Snowflake warehouse",
        "the OAuth token store",
        "the tax calculation service",
    ];
    let tools = [
        "Linear",
        "Jira",
        "Notion",
        "Datadog",
        "PagerDuty",
        "Sentry",
        "Slack",
        "Airflow",
        "Vault",
        "Okta",
    ];
    let reasons = [
        "to cut cloud spend",
        "after the March outage",
        "because latency regressed",
        "to satisfy the auditors",
        "after a customer escalation",
        "to unblock the EU launch",
        "to halve build times",
        "to support failover",
    ];
    let prefs = [
        "dark mode in the admin console",
        "async standups",
        "written design docs",
        "squash merges",
        "TypeScript over JavaScript",
        "metric units in reports",
        "short weekly summaries",
        "pairing on risky migrations",
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let text = |rng: &mut Rng| match rng.next() % 5 {
        0 => format!(
            "{} for the {} team times out after {} minutes under load.",
            rng.pick(&systems),
            rng.pick(&teams),
            rng.next() % 90
        ),
        1 => format!(
            "The {} team decided to move {} to {} {}.",
            rng.pick(&teams),
            rng.pick(&systems),
            rng.pick(&tools),
            rng.pick(&reasons)
        ),
        2 => format!("{} prefers {}.", rng.pick(&people), rng.pick(&prefs)),
        3 => format!(
            "{} owns {} and is on call for {} this week.",
            rng.pick(&people),
            rng.pick(&systems),
            rng.pick(&teams)
        ),
        _ => format!(
            "Incident: {} failed {}; {} paged through {}.",
            rng.pick(&systems),
            rng.pick(&reasons),
            rng.pick(&people),
            rng.pick(&tools)
        ),
    };
    let model = lore_embed::builtin::BuiltinEmbedder::new();
    let n = 12_000;
    let vectors: Vec<Vec<f32>> = (0..n).map(|_| model.embed_text(&text(&mut rng))).collect();
    let codes: Vec<Vec<u8>> = vectors.iter().map(|v| sign_bits(v)).collect();
    let refs: Vec<&[u8]> = codes.iter().map(Vec::as_slice).collect();
    let groups = cluster(&refs, cluster_cap(refs[0].len()));
    let mut centroids = Vec::new();
    let mut sizes = Vec::new();
    for (c, m) in &groups {
        centroids.extend_from_slice(c);
        sizes.push(m.len() as u32);
    }
    let dir = Directory {
        code_len: refs[0].len(),
        centroids,
        sizes,
    };
    // As at 100,000 memories: PROBE_CODES of them, an eighth.
    let share = n / 8;
    let (keep, want) = (160, 10);
    let queries = 40;
    let (mut whole, mut clustered) = (0usize, 0usize);
    for _ in 0..queries {
        let q = model.embed_text(&text(&mut rng));
        let truth = exact(&vectors, &q, 0..n as u32, want);
        let all = probed(&vectors, &codes, &q, 0..n as u32, (keep, want));
        let read: Vec<u32> = dir
            .nearest(&sign_bits(&q), share)
            .into_iter()
            .flat_map(|c| groups[c as usize].1.iter().copied())
            .collect();
        assert!(
            read.len() < share + cluster_cap(32),
            "read {} sketches",
            read.len()
        );
        let part = probed(&vectors, &codes, &q, read.into_iter(), (keep, want));
        whole += all.iter().filter(|d| truth.contains(d)).count();
        clustered += part.iter().filter(|d| truth.contains(d)).count();
    }
    let recall = |found: usize| found as f64 / (queries * want) as f64;
    eprintln!(
        "recall@{want}: whole scan {:.3}, clusters {:.3}",
        recall(whole),
        recall(clustered)
    );
    assert!(
        recall(whole) > 0.5,
        "the sketches themselves rank: {}",
        recall(whole)
    );
    assert!(
        recall(clustered) >= recall(whole) - 0.05,
        "clusters {} vs whole {}",
        recall(clustered),
        recall(whole)
    );
}
