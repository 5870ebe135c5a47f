//! Semantic memory plumbing on the in-memory store: vectors stored with their events, the
//! index snapshot a cold instance loads instead of re-embedding, lazy re-embedding after an
//! embedder failure or a model change, and filters, supersession and org isolation applied
//! to vector hits. The embedder here is the port's test double (word hashing); what the
//! built-in embedder understands is tested with it, in the retrieval evaluation.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::json;

use common::{Harness, ids};
use lore_base::ports::{Embedder, Ports, Storage};
use lore_base::reply::Reply;
use lore_base::storage::memory::MemoryStorage;
use lore_directory::admin;
use lore_memory::{Ranking, SearchInput};
use lore_testing::ports::{SeqRandom, StepClock, WordHashEmbedder};

use common::START_MS;

struct Node {
    h: Harness,
    embedder: Rc<WordHashEmbedder>,
    clock: Rc<StepClock>,
}

fn node(storage: &Rc<MemoryStorage>, model: &str, dims: usize) -> Node {
    let embedder = Rc::new(WordHashEmbedder::new(model, dims));
    let clock = Rc::new(StepClock::starting_at(START_MS));
    let ports = Ports {
        storage: storage.clone(),
        clock: clock.clone(),
        random: Rc::new(SeqRandom::seeded(7)),
        http: None,
        embedder: Some(embedder.clone() as Rc<dyn Embedder>),
        cache: None,
        background: None,
    };
    Node {
        h: Harness::on(ports, "acme"),
        embedder,
        clock,
    }
}

/// A node whose searches rank by vectors alone.
fn vector_node(storage: &Rc<MemoryStorage>, dims: usize) -> Node {
    let n = node(storage, "test-model", dims);
    n.h.lore.engine.set_ranking(Ranking::Vector);
    n
}

fn memories(from: usize, to: usize) -> serde_json::Value {
    let list: Vec<_> = (from..to)
        .map(|i| json!({"content": format!("note {i} about topic{} and area{}", i % 40, i % 7)}))
        .collect();
    json!({ "memories": list })
}

fn stored_keys(storage: &Rc<MemoryStorage>, prefix: &str) -> usize {
    block_on(storage.scan_all(prefix)).unwrap().len()
}

#[test]
fn a_cold_instance_reads_the_sketches_and_tail_instead_of_re_embedding() {
    let storage = Rc::new(MemoryStorage::new());
    let first = node(&storage, "test-model", 48);
    let owner = first.h.owner.clone();
    for start in (0..4_200).step_by(100) {
        first.h.save(&owner, memories(start, start + 100));
    }
    assert_eq!(first.embedder.texts.get(), 4_200, "saves embed once each");
    let query = json!({"query": "topic7 area3", "limit": 5});
    let before = ids(&first.h.search(&owner, query.clone()));
    assert_eq!(
        first.embedder.texts.get(),
        4_201,
        "the saving instance reuses its own vectors; only the query is embedded"
    );
    assert_eq!(stored_keys(&storage, "o/acme/vec/"), 4_200);
    assert!(
        stored_keys(&storage, "o/acme/kidx/p/v/") >= 1,
        "the segments hold the vectors' sketches"
    );

    // A cold instance ranks as the warm one did, embedding only the query.
    let second = node(&storage, "test-model", 48);
    assert_eq!(ids(&second.h.search(&owner, query.clone())), before);
    assert_eq!(second.embedder.texts.get(), 1);

    // Prove the sketches are what a cold instance starts from: without the per-event vectors,
    // anything else would have to embed all 4,200 memories again. (An org of at most
    // `EXACT_BELOW` memories reads its vectors instead, and ranks them all exactly.)
    let mut batch = lore_base::storage::Batch::new();
    for (key, _) in block_on(storage.scan_all("o/acme/vec/")).unwrap() {
        batch.delete(key);
    }
    block_on(storage.commit(batch)).unwrap();
    let third = node(&storage, "test-model", 48);
    third.h.search(&owner, query.clone());
    assert_eq!(
        third.embedder.texts.get(),
        1,
        "a cold instance embeds only the query"
    );

    // Newer events than the segments come from their stored vectors.
    third.h.save(&owner, memories(4_200, 4_220));
    let fourth = vector_node(&storage, 48);
    let found = fourth.h.search(
        &owner,
        json!({"query": "note 4215 about topic15 and area1", "limit": 3}),
    );
    assert_eq!(fourth.embedder.texts.get(), 1);
    assert!(
        found[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("note 4215 "),
        "{found:?}"
    );
    // A filter that allows few documents of a large org ranks them all exactly.
    let recent = fourth.h.search(
        &owner,
        json!({"query": "note 4210 about topic10 and area3", "since": found[0]["created_at"], "limit": 3}),
    );
    assert!(recent.len() <= 3 && !recent.is_empty(), "{recent:?}");
    assert!(
        recent[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("note 4210 "),
        "{recent:?}"
    );
}

#[test]
fn an_embedder_failure_loses_nothing_and_vectors_follow_when_it_recovers() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, "test-model", 48);
    let owner = n.h.owner.clone();
    n.embedder.fail.set(true);
    let saved =
        n.h.save(&owner, json!({"content": "Dana reviews vendor contracts"}));
    let found = n.h.search(&owner, json!({"query": "vendor contracts"}));
    assert_eq!(ids(&found), saved, "keyword ranking answers meanwhile");
    assert_eq!(stored_keys(&storage, "o/acme/vec/"), 0);

    n.embedder.fail.set(false);
    // The instance waits before asking a failing embedder again.
    n.h.search(&owner, json!({"query": "vendor contracts"}));
    assert_eq!(n.embedder.texts.get(), 0);
    n.clock.0.set(n.clock.0.get() + 31_000);
    n.h.lore.engine.set_ranking(Ranking::Vector);
    let found =
        n.h.search(&owner, json!({"query": "Dana reviews vendor contracts"}));
    assert_eq!(ids(&found), saved);
    assert_eq!(stored_keys(&storage, "o/acme/vec/"), 1);
}

