//! Storage failures injected under the whole core (`FaultyStorage` over the in-memory store),
//! through real MCP and REST requests. Each test fails the 1st, 2nd, 3rd … read, write or
//! commit of one request in turn: every failure leaves every stored key as it was (a failed
//! `run_sdk` adds only the Action recording it), comes back as a structured error (`isError:
//! true` with a code, a REST error, or a JSON-RPC error when the token could not be read),
//! never a panic, and the next attempt is served and complete. Only work after a request's own
//! commit may fail without failing the request, and is logged: the behaviors lookup for
//! reactions and the Action a REST write is audited with.
use crate::common;

use std::collections::BTreeMap;
use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::Harness;
use lore_base::ports::{Clock, Ports};
use lore_base::storage::Storage;
use lore_base::storage::memory::MemoryStorage;
use lore_testing::faulty::{FaultyStorage, INJECTED};
use lore_testing::ports::SeqRandom;

/// A clock that stands still: usage counters, flushed when two seconds have passed, never come
/// due in the middle of a test, so every write a test sees is the request's own.
struct StillClock;

impl Clock for StillClock {
    fn now_ms(&self) -> i64 {
        1_767_225_600_000
    }
}

struct Faulty {
    h: Harness,
    store: Rc<MemoryStorage>,
    faults: Rc<FaultyStorage>,
}

