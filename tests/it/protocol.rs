//! The MCP endpoint driven in-process through `Lore::handle` on the in-memory store: every
//! status code and error shape a client can meet, plus the golden `tools/list`.

use crate::common;
use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::model::{Role, Scopes};
use lore_base::ports::Ports;
use lore_directory::admin::{self, TokenRequest};
use lore_front::{Config, Lore};
use lore_testing::ports::{MemoryCache, StepClock};

struct Harness {
    lore: Lore,
    owner: String,
}

struct Reply {
    status: u16,
    headers: http::HeaderMap,
    body: Value,
}

const V26: &str = "2026-07-28";

fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": V26, "io.modelcontextprotocol/clientCapabilities": {} })
}

impl Harness {
    fn new() -> Self {
        Self::with_cache(None)
    }

    /// A harness whose core has `cache` as its cache port (as on Spin).
    fn with_cache(cache: Option<Rc<dyn lore_base::ports::Cache>>) -> Self {
        let ports = Ports {
            cache,
            ..common::memory_ports(7)
        };
        let common::Harness { lore, owner } =
            common::Harness::on_with(ports, "default", Config::default());
        Self { lore, owner }
    }

    fn token(&self, org: &str, role: Role, scopes: &str) -> String {
        common::token(&self.lore, org, role, scopes)
    }

    fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Reply {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1:8787");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let response = block_on(self.lore.handle(req.body(body).unwrap()));
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.into_body();
        let body = if headers
            .get("content-type")
            .is_some_and(|c| c == "text/event-stream")
        {
            // The last SSE event carries the response.
            let text = String::from_utf8(bytes).unwrap();
            let last = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back()
                .unwrap()
                .to_string();
            serde_json::from_str(&last).unwrap()
        } else if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    fn post_as(&self, token: &str, path: &str, extra: &[(&str, &str)], body: &Value) -> Reply {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        self.raw("POST", path, &headers, serde_json::to_vec(body).unwrap())
    }

    fn post(&self, body: &Value) -> Reply {
        self.post_as(&self.owner, "/mcp", &[], body)
    }

    /// A stateless (2026-07-28) tools/call with correct headers.
    fn call26(&self, token: &str, path: &str, tool: &str, args: Value) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": meta()}});
        let headers = [
            ("mcp-protocol-version", V26),
            ("mcp-method", "tools/call"),
            ("mcp-name", tool),
        ];
        self.post_as(token, path, &headers, &body)
    }

    fn call(&self, token: &str, tool: &str, args: Value) -> Value {
        let r = self.call26(token, "/mcp", tool, args);
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["result"].clone()
    }
}

fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

/// The product's list; the conformance-fixtures build adds the suite's fixtures to it.
#[cfg(not(feature = "conformance-fixtures"))]
#[test]
fn tools_list_is_a_golden_snapshot() {
    let h = Harness::new();
    let r = h.post(&rpc("tools/list", json!({})));
    assert_eq!(r.status, 200);
    let text = serde_json::to_string_pretty(&r.body["result"]).unwrap();
    expect_test::expect_file!["snapshots/tools_list.json"].assert_eq(&text);
}

