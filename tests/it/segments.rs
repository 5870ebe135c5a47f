//! The keyword index as stored segments (`lore_memory::segments`): a fresh instance
//! answers `search_memory` with the same number of storage reads whatever the org's size;
//! corrupt, foreign and stale segments are detected and replaced, never trusted; a failed
//! segment write loses nothing; and every segment key is the org's.

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::ports::{Background, Clock, Embedder, Ports};
use lore_base::storage::Storage;
use lore_base::storage::memory::MemoryStorage;
use lore_directory::Caller;
use lore_directory::admin;
use lore_front::{Config, IndexWork, Lore};
use lore_memory::segments::{Manifest, SEGMENT_EVENTS};
use lore_testing::faulty::FaultyStorage;
use lore_testing::ports::{Later, SeqRandom};

/// A clock that stands still: usage counters never come due mid-test, so reads counted are
/// the search's own.
struct StillClock;

impl Clock for StillClock {
    fn now_ms(&self) -> i64 {
        1_767_225_600_000
    }
}

/// A fresh instance (empty caches) over `store`, counting what it reads.
fn instance(store: Rc<dyn Storage>, seed: u64) -> (Lore, Rc<FaultyStorage>) {
    instance_with(store, seed, None)
}

/// [`instance`] with an embedder.
fn instance_with(
    store: Rc<dyn Storage>,
    seed: u64,
    embedder: Option<Rc<dyn Embedder>>,
) -> (Lore, Rc<FaultyStorage>) {
    built(store, seed, embedder, None)
}

/// A fresh instance over `store` with all its ports named.
fn built(
    store: Rc<dyn Storage>,
    seed: u64,
    embedder: Option<Rc<dyn Embedder>>,
    background: Option<Rc<dyn Background>>,
) -> (Lore, Rc<FaultyStorage>) {
    let counted = Rc::new(FaultyStorage::new(store));
    let ports = Ports {
        storage: counted.clone(),
        clock: Rc::new(StillClock),
        random: Rc::new(SeqRandom::seeded(seed)),
        http: None,
        embedder,
        cache: None,
        background,
    };
    (Lore::new(ports, Config::default()), counted)
}

fn owner(lore: &Lore) -> Caller {
    block_on(lore.local_caller(Some("acme"))).expect("the local owner")
}

