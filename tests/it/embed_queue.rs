//! Vectors after the answer (`lore_memory`'s `embed_queue.rs`): a save whose embedder is not
//! quick answers once its memories are durable and found by keywords, with a queue key per
//! memory in the same batch; the background embedder stores the vectors after the answer; a
//! search embeds a small tail itself and says how many memories it ranked by keywords alone;
//! `wait_for_vectors` waits; the queue outlives a crash; `lore doctor` counts it. The embedder
//! is the port's test double, whose calls are counted; the host's work after the answer is
//! `Later`, run when the test says.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Harness, START_MS};
use lore_base::ports::{Background, Embedder, Ports, Storage};
use lore_base::storage::memory::MemoryStorage;
use lore_front::IndexWork;
use lore_memory::{INLINE_TAIL, Ranking};
use lore_testing::ports::{Later, SeqRandom, StepClock, WordHashEmbedder};

struct Node {
    h: Harness,
    embedder: Rc<WordHashEmbedder>,
    clock: Rc<StepClock>,
    later: Rc<Later>,
}

fn node(storage: &Rc<MemoryStorage>, seed: u64) -> Node {
    node_under(storage, seed, WordHashEmbedder::new("test-model", 48))
}

/// A node on `storage` whose embedder is `embedder` (another model than [`node`]'s).
fn node_under(storage: &Rc<MemoryStorage>, seed: u64, embedder: WordHashEmbedder) -> Node {
    let embedder = Rc::new(embedder);
    let clock = Rc::new(StepClock::starting_at(START_MS));
    let later = Rc::new(Later::default());
    let ports = Ports {
        storage: storage.clone(),
        clock: clock.clone(),
        random: Rc::new(SeqRandom::seeded(seed)),
        http: None,
        embedder: Some(embedder.clone() as Rc<dyn Embedder>),
        cache: None,
        background: Some(later.clone() as Rc<dyn Background>),
    };
    Node {
        h: Harness::on(ports, "acme"),
        embedder,
        clock,
        later,
    }
}

fn memories(n: usize) -> Value {
    let list: Vec<_> = (0..n)
        .map(|i| json!({"content": format!("note {i} about topic{i} and area{}", i % 7)}))
        .collect();
    json!({ "memories": list })
}

fn stored(storage: &Rc<MemoryStorage>, prefix: &str) -> usize {
    block_on(storage.scan_all(prefix)).unwrap().len()
}

/// The whole `search_memory` result, asked with `token`.
fn search_as(n: &Node, token: &str, args: Value) -> Value {
    let r = n.h.call(token, "search_memory", args);
    assert_eq!(r["isError"], false, "{r}");
    r["structuredContent"].clone()
}

/// The whole `search_memory` result, asked by the node's owner.
fn search(n: &Node, args: Value) -> Value {
    let r = n.h.call(&n.h.owner, "search_memory", args);
    assert_eq!(r["isError"], false, "{r}");
    r["structuredContent"].clone()
}

#[test]
fn a_save_answers_before_its_vectors_and_the_background_embedder_stores_them() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, 1);
    let owner = n.h.owner.clone();
    let count = INLINE_TAIL * 3;
    let r = n.h.call(&owner, "save_memory", memories(count));
    assert_eq!(r["structuredContent"]["vectors"], "pending", "{r}");
    assert_eq!(n.embedder.texts.get(), 0, "the answer waited for no model");
    assert_eq!(stored(&storage, "o/acme/embq/"), count);
    assert_eq!(stored(&storage, "o/acme/vec/"), 0);

    // Meanwhile a search finds them by keywords, and says how many it ranked so.
    let found = search(&n, json!({"query": "topic5 area5"}));
    assert_eq!(
        found["results"][0]["content"],
        "note 5 about topic5 and area5"
    );
    assert_eq!(found["pending_vectors"], count);
    assert_eq!(
        n.embedder.texts.get(),
        0,
        "a long tail is not the search's to embed"
    );

    // After the answers: the queue is drained, in rounds, at background priority.
    n.later.run_all();
    assert_eq!(n.embedder.texts.get(), count);
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
    assert_eq!(stored(&storage, "o/acme/vec/"), count);
    assert_eq!(
        stored(&storage, "o/acme/meta/embed-lease"),
        0,
        "the lease is given back"
    );

    // The same instance's index has them: a vector-only search finds each.
    n.h.lore.engine.set_ranking(Ranking::Vector);
    let found = search(&n, json!({"query": "note 17 about topic17 and area3"}));
    assert_eq!(
        found["results"][0]["content"],
        "note 17 about topic17 and area3"
    );
    assert!(found.get("pending_vectors").is_none(), "{found}");
    // So does another instance's, reading the stored vectors once it loaded the index (its
    // first search answers from the stored segments and loads it after the answer).
    let other = node(&storage, 2);
    other.h.lore.engine.set_ranking(Ranking::Vector);
    let query = json!({"query": "note 40 about topic40 and area5"});
    search_as(&other, &owner, query.clone());
    other.later.run_all();
    let found = search_as(&other, &owner, query);
    assert_eq!(
        found["results"][0]["content"],
        "note 40 about topic40 and area5"
    );
    assert!(found.get("pending_vectors").is_none(), "{found}");
    assert!(
        other.embedder.texts.get() <= 2,
        "only the query, nothing re-embedded"
    );
}