#[test]
fn legacy_handshake_issues_a_session_that_delete_ends() {
    let h = Harness::new();
    let init = rpc(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let r = h.post(&init);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["result"]["protocolVersion"], "2025-06-18");
    let instructions = r.body["result"]["instructions"].as_str().unwrap();
    for tool in lore_engine::tools::listed(lore_base::model::Profile::Workspace) {
        assert!(
            instructions.contains(tool.name),
            "instructions omit {}",
            tool.name
        );
    }
    for name in ["query_sdk", "query_sql", "run_sdk"] {
        assert!(
            !instructions.contains(name) || lore_engine::tools::find(name).is_some(),
            "instructions name {name}, which does not exist yet"
        );
    }
    let sid = r.headers["mcp-session-id"].to_str().unwrap().to_string();
    let with_session = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        h.post_as(&h.owner, "/mcp", &with_session, &note).status,
        202
    );
    let r = h.post_as(&h.owner, "/mcp", &with_session, &rpc("ping", json!({})));
    assert_eq!(r.body["result"], json!({}));
    // Another principal cannot use the session.
    let other = h.token("default", Role::Member, "mcp:read,mcp:write");
    assert_eq!(
        h.post_as(&other, "/mcp", &with_session, &rpc("ping", json!({})))
            .status,
        404
    );
    let auth = format!("Bearer {}", h.owner);
    let del = h.raw(
        "DELETE",
        "/mcp",
        &[("authorization", &auth), ("mcp-session-id", &sid)],
        vec![],
    );
    assert_eq!(del.status, 204);
    let r = h.post_as(&h.owner, "/mcp", &with_session, &rpc("ping", json!({})));
    assert_eq!(r.status, 404);
    assert_eq!(r.body["error"]["code"], -32001);
    // Unknown versions are answered with the newest legacy one.
    let r = h.post(&rpc("initialize", json!({"protocolVersion": "2024-01-01", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})));
    assert_eq!(r.body["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn discover_and_stateless_results_carry_the_2026_fields() {
    let h = Harness::new();
    let headers = [
        ("mcp-protocol-version", V26),
        ("mcp-method", "server/discover"),
    ];
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &headers,
        &rpc("server/discover", json!({"_meta": meta()})),
    );
    assert_eq!(r.status, 200);
    let result = &r.body["result"];
    assert_eq!(result["resultType"], "complete");
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(V26))
    );
    assert!(result["capabilities"]["tools"].is_object());
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "lore"
    );
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string());
    let headers = [("mcp-protocol-version", V26), ("mcp-method", "tools/list")];
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &headers,
        &rpc("tools/list", json!({"_meta": meta()})),
    );
    assert_eq!(r.body["result"]["resultType"], "complete");
    assert_eq!(r.body["result"]["ttlMs"], 0);
    assert_eq!(r.body["result"]["cacheScope"], "private");
    // Sessions are ignored in this era.
    let headers = [
        ("mcp-protocol-version", V26),
        ("mcp-method", "tools/list"),
        ("mcp-session-id", "nonexistent"),
    ];
    assert_eq!(
        h.post_as(
            &h.owner,
            "/mcp",
            &headers,
            &rpc("tools/list", json!({"_meta": meta()}))
        )
        .status,
        200
    );
}

/// One malformed request: expected HTTP status and JSON-RPC error code.
fn check_error(h: &Harness, headers: &[(&str, &str)], body: &[u8], status: u16, code: i64) {
    let auth = format!("Bearer {}", h.owner);
    let mut all: Vec<(&str, &str)> = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    .into_iter()
    .filter(|(k, _)| !headers.iter().any(|(o, _)| o == k))
    .collect();
    all.extend_from_slice(headers);
    let r = h.raw("POST", "/mcp", &all, body.to_vec());
    assert_eq!(
        (r.status, r.body["error"]["code"].as_i64()),
        (status, Some(code)),
        "{} -> {}",
        String::from_utf8_lossy(body),
        r.body
    );
    assert!(!r.body["error"]["message"].as_str().unwrap().is_empty());
    // The server keeps serving.
    assert_eq!(h.post(&rpc("ping", json!({}))).status, 200);
}

#[test]
fn malformed_requests_get_the_right_status_and_code() {
    let h = Harness::new();
    check_error(&h, &[], b"{not json", 400, -32700);
    check_error(&h, &[], b"[]", 400, -32600);
    check_error(&h, &[], b"42", 400, -32600);
    check_error(&h, &[], br#"{"id":1,"method":"ping"}"#, 400, -32600);
    check_error(
        &h,
        &[],
        br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        400,
        -32600,
    );
    check_error(
        &h,
        &[],
        br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
        400,
        -32600,
    );
    check_error(
        &h,
        &[],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
        400,
        -32602,
    );
    check_error(
        &h,
        &[],
        br#"{"jsonrpc":"2.0","id":1,"method":"no/such"}"#,
        200,
        -32601,
    );
    check_error(
        &h,
        &[],
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}"#,
        200,
        -32602,
    );
    check_error(&h, &[], br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_memory","arguments":[]}}"#, 200, -32602);
    check_error(
        &h,
        &[("mcp-protocol-version", "1999-01-01")],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        400,
        -32022,
    );
    let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
    check_error(
        &h,
        &[("mcp-protocol-version", "2025-06-18")],
        batch,
        400,
        -32600,
    );
    check_error(
        &h,
        &[("content-type", "text/plain")],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        415,
        -32600,
    );
    check_error(
        &h,
        &[("origin", "http://evil.example")],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        403,
        -32003,
    );
    let big = vec![b' '; lore_front::DEFAULT_MAX_BODY + 1];
    check_error(&h, &[], &big, 413, -32600);

    // 2026-07-28 checks, in order: _meta, header agreement, version, Mcp-Method, Mcp-Name.
    let body =
        |meta: Value| serde_json::to_vec(&rpc("tools/list", json!({"_meta": meta}))).unwrap();
    let good = [("mcp-protocol-version", V26), ("mcp-method", "tools/list")];
    check_error(
        &h,
        &good,
        &body(json!({"io.modelcontextprotocol/protocolVersion": V26})),
        400,
        -32602,
    );
    let wrong_meta = json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}});
    check_error(&h, &good, &body(wrong_meta.clone()), 400, -32020);
    check_error(
        &h,
        &[
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "tools/list"),
        ],
        &body(wrong_meta),
        400,
        -32022,
    );
    check_error(
        &h,
        &[
            ("mcp-protocol-version", V26),
            ("mcp-method", "prompts/list"),
        ],
        &body(meta()),
        400,
        -32020,
    );
    check_error(
        &h,
        &[("mcp-protocol-version", V26)],
        &body(meta()),
        400,
        -32020,
    );
    let call = serde_json::to_vec(&rpc(
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": "x"}, "_meta": meta()}),
    ))
    .unwrap();
    check_error(
        &h,
        &[
            ("mcp-protocol-version", V26),
            ("mcp-method", "tools/call"),
            ("mcp-name", "save_memory"),
        ],
        &call,
        400,
        -32020,
    );
    check_error(
        &h,
        &[("mcp-protocol-version", V26), ("mcp-method", "tools/call")],
        &call,
        400,
        -32020,
    );
    let ping = serde_json::to_vec(&rpc("ping", json!({"_meta": meta()}))).unwrap();
    check_error(
        &h,
        &[("mcp-protocol-version", V26), ("mcp-method", "ping")],
        &ping,
        404,
        -32601,
    );

    // Methods other than POST and DELETE.
    let r = h.raw("GET", "/mcp", &[], vec![]);
    assert_eq!(r.status, 405);
    assert_eq!(h.raw("GET", "/healthz", &[], vec![]).status, 200);
    assert_eq!(h.raw("GET", "/nowhere", &[], vec![]).status, 404);
}

