//! Time in memory search: `occurred_at` (the time a memory describes) and the filters on it,
//! `as_of` (what was current then: memories saved by that time, superseded only by memories
//! saved by it), the same question in SQL over `event_history`, and equal scores ordered by
//! event id on any server.

use crate::common;

use std::rc::Rc;

use serde_json::{Value, json};

use common::{Harness, ids};
use lore_base::ports::{Embedder, Ports};
use lore_base::storage::memory::MemoryStorage;
use lore_testing::ports::{WordHashEmbedder, step_ports};

fn harness() -> Harness {
    let ports = Ports {
        embedder: Some(Rc::new(WordHashEmbedder::new("hash", 64)) as Rc<dyn Embedder>),
        ..step_ports(Rc::new(MemoryStorage::new()), 3)
    };
    Harness::on(ports, "acme")
}

fn created_at(h: &Harness, id: &str) -> String {
    let all = h.search(
        &h.owner,
        json!({"query": "deploy window", "include_superseded": true, "limit": 50}),
    );
    let hit = all.iter().find(|m| m["id"] == id).expect("found");
    hit["created_at"].as_str().unwrap().to_string()
}

#[test]
fn as_of_answers_what_was_current_then_and_since_until_use_the_described_time() {
    let h = harness();
    let old = h.save(
        &h.owner,
        json!({"content": "The deploy window is Tuesday morning", "kind": "decision", "occurred_at": "2023-05-01"}),
    )[0]
        .clone();
    let new = h.save(
        &h.owner,
        json!({"content": "The deploy window is Thursday afternoon", "kind": "decision", "supersedes_event_id": old}),
    )[0]
        .clone();
    let (t_old, t_new) = (created_at(&h, &old), created_at(&h, &new));
    assert!(t_old < t_new);

    let now = h.search(&h.owner, json!({"query": "deploy window"}));
    assert_eq!(ids(&now), std::slice::from_ref(&new));
    // As of the old memory's saving, it was current and the new one did not exist.
    let then = h.search(&h.owner, json!({"query": "deploy window", "as_of": t_old}));
    assert_eq!(ids(&then), std::slice::from_ref(&old));
    assert!(then[0].get("superseded_by").is_none(), "{}", then[0]);
    assert_eq!(then[0]["occurred_at"], "2023-05-01T00:00:00.000Z");
    let then_all = h.search(
        &h.owner,
        json!({"query": "deploy window", "as_of": t_old, "include_superseded": true}),
    );
    assert_eq!(ids(&then_all), std::slice::from_ref(&old));
    // Before anything was saved: nothing. After both: as now, the old one replaced.
    assert!(
        h.search(
            &h.owner,
            json!({"query": "deploy window", "as_of": "2020-01-01"})
        )
        .is_empty()
    );
    let later = h.search(
        &h.owner,
        json!({"query": "deploy window", "as_of": t_new, "include_superseded": true}),
    );
    let old_hit = later.iter().find(|m| m["id"] == old.as_str()).unwrap();
    assert_eq!(old_hit["superseded_by"], new.as_str());

    // since/until filter on the described time: the old memory is about 2023.
    let in_2023 = h.search(
        &h.owner,
        json!({"query": "deploy window", "until": "2023-12-31", "include_superseded": true}),
    );
    assert_eq!(ids(&in_2023), std::slice::from_ref(&old));
    let since_2024 = h.search(
        &h.owner,
        json!({"query": "deploy window", "since": "2024-01-01", "include_superseded": true}),
    );
    assert_eq!(ids(&since_2024), std::slice::from_ref(&new));

    // The same question in SQL.
    let sql = h.call(
        &h.owner,
        "query_sql",
        json!({
            "sql": "SELECT id, occurred_at, superseded_by FROM event_history WHERE created_at <= $1 AND (superseded_at IS NULL OR superseded_at > $1)",
            "params": [t_old],
        }),
    );
    let rows = &sql["structuredContent"]["rows"];
    assert_eq!(
        rows,
        &json!([[old, "2023-05-01T00:00:00.000Z", new]]),
        "{sql}"
    );
}

#[test]
fn a_bad_time_is_a_structured_error_that_saves_nothing() {
    let h = harness();
    let r = h.call(
        &h.owner,
        "save_memory",
        json!({"memories": [
            {"content": "fine"},
            {"content": "when?", "occurred_at": "last tuesday"}
        ]}),
    );
    assert_eq!(r["isError"], true, "{r}");
    let text = r.to_string();
    assert!(text.contains("memories/1/occurred_at"), "{text}");
    assert!(h.search(&h.owner, json!({"query": "fine"})).is_empty());
    let r = h.call(
        &h.owner,
        "search_memory",
        json!({"query": "x", "as_of": "soon"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.to_string().contains("as_of"), "{r}");
}

#[test]
fn equal_scores_go_to_the_newer_memory() {
    let h = harness();
    // The same words under three kinds: three memories that score the same for any query.
    let saved: Vec<String> = ["fact", "note", "observation"]
        .iter()
        .map(|kind| {
            h.save(
                &h.owner,
                json!({"content": "Quarterly planning happens in the Lisbon office", "kind": kind}),
            )[0]
            .clone()
        })
        .collect();
    let mut newest_first = saved.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    let found: Vec<Value> = h.search(&h.owner, json!({"query": "quarterly planning Lisbon"}));
    let scores: Vec<&Value> = found.iter().map(|m| &m["score"]).collect();
    assert!(scores.windows(2).all(|w| w[0] == w[1]), "{scores:?}");
    assert_eq!(ids(&found), newest_first);
}