#[test]
fn a_new_model_re_embeds_lazily_once() {
    let storage = Rc::new(MemoryStorage::new());
    let old = node(&storage, "model-a", 48);
    let owner = old.h.owner.clone();
    old.h.save(&owner, memories(0, 5));
    let new = node(&storage, "model-b", 32);
    new.h.lore.engine.set_ranking(Ranking::Vector);
    let found = new
        .h
        .search(&owner, json!({"query": "note 3 about topic3 and area3"}));
    assert!(found[0]["content"].as_str().unwrap().starts_with("note 3 "));
    assert_eq!(new.embedder.texts.get(), 5 + 1);
    assert_eq!(
        stored_keys(&storage, "o/acme/vec/"),
        10,
        "both models' vectors"
    );
    let again = node(&storage, "model-b", 32);
    again.h.search(&owner, json!({"query": "note"}));
    assert_eq!(again.embedder.texts.get(), 1);
}

#[test]
fn vector_hits_obey_filters_supersession_and_org_boundaries() {
    let storage = Rc::new(MemoryStorage::new());
    let n = vector_node(&storage, 48);
    let owner = n.h.owner.clone();
    let other = block_on(admin::create_org(n.h.lore.ports(), "other"))
        .unwrap()
        .token;
    let theirs =
        n.h.save(&other, json!({"content": "alpha beta gamma delta"}));
    let old = n.h.save(
        &owner,
        json!({"content": "alpha beta gamma", "kind": "fact"}),
    )[0]
    .clone();
    let new = n.h.save(
        &owner,
        json!({"content": "alpha beta epsilon", "kind": "fact", "supersedes_event_id": old}),
    )[0]
    .clone();
    let note = n.h.save(
        &owner,
        json!({"content": "alpha gamma zeta", "kind": "note"}),
    )[0]
    .clone();

    let found = ids(&n.h.search(&owner, json!({"query": "alpha beta gamma"})));
    assert!(!found.contains(&old), "superseded hidden: {found:?}");
    assert!(found.contains(&new) && found.contains(&note));
    assert!(
        !found.contains(&theirs[0]),
        "another org's memory: {found:?}"
    );

    let all = ids(&n.h.search(
        &owner,
        json!({"query": "alpha beta gamma", "include_superseded": true}),
    ));
    assert_eq!(all[0], old, "the closest, shown on request");

    let facts = ids(&n.h.search(
        &owner,
        json!({"query": "alpha gamma zeta", "kinds": ["fact"]}),
    ));
    assert_eq!(facts, std::slice::from_ref(&new));

    let mine = ids(&n.h.search(&other, json!({"query": "alpha beta gamma"})));
    assert_eq!(mine, theirs);
}