#[test]
fn batches_work_only_in_2025_03_26() {
    let h = Harness::new();
    let batch = json!([rpc("ping", json!({})), {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": 9, "method": "nope"}]);
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &[("mcp-protocol-version", "2025-03-26")],
        &batch,
    );
    assert_eq!(r.status, 200);
    let replies = r.body.as_array().unwrap();
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0]["result"], json!({}));
    assert_eq!(replies[1]["error"]["code"], -32601);
}

#[test]
fn bad_credentials_get_401_with_a_challenge() {
    let h = Harness::new();
    let ping = serde_json::to_vec(&rpc("ping", json!({}))).unwrap();
    let base = [
        ("content-type", "application/json"),
        ("accept", "application/json"),
    ];
    for auth in [
        None,
        Some("Bearer lore_nonsense"),
        Some("Bearer not-a-lore-token"),
        Some("Basic dXNlcjpwYXNz"),
    ] {
        let mut headers = base.to_vec();
        if let Some(a) = auth {
            headers.push(("authorization", a));
        }
        let r = h.raw("POST", "/mcp", &headers, ping.clone());
        assert_eq!(r.status, 401, "{auth:?}");
        assert!(
            r.headers["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer ")
        );
        assert_eq!(r.body["error"]["code"], -32005);
    }
}

#[test]
fn revoked_and_expired_tokens_stop_working() {
    let h = Harness::new();
    let request = TokenRequest {
        org: "default".into(),
        role: Some(Role::Member),
        scopes: Scopes::ALL,
        principal: None,
        name: None,
        expires_at_ms: Some(1),
    };
    let expired = block_on(admin::create_token(h.lore.ports(), request)).unwrap();
    assert_eq!(
        h.post_as(&expired.token, "/mcp", &[], &rpc("ping", json!({})))
            .status,
        401
    );
    let request = TokenRequest {
        org: "default".into(),
        role: Some(Role::Member),
        scopes: Scopes::ALL,
        principal: None,
        name: None,
        expires_at_ms: None,
    };
    let live = block_on(admin::create_token(h.lore.ports(), request)).unwrap();
    assert_eq!(
        h.post_as(&live.token, "/mcp", &[], &rpc("ping", json!({})))
            .status,
        200
    );
    block_on(admin::revoke_token(
        h.lore.ports(),
        "default",
        &live.token_id,
    ))
    .unwrap();
    let r = h.post_as(&live.token, "/mcp", &[], &rpc("ping", json!({})));
    assert_eq!(r.status, 401);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("revoked")
    );
    let listed = block_on(admin::list_tokens(h.lore.ports(), "default")).unwrap();
    assert!(listed.iter().any(|t| t.id == live.token_id && t.revoked));
}