fn call(lore: &Lore, caller: &Caller, tool: &str, args: Value) -> Value {
    block_on(lore.call_tool(caller, tool, args)).unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A store with org `acme` holding `n` memories that all mention "heron".
fn org_with(n: usize) -> Rc<MemoryStorage> {
    org_with_embedder(n, None)
}

/// [`org_with`], the memories saved with `embedder` (so each has its vector stored).
fn org_with_embedder(n: usize, embedder: Option<Rc<dyn Embedder>>) -> Rc<MemoryStorage> {
    let store = Rc::new(MemoryStorage::new());
    let (lore, _) = instance_with(store.clone(), 1, embedder);
    block_on(admin::init(lore.ports(), "acme")).unwrap();
    let caller = owner(&lore);
    let topics = [
        "billing", "kafka", "runbook", "postgres", "deploy", "oncall", "renewal",
    ];
    let mut i = 0;
    while i < n {
        let batch: Vec<Value> = (i..n.min(i + 100))
            .map(|k| {
                json!({"content": format!("memory {k}: the heron watched the {} work, note {}", topics[k % topics.len()], k * 7919 % 1000)})
            })
            .collect();
        call(&lore, &caller, "save_memory", json!({ "memories": batch }));
        i += 100;
    }
    store
}

/// The ids `search_memory` answers.
fn search(lore: &Lore, caller: &Caller, query: &str) -> Vec<String> {
    let out = call(
        lore,
        caller,
        "search_memory",
        json!({"query": query, "limit": 10}),
    );
    ids_of(&out["results"])
}

/// The ids of `search_memory`'s results, in order.
fn ids_of(results: &Value) -> Vec<String> {
    results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// Storage reads of one cold `search_memory` (the caller resolved first, not counted), and
/// its answer.
fn cold_search(store: Rc<MemoryStorage>, query: &str) -> (u64, Vec<String>) {
    let (lore, counted) = instance(store, 9);
    let caller = owner(&lore);
    let (before, _, _) = counted.counts();
    let ids = search(&lore, &caller, query);
    let (after, _, _) = counted.counts();
    (after - before, ids)
}

/// How many memories the stored segments hold.
fn covered(store: &MemoryStorage) -> u32 {
    manifest(store)
        .expect("segments written")
        .segments
        .iter()
        .map(|s| s.docs)
        .sum()
}

fn manifest(store: &MemoryStorage) -> Option<Manifest> {
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    block_on(store.get(&keys.keyword_manifest()))
        .unwrap()
        .map(|raw| serde_json::from_slice(&raw).unwrap())
}

/// An org of `n` memories with its segments written (all but fewer than `SEGMENT_EVENTS` of
/// them), then `tail` more memories saved past them.
fn settled(n: usize, tail: usize) -> Rc<MemoryStorage> {
    settled_with(n, tail, None)
}

/// [`settled`] with an embedder (the segments then carry vector sketches).
fn settled_with(n: usize, tail: usize, embedder: Option<Rc<dyn Embedder>>) -> Rc<MemoryStorage> {
    let store = org_with_embedder(n, embedder.clone());
    let (lore, _) = instance_with(store.clone(), 2, embedder);
    let caller = owner(&lore);
    // A search loads (or builds) the index; the call's end writes what is due.
    search(&lore, &caller, "heron");
    let covered = covered(&store);
    assert!(
        n - (covered as usize) < SEGMENT_EVENTS as usize,
        "{covered} of {n} memories in segments"
    );
    for k in 0..tail {
        call(
            &lore,
            &caller,
            "save_memory",
            json!({"content": format!("a late heron note {k}")}),
        );
    }
    store
}

#[test]
fn a_cold_search_reads_the_same_at_one_thousand_and_at_one_hundred_thousand_memories() {
    let tail = SEGMENT_EVENTS as usize / 2;
    let small = settled(1_000, tail);
    let large = settled(100_000, tail);
    let (small_reads, small_ids) = cold_search(small.clone(), "heron kafka");
    let (large_reads, large_ids) = cold_search(large.clone(), "heron kafka");
    eprintln!(
        "a cold search_memory: {small_reads} reads at 1,000 memories, {large_reads} at 100,000"
    );
    assert_eq!(small_ids.len(), 10);
    assert_eq!(large_ids.len(), 10);
    assert_eq!(
        small_reads, large_reads,
        "a cold search reads {small_reads} times at 1,000 memories and {large_reads} at 100,000"
    );
    // The events past the segments, the sequence number, the manifest, the parts' scan, the
    // sequence entries' scan and the hits: a few dozen, whatever the size.
    assert!(small_reads <= 64, "{small_reads} reads");
    // The segments hold what the events hold: a warm instance that built its index from the
    // events answers the same.
    let (warm, _) = instance(large.clone(), 3);
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    block_on(large.delete(&keys.keyword_manifest())).unwrap();
    assert_eq!(search(&warm, &owner(&warm), "heron kafka"), large_ids);
}

#[test]
fn segments_stay_few_as_the_org_grows() {
    let store = org_with(0);
    let (lore, _) = instance(store.clone(), 4);
    let caller = owner(&lore);
    // Saves one by one, with a search now and then (a search brings the index up to date; the
    // call's end writes the segments due).
    for k in 0..3_000 {
        call(
            &lore,
            &caller,
            "save_memory",
            json!({"content": format!("heron sighting number {k}")}),
        );
        if k % 40 == 39 {
            search(&lore, &caller, "heron");
        }
    }
    let m = manifest(&store).expect("segments written");
    let covered = covered(&store);
    assert!(
        3_000 - covered < SEGMENT_EVENTS,
        "{covered} of 3000 in segments"
    );
    assert!(m.segments.len() <= 12, "{} segments", m.segments.len());
    let (_, ids) = cold_search(store, "sighting 2999");
    assert!(ids.len() == 10);
}

#[test]
fn a_corrupt_segment_is_detected_and_replaced() {
    let store = settled(200, 3);
    let (_, expected) = cold_search(store.clone(), "heron postgres");
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    let m = manifest(&store).unwrap();
    let first = &m.segments[0];
    let part = keys.keyword_doc_page(&first.id, 0);
    let mut bytes = block_on(store.get(&part)).unwrap().unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    block_on(store.put(&part, bytes)).unwrap();
    // The checksum fails: the fresh instance builds from the events, answers the same, and
    // replaces the segments.
    let (_, ids) = cold_search(store.clone(), "heron postgres");
    assert_eq!(ids, expected);
    let replaced = manifest(&store).unwrap();
    assert_ne!(replaced, m);
    assert!(replaced.segments.iter().all(|s| s.id != first.id));
    let (_, again) = cold_search(store, "heron postgres");
    assert_eq!(again, expected);
}

#[test]
fn foreign_and_stale_manifests_are_not_trusted() {
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    for spoil in ["format", "seq", "garbage", "missing part"] {
        let store = settled(150, 1);
        let (_, expected) = cold_search(store.clone(), "heron deploy");
        let mut m = manifest(&store).unwrap();
        let raw = match spoil {
            "format" => {
                m.format = 99;
                serde_json::to_vec(&m).unwrap()
            }
            "seq" => {
                m.segments.last_mut().unwrap().to_seq += 1_000;
                serde_json::to_vec(&m).unwrap()
            }
            "missing part" => {
                let part = keys.keyword_doc_page(&m.segments[0].id, 0);
                block_on(store.delete(&part)).unwrap();
                serde_json::to_vec(&m).unwrap()
            }
            _ => b"{not json".to_vec(),
        };
        block_on(store.put(&keys.keyword_manifest(), raw)).unwrap();
        let (_, ids) = cold_search(store.clone(), "heron deploy");
        assert_eq!(ids, expected, "{spoil}");
        let fixed = manifest(&store).expect("replaced");
        assert_eq!(fixed.format, lore_memory::segments::FORMAT, "{spoil}");
    }
}

/// Saves 100 memories (`{text} {k}`) in one call and fails the segment write after it. A
/// first call flushes the usage counters (the clock stands still: never again), so the commits
/// of the save are the save's and then the segment write: the second fails.
fn save_failing_the_segment_write(
    lore: &Lore,
    counted: &FaultyStorage,
    caller: &Caller,
    text: &str,
) {
    call(lore, caller, "search_sdk", json!({"query": "memory"}));
    counted.fail_commit_at(2);
    let batch: Vec<Value> = (0..100)
        .map(|k| json!({"content": format!("{text} {k}")}))
        .collect();
    call(lore, caller, "save_memory", json!({ "memories": batch }));
    counted.heal();
}

#[test]
fn a_failed_segment_write_loses_no_memory() {
    let store = org_with(0);
    let (lore, counted) = instance(store.clone(), 5);
    let caller = owner(&lore);
    save_failing_the_segment_write(&lore, &counted, &caller, "before the crash, heron");
    assert!(
        manifest(&store).is_none(),
        "the failed commit was the segment write"
    );
    for k in 0..5 {
        call(
            &lore,
            &caller,
            "save_memory",
            json!({"content": format!("afterwards a salmon {k}")}),
        );
    }
    let (fresh, _) = instance(store.clone(), 6);
    let out = call(
        &fresh,
        &owner(&fresh),
        "search_memory",
        json!({"query": "salmon", "limit": 20}),
    );
    assert_eq!(out["results"].as_array().unwrap().len(), 5);
    let all = call(
        &fresh,
        &owner(&fresh),
        "query_sql",
        json!({"sql": "SELECT COUNT(*) AS n FROM events"}),
    );
    assert_eq!(all["rows"][0][0], json!(105), "{all}");
    // The fresh instance's search wrote the segment the failed write owed.
    assert_eq!(covered(&store), 105, "written by the next search");
}

#[test]
fn segment_keys_are_the_orgs_own() {
    let store = settled(120, 0);
    let (lore, _) = instance(store.clone(), 7);
    block_on(admin::create_org(lore.ports(), "globex")).unwrap();
    let all = block_on(store.scan_all("o/")).unwrap();
    let segment_keys: Vec<&String> = all
        .iter()
        .map(|(k, _)| k)
        .filter(|k| k.contains("kidx/"))
        .collect();
    assert!(!segment_keys.is_empty());
    for key in segment_keys {
        assert!(key.starts_with("o/acme/kidx/"), "{key}");
    }
    // Another org's cold search reads none of them and finds nothing of acme's.
    let globex = block_on(lore.local_caller(Some("globex"))).unwrap();
    assert!(search(&lore, &globex, "heron").is_empty());
}

#[test]
fn doctor_reports_unusable_segments_and_reindex_rebuilds_them() {
    let store = settled(300, 2);
    let (lore, _) = instance(store.clone(), 8);
    let report = block_on(lore.memory_index(None, IndexWork::Check)).unwrap();
    assert_eq!(report["healthy"], json!(true), "{report}");
    let acme = &report["orgs"][0];
    assert_eq!(acme["org"], json!("acme"));
    assert_eq!(
        acme["keyword_segments"]["state"],
        json!("healthy"),
        "{acme}"
    );
    assert_eq!(acme["keyword_segments"]["documents"], json!(300), "{acme}");
    assert_eq!(acme["events"], json!(302), "{acme}");

    // A flipped byte in a part: the report says so without changing anything.
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    let m = manifest(&store).unwrap();
    let part = keys.keyword_doc_page(&m.segments[0].id, 0);
    let mut bytes = block_on(store.get(&part)).unwrap().unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    block_on(store.put(&part, bytes.clone())).unwrap();
    let (doctor, _) = instance(store.clone(), 10);
    let report = block_on(doctor.memory_index(Some("acme"), IndexWork::Check)).unwrap();
    assert_eq!(report["healthy"], json!(false), "{report}");
    let k = &report["orgs"][0]["keyword_segments"];
    assert_eq!(k["state"], json!("unusable"), "{k}");
    assert!(k["why"].as_str().unwrap().contains("checksum"), "{k}");
    assert_eq!(block_on(store.get(&part)).unwrap().unwrap(), bytes);

    // Reindex rebuilds every segment from the events; the answer stays the same.
    let (_, expected) = cold_search(store.clone(), "heron oncall");
    let rebuilt = block_on(doctor.memory_index(Some("acme"), IndexWork::Rebuild)).unwrap();
    assert_eq!(rebuilt["healthy"], json!(true), "{rebuilt}");
    let k = &rebuilt["orgs"][0]["keyword_segments"];
    assert_eq!(k["documents"], json!(302), "{k}");
    assert_eq!(k["covers_seq"], json!(302), "{k}");
    assert!(
        block_on(store.get(&part)).unwrap().is_none(),
        "the old part is gone"
    );
    let (_, ids) = cold_search(store.clone(), "heron oncall");
    assert_eq!(ids, expected);

    // An id page (read by per-request searches alone) cut short is reported too.
    let m = manifest(&store).unwrap();
    let page = keys.keyword_id_page(&m.segments[0].id, 1);
    let mut bytes = block_on(store.get(&page)).unwrap().unwrap();
    bytes.truncate(bytes.len() - 3);
    block_on(store.put(&page, bytes)).unwrap();
    let report = block_on(doctor.memory_index(Some("acme"), IndexWork::Check)).unwrap();
    assert_eq!(report["healthy"], json!(false), "{report}");
    let rebuilt = block_on(doctor.memory_index(Some("acme"), IndexWork::Rebuild)).unwrap();
    assert_eq!(rebuilt["healthy"], json!(true), "{rebuilt}");

    // An unknown org is a clear error, not an empty report.
    let err = block_on(doctor.memory_index(Some("nope"), IndexWork::Check)).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

/// A fresh per-request instance (as Spin makes one per request) over `store`.
fn per_request(
    store: Rc<dyn Storage>,
    seed: u64,
    embedder: Option<Rc<dyn Embedder>>,
) -> (Lore, Rc<FaultyStorage>) {
    let (lore, counted) = instance_with(store, seed, embedder);
    (lore.serving_one_request(), counted)
}

/// `search_memory`'s whole answer (ids, scores, supersession) and the reads it took.
fn answer(lore: &Lore, counted: &FaultyStorage, args: Value) -> (Value, u64) {
    let caller = owner(lore);
    let (before, _, _) = counted.counts();
    let out = call(lore, &caller, "search_memory", args);
    let (after, _, _) = counted.counts();
    (out["results"].clone(), after - before)
}

const QUERIES: &[&str] = &[
    "heron kafka",
    "billing renewal",
    "note 17",
    "postgres deploy oncall runbook",
    "memory 1999",
    "late heron note",
    "nothing matches this",
    "the and of",
];

#[test]
fn a_per_request_search_answers_as_the_loaded_index_and_reads_the_same_at_any_size() {
    let mut reads = Vec::new();
    for n in [1_000, 100_000] {
        let store = settled(n, SEGMENT_EVENTS as usize / 2);
        // Supersede a few memories the queries find, so markers are read and honoured.
        let (lore, _) = instance(store.clone(), 20);
        let caller = owner(&lore);
        let found = search(&lore, &caller, "heron kafka");
        for old in &found[..3] {
            call(
                &lore,
                &caller,
                "save_memory",
                json!({"content": "a heron corrected this kafka note", "supersedes_event_id": old}),
            );
        }
        for query in QUERIES {
            for include in [false, true] {
                let args = json!({"query": query, "limit": 10, "include_superseded": include});
                let (loaded, counted) = instance(store.clone(), 21);
                let (expected, _) = answer(&loaded, &counted, args.clone());
                let (probe, counted) = per_request(store.clone(), 22, None);
                let (got, r) = answer(&probe, &counted, args.clone());
                assert_eq!(got, expected, "n = {n}, {args}");
                if query == &"heron kafka" && !include {
                    reads.push(r);
                }
            }
        }
    }
    eprintln!(
        "a per-request search_memory: {} reads at 1,000 memories, {} at 100,000",
        reads[0], reads[1]
    );
    assert_eq!(
        reads[0], reads[1],
        "reads at 1,000 and at 100,000: {reads:?}"
    );
    assert!(reads[0] <= 12, "{reads:?}");
}

#[test]
fn a_per_request_search_falls_back_to_the_index_when_a_part_does_not_open() {
    let store = settled(600, 3);
    let args = json!({"query": "heron postgres", "limit": 10});
    let (loaded, counted) = instance(store.clone(), 30);
    let (expected, _) = answer(&loaded, &counted, args.clone());
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    // Every bucket part of the query's terms, one byte changed.
    for (key, mut bytes) in block_on(store.scan_all(&keys.keyword_parts())).unwrap() {
        if key.contains("/t/") {
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0x20;
            block_on(store.put(&key, bytes)).unwrap();
        }
    }
    let (probe, counted) = per_request(store.clone(), 31, None);
    let (got, _) = answer(&probe, &counted, args);
    assert_eq!(got, expected);
    // Filters need the loaded index; a per-request instance answers them the same.
    let args = json!({"query": "heron", "kinds": ["note"], "limit": 5});
    let (loaded, counted) = instance(store.clone(), 32);
    let (expected, _) = answer(&loaded, &counted, args.clone());
    let (probe, counted) = per_request(store, 33, None);
    assert_eq!(answer(&probe, &counted, args).0, expected);
}

/// A sketch or an id page (parts only per-request searches read, not a load) that does not
/// open is not only worked around: the load the search falls back to rebuilds every segment.
#[test]
fn a_sketch_or_id_page_that_does_not_open_is_rebuilt() {
    let embedder: Rc<dyn Embedder> = Rc::new(lore_embed::builtin::BuiltinEmbedder::new());
    let store = settled_with(600, 3, Some(embedder.clone()));
    let before: Vec<String> = manifest(&store)
        .unwrap()
        .segments
        .into_iter()
        .map(|s| s.id)
        .collect();
    let args = json!({"query": "heron postgres", "limit": 10});
    let (loaded, counted) = instance_with(store.clone(), 60, Some(embedder.clone()));
    let (expected, _) = answer(&loaded, &counted, args.clone());
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    let mut broken = Vec::new();
    for (key, mut bytes) in block_on(store.scan_all(&keys.keyword_parts())).unwrap() {
        if key.contains("/p/v/") || key.contains("/p/i/") {
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0x20;
            block_on(store.put(&key, bytes)).unwrap();
            broken.push(key);
        }
    }
    assert!(broken.iter().any(|k| k.contains("/p/v/")), "{broken:?}");
    assert!(broken.iter().any(|k| k.contains("/p/i/")), "{broken:?}");
    // `lore doctor` checks the parts only per-request searches read, too.
    let (doctor, _) = instance_with(store.clone(), 64, Some(embedder.clone()));
    let report = block_on(doctor.memory_index(Some("acme"), IndexWork::Check)).unwrap();
    let k = &report["orgs"][0]["keyword_segments"];
    assert_eq!(k["state"], json!("unusable"), "{report}");
    let (probe, counted) = per_request(store.clone(), 61, Some(embedder.clone()));
    let (got, _) = answer(&probe, &counted, args.clone());
    assert_eq!(got, expected, "answered by the loaded index");
    let after = manifest(&store).unwrap();
    assert!(
        after.segments.iter().all(|s| !before.contains(&s.id)),
        "every segment was written again: {before:?} → {:?}",
        after.segments.iter().map(|s| &s.id).collect::<Vec<_>>()
    );
    let parts: Vec<String> = block_on(store.scan_all(&keys.keyword_parts()))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(
        broken.iter().all(|k| !parts.contains(k)),
        "the broken parts are gone"
    );
    // Keyword-only searches read the id pages: broken ones are rebuilt the same way.
    let pages: Vec<String> = parts.into_iter().filter(|k| k.contains("/p/i/")).collect();
    for page in &pages {
        let mut bytes = block_on(store.get(page)).unwrap().unwrap();
        bytes.truncate(bytes.len() - 1);
        block_on(store.put(page, bytes)).unwrap();
    }
    let (loaded, counted) = instance(store.clone(), 62);
    let (expected, _) = answer(&loaded, &counted, args.clone());
    let (probe, counted) = per_request(store.clone(), 63, None);
    assert_eq!(answer(&probe, &counted, args).0, expected);
    let parts = block_on(store.scan_all(&keys.keyword_parts())).unwrap();
    assert!(
        !parts.iter().any(|(k, _)| pages.contains(k)),
        "the broken id pages are gone"
    );
}

#[test]
fn a_per_request_search_with_vectors_reads_sketches_not_the_index() {
    let embedder: Rc<dyn Embedder> = Rc::new(lore_embed::builtin::BuiltinEmbedder::new());
    let mut reads = Vec::new();
    let mut overlap = 0usize;
    let mut wanted = 0usize;
    for n in [1_000, 10_000] {
        let store = settled_with(n, 5, Some(embedder.clone()));
        let m = manifest(&store).unwrap();
        assert!(
            m.segments.iter().all(|s| !s.sketches.is_empty()),
            "every segment has a vector sketch"
        );
        // Past CLUSTER_MIN documents a segment's sketches are clustered.
        let clustered = m.segments.iter().any(|s| s.sketches[0].clusters > 0);
        assert_eq!(clustered, n > 4096, "{n} memories");
        for (i, query) in ["heron kafka", "who watched billing", "postgres work notes"]
            .iter()
            .enumerate()
        {
            let args = json!({"query": query, "limit": 10});
            let (loaded, counted) = instance_with(store.clone(), 40, Some(embedder.clone()));
            let (expected, _) = answer(&loaded, &counted, args.clone());
            let (probe, counted) = per_request(store.clone(), 41, Some(embedder.clone()));
            let (got, r) = answer(&probe, &counted, args);
            let (expected, got) = (ids_of(&expected), ids_of(&got));
            assert_eq!(got.len(), expected.len(), "{query}");
            overlap += got.iter().filter(|id| expected.contains(id)).count();
            wanted += expected.len();
            if i == 0 {
                reads.push(r);
            }
        }
        if n > 4096 {
            a_share_of_the_clusters_is_read(&store, &embedder, reads[1]);
            clusters_that_do_not_open_are_rebuilt(&store, &embedder);
        }
    }
    eprintln!(
        "per-request search with vectors: {} reads at 1,000 memories, {} at 10,000; {overlap} of {wanted} loaded-index hits found",
        reads[0], reads[1]
    );
    // At 10,000 the clustered segment holds fewer than twice the sketches a probe ranks
    // (PROBE_CODES): its clusters are read in the scan of the sketches, and the reads are the
    // same.
    assert_eq!(reads[0], reads[1], "{reads:?}");
    assert!(
        overlap * 10 >= wanted * 8,
        "the sketch search finds {overlap} of the loaded index's {wanted} hits"
    );
}

/// A probe that ranks fewer sketches than the clustered segments hold reads the clusters
/// nearest its query in one more read (`all` reads when it ranks them all) and still finds
/// most of what the loaded index finds.
fn a_share_of_the_clusters_is_read(
    store: &Rc<MemoryStorage>,
    embedder: &Rc<dyn Embedder>,
    all: u64,
) {
    let args = json!({"query": "heron kafka", "limit": 10});
    let (loaded, counted) = instance_with(store.clone(), 80, Some(embedder.clone()));
    let (expected, _) = answer(&loaded, &counted, args.clone());
    let (probe, counted) = per_request(store.clone(), 81, Some(embedder.clone()));
    probe.engine.set_probe_codes(2048);
    let (got, reads) = answer(&probe, &counted, args);
    // The clusters, and at most one read of id pages for keyword hits outside them.
    assert!(
        reads == all + 1 || reads == all + 2,
        "{reads} reads, {all} reading them all"
    );
    let (expected, got) = (ids_of(&expected), ids_of(&got));
    let found = got.iter().filter(|id| expected.contains(id)).count();
    assert!(
        found >= 7,
        "{found} of the loaded index's 10 hits: {got:?} / {expected:?}"
    );
}

/// Every cluster of a clustered sketch corrupted: a per-request search answers from the loaded
/// index, which writes the segments again, and the next one reads the new clusters.
fn clusters_that_do_not_open_are_rebuilt(store: &Rc<MemoryStorage>, embedder: &Rc<dyn Embedder>) {
    let keys = OrgKeys::new(&OrgId::parse("acme").unwrap());
    let before: Vec<String> = manifest(store)
        .unwrap()
        .segments
        .into_iter()
        .map(|s| s.id)
        .collect();
    let mut broken = Vec::new();
    for (key, mut bytes) in block_on(store.scan_all(&keys.keyword_parts())).unwrap() {
        if key.contains("/p/v/") && key.contains("/c/") {
            let last = bytes.len() - 1;
            bytes[last] ^= 0x01;
            block_on(store.put(&key, bytes)).unwrap();
            broken.push(key);
        }
    }
    assert!(!broken.is_empty());
    let args = json!({"query": "who watched the kafka work", "limit": 10});
    let (loaded, counted) = instance_with(store.clone(), 70, Some(embedder.clone()));
    let (expected, _) = answer(&loaded, &counted, args.clone());
    let (probe, counted) = per_request(store.clone(), 71, Some(embedder.clone()));
    assert_eq!(answer(&probe, &counted, args.clone()).0, expected);
    let after = manifest(store).unwrap();
    assert!(after.segments.iter().all(|s| !before.contains(&s.id)));
    assert!(after.segments.iter().any(|s| s.sketches[0].clusters > 0));
    let parts: Vec<String> = block_on(store.scan_all(&keys.keyword_parts()))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(
        broken.iter().all(|k| !parts.contains(k)),
        "the broken clusters are gone"
    );
    // The rebuilt clusters open: the next per-request search finds nothing to rebuild.
    let (probe, counted) = per_request(store.clone(), 72, Some(embedder.clone()));
    let (got, _) = answer(&probe, &counted, args);
    assert_eq!(got.as_array().unwrap().len(), 10);
    assert_eq!(manifest(store).unwrap(), after, "nothing rebuilt again");
}

/// A copy of `store` without its index segments: an instance over it builds the index from
/// the events, the truth segments are checked against.
fn without_segments(store: &MemoryStorage) -> Rc<MemoryStorage> {
    let copy = Rc::new(MemoryStorage::new());
    let mut batch = lore_base::storage::Batch::new();
    for (key, value) in block_on(store.scan_all("")).unwrap() {
        if !key.contains("/kidx/") {
            batch.put(key, value);
        }
    }
    block_on(copy.commit(batch)).unwrap();
    copy
}

/// Two answers rank alike: the same scores in order, the same hits (with their supersession)
/// above the lowest score. Equal scores are ordered by the index's document numbers, and an
/// index built from the events numbers them in id order, segments in commit order.
fn same_ranking(got: &Value, expected: &Value, args: &Value) {
    let scores = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["score"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(scores(got), scores(expected), "{args}");
    let lowest = scores(expected).last().copied().unwrap_or(0.0);
    let above = |v: &Value| -> std::collections::BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["score"].as_f64().unwrap() > lowest)
            .map(|r| format!("{} {}", r["id"], r["superseded_by"]))
            .collect()
    };
    assert_eq!(above(got), above(expected), "{args}");
}

#[test]
fn an_org_only_ever_written_by_fresh_instances_keeps_its_segments_current() {
    // Spin's shape: every request a fresh instance, and nothing but saves (one by one, in
    // batches, superseding); no instance ever loads the index.
    let store = org_with(0);
    let mut saved = 0;
    let mut seed = 100;
    let mut fresh = || {
        seed += 1;
        per_request(store.clone(), seed, None).0
    };
    while saved < 2_000 {
        let lore = fresh();
        let caller = owner(&lore);
        let n = [1, 7, 40, 100, 3][saved % 5];
        let batch: Vec<Value> = (saved..saved + n)
            .map(|k| json!({"content": format!("memory {k}: the heron logged kafka note {}", k * 31 % 97)}))
            .collect();
        call(&lore, &caller, "save_memory", json!({ "memories": batch }));
        saved += n;
        if saved % 400 < n {
            let lore = fresh();
            let caller = owner(&lore);
            let hit = search(&lore, &caller, "heron kafka");
            call(
                &lore,
                &caller,
                "save_memory",
                json!({"content": "a heron corrected this kafka note", "supersedes_event_id": hit[0]}),
            );
            saved += 1;
        }
    }
    let m = manifest(&store).expect("segments written by saves");
    let covered = covered(&store);
    assert!(
        saved as u32 - covered < SEGMENT_EVENTS,
        "{covered} of {saved} memories in segments"
    );
    assert!(m.segments.len() <= 12, "{} segments", m.segments.len());
    // What the segments answer equals what the events answer.
    let truth = without_segments(&store);
    for query in QUERIES {
        for include in [false, true] {
            let args = json!({"query": query, "limit": 10, "include_superseded": include});
            let (loaded, counted) = instance(truth.clone(), 30);
            let (expected, _) = answer(&loaded, &counted, args.clone());
            let (probe, counted) = per_request(store.clone(), 31, None);
            let (got, _) = answer(&probe, &counted, args.clone());
            same_ranking(&got, &expected, &args);
            let (cold, counted) = instance(store.clone(), 32);
            let (got, _) = answer(&cold, &counted, args.clone());
            same_ranking(&got, &expected, &args);
        }
    }
}

#[test]
fn a_long_history_without_segments_catches_up_in_bounded_writes() {
    // An org whose events were all stored before it had segments (or after they were cleared).
    let store = without_segments(&org_with(10_000));
    assert!(manifest(&store).is_none());
    let (lore, counted) = per_request(store.clone(), 40, None);
    let caller = owner(&lore);
    call(&lore, &caller, "search_sdk", json!({"query": "memory"}));
    let (before, _, _) = counted.counts();
    let batch: Vec<Value> = (0..40)
        .map(|k| json!({"content": format!("a new heron {k}")}))
        .collect();
    call(&lore, &caller, "save_memory", json!({ "memories": batch }));
    let (after, _, _) = counted.counts();
    assert_eq!(
        covered(&store) as usize,
        lore_memory::MAX_TAIL_EVENTS,
        "a first segment"
    );
    eprintln!(
        "a save that wrote a first segment of 4,096 events: {} reads",
        after - before
    );
    // More saves carry on where it stopped, until the whole history is in segments.
    for round in 0..4 {
        let (lore, _) = per_request(store.clone(), 41 + round, None);
        let caller = owner(&lore);
        let batch: Vec<Value> = (0..40)
            .map(|k| json!({"content": format!("round {round}, heron {k}")}))
            .collect();
        call(&lore, &caller, "save_memory", json!({ "memories": batch }));
    }
    assert_eq!(covered(&store), 10_200);
    let (cold, counted) = instance(store.clone(), 50);
    let (got, _) = answer(
        &cold,
        &counted,
        json!({"query": "round 3 heron", "limit": 5}),
    );
    assert_eq!(got.as_array().unwrap().len(), 5);
}

#[test]
fn a_script_that_saves_leaves_its_events_in_segments() {
    let store = org_with(0);
    let (lore, _) = per_request(store.clone(), 60, None);
    let caller = owner(&lore);
    call(
        &lore,
        &caller,
        "run_sdk",
        json!({"code": "for (let i = 0; i < 40; i++) { await client.memory.save({content: `scripted heron ${i}`}); } return 1;"}),
    );
    assert_eq!(covered(&store), 40, "the run's events in a segment");
}

#[test]
fn a_fresh_server_answers_its_first_search_from_the_segments_and_loads_the_index_after() {
    let mut first = Vec::new();
    for n in [1_000, 10_000] {
        let store = settled(n, 5);
        let later = Rc::new(Later::default());
        let (lore, counted) = built(store.clone(), 70, None, Some(later.clone()));
        let (truth, truth_counted) = instance(store.clone(), 71);
        for (i, query) in QUERIES.iter().enumerate() {
            let args = json!({"query": query, "limit": 10});
            let (expected, _) = answer(&truth, &truth_counted, args.clone());
            let (got, reads) = answer(&lore, &counted, args.clone());
            assert_eq!(got, expected, "n = {n}, {args}");
            if i == 0 {
                // The first: answered from the segments, the index loaded after the answer.
                first.push(reads);
                assert!(later.run_all() >= 1, "the index loads after the answer");
            } else {
                // Then from the loaded index: the sequence number and the hits.
                assert!(reads <= 2, "n = {n}, {args}: {reads} reads");
            }
        }
    }
    eprintln!(
        "a fresh server's first search_memory: {} reads at 1,000 memories, {} at 10,000",
        first[0], first[1]
    );
    assert_eq!(first[0], first[1], "{first:?}");
}

#[test]
fn a_per_request_search_over_a_long_tail_answers_and_writes_it() {
    let store = settled(1_000, 0);
    let before = covered(&store);
    // A save whose segment write fails: 100 events stay past the segments.
    let (lore, counted) = per_request(store.clone(), 80, None);
    save_failing_the_segment_write(&lore, &counted, &owner(&lore), "a long tail heron");
    assert_eq!(covered(&store), before, "the segment write failed");
    let truth = without_segments(&store);
    let args = json!({"query": "long tail heron", "limit": 10});
    let (loaded, c) = instance(truth, 81);
    let (expected, _) = answer(&loaded, &c, args.clone());
    // The probe indexes the tail itself, and the request's end writes it as a segment.
    let (probe, c) = per_request(store.clone(), 82, None);
    let (got, _) = answer(&probe, &c, args.clone());
    same_ranking(&got, &expected, &args);
    assert_eq!(got.as_array().unwrap().len(), 10);
    assert_eq!(covered(&store), before + 100, "the search wrote the tail");
}
