//! A caller resolved for a bearer token is reused by the next request with that token
//! (`lore_directory::callers`): a warm request reads the org's auth stamp and nothing else to
//! authenticate, and every change that ends or narrows access (a revocation, a demotion, a
//! removal), made through another instance over the same store, holds at the next request.

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::model::{Role, Scopes};
use lore_base::storage::memory::MemoryStorage;
use lore_directory::admin::{self, InitOutcome, TokenRequest};
use lore_front::{Config, Lore};
use lore_testing::faulty::FaultyStorage;
use lore_testing::ports::step_ports;

use crate::common;

const V26: &str = "2026-07-28";

struct Two {
    /// The instance under test, over a store that counts its reads.
    lore: Lore,
    counted: Rc<FaultyStorage>,
    /// Another instance over the same store (another process, or another org object).
    other: Lore,
    owner: String,
}

fn two() -> Two {
    let store = Rc::new(MemoryStorage::new());
    let counted = Rc::new(FaultyStorage::new(store.clone()));
    let lore = Lore::new(step_ports(counted.clone(), 7), Config::default());
    let other = Lore::new(step_ports(store, 7), Config::default());
    let owner = match block_on(admin::init(other.ports(), "default")).unwrap() {
        InitOutcome::Created(t) => t.token,
        o => panic!("{o:?}"),
    };
    Two {
        lore,
        counted,
        other,
        owner,
    }
}

fn post(lore: &Lore, token: &str, path: &str, method: &str, body: &Value) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if path.starts_with("/mcp") {
        req = req
            .header("mcp-protocol-version", V26)
            .header("mcp-method", method);
        if method == "tools/call" {
            req = req.header("mcp-name", body["params"]["name"].as_str().unwrap());
        }
    }
    let response = block_on(lore.handle(req.body(serde_json::to_vec(body).unwrap()).unwrap()));
    let status = response.status().as_u16();
    let bytes = response.into_body();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": V26, "io.modelcontextprotocol/clientCapabilities": {} })
}

fn list(lore: &Lore, token: &str) -> (u16, Value) {
    post(
        lore,
        token,
        "/mcp",
        "tools/list",
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta()}}),
    )
}

fn save(lore: &Lore, token: &str, text: &str) -> (u16, Value) {
    post(
        lore,
        token,
        "/mcp",
        "tools/call",
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "save_memory", "arguments": {"content": text}, "_meta": meta()}}),
    )
}

fn member_token(t: &Two, role: Role) -> (String, String) {
    let issued = block_on(admin::create_token(
        t.other.ports(),
        TokenRequest {
            org: "default".into(),
            role: Some(role),
            scopes: Scopes::ALL,
            principal: None,
            name: None,
            expires_at_ms: None,
        },
    ))
    .unwrap();
    (issued.token, issued.principal)
}

/// The first request resolves the caller (token, principal, membership, stamp); every later one
/// with the same token reads the stamp alone, and a `tools/list` reads nothing else.
#[test]
fn a_warm_request_reads_only_the_auth_stamp() {
    let t = two();
    let (status, body) = list(&t.lore, &t.owner);
    assert_eq!(status, 200, "{body}");
    let (cold, _, _) = t.counted.counts();
    assert!(cold > 1, "the first request reads the directory: {cold}");
    for _ in 0..3 {
        let (before, _, _) = t.counted.counts();
        let (status, body) = list(&t.lore, &t.owner);
        assert_eq!(status, 200, "{body}");
        assert!(
            body["result"]["tools"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        );
        assert_eq!(body["id"], 3);
        let (after, _, _) = t.counted.counts();
        assert_eq!(after - before, 1, "one read: the org's auth stamp");
    }
}

/// A member demoted to viewer, or removed, through the other instance: the next request of
/// their token, whose caller this instance holds, gets the new role or is refused.
#[test]
fn a_demotion_or_removal_elsewhere_holds_at_the_next_request() {
    let t = two();
    let (token, principal) = member_token(&t, Role::Member);
    assert_eq!(save(&t.lore, &token, "first").0, 200);
    let (status, body) = save(&t.lore, &token, "second, from the cached caller");
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["result"]["isError"], true, "{body}");

    let (status, body) = post(
        &t.other,
        &t.owner,
        "/api/default/members.update",
        "",
        &json!({"principal_id": principal, "role": "viewer"}),
    );
    assert_eq!(status, 200, "{body}");
    let (_, body) = save(&t.lore, &token, "a viewer cannot save");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("viewer"), "{body}");
    assert_eq!(list(&t.lore, &token).0, 200, "a viewer still lists");

    let (status, body) = post(
        &t.other,
        &t.owner,
        "/api/default/members.remove",
        "",
        &json!({"principal_id": principal}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = list(&t.lore, &token);
    assert!(status == 401 || status == 403, "{status} {body}");
}

/// Callers are kept per token: two tokens of two principals never share one.
#[test]
fn callers_are_kept_per_token() {
    let t = two();
    let (viewer, _) = member_token(&t, Role::Viewer);
    assert_eq!(save(&t.lore, &t.owner, "the owner saves").0, 200);
    let (_, body) = save(&t.lore, &viewer, "the viewer may not");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let (_, body) = save(&t.lore, &t.owner, "the owner still saves");
    assert_ne!(body["result"]["isError"], true, "{body}");
    let (status, _) = list(&t.lore, "lore_not-a-real-token");
    assert_eq!(status, 401);
}

/// The result of a successful call of `tool`.
fn call(lore: &Lore, token: &str, tool: &str, arguments: Value) -> Value {
    let (status, body) = post(
        lore,
        token,
        "/mcp",
        "tools/call",
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta()}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["result"]["isError"], true, "{body}");
    body["result"].clone()
}