#[test]
fn wait_for_vectors_stores_them_before_the_answer() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, 3);
    let owner = n.h.owner.clone();
    let mut batch = memories(INLINE_TAIL * 2);
    batch["wait_for_vectors"] = json!(true);
    let r = n.h.call(&owner, "save_memory", batch);
    assert_eq!(r["isError"], false, "{r}");
    assert!(r["structuredContent"].get("vectors").is_none(), "{r}");
    assert_eq!(n.embedder.texts.get(), INLINE_TAIL * 2);
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
    assert_eq!(stored(&storage, "o/acme/vec/"), INLINE_TAIL * 2);
    let one = n.h.call(
        &owner,
        "save_memory",
        json!({"content": "Dana reviews vendor contracts", "wait_for_vectors": true}),
    );
    assert!(one["structuredContent"].get("vectors").is_none(), "{one}");
    n.h.lore.engine.set_ranking(Ranking::Vector);
    let found = search(&n, json!({"query": "Dana reviews vendor contracts"}));
    assert_eq!(
        found["results"][0]["content"],
        "Dana reviews vendor contracts"
    );
    // Only inside a call's top level: a batch's items take no such field.
    let r = n.h.call(
        &owner,
        "save_memory",
        json!({"memories": [{"content": "x", "wait_for_vectors": true}]}),
    );
    assert_eq!(r["isError"], true, "{r}");
}

#[test]
fn a_search_embeds_a_small_tail_itself() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, 4);
    let owner = n.h.owner.clone();
    n.h.save(&owner, memories(INLINE_TAIL));
    assert_eq!(stored(&storage, "o/acme/embq/"), INLINE_TAIL);
    n.h.lore.engine.set_ranking(Ranking::Vector);
    let found = search(&n, json!({"query": "note 3 about topic3 and area3"}));
    assert_eq!(
        found["results"][0]["content"],
        "note 3 about topic3 and area3"
    );
    assert!(found.get("pending_vectors").is_none(), "{found}");
    assert_eq!(n.embedder.texts.get(), INLINE_TAIL + 1);
    assert_eq!(
        stored(&storage, "o/acme/embq/"),
        0,
        "the search took them off the queue"
    );
    n.later.run_all();
    assert_eq!(
        n.embedder.texts.get(),
        INLINE_TAIL + 1,
        "and nothing is embedded twice"
    );
}

#[test]
fn a_pending_embedding_outlives_a_crash_and_doctor_counts_it() {
    let storage = Rc::new(MemoryStorage::new());
    let count = INLINE_TAIL * 2 + 3;
    let owner = {
        let crashed = node(&storage, 5);
        crashed.h.save(&crashed.h.owner, memories(count));
        // Its work after the answer never runs: the process is gone.
        crashed.h.owner.clone()
    };
    let n = node(&storage, 6);
    let report = block_on(n.h.lore.memory_index(Some("acme"), IndexWork::Check)).unwrap();
    assert_eq!(report["orgs"][0]["vectors"]["queued"], count, "{report}");
    // The server's pass at start (and on its timer) drains every org's queue.
    assert_eq!(block_on(n.h.lore.embedding_pass()), 1);
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
    assert_eq!(stored(&storage, "o/acme/vec/"), count);
    let report = block_on(n.h.lore.memory_index(Some("acme"), IndexWork::Check)).unwrap();
    assert_eq!(report["orgs"][0]["vectors"]["queued"], 0, "{report}");
    assert_eq!(
        block_on(n.h.lore.embedding_pass()),
        0,
        "nothing left to drain"
    );
    n.h.lore.engine.set_ranking(Ranking::Vector);
    let found = search_as(
        &n,
        &owner,
        json!({"query": "note 30 about topic30 and area2"}),
    );
    assert_eq!(
        found["results"][0]["content"],
        "note 30 about topic30 and area2"
    );
}

#[test]
fn a_failing_embedder_leaves_the_queue_whole_until_it_recovers() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, 7);
    let owner = n.h.owner.clone();
    let count = INLINE_TAIL * 2;
    n.h.save(&owner, memories(count));
    n.embedder.fail.set(true);
    n.later.run_all();
    assert_eq!(stored(&storage, "o/acme/embq/"), count, "nothing lost");
    assert_eq!(stored(&storage, "o/acme/meta/embed-lease"), 0);
    n.embedder.fail.set(false);
    // A failed drain rests before the next: a search now leaves the queue alone (it embeds
    // only its query, to rank the stored segments: this instance has no index loaded yet).
    search(&n, json!({"query": "topic3"}));
    let queries = n.embedder.texts.get();
    n.later.run_all();
    assert_eq!(n.embedder.texts.get(), queries);
    assert_eq!(stored(&storage, "o/acme/embq/"), count);
    n.clock.0.set(n.clock.0.get() + 31_000);
    let found = search(&n, json!({"query": "topic3"}));
    assert_eq!(found["pending_vectors"], count);
    n.later.run_all();
    assert_eq!(n.embedder.texts.get(), queries + count);
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
}