/// Two instances over one store, each with its own cache (two processes, or two org objects):
/// a verified token is served from the cache, and a revocation made through the other
/// instance (the operator path, the SDK's `tokens.revoke`, an OAuth grant withdrawn) holds at
/// the next request although the copy is still cached: it renews the org's auth stamp, which
/// the copy is checked against. A change of the org's record (its profile) shows the same way.
#[test]
fn a_revocation_through_another_instance_holds_at_once_while_the_credential_is_cached() {
    let clock: Rc<dyn lore_base::ports::Clock> = Rc::new(StepClock::starting_at(common::START_MS));
    let cache = Rc::new(MemoryCache::new(clock.clone()));
    let h = Harness::with_cache(Some(cache.clone()));
    let other = Harness {
        lore: Lore::new(
            Ports {
                cache: Some(Rc::new(MemoryCache::new(clock))),
                ..h.lore.ports().clone()
            },
            Config::default(),
        ),
        owner: h.owner.clone(),
    };
    let issue = || {
        let request = TokenRequest {
            org: "default".into(),
            role: Some(Role::Member),
            scopes: Scopes::ALL,
            principal: None,
            name: None,
            expires_at_ms: None,
        };
        block_on(admin::create_token(other.lore.ports(), request)).unwrap()
    };
    let cached = |token: &str| {
        cache.contains(&lore_base::keys::cached_credential(
            &lore_base::keys::sha256_hex(token),
        ))
    };
    let ping = |token: &str| h.post_as(token, "/mcp", &[], &rpc("ping", json!({})));
    let refused = |token: &str| {
        let r = ping(token);
        assert_eq!(r.status, 401, "{}", r.body);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("revoked")
        );
    };

    // The operator path (`lore token revoke`, `/operator/token-revoke`).
    let t = issue();
    assert!(!cached(&t.token));
    assert_eq!(ping(&t.token).status, 200);
    assert!(cached(&t.token), "the first request caches the credential");
    let hits = cache.hits.get();
    assert_eq!(ping(&t.token).status, 200);
    assert_eq!(
        cache.hits.get(),
        hits,
        "the second request reuses the caller this instance resolved (lore_directory::callers)"
    );
    block_on(admin::revoke_token(
        other.lore.ports(),
        "default",
        &t.token_id,
    ))
    .unwrap();
    assert!(cached(&t.token), "the copy is still there");
    refused(&t.token);
    refused(&t.token);

    // The SDK path (`tokens.revoke` over REST), also warm.
    let t = issue();
    assert_eq!(ping(&t.token).status, 200);
    assert_eq!(ping(&t.token).status, 200);
    let r = other.post_as(
        &h.owner,
        "/api/default/tokens.revoke",
        &[],
        &json!({ "id": t.token_id }),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    refused(&t.token);
    // The owner's token still works under the new stamp, and its caller is kept.
    assert_eq!(ping(&h.owner).status, 200);
    let hits = cache.hits.get();
    assert_eq!(ping(&h.owner).status, 200);
    assert_eq!(
        cache.hits.get(),
        hits,
        "the caller kept, not the cache port, answers"
    );

    // The org's profile, changed through the other instance, applies at the next request.
    let profile = || {
        let r = h.post_as(
            &h.owner,
            "/mcp",
            &[],
            &rpc(
                "initialize",
                json!({
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}
                }),
            ),
        );
        r.body["result"]["instructions"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let before = profile();
    let r = other.post_as(
        &h.owner,
        "/api/default/organizations.update",
        &[],
        &json!({ "default_profile": "compact" }),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_ne!(profile(), before, "the new profile's instructions");
}

#[test]
fn save_search_supersede_and_idempotency() {
    let h = Harness::new();
    let rest = |name: &str, args: Value| {
        let r = h.post_as(&h.owner, &format!("/api/default/{name}"), &[], &args);
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    };
    rest(
        "manage_templates",
        json!({"action": "create", "name": "person"}),
    );
    let dana = rest("Person.create", json!({"name": "Dana"}))["id"].clone();
    let bad = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "x", "entity_ids": ["ent_01jzzzzzzzzzzzzzzzzzzzzzzz"]}),
    );
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("entity_ids/0"),
        "{bad}"
    );
    let saved = h.call(&h.owner, "save_memory", json!({"content": "Dana is responsible for invoices and payments", "kind": "fact", "entity_ids": [dana]}));
    let old = saved["structuredContent"]["ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    h.call(&h.owner, "save_memory", json!({"memories": [{"content": "Deploys happen on Fridays", "kind": "decision"}, {"content": "Sam prefers short answers", "kind": "preference"}]}));
    let found = h.call(
        &h.owner,
        "search_memory",
        json!({"query": "who handles invoice payments?"}),
    );
    let results = found["structuredContent"]["results"].as_array().unwrap();
    assert_eq!(results[0]["id"], old.as_str());
    assert_eq!(results[0]["entity_ids"], json!([dana]));
    let only_decisions = h.call(
        &h.owner,
        "search_memory",
        json!({"query": "fridays deploys", "kinds": ["preference"]}),
    );
    assert!(
        only_decisions["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let newer = h.call(&h.owner, "save_memory", json!({"content": "Priya now owns invoices and payments", "kind": "fact", "supersedes_event_id": old}));
    let new_id = newer["structuredContent"]["ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    let found = h.call(&h.owner, "search_memory", json!({"query": "invoices"}));
    let ids: Vec<&str> = found["structuredContent"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [new_id.as_str()]);
    let all = h.call(
        &h.owner,
        "search_memory",
        json!({"query": "invoices", "include_superseded": true}),
    );
    let hidden = all["structuredContent"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == old.as_str())
        .cloned()
        .unwrap();
    assert_eq!(hidden["superseded_by"], new_id.as_str());

    let bad = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "x", "supersedes_event_id": "evt_01aaaaaaaaaaaaaaaaaaaaaaaa"}),
    );
    assert_eq!(bad["isError"], true);
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("supersedes_event_id")
    );

    let a = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "retry me", "idempotency_key": "k1"}),
    );
    let b = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "retry me", "idempotency_key": "k1"}),
    );
    assert_eq!(a["structuredContent"], b["structuredContent"]);
    let c = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "something else", "idempotency_key": "k1"}),
    );
    assert_eq!(c["isError"], true);

    let invalid = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "x", "kind": "rumour"}),
    );
    assert_eq!(invalid["isError"], true);
    let text: Value =
        serde_json::from_str(invalid["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["error"]["code"], "invalid_argument");
    assert_eq!(text["error"]["field"], "kind");
}

#[test]
fn orgs_are_isolated_and_roles_and_scopes_are_enforced() {
    let h = Harness::new();
    h.call(
        &h.owner,
        "save_memory",
        json!({"content": "The default org's secret plan is Zephyr"}),
    );
    let other = block_on(admin::create_org(h.lore.ports(), "other"))
        .unwrap()
        .token;
    let r = h.call(
        &other,
        "search_memory",
        json!({"query": "secret plan zephyr"}),
    );
    assert!(
        r["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let r = h.call26(
        &other,
        "/mcp/default",
        "search_memory",
        json!({"query": "zephyr"}),
    );
    assert_eq!(r.status, 403);
    let r = h.call26(
        &h.owner,
        "/mcp/other",
        "search_memory",
        json!({"query": "zephyr"}),
    );
    assert_eq!(r.status, 403);
    let r = h.call26(
        &h.owner,
        "/mcp/default",
        "search_memory",
        json!({"query": "zephyr"}),
    );
    assert_eq!(
        r.body["result"]["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let r = h.call26(
        &h.owner,
        "/mcp/NOT_AN_ORG",
        "search_memory",
        json!({"query": "zephyr"}),
    );
    assert_eq!(r.status, 403);

    let reader = h.token("default", Role::Member, "mcp:read");
    let r = h.call26(&reader, "/mcp", "save_memory", json!({"content": "nope"}));
    assert_eq!(r.status, 403);
    assert!(
        r.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("insufficient_scope")
    );
    assert_eq!(
        h.call(&reader, "search_memory", json!({"query": "zephyr"}))["isError"],
        false
    );

    let viewer = h.token("default", Role::Viewer, "mcp:read,mcp:write");
    let r = h.call(&viewer, "save_memory", json!({"content": "nope"}));
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("needs_write")
    );
    let all = h.call(&h.owner, "search_memory", json!({"query": "nope"}));
    assert!(
        all["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .is_empty(),
        "refused writes left nothing behind"
    );
}

#[test]
fn progress_tokens_stream_progress_before_the_result() {
    let h = Harness::new();
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "search_memory", "arguments": {"query": "x"}, "_meta": {"progressToken": "p1"}}});
    let auth = format!("Bearer {}", h.owner);
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let response = block_on(h.lore.handle({
        let mut b = http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", "localhost");
        for (k, v) in headers {
            b = b.header(k, v);
        }
        b.body(serde_json::to_vec(&body).unwrap()).unwrap()
    }));
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = String::from_utf8(response.into_body()).unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 3);
    assert_eq!(events[0]["method"], "notifications/progress");
    assert_eq!(events[0]["params"]["progressToken"], "p1");
    assert_eq!(events[2]["id"], 3);
}