fn setup() -> Faulty {
    let store = Rc::new(MemoryStorage::new());
    let faults = Rc::new(FaultyStorage::new(store.clone()));
    let ports = Ports {
        storage: faults.clone(),
        clock: Rc::new(StillClock),
        random: Rc::new(SeqRandom::seeded(11)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let h = Harness::on(ports, "acme");
    let f = Faulty { h, store, faults };
    let r = f.run(
        "await client.templates.create({name: 'ticket', schema: {type: 'object', properties: {title: {type: 'string'}}}}); return 'ok';",
    );
    assert_eq!(r["structuredContent"]["result"], "ok", "{r}");
    // The first request flushes the usage counters; from here on nothing else writes.
    f.h.save(
        &f.h.owner,
        json!({"content": "warm-up memory about the blue heron"}),
    );
    f
}

impl Faulty {
    /// Every key and value in the store, read past the fault injector.
    fn dump(&self) -> BTreeMap<String, Vec<u8>> {
        block_on(self.store.scan_all(""))
            .unwrap()
            .into_iter()
            .collect()
    }

    fn run(&self, code: &str) -> Value {
        self.h.call(&self.h.owner, "run_sdk", json!({"code": code}))
    }

    /// A `tools/call` that may fail at the protocol level: the HTTP status and the JSON-RPC
    /// response.
    fn call(&self, tool: &str, args: Value) -> (u16, Value) {
        self.h.rpc(
            "/mcp",
            &self.h.owner,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
    }
}

fn diff(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in after {
        match before.get(k) {
            None => out.push(format!("+ {k}")),
            Some(old) if old != v => out.push(format!("~ {k}")),
            _ => {}
        }
    }
    for k in before.keys().filter(|k| !after.contains_key(*k)) {
        out.push(format!("- {k}"));
    }
    out
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    Read,
    Write,
    Commit,
}

/// The error a request got, checked for shape: a tool result with `isError: true` and a JSON
/// `{error: {code, message}}` text, a JSON-RPC error (a failure before the tool ran, e.g.
/// reading the token), or a REST `{error: {code, message}}`; the message names the failure.
fn error_of(status: u16, body: &Value) -> Value {
    let e = if status == 200 && body.get("result").is_some() {
        let r = &body["result"];
        assert_eq!(r["isError"], true, "{body}");
        let text = r["content"][0]["text"].as_str().unwrap();
        serde_json::from_str::<Value>(text).unwrap()["error"].clone()
    } else if let Some(rpc) = body.get("error").filter(|e| e["code"].is_i64()) {
        assert_eq!(status, 500, "{body}");
        assert_eq!(rpc["code"], -32603, "{body}");
        json!({"code": "internal", "message": rpc["message"]})
    } else {
        assert_eq!(status, 500, "{body}");
        body["error"].clone()
    };
    assert_eq!(e["code"], "internal", "{body}");
    assert!(e["message"].as_str().unwrap().contains(INJECTED), "{body}");
    e
}

/// Where failures surfaced, for the assertions of each test.
#[derive(Debug, Default)]
struct Sweep {
    /// Positions whose failure came back as a tool or REST error (the request was served).
    served: Vec<u64>,
    /// Positions whose failure came back as a JSON-RPC error (before the tool ran).
    protocol: Vec<u64>,
    /// Positions whose failure did not fail the request (a post-commit read, logged).
    tolerated: Vec<u64>,
    /// The structured error of each failed position.
    errors: Vec<Value>,
    /// The answer once the armed position was beyond what the request does.
    success: Value,
}

/// Fails the 1st, 2nd, 3rd … operation of `kind` that `request` makes, one position per
/// attempt, until an attempt gets through without reaching the armed position (or past a
/// tolerated one). Every failed
/// attempt must be a clean error that leaves every stored key as it was, but for new keys
/// `extra` allows (an audit record of the failed run).
fn sweep(
    f: &Faulty,
    kind: Fault,
    extra: impl Fn(&str) -> bool,
    request: impl Fn() -> (u16, Value),
) -> Sweep {
    let mut out = Sweep::default();
    for n in 1..=500 {
        let before = f.dump();
        let injected = f.faults.injected();
        match kind {
            Fault::Read => f.faults.fail_read_at(n),
            Fault::Write => f.faults.fail_write_at(n),
            Fault::Commit => f.faults.fail_commit_at(n),
        }
        let (status, body) = request();
        if f.faults.injected() == injected {
            f.faults.heal();
            assert!(n > 1, "{kind:?}: the request made no such operation");
            out.success = body;
            return out;
        }
        let served = status == 200
            && (body["result"]["isError"] == false
                || (body.get("result").is_none() && body.get("error").is_none()));
        if served {
            // Served despite the fault: only work after the request's own commit may fail so,
            // and is logged: the lookup of behaviors to react to new events, and the Action a
            // REST write is audited with.
            let what = f.faults.last_error().unwrap();
            assert!(
                what.ends_with("scan o/acme/beh/") || what.contains("writes (o/acme/act/"),
                "{kind:?} #{n}: {what} was swallowed"
            );
            out.tolerated.push(n);
            out.success = body;
            return out;
        }
        out.errors.push(error_of(status, &body));
        if body["error"]["code"].is_i64() {
            out.protocol.push(n);
        } else {
            out.served.push(n);
        }
        let changed: Vec<_> = diff(&before, &f.dump())
            .into_iter()
            .filter(|d| !(d.starts_with("+ ") && extra(&d[2..])))
            .collect();
        assert!(
            changed.is_empty(),
            "{kind:?} #{n} left partial state: {changed:?}"
        );
    }
    panic!("{kind:?}: still failing after 500 positions");
}

/// The structured result of a successful tool call.
fn ok(status: u16, body: &Value) -> Value {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    body["result"]["structuredContent"].clone()
}

fn nothing_else(_: &str) -> bool {
    false
}

/// An audit record of a failed run (an Action); nothing else.
fn an_action(key: &str) -> bool {
    key.starts_with("o/acme/act/")
}

#[test]
fn a_failed_save_memory_keeps_none_of_its_memories_and_the_retry_saves_them_all() {
    for kind in [Fault::Read, Fault::Write, Fault::Commit] {
        let f = setup();
        let s = sweep(&f, kind, nothing_else, || {
            f.call(
                "save_memory",
                json!({"memories": [
                    {"content": "the osprey nests on the north tower", "idempotency_key": "osprey-1"},
                    {"content": "the osprey eats trout from the reservoir", "idempotency_key": "osprey-2"},
                    {"content": "the osprey migrates in september", "idempotency_key": "osprey-3"}
                ]}),
            )
        });
        match kind {
            // Authentication reads fail as JSON-RPC errors, the tool's own as tool errors.
            Fault::Read => assert!(!s.protocol.is_empty() && !s.served.is_empty(), "{s:?}"),
            // Each memory is several rows (event, sequence, idempotency, dedupe), all in one
            // batch: failing any of them fails the batch.
            Fault::Write => assert!(s.served.len() >= 9, "{s:?}"),
            Fault::Commit => assert_eq!(s.served, [1], "{s:?}"),
        }
        let ids = ok(200, &s.success)["ids"].as_array().unwrap().clone();
        assert_eq!(ids.len(), 3);
        let found = f.h.search(&f.h.owner, json!({"query": "osprey"}));
        assert_eq!(found.len(), 3, "{kind:?}: {found:?}");
    }
}

#[test]
fn a_failed_run_sdk_writes_only_its_action_and_reports_a_structured_error() {
    let code = "const list = await client.entities.list({type: 'ticket'});\n\
        const a = await client.entities.create({type: 'ticket', name: 'first ' + list.items.length});\n\
        const b = await client.entities.create({type: 'ticket', name: 'second'});\n\
        await client.memory.save({content: 'the kingfisher ticket pair'});\n\
        return [a.id, b.id];";
    for kind in [Fault::Read, Fault::Write, Fault::Commit] {
        let f = setup();
        let s = sweep(&f, kind, an_action, || {
            f.call("run_sdk", json!({"code": code}))
        });
        match kind {
            Fault::Read => assert!(!s.protocol.is_empty() && !s.served.is_empty(), "{s:?}"),
            // Two entities with their index rows, a memory, the Action: one batch.
            Fault::Write => assert!(s.served.len() >= 6, "{s:?}"),
            Fault::Commit => assert_eq!(s.served, [1], "{s:?}"),
        }
        let ids = ok(200, &s.success)["result"].as_array().unwrap().clone();
        assert_eq!(ids.len(), 2);
        let r = f.run(
            "return (await client.entities.list({type: 'ticket'})).items.map(t => t.name).sort()",
        );
        assert_eq!(
            r["structuredContent"]["result"],
            json!(["first 0", "second"]),
            "{r}"
        );
        if let Fault::Commit = kind {
            // The run's error says what failed and names the Action that records it.
            let e = &s.errors[0];
            assert!(
                e["message"].as_str().unwrap().contains("could not commit"),
                "{e}"
            );
            let r = f.run(&format!(
                "return (await client.actions.get({{id: '{}'}})).status",
                e["action_id"].as_str().unwrap()
            ));
            assert_eq!(r["structuredContent"]["result"], "error", "{r}");
        }
    }
}

impl Faulty {
    /// `POST /api/acme/{method}` as the owner: the HTTP status and the JSON body.
    fn rest(&self, method: &str, args: Value) -> (u16, Value) {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("/api/acme/{method}"))
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {}", self.h.owner))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&args).unwrap())
            .unwrap();
        let response = block_on(self.h.lore.handle(req));
        let status = response.status().as_u16();
        (
            status,
            serde_json::from_slice(response.body()).unwrap_or(Value::Null),
        )
    }
}

#[test]
fn a_failed_entity_create_leaves_neither_the_entity_nor_its_index_rows() {
    for kind in [Fault::Read, Fault::Write, Fault::Commit] {
        let f = setup();
        let s = sweep(&f, kind, an_action, || {
            f.rest(
                "entities.create",
                json!({"type": "ticket", "name": "heron nest survey", "properties": {"title": "survey"}}),
            )
        });
        // REST answers every failure itself, authentication included.
        assert!(s.protocol.is_empty(), "{s:?}");
        match kind {
            Fault::Read => assert!(!s.served.is_empty(), "{s:?}"),
            // The entity and its index rows are one batch.
            Fault::Write => assert!(s.served.len() >= 2, "{s:?}"),
            Fault::Commit => assert_eq!(s.served, [1], "{s:?}"),
        }
        let id = s.success["id"].as_str().unwrap().to_string();
        let (status, got) = f.rest("entities.get", json!({"id": id}));
        assert_eq!(
            (status, got["name"].clone()),
            (200, json!("heron nest survey"))
        );
        let listed = f.rest("entities.list", json!({"type": "ticket"})).1;
        assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
        let rows = ok_sql(&f, "SELECT name FROM ticket");
        assert_eq!(rows, json!([["heron nest survey"]]));
    }
}

fn ok_sql(f: &Faulty, sql: &str) -> Value {
    let (status, body) = f.call("query_sql", json!({"sql": sql}));
    ok(status, &body)["rows"].clone()
}

#[test]
fn a_read_failing_mid_search_memory_is_an_error_and_the_next_search_finds_everything() {
    let f = setup();
    // New memories the search has to read past its cached index.
    for text in [
        "the heron fishes at dawn",
        "a grey heron on the weir",
        "heron chicks hatch in april",
    ] {
        f.h.save(&f.h.owner, json!({"content": text}));
    }
    let s = sweep(&f, Fault::Read, nothing_else, || {
        f.call("search_memory", json!({"query": "heron", "limit": 10}))
    });
    assert!(!s.served.is_empty(), "{s:?}");
    let found = ok(200, &s.success)["results"].as_array().unwrap().len();
    assert_eq!(found, 4);
    // A failure while the index caught up must not have cached a partial index.
    let again =
        f.h.search(&f.h.owner, json!({"query": "heron", "limit": 10}));
    assert_eq!(again.len(), 4);
}

#[test]
fn a_read_failing_mid_query_sql_is_an_error_and_the_next_query_sees_every_row() {
    let f = setup();
    let r = f.run(
        "for (const n of ['a', 'b', 'c']) await client.entities.create({type: 'ticket', name: n}); return 1",
    );
    assert_eq!(r["isError"], false, "{r}");
    let s = sweep(&f, Fault::Read, nothing_else, || {
        f.call(
            "query_sql",
            json!({"sql": "SELECT t.name, count(*) AS n FROM ticket t JOIN entities e ON e.id = t.id GROUP BY t.name ORDER BY t.name"}),
        )
    });
    assert!(!s.served.is_empty(), "{s:?}");
    assert_eq!(
        ok(200, &s.success)["rows"],
        json!([["a", 1], ["b", 1], ["c", 1]])
    );
    // A failure while a table loaded must not have cached part of it.
    assert_eq!(
        ok_sql(&f, "SELECT name FROM ticket ORDER BY name"),
        json!([["a"], ["b"], ["c"]])
    );
}

#[test]
fn a_script_that_loses_its_commit_race_runs_again_and_commits_once() {
    let f = setup();
    let before = f.dump();
    // The script's commit (its writes and its Action in one batch) is answered as if another
    // writer had changed what it read: nothing was written, so it runs again and commits.
    f.faults.lose_race_at(1);
    let r = f.run(
        "const saved = await client.memory.save({content: 'The kiln fires on Thursdays.'}); return saved.ids.length",
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["result"], 1);
    assert_eq!(f.faults.injected(), 1);
    let events: Vec<String> = diff(&before, &f.dump())
        .into_iter()
        .filter(|k| k.contains("/ev/"))
        .collect();
    assert_eq!(events.len(), 1, "saved once: {events:?}");
    let found = f.h.search(&f.h.owner, json!({"query": "kiln Thursdays"}));
    assert_eq!(
        found
            .iter()
            .filter(|m| m["content"] == "The kiln fires on Thursdays.")
            .count(),
        1
    );
}