#[test]
fn one_drain_works_an_orgs_queue_at_a_time() {
    let storage = Rc::new(MemoryStorage::new());
    let a = node(&storage, 8);
    let b = node(&storage, 9);
    let count = INLINE_TAIL * 2;
    a.h.save(&a.h.owner, memories(count));
    // Another instance holds the lease: this one's drain leaves the queue to it.
    block_on(storage.put("o/acme/meta/embed-lease", b"other 99999999999999".to_vec())).unwrap();
    a.later.run_all();
    assert_eq!(a.embedder.texts.get(), 0);
    assert_eq!(stored(&storage, "o/acme/embq/"), count);
    // A lease past its time is taken over (its holder died).
    block_on(storage.put(
        "o/acme/meta/embed-lease",
        format!("other {START_MS}").into_bytes(),
    ))
    .unwrap();
    b.clock.0.set(START_MS + 1);
    assert_eq!(block_on(b.h.lore.embedding_pass()), 1);
    assert_eq!(b.embedder.texts.get(), count);
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
}

#[test]
fn a_memory_whose_vectors_are_pending_ranks_by_its_keywords_not_as_unrelated() {
    let storage = Rc::new(MemoryStorage::new());
    let n = node(&storage, 6);
    let owner = n.h.owner.clone();
    // Memories with their vectors, none sharing a word with the query below.
    n.h.call(&owner, "save_memory", memories(40));
    search(&n, json!({"query": "note 1"}));
    n.later.run_all();
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
    // Then a tail too long for a search to embed, one of which is the only keyword match.
    let mut tail: Vec<Value> = (0..INLINE_TAIL * 2)
        .map(|i| json!({"content": format!("later note {i} on subject{i}")}))
        .collect();
    tail[3] = json!({"content": "Deploys go out on Wednesdays since March"});
    n.h.call(&owner, "save_memory", json!({ "memories": tail }));
    let found = search(&n, json!({"query": "Deploys"}));
    assert!(
        found["pending_vectors"].as_u64() > Some(INLINE_TAIL as u64),
        "{found}"
    );
    assert_eq!(
        found["results"][0]["content"], "Deploys go out on Wednesdays since March",
        "{found}"
    );
}

#[test]
fn reindex_embeddings_queues_every_memory_without_a_vector_under_the_new_model() {
    let storage = Rc::new(MemoryStorage::new());
    let old = node(&storage, 7);
    let owner = old.h.owner.clone();
    old.h.call(&owner, "save_memory", memories(40));
    old.later.run_all();
    assert_eq!(stored(&storage, "o/acme/vec/"), 40);

    // The same org under another model (a new embedder, or an org moved in from another
    // platform): nothing has a vector under it.
    let new = node_under(&storage, 8, WordHashEmbedder::new("another-model", 32));
    let report = block_on(new.h.lore.memory_index(Some("acme"), IndexWork::Embeddings)).unwrap();
    let org = &report["orgs"][0];
    assert_eq!(org["vectors"]["model"], "another-model", "{report}");
    assert_eq!(org["vectors"]["queued_now"], 40, "{report}");
    assert_eq!(org["vectors"]["queued"], 40, "{report}");
    assert_eq!(stored(&storage, "o/acme/embq/"), 40);
    assert_eq!(
        new.embedder.texts.get(),
        0,
        "queued, not embedded, by the call"
    );

    // The background embedder stores them (the serve's pass, or the CLI's), the old vectors
    // untouched; queueing again finds nothing to do.
    assert_eq!(block_on(new.h.lore.embedding_pass()), 1);
    assert_eq!(new.embedder.texts.get(), 40);
    assert_eq!(stored(&storage, "o/acme/embq/"), 0);
    assert_eq!(stored(&storage, "o/acme/vec/"), 80);
    let again = block_on(new.h.lore.memory_index(Some("acme"), IndexWork::Embeddings)).unwrap();
    assert_eq!(again["orgs"][0]["vectors"]["queued_now"], 0, "{again}");
    new.h.lore.engine.set_ranking(Ranking::Vector);
    let found = search_as(
        &new,
        &owner,
        json!({"query": "note 17 about topic17 and area3"}),
    );
    assert_eq!(
        found["results"][0]["content"], "note 17 about topic17 and area3",
        "{found}"
    );
    assert!(found.get("pending_vectors").is_none(), "{found}");
}