#[test]
fn instances_sharing_one_store_see_each_others_writes() {
    // Two core instances on one store, like two worker threads or two edge isolates.
    let h = Harness::new();
    let second = Lore::new(h.lore.ports().clone(), Config::default());
    let second = Harness {
        lore: second,
        owner: h.owner.clone(),
    };
    assert!(second.call(&h.owner, "search_memory", json!({"query": "kiwi"}))["structuredContent"]["results"].as_array().unwrap().is_empty());
    h.call(
        &h.owner,
        "save_memory",
        json!({"content": "The office kiwi plant needs water on Mondays"}),
    );
    let found = second.call(&h.owner, "search_memory", json!({"query": "kiwi"}));
    assert_eq!(
        found["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    h.call(
        &h.owner,
        "save_memory",
        json!({"content": "A second kiwi fact"}),
    );
    let found = second.call(&h.owner, "search_memory", json!({"query": "kiwi"}));
    assert_eq!(
        found["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn allowed_browser_origins_get_cors_headers() {
    let h = Harness::new();
    let preflight = h.raw(
        "OPTIONS",
        "/mcp",
        &[
            ("origin", "http://localhost:8787"),
            ("access-control-request-method", "POST"),
        ],
        vec![],
    );
    assert_eq!(preflight.status, 204);
    assert_eq!(
        preflight.headers["access-control-allow-origin"],
        "http://localhost:8787"
    );
    assert!(
        preflight.headers["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("mcp-protocol-version")
    );
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &[("origin", "http://localhost:8787")],
        &rpc("ping", json!({})),
    );
    assert_eq!(r.status, 200);
    assert!(
        r.headers["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("mcp-session-id")
    );
    let evil = h.raw(
        "OPTIONS",
        "/mcp",
        &[("origin", "http://evil.example")],
        vec![],
    );
    assert_eq!(evil.status, 403);
    assert!(evil.headers.get("access-control-allow-origin").is_none());
}

#[test]
fn legacy_requests_may_name_their_version_in_meta() {
    let h = Harness::new();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25", "io.modelcontextprotocol/clientCapabilities": {}});
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &[("mcp-protocol-version", "2025-11-25")],
        &rpc("tools/list", json!({"_meta": meta})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body["result"]["resultType"].is_null(),
        "legacy results carry no resultType"
    );
}

#[test]
fn an_idempotency_key_repeated_within_one_batch_saves_once() {
    let h = Harness::new();
    let same = json!({"content": "Standup moved to 9:30", "idempotency_key": "standup"});
    let r = h.call(&h.owner, "save_memory", json!({"memories": [same, same]}));
    let ids = r["structuredContent"]["ids"].as_array().unwrap();
    assert_eq!(ids[0], ids[1]);
    let found = h.call(&h.owner, "search_memory", json!({"query": "standup"}));
    assert_eq!(
        found["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let clash = json!({"memories": [
        {"content": "A", "idempotency_key": "k"},
        {"content": "B", "idempotency_key": "k"}
    ]});
    let r = h.call(&h.owner, "save_memory", clash);
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("memories/1/idempotency_key")
    );
}

#[test]
fn a_late_commit_with_an_older_timestamp_is_still_found() {
    // Regression: the index used to rescan only the last 5 s before its newest event, so an
    // event committed late (lock wait, clock skew between hosts) was missed forever.
    let h = Harness::new();
    let skewed = Ports {
        clock: Rc::new(StepClock::starting_at(common::START_MS + 3_600_000)),
        ..h.lore.ports().clone()
    };
    let ahead = Harness {
        lore: Lore::new(skewed, Config::default()),
        owner: h.owner.clone(),
    };
    ahead.call(
        &h.owner,
        "save_memory",
        json!({"content": "The late fact about zebras"}),
    );
    let found = ahead.call(&h.owner, "search_memory", json!({"query": "zebras"}));
    assert_eq!(
        found["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    h.call(
        &h.owner,
        "save_memory",
        json!({"content": "The early fact about zebras"}),
    );
    let found = ahead.call(&h.owner, "search_memory", json!({"query": "early zebras"}));
    let results = found["structuredContent"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["content"], "The early fact about zebras");
}

#[test]
fn batch_saves_refuse_fields_beside_the_list_and_keys_are_per_principal() {
    let h = Harness::new();
    let r = h.call(
        &h.owner,
        "save_memory",
        json!({"memories": [{"content": "x"}], "idempotency_key": "b1"}),
    );
    assert_eq!(
        r["isError"], true,
        "a top-level idempotency_key would be silently ignored"
    );
    let member = h.token("default", Role::Member, "mcp:read,mcp:write");
    let mine = h.call(
        &member,
        "save_memory",
        json!({"content": "Dana owns invoices", "idempotency_key": "k1"}),
    );
    // The same key with other content: no clash, because keys are per principal.
    let theirs = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "Priya owns payroll", "idempotency_key": "k1"}),
    );
    assert_ne!(
        mine["structuredContent"]["ids"],
        theirs["structuredContent"]["ids"]
    );
    let other = h.call(
        &h.owner,
        "save_memory",
        json!({"content": "Something else", "idempotency_key": "k2"}),
    );
    assert_eq!(other["isError"], false);
    let blocked = h.call(
        &member,
        "save_memory",
        json!({"content": "Mine", "idempotency_key": "k2"}),
    );
    assert_eq!(
        blocked["isError"], false,
        "another principal's key does not block mine"
    );
    let big = json!({"content": "x", "payload": {"blob": "y".repeat(20_000)}});
    let r = h.call(&h.owner, "save_memory", big);
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("payload")
    );
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let h = Harness::new();
    let ping = serde_json::to_vec(&rpc("ping", json!({}))).unwrap();
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} {}", h.owner);
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ];
        assert_eq!(
            h.raw("POST", "/mcp", &headers, ping.clone()).status,
            200,
            "{scheme}"
        );
    }
}