#[test]
fn a_long_memory_is_found_by_the_window_that_answers_the_question() {
    let storage = Rc::new(MemoryStorage::new());
    let n = vector_node(&storage, 1024);
    let owner = n.h.owner.clone();
    // 250 words of filler with the answer in the middle: the text's one vector would blur it.
    let filler = |from: usize, to: usize| -> Vec<String> {
        (from..to).map(|i| format!("filler{i}")).collect()
    };
    let mut words = filler(0, 120);
    words.extend(["kiwi", "mango", "papaya", "harvest"].map(String::from));
    words.extend(filler(120, 246));
    let long = words.join(" ");
    let short = format!("kiwi {}", filler(500, 509).join(" "));
    let query = "kiwi mango papaya harvest";
    let cosine = |a: &str, b: &str| {
        let (x, y) = (n.embedder.vector(a), n.embedder.vector(b));
        let dot: f32 = x.iter().zip(&y).map(|(p, q)| p * q).sum();
        let norm = |v: &[f32]| v.iter().map(|p| p * p).sum::<f32>().sqrt();
        dot / (norm(&x) * norm(&y))
    };
    // What makes this a test of the windows: as one vector, the long memory loses.
    assert!(cosine(query, &long) < cosine(query, &short));
    let long_id = n.h.save(&owner, json!({"content": long}))[0].clone();
    let short_id = n.h.save(&owner, json!({"content": short}))[0].clone();
    assert_eq!(
        n.embedder.texts.get(),
        lore_memory::semantic::pieces(&long).len() + 1,
        "the long memory is embedded in windows, the short one whole"
    );
    assert_eq!(
        ids(&n.h.search(&owner, json!({"query": query}))),
        [long_id.clone(), short_id.clone()]
    );
    // A cold instance ranks the stored windows the same way.
    let cold = vector_node(&storage, 1024);
    assert_eq!(
        ids(&cold.h.search(&owner, json!({"query": query}))),
        [long_id, short_id]
    );
    assert_eq!(cold.embedder.texts.get(), 1, "only the query is embedded");
}

/// A search repeated over an unchanged index is answered with the text its first answer was
/// kept as; a memory saved elsewhere or a superseding one makes a new answer, which then answers
/// in turn, and a ranking made while the embedder fails is not kept.
#[test]
fn a_repeated_search_answers_with_its_kept_text_until_the_index_changes() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, "test-model", 48);
    let owner = n.h.owner.clone();
    n.h.save(&owner, memories(0, 10));
    let mut headers = http::HeaderMap::new();
    headers.insert("authorization", format!("Bearer {owner}").parse().unwrap());
    let caller = block_on(n.h.lore.authenticate(&headers, Some("acme")))
        .map_err(|(e, _)| e)
        .unwrap();
    let engine = &n.h.lore.engine;
    let reply = |query: &str| {
        let input: SearchInput = serde_json::from_value(json!({ "query": query })).unwrap();
        block_on(engine.memory.search(&engine.ports, &caller, input)).unwrap()
    };
    let search = |query: &str| match reply(query) {
        Reply::Text(text) => text,
        Reply::Tree(v) => panic!("a loaded search keeps its answer: {v}"),
    };
    let first = search("topic3 area3");
    assert!(Rc::ptr_eq(&first, &search("topic3 area3")), "the kept text");
    assert!(
        !Rc::ptr_eq(&first, &search("topic4 area4")),
        "another query's own"
    );

    // Saved through another instance: the next search reads it and answers anew.
    let other = node(&storage, "test-model", 48);
    other
        .h
        .save(&owner, json!({"content": "note 99 about topic3 and area3"}));
    let second = search("topic3 area3");
    assert!(second.json().contains("note 99"), "{}", second.json());
    assert!(Rc::ptr_eq(&second, &search("topic3 area3")));

    // Superseded: the older memory says so in the next answer.
    let old = ids(&n.h.search(&owner, json!({"query": "note 99"})))[0].clone();
    n.h.save(
        &owner,
        json!({"content": "note 100 about topic3 and area3", "supersedes_event_id": old}),
    );
    let third = search("topic3 area3");
    assert!(third.json().contains("note 100"), "{}", third.json());
    assert!(!third.json().contains("note 99 "), "hidden once superseded");

    // While the embedder fails, a ranking without the query's vector is not kept; once the
    // index has the new memory's vector, the answer ranks by it and is kept.
    n.embedder.fail.set(true);
    n.h.save(
        &owner,
        json!({"content": "note 101 about topic3 and area3"}),
    );
    assert!(matches!(reply("topic3 area3"), Reply::Tree(_)));
    n.embedder.fail.set(false);
    n.clock.0.set(n.clock.0.get() + 31_000);
    let with_vector = search("topic3 area3");
    assert!(with_vector.json().contains("note 101"));
    assert!(Rc::ptr_eq(&with_vector, &search("topic3 area3")));
}