fn search(lore: &Lore, token: &str, query: &str) -> Value {
    call(lore, token, "search_memory", json!({"query": query}))["structuredContent"]["results"]
        .clone()
}

/// A warm `search_memory` repeated over an unchanged index reads the org's auth stamp and its
/// memory event sequence number, in one storage call, and nothing else (its answer is the text
/// kept from the first); a memory saved through the other instance moves the number, and the
/// next search finds it.
#[test]
fn a_warm_repeated_search_reads_the_stamp_and_the_sequence_alone() {
    let t = two();
    assert_eq!(
        save(&t.lore, &t.owner, "the heron nests by the weir").0,
        200
    );
    let first = search(&t.lore, &t.owner, "heron weir");
    assert_eq!(first.as_array().map(Vec::len), Some(1), "{first}");
    for _ in 0..3 {
        let (before, _, _) = t.counted.counts();
        assert_eq!(search(&t.lore, &t.owner, "heron weir"), first);
        let (after, _, _) = t.counted.counts();
        assert_eq!(
            after - before,
            1,
            "one read: the auth stamp with the sequence number"
        );
    }
    assert_eq!(
        save(&t.other, &t.owner, "a second heron by the weir").0,
        200
    );
    let (before, _, _) = t.counted.counts();
    let second = search(&t.lore, &t.owner, "heron weir");
    let (after, _, _) = t.counted.counts();
    assert_eq!(second.as_array().map(Vec::len), Some(2), "{second}");
    assert!(
        after - before > 1,
        "the new event is read: {}",
        after - before
    );
    assert_eq!(search(&t.lore, &t.owner, "heron weir"), second);
}

/// A warm `query_sql` over a table this instance keeps reads the org's auth stamp and its
/// records version in one storage call (then lists the org's types and feeds for its catalog);
/// a record written through the other instance moves the version, and the next query sees it.
#[test]
fn a_warm_repeated_query_reads_the_stamp_and_the_records_version_together() {
    let t = two();
    let run = |lore: &Lore, code: &str| call(lore, &t.owner, "run_sdk", json!({ "code": code }));
    run(
        &t.lore,
        "await $.templates.create({name: 'person'}); return 1",
    );
    run(
        &t.lore,
        "return (await $.entities.create({type: 'person', name: 'first'})).id",
    );
    let query = |sql: &str| call(&t.lore, &t.owner, "query_sql", json!({ "sql": sql }));
    let sql = "SELECT name FROM entities ORDER BY name";
    let first = query(sql)["structuredContent"].clone();
    for _ in 0..3 {
        let (before, _, _) = t.counted.counts();
        assert_eq!(query(sql)["structuredContent"], first);
        let (after, _, _) = t.counted.counts();
        assert_eq!(
            after - before,
            3,
            "three reads: the stamp with the records version, the catalog's types and feeds"
        );
    }
    run(
        &t.other,
        "return (await $.entities.create({type: 'person', name: 'second'})).id",
    );
    let second = query(sql)["structuredContent"].clone();
    assert_ne!(
        second, first,
        "the other instance's record is seen: {second}"
    );
}

/// Natively, the one read of a warm repeated search is answered from the values the
/// connection keeps (`src/kept.rs`): no SQLite statement at all, until a write of the org's
/// sequence number through another connection (another worker thread; another process is
/// `tests/processes.rs`) makes the next search read it, and find the new memory.
#[test]
fn natively_a_warm_repeated_search_runs_no_statement() {
    use lore::sqlite::SqliteStorage;
    let dir = common::Dir::new("callers-native");
    let db = dir.join("lore.db");
    let store = Rc::new(SqliteStorage::open(&db).unwrap());
    let lore = Lore::new(step_ports(store.clone(), 7), Config::default());
    let other = Lore::new(
        step_ports(Rc::new(SqliteStorage::open(&db).unwrap()), 7),
        Config::default(),
    );
    let owner = match block_on(admin::init(other.ports(), "default")).unwrap() {
        InitOutcome::Created(t) => t.token,
        o => panic!("{o:?}"),
    };
    assert_eq!(save(&lore, &owner, "the heron nests by the weir").0, 200);
    let first = search(&lore, &owner, "heron weir");
    search(&lore, &owner, "heron weir");
    for _ in 0..3 {
        let before = store.reads();
        assert_eq!(search(&lore, &owner, "heron weir"), first);
        assert_eq!(
            store.reads(),
            before,
            "a warm repeated search runs no statement"
        );
    }
    assert_eq!(save(&other, &owner, "a second heron by the weir").0, 200);
    let before = store.reads();
    let second = search(&lore, &owner, "heron weir");
    assert!(store.reads() > before, "the moved sequence number is read");
    assert_eq!(second.as_array().map(Vec::len), Some(2), "{second}");
    search(&lore, &owner, "heron weir");
    let before = store.reads();
    assert_eq!(search(&lore, &owner, "heron weir"), second);
    assert_eq!(store.reads(), before);
}