#[test]
fn batches_follow_the_session_version_and_sessions_expire() {
    let h = Harness::new();
    let init = rpc(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let sid = h.post(&init).headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let batch = json!([rpc("ping", json!({}))]);
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &[("mcp-session-id", sid.as_str())],
        &batch,
    );
    assert_eq!(
        r.status, 400,
        "a 2025-06-18 session has no batches: {}",
        r.body
    );
    let r = h.post_as(
        &h.owner,
        "/mcp",
        &[
            ("mcp-session-id", sid.as_str()),
            ("mcp-protocol-version", "2025-03-26"),
        ],
        &batch,
    );
    assert_eq!(
        r.status, 400,
        "a header contradicting the session is refused"
    );
    // A day later the session is gone.
    let later = Ports {
        clock: Rc::new(StepClock::starting_at(common::START_MS + 25 * 3_600_000)),
        ..h.lore.ports().clone()
    };
    let later = Harness {
        lore: Lore::new(later, Config::default()),
        owner: h.owner.clone(),
    };
    let r = later.post_as(
        &h.owner,
        "/mcp",
        &[("mcp-session-id", sid.as_str())],
        &rpc("ping", json!({})),
    );
    assert_eq!(r.status, 404);
}

#[test]
fn no_save_is_lost_silently_dedupe_is_only_against_current_equal_memories_and_says_so() {
    let h = Harness::new();
    let save = |token: &str, args: Value| -> Value {
        let r = h.call(token, "save_memory", args);
        assert_eq!(r["isError"], false, "{r}");
        r["structuredContent"].clone()
    };
    let id = |r: &Value| r["ids"][0].as_str().unwrap().to_string();
    let current = |query: &str| -> Vec<String> {
        h.call(&h.owner, "search_memory", json!({"query": query}))["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    // Decide, reverse, then revert: the reverted text is a memory again, current and found.
    let a = save(
        &h.owner,
        json!({"content": "Ship on Fridays", "kind": "decision"}),
    );
    assert_eq!(a["deduplicated"], false);
    let b = save(
        &h.owner,
        json!({"content": "Never ship on Fridays", "kind": "decision", "supersedes_event_id": id(&a)}),
    );
    let c = save(
        &h.owner,
        json!({"content": "Ship on Fridays", "kind": "decision", "supersedes_event_id": id(&b)}),
    );
    assert_ne!(id(&c), id(&a));
    // And without supersedes_event_id, saving a superseded memory's text again stores it anew.
    let x = save(
        &h.owner,
        json!({"content": "The office is in Lyon", "kind": "fact"}),
    );
    let y = save(
        &h.owner,
        json!({"content": "The office is in Paris", "kind": "fact", "supersedes_event_id": id(&x)}),
    );
    let x2 = save(
        &h.owner,
        json!({"content": "The office is in Lyon", "kind": "fact"}),
    );
    assert_ne!(
        id(&x2),
        id(&x),
        "a superseded memory is not current: the save is new"
    );
    assert_eq!(x2["deduplicated"], false);
    assert!(
        current("office Lyon").contains(&id(&x2)),
        "the reverted memory is found"
    );
    assert!(current("office Paris").contains(&id(&y)));
    // Equal in text, entities, kind, payload and author, and current: deduplicated, and said.
    let again = save(
        &h.owner,
        json!({"content": "  the OFFICE is in   lyon ", "kind": "fact"}),
    );
    assert_eq!(
        (id(&again), again["deduplicated"].clone()),
        (id(&x2), json!(true))
    );
    // Another kind, another payload or another author is another memory.
    let kind = save(
        &h.owner,
        json!({"content": "The office is in Lyon", "kind": "observation"}),
    );
    let payload = save(
        &h.owner,
        json!({"content": "The office is in Lyon", "kind": "fact", "payload": {"source": "hr"}}),
    );
    let agent = h.token("default", Role::Member, "mcp:read,write");
    let other = save(
        &agent,
        json!({"content": "The office is in Lyon", "kind": "fact"}),
    );
    let all = [id(&x2), id(&kind), id(&payload), id(&other)];
    assert_eq!(
        all.iter().collect::<std::collections::HashSet<_>>().len(),
        4,
        "{all:?}"
    );
    for r in [&kind, &payload, &other] {
        assert_eq!(r["deduplicated"], false, "{r}");
    }
    // A batch says which of its memories were deduplicated.
    let batch = save(
        &h.owner,
        json!({"memories": [
            {"content": "A brand new fact"},
            {"content": "The office is in Lyon", "kind": "fact"},
            {"content": "A brand new fact"}
        ]}),
    );
    assert_eq!(batch["deduplicated"], true);
    assert_eq!(batch["deduplicated_indexes"], json!([1, 2]));
    assert_eq!(batch["ids"][1], json!(id(&x2)));
    assert_eq!(batch["ids"][0], batch["ids"][2]);
    // An idempotent retry answers as the first save did.
    let first = save(
        &h.owner,
        json!({"content": "The office is in Lyon", "kind": "fact", "idempotency_key": "k1"}),
    );
    let retry = save(
        &h.owner,
        json!({"content": "The office is in Lyon", "kind": "fact", "idempotency_key": "k1"}),
    );
    assert_eq!(first, retry);
    assert_eq!(retry["deduplicated"], true);
}

#[test]
fn a_second_authorization_header_is_refused() {
    let h = Harness::new();
    let viewer = h.token("default", Role::Viewer, "mcp:read");
    let body = rpc("tools/list", json!({"_meta": meta()}));
    for (name, first, second) in [
        (
            "authorization",
            format!("Bearer {}", h.owner),
            format!("Bearer {viewer}"),
        ),
        (
            "authorization",
            format!("Bearer {viewer}"),
            format!("Bearer {}", h.owner),
        ),
        (
            "authorization",
            format!("Bearer {}", h.owner),
            "Basic eDp5".to_string(),
        ),
        (
            "mcp-protocol-version",
            V26.to_string(),
            "2025-11-25".to_string(),
        ),
    ] {
        let mut headers = vec![
            ("content-type", "application/json".to_string()),
            ("accept", "application/json, text/event-stream".to_string()),
            ("mcp-method", "tools/list".to_string()),
            (name, first),
            (name, second),
        ];
        if name != "authorization" {
            headers.push(("authorization", format!("Bearer {}", h.owner)));
        } else {
            headers.push(("mcp-protocol-version", V26.to_string()));
        }
        let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = h.raw("POST", "/mcp", &pairs, serde_json::to_vec(&body).unwrap());
        assert_eq!(r.status, 400, "{name}: {}", r.body);
        assert!(
            r.body
                .to_string()
                .contains(&format!("more than one {name} header")),
            "{}",
            r.body
        );
    }
    // The REST and webhook routes too.
    let pairs = [
        ("authorization", format!("Bearer {}", h.owner)),
        ("authorization", format!("Bearer {viewer}")),
        ("content-type", "application/json".to_string()),
    ];
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for path in ["/api/default/entities.list", "/hooks/default/inbox"] {
        let r = h.raw("POST", path, &pairs, b"{}".to_vec());
        assert_eq!(r.status, 400, "{path}: {}", r.body);
    }
}

#[test]
fn saving_the_same_text_about_the_same_entities_returns_the_first_id() {
    let h = Harness::new();
    let ids = |r: Value| -> Vec<String> {
        r["structuredContent"]["ids"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let first = ids(h.call(
        &h.owner,
        "save_memory",
        json!({"content": "Dana owns billing"}),
    ));
    // Case and spacing do not make a new memory; neither does a repeat inside one batch.
    let again = ids(h.call(
        &h.owner,
        "save_memory",
        json!({"memories": [
            {"content": "  dana   OWNS billing "},
            {"content": "Sam owns support"},
            {"content": "Sam owns support"}
        ]}),
    ));
    assert_eq!(again[0], first[0]);
    assert_ne!(again[1], first[0]);
    assert_eq!(again[1], again[2]);
    let found = h.call(&h.owner, "search_memory", json!({"query": "dana billing"}));
    let results = found["structuredContent"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{found}");
    // A replacement with the same words is a new memory, and takes the text over.
    let newer = ids(h.call(
        &h.owner,
        "save_memory",
        json!({"content": "Dana owns billing", "kind": "fact", "supersedes_event_id": first[0]}),
    ));
    assert_ne!(newer[0], first[0]);
    let repeat = ids(h.call(
        &h.owner,
        "save_memory",
        json!({"content": "Dana owns billing", "kind": "fact"}),
    ));
    assert_eq!(repeat[0], newer[0]);
    // Another org's identical text is its own memory.
    let other = block_on(admin::create_org(h.lore.ports(), "other"))
        .unwrap()
        .token;
    let theirs = h.call(
        &other,
        "save_memory",
        json!({"content": "Dana owns billing"}),
    );
    assert_ne!(ids(theirs)[0], first[0]);
}
