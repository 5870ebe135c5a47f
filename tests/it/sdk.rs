//! The SDK registry through the REST admin surface, in-process on the in-memory store: golden
//! snapshots of the generated `.d.ts` and of every admin tool's JSON Schema (so any change to
//! what clients see is a visible diff), `search_sdk` ranking and filtering, and the REST error
//! statuses.

use crate::common;
use std::rc::Rc;

use expect_test::expect_file;
use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::model::Role;
use lore_directory::admin;
use lore_front::{Config, Lore};

struct Harness {
    lore: Lore,
    owner: String,
}

struct Reply {
    status: u16,
    headers: http::HeaderMap,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }
}

impl Harness {
    fn new() -> Self {
        let ports = common::memory_ports(11);
        let common::Harness { lore, owner } =
            common::Harness::on_with(ports, "acme", Config::default());
        Self { lore, owner }
    }

    fn token(&self, role: Role, scopes: &str) -> String {
        common::token(&self.lore, "acme", role, scopes)
    }

    fn request(&self, method: &str, path: &str, token: &str, ctype: &str, body: Vec<u8>) -> Reply {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", ctype)
            .body(body)
            .unwrap();
        let response = block_on(self.lore.handle(req));
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            text: String::from_utf8(response.into_body()).unwrap(),
        }
    }

    fn api(&self, token: &str, name: &str, args: Value) -> Reply {
        self.request(
            "POST",
            &format!("/api/acme/{name}"),
            token,
            "application/json",
            serde_json::to_vec(&args).unwrap(),
        )
    }

    fn ok(&self, name: &str, args: Value) -> Value {
        let r = self.api(&self.owner, name, args);
        assert_eq!(r.status, 200, "{name}: {}", r.text);
        r.json()
    }

    /// Two sample types and a custom verb, as in the docs.
    fn sample_org(&self) {
        self.ok(
            "manage_templates",
            json!({"action": "create", "name": "ticket", "description": "A support ticket.",
                "schema": {"type": "object", "properties": {
                    "title": {"type": "string", "description": "One line."},
                    "priority": {"enum": ["low", "high"]},
                    "points": {"type": "integer"},
                    "labels": {"type": "array", "items": {"type": "string"}}
                }, "required": ["title"]}}),
        );
        self.ok(
            "manage_templates",
            json!({"action": "create", "name": "support_case",
            "schema": {"type": "object", "properties": {
                "customer": {"type": "string"},
                "open": {"type": "boolean"},
                "meta": {"type": "object", "additionalProperties": {"type": "number"}}
            }}}),
        );
        self.ok(
            "manage_connections",
            json!({"action": "create", "name": "tracker", "base_url": "https://tracker.example.com", "secret": "s3cret-value"}),
        );
        self.ok(
            "manage_operations",
            json!({"action": "create", "name": "escalate", "entity_type": "ticket",
                "description": "Escalate a ticket to the on-call engineer.",
                "kind": "http", "connection": "tracker", "method": "POST", "path": "/tickets/{id}/escalate",
                "args_schema": {"type": "object", "properties": {"id": {"type": "string"}, "reason": {"type": "string"}}, "required": ["id"]}}),
        );
    }
}

#[test]
fn declarations_are_a_golden_snapshot() {
    let h = Harness::new();
    h.sample_org();
    let r = h.request(
        "GET",
        "/api/acme/sdk.d.ts",
        &h.owner,
        "text/plain",
        Vec::new(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    // Principal ids differ per run; the rest is stable.
    let text = r
        .text
        .lines()
        .map(|l| {
            if l.starts_with("// TypeScript declarations") {
                "// TypeScript declarations (header line elided in the snapshot)".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    expect_file!["snapshots/sdk.d.ts"].assert_eq(&text);
    // Every type a method's promise names is declared in the file (tsc would refuse it).
    for (at, _) in text.match_indices("Promise<") {
        let name: String = text[at + "Promise<".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty()
            || ["void", "unknown", "string", "number", "boolean", "any"].contains(&name.as_str())
        {
            continue;
        }
        assert!(
            text.contains(&format!("interface {name} "))
                || text.contains(&format!("type {name} "))
                || text.contains(&format!("interface {name}<")),
            "{name} is returned but never declared"
        );
    }
}

#[test]
fn a_viewer_declarations_hold_only_read_methods() {
    let h = Harness::new();
    h.sample_org();
    let viewer = h.token(Role::Viewer, "mcp:read,write");
    let r = h.request(
        "GET",
        "/api/acme/sdk.d.ts",
        &viewer,
        "text/plain",
        Vec::new(),
    );
    assert_eq!(r.status, 200);
    assert!(r.text.contains("list(args?: {"), "{}", r.text);
    for absent in ["create(", "escalate(", "manage", "tokens:"] {
        assert!(!r.text.contains(absent), "a viewer sees {absent}");
    }
}

#[test]
fn admin_tool_schemas_are_a_golden_snapshot() {
    let all: serde_json::Map<String, Value> = lore_engine::tools::admin_tools()
        .map(|t| {
            let schema = t.input_schema();
            lore_base::schema::compile(&schema).expect("admin tool schemas compile");
            (
                t.name.to_string(),
                json!({"description": t.description, "inputSchema": schema}),
            )
        })
        .collect();
    expect_file!["snapshots/admin_tools.json"]
        .assert_eq(&serde_json::to_string_pretty(&Value::Object(all)).unwrap());
}

#[test]
fn admin_tools_are_not_on_tools_list() {
    let listed: Vec<&str> = [
        lore_base::model::Profile::Workspace,
        lore_base::model::Profile::Compact,
    ]
    .into_iter()
    .flat_map(lore_engine::tools::listed)
    .map(|t| t.name)
    .collect();
    for tool in lore_engine::tools::admin_tools() {
        assert!(
            !listed.contains(&tool.name),
            "{} is on tools/list",
            tool.name
        );
    }
}

fn search(h: &Harness, token: &str, args: Value) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_sdk", "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let req = http::Request::builder()
        .method("POST")
        .uri("/mcp/acme")
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "search_sdk")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let response = block_on(h.lore.handle(req));
    let v: Value = serde_json::from_slice(response.body()).unwrap();
    assert_eq!(v["result"]["isError"], json!(false), "{v}");
    v["result"]["structuredContent"]["methods"]
        .as_array()
        .unwrap()
        .clone()
}

fn paths(methods: &[Value]) -> Vec<String> {
    methods
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn search_sdk_finds_methods_by_meaning_and_respects_access() {
    let h = Harness::new();
    h.sample_org();
    let found = search(&h, &h.owner, json!({"query": "create a record"}));
    assert_eq!(found[0]["path"], "entities.create", "{:?}", paths(&found));
    assert_eq!(found[0]["access"], "write");
    assert!(
        found[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("entities.create(args: {")
    );
    let read = search(
        &h,
        &h.owner,
        json!({"query": "create a record", "mode": "read"}),
    );
    assert!(read.iter().all(|m| m["access"] == "read"), "{read:?}");
    assert!(!paths(&read).contains(&"entities.create".to_string()));
    let exact = search(&h, &h.owner, json!({"query": "relationships.list"}));
    assert_eq!(exact[0]["path"], "relationships.list");
    let ticket = paths(&search(
        &h,
        &h.owner,
        json!({"namespace": "Ticket", "limit": 100}),
    ));
    assert_eq!(
        ticket,
        [
            "Ticket.get",
            "Ticket.list",
            "Ticket.create",
            "Ticket.update",
            "Ticket.delete",
            "Ticket.link",
            "Ticket.escalate"
        ]
    );
    let escalate = search(&h, &h.owner, json!({"query": "escalate to on-call"}));
    assert_eq!(escalate[0]["path"], "Ticket.escalate");
    let viewer = h.token(Role::Viewer, "mcp:read,write");
    let seen = search(&h, &viewer, json!({"limit": 100}));
    assert!(
        seen.iter().all(|m| m["access"] == "read"),
        "{:?}",
        paths(&seen)
    );
    let member = h.token(Role::Member, "mcp:read,write");
    let seen = search(
        &h,
        &member,
        json!({"query": "define an entity type template"}),
    );
    assert!(
        seen.iter().all(|m| m["access"] != "admin"),
        "{:?}",
        paths(&seen)
    );
    let helpers = paths(&search(&h, &h.owner, json!({"query": "sleep"})));
    assert_eq!(helpers[0], "ctx.sleep");
}

#[test]
fn rest_errors_carry_stable_codes_and_statuses() {
    let h = Harness::new();
    h.sample_org();
    let read_only = h.token(Role::Member, "mcp:read");
    let viewer = h.token(Role::Viewer, "mcp:read,write");
    let create = json!({"name": "x", "properties": {"title": "x"}});
    let r = h.api(&read_only, "Ticket.create", create.clone());
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (403, json!("insufficient_scope"))
    );
    assert!(
        r.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("insufficient_scope")
    );
    let r = h.api(&viewer, "Ticket.create", create.clone());
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (403, json!("needs_write"))
    );
    let r = h.api(&viewer, "manage_templates", json!({"action": "list"}));
    assert_eq!(
        r.status, 200,
        "reading templates is a read method: {}",
        r.text
    );
    let r = h.api(
        &viewer,
        "manage_templates",
        json!({"action": "delete", "name": "ticket"}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (403, json!("needs_admin"))
    );
    let r = h.api(&h.owner, "manage_templates", json!({"action": "explode"}));
    assert_eq!(
        (r.status, r.json()["error"]["field"].clone()),
        (400, json!("action"))
    );
    let r = h.api(
        &h.owner,
        "entities.create",
        json!({"type": "ticket", "name": "x", "properties": {"title": 5}}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["field"].clone()),
        (400, json!("properties/title"))
    );
    let r = h.api(
        &h.owner,
        "entities.get",
        json!({"id": "ent_01jzzzzzzzzzzzzzzzzzzzzzzz"}),
    );
    assert_eq!(r.status, 404);
    let r = h.api(&h.owner, "no_such_tool", json!({}));
    assert_eq!(r.status, 404);
    let r = h.api("lore_wrong", "entities.list", json!({}));
    assert_eq!(r.status, 401);
    assert!(r.headers.contains_key("www-authenticate"));
    let r = h.request(
        "POST",
        "/api/acme/entities.list",
        &h.owner,
        "text/plain",
        b"{}".to_vec(),
    );
    assert_eq!(r.status, 415);
    let r = h.request(
        "POST",
        "/api/acme/entities.list",
        &h.owner,
        "application/json",
        b"{nope".to_vec(),
    );
    assert_eq!(r.status, 400);
    let r = h.request(
        "PUT",
        "/api/acme/entities.list",
        &h.owner,
        "application/json",
        b"{}".to_vec(),
    );
    assert_eq!(r.status, 405);
    let r = h.request(
        "POST",
        "/api/acme/entities.list",
        &h.owner,
        "application/json",
        vec![b' '; 5 << 20],
    );
    assert_eq!(r.status, 413);
    let r = h.request(
        "POST",
        "/api/elsewhere/entities.list",
        &h.owner,
        "application/json",
        b"{}".to_vec(),
    );
    assert_eq!(r.status, 403);
    // Script operations run in the sandbox; a failing one is a structured script error.
    h.ok(
        "manage_operations",
        json!({"action": "create", "name": "triage", "kind": "script", "code": "return 1"}),
    );
    let r = h.api(&h.owner, "operations.run", json!({"name": "triage"}));
    assert_eq!((r.status, r.json()), (200, json!(1)));
    h.ok(
        "manage_operations",
        json!({"action": "create", "name": "broken", "kind": "script", "code": "throw new Error('no')"}),
    );
    let r = h.api(&h.owner, "operations.run", json!({"name": "broken"}));
    assert_eq!(r.json()["error"]["code"], "script_error", "{}", r.text);
}

#[test]
fn writes_through_rest_are_audited_and_counted() {
    let h = Harness::new();
    h.sample_org();
    h.ok(
        "Ticket.create",
        json!({"name": "a", "properties": {"title": "a"}}),
    );
    let member = h.token(Role::Member, "mcp:read,write");
    let r = h.api(
        &member,
        "Ticket.create",
        json!({"name": "b", "properties": {"title": "b"}}),
    );
    assert_eq!(r.status, 200);
    let all = h.ok("actions.list", json!({"limit": 500}));
    let methods: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["steps"][0]["method"].as_str().unwrap())
        .collect();
    assert!(
        methods.contains(&"Ticket.create") && methods.contains(&"templates.create"),
        "{methods:?}"
    );
    // Reads are not audited, whichever route they take.
    h.ok("manage_templates", json!({"action": "list"}));
    h.ok("templates.list", json!({}));
    let again = h.ok("actions.list", json!({"limit": 500}));
    assert_eq!(again["items"], all["items"]);
    let mine = h.api(&member, "actions.list", json!({}));
    let mine = mine.json();
    assert_eq!(mine["items"].as_array().unwrap().len(), 1, "{mine}");
    let usage = h.ok(
        "query_metric",
        json!({"name": "tool_calls", "group_by": "tool"}),
    );
    let creates = usage["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "Ticket.create")
        .map(|s| s["value"].as_f64().unwrap());
    assert_eq!(creates, Some(2.0), "{usage}");
}

fn hook(h: &Harness, feed: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("/hooks/acme/{feed}"))
        .header("host", "127.0.0.1:8787");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = block_on(h.lore.handle(req.body(body.to_vec()).unwrap()));
    Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        text: String::from_utf8(response.into_body()).unwrap(),
    }
}

fn sign(secret: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

#[test]
fn webhook_deliveries_are_verified_deduplicated_and_searchable() {
    let h = Harness::new();
    let feed = h.ok(
        "manage_feeds",
        json!({"action": "create", "name": "github", "kind": "webhook", "event_kind": "github_push", "content_pointer": "/head_commit/message"}),
    );
    let secret = feed["secret"].as_str().unwrap().to_string();
    let body = br#"{"head_commit": {"message": "Fix the quokka login loop"}, "ref": "main"}"#;
    let signature = sign(&secret, body);
    let headers = [
        ("content-type", "application/json"),
        ("x-hub-signature-256", signature.as_str()),
        ("x-github-delivery", "d-1"),
    ];
    let first = hook(&h, "github", &headers, body);
    assert_eq!(first.status, 202, "{}", first.text);
    assert_eq!(first.json()["duplicate"], false);
    let again = hook(&h, "github", &headers, body);
    assert_eq!(again.json()["id"], first.json()["id"]);
    assert_eq!(again.json()["duplicate"], true);
    let wrong = sign("not-the-secret-at-all", body);
    let r = hook(
        &h,
        "github",
        &[
            ("content-type", "application/json"),
            ("x-lore-signature", &wrong),
        ],
        body,
    );
    assert_eq!(r.status, 401);
    let r = hook(&h, "github", &[("content-type", "application/json")], body);
    assert_eq!(r.status, 401, "unsigned");
    let text = b"not json";
    let r = hook(
        &h,
        "github",
        &[
            ("content-type", "text/plain"),
            ("x-lore-signature", &sign(&secret, text)),
        ],
        text,
    );
    assert_eq!(r.status, 400);
    let r = hook(
        &h,
        "github",
        &[
            ("content-type", "application/json"),
            ("x-lore-signature", &sign(&secret, text)),
        ],
        text,
    );
    assert_eq!(r.status, 400);
    let big = vec![b' '; 256 * 1024 + 1];
    assert_eq!(
        hook(&h, "github", &[("content-type", "application/json")], &big).status,
        413
    );
    assert_eq!(hook(&h, "nope", &headers, body).status, 404);
    // The delivery is a memory of the feed's kind, found by its text.
    let event = h.ok("memory.get", json!({"id": first.json()["id"]}));
    assert_eq!(event["kind"], "github_push");
    assert_eq!(event["content"], "Fix the quokka login loop");
    assert_eq!(event["author"], "feed:github");
    let found = h.ok(
        "memory.search",
        json!({"query": "quokka login", "kinds": ["github_push"]}),
    );
    assert_eq!(found["results"].as_array().unwrap().len(), 1, "{found}");
    // Bearer feeds take the secret as a token, and nothing else.
    let bearer = h.ok(
        "manage_feeds",
        json!({"action": "create", "name": "ci", "kind": "webhook", "auth": "bearer", "secret": "a-long-enough-secret"}),
    );
    assert_eq!(bearer["secret"], "a-long-enough-secret");
    let ok = hook(
        &h,
        "ci",
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer a-long-enough-secret"),
        ],
        b"{}",
    );
    assert_eq!(ok.status, 202);
    let bad = hook(
        &h,
        "ci",
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer a-long-enough-secreT"),
        ],
        b"{}",
    );
    assert_eq!(bad.status, 401);
}

/// A stand-in for an external HTTP service (a tracker API), recording what lore sends it.
struct Tracker {
    seen: std::cell::RefCell<Vec<lore_base::ports::OutboundRequest>>,
}

#[async_trait::async_trait(?Send)]
impl lore_base::ports::HttpClient for Tracker {
    async fn send(
        &self,
        request: lore_base::ports::OutboundRequest,
    ) -> Result<lore_base::ports::OutboundResponse, lore_base::ports::PortError> {
        let auth = request
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let body = if request.url.ends_with("/issues") {
            json!([{"id": 1, "title": "Quokka outage"}, {"id": 2, "title": "Slow dashboard"}])
        } else {
            json!({"echo": {"url": request.url, "authorization": auth}})
        };
        self.seen.borrow_mut().push(request);
        Ok(lore_base::ports::OutboundResponse {
            status: 200,
            headers: Vec::new(),
            body: serde_json::to_vec(&body).unwrap(),
        })
    }
}

#[test]
fn connections_operations_and_feeds_call_out_with_the_secret_and_never_show_it() {
    let tracker = Rc::new(Tracker {
        seen: Default::default(),
    });
    let mut h = Harness::new();
    h.lore.engine.ports.http = Some(tracker.clone());
    h.sample_org();
    let ticket = h.ok(
        "Ticket.create",
        json!({"name": "a", "properties": {"title": "a"}}),
    );
    let id = ticket["id"].as_str().unwrap();
    let out = h.ok("Ticket.escalate", json!({"id": id, "reason": "on fire"}));
    assert_eq!(out["status"], 200);
    let text = out.to_string();
    assert!(
        !text.contains("s3cret-value"),
        "the echoed credential is scrubbed: {text}"
    );
    assert!(text.contains("[redacted]"));
    let sent = tracker.seen.borrow().last().cloned().unwrap();
    assert_eq!(
        sent.url,
        format!("https://tracker.example.com/tickets/{id}/escalate")
    );
    assert!(
        sent.headers
            .contains(&("authorization".into(), "Bearer s3cret-value".into()))
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&sent.body).unwrap(),
        json!({"reason": "on fire"})
    );
    let r = h.api(&h.owner, "Ticket.escalate", json!({"reason": "no id"}));
    assert_eq!(
        (r.status, r.json()["error"]["field"].clone()),
        (400, json!("args/id"))
    );
    let r = h.api(
        &h.owner,
        "connections.call",
        json!({"name": "tracker", "path": "@evil.example.com/x"}),
    );
    assert_eq!(r.status, 400, "{}", r.text);
    // A connection feed pulls items once; a virtual feed reads them live and stores nothing.
    h.ok("manage_feeds", json!({"action": "create", "name": "issues", "kind": "connection", "connection": "tracker", "path": "/issues", "content_pointer": "/title"}));
    let pulled = h.ok("feeds.pull", json!({"name": "issues"}));
    assert_eq!(pulled["added"].as_array().unwrap().len(), 2);
    let again = h.ok("feeds.pull", json!({"name": "issues"}));
    assert_eq!(
        (
            again["added"].as_array().unwrap().len(),
            again["duplicates"].clone()
        ),
        (0, json!(2))
    );
    let found = h.ok("memory.search", json!({"query": "quokka outage"}));
    assert_eq!(found["results"][0]["content"], "Quokka outage");
    h.ok("manage_feeds", json!({"action": "create", "name": "live", "kind": "virtual", "connection": "tracker", "path": "/issues"}));
    let live = h.ok("feeds.read", json!({"name": "live", "limit": 1}));
    assert_eq!(live["items"], json!([{"id": 1, "title": "Quokka outage"}]));
    let searched = h.ok(
        "memory.search",
        json!({"query": "slow dashboard", "kinds": ["feed_item"]}),
    );
    assert_eq!(
        searched["results"].as_array().unwrap().len(),
        1,
        "only the pulled copy: {searched}"
    );
}

#[test]
fn the_admin_tool_index_lists_every_tool_with_its_schema() {
    let h = Harness::new();
    let r = h.request(
        "GET",
        "/api/acme/tools",
        &h.owner,
        "application/json",
        Vec::new(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let tools = r.json()["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), lore_engine::tools::admin_tools().count());
    assert!(tools.iter().all(|t| t["inputSchema"].is_object()));
    let r = h.request(
        "GET",
        "/api/acme/tools",
        "lore_nope",
        "application/json",
        Vec::new(),
    );
    assert_eq!(r.status, 401);
}

/// An upstream that echoes the credential it was sent in every encoding an echo service (or
/// a hostile upstream) might use.
struct Echo {
    seen: std::cell::RefCell<Vec<lore_base::ports::OutboundRequest>>,
}

#[async_trait::async_trait(?Send)]
impl lore_base::ports::HttpClient for Echo {
    async fn send(
        &self,
        request: lore_base::ports::OutboundRequest,
    ) -> Result<lore_base::ports::OutboundResponse, lore_base::ports::PortError> {
        use base64::Engine;
        let auth = request
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let secret = auth.trim_start_matches("Bearer ").to_string();
        let b64 = base64::engine::general_purpose::STANDARD;
        let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body = json!({
            "url": request.url,
            "plain": auth,
            "base64_header": b64.encode(&auth),
            "base64_secret": b64.encode(&secret),
            "base64_url_safe": url_safe.encode(&secret),
            "base64_inside": b64.encode(format!("{{\"headers\":{{\"authorization\":\"{auth}\"}}}}")),
            "percent": secret.bytes().map(|b| format!("%{b:02X}")).collect::<String>(),
            "percent_lower": secret.bytes().map(|b| format!("%{b:02x}")).collect::<String>(),
            "form": url::form_urlencoded::byte_serialize(auth.as_bytes()).collect::<String>(),
            "hex": secret.bytes().map(|b| format!("{b:02x}")).collect::<String>(),
            "unicode_escaped": secret.encode_utf16().map(|u| format!("\\u{u:04x}")).collect::<String>(),
        });
        self.seen.borrow_mut().push(request);
        Ok(lore_base::ports::OutboundResponse {
            status: 200,
            headers: Vec::new(),
            body: serde_json::to_vec(&body).unwrap(),
        })
    }
}

#[test]
fn connection_calls_stay_under_the_base_path_and_encoded_credentials_come_back_redacted() {
    use base64::Engine;
    let echo = Rc::new(Echo {
        seen: Default::default(),
    });
    let mut h = Harness::new();
    h.lore.engine.ports.http = Some(echo.clone());
    let secret = "tok_3xAmple/s3cret+value=";
    h.ok(
        "manage_connections",
        json!({"action": "create", "name": "api", "base_url": "https://api.example.com/v1/tenant", "secret": secret}),
    );
    h.ok(
        "manage_operations",
        json!({"action": "create", "name": "item", "kind": "http", "connection": "api", "method": "GET", "path": "/items/{id}",
            "args_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}),
    );
    // Dot segments, in every encoding and through both ways out, are refused before anything
    // is sent.
    for path in [
        "/../admin",
        "/..",
        "/a/../../admin",
        "/%2e%2e/admin",
        "/%2E%2E%2fadmin",
        "/.%2e/admin",
        "/%252e%252e/admin",
        "/..%2fadmin",
        "/..\\admin",
        "/..%5cadmin",
        "/..;/admin",
        "/./x",
    ] {
        let r = h.api(
            &h.owner,
            "connections.call",
            json!({"name": "api", "path": path}),
        );
        assert_eq!(
            (r.status, r.json()["error"]["field"].clone()),
            (400, json!("path")),
            "{path}: {}",
            r.text
        );
    }
    for id in [
        "..",
        ".",
        "../../admin",
        "%2e%2e",
        "%2E%2E%2Fadmin",
        "..%2f..",
        "..\\..",
    ] {
        let r = h.api(
            &h.owner,
            "operations.run",
            json!({"name": "item", "args": {"id": id}}),
        );
        assert_eq!(
            (r.status, r.json()["error"]["field"].clone()),
            (400, json!("path")),
            "{id}: {}",
            r.text
        );
    }
    assert!(echo.seen.borrow().is_empty(), "nothing left lore");
    // Paths under the base go out as written, with the credential.
    let out = h.ok(
        "connections.call",
        json!({"name": "api", "path": "/items/a..b?q=../x"}),
    );
    assert_eq!(out["status"], 200);
    let sent = echo.seen.borrow().last().cloned().unwrap();
    assert_eq!(
        sent.url,
        "https://api.example.com/v1/tenant/items/a..b?q=../x"
    );
    let out = h.ok(
        "operations.run",
        json!({"name": "item", "args": {"id": "x/y"}}),
    );
    assert_eq!(out["status"], 200);
    assert_eq!(
        echo.seen.borrow().last().unwrap().url,
        "https://api.example.com/v1/tenant/items/x%2Fy"
    );
    // What came back holds the credential in no form redaction knows.
    let text = out.to_string();
    let b64 = base64::engine::general_purpose::STANDARD;
    for form in [
        secret.to_string(),
        b64.encode(secret),
        b64.encode(format!("Bearer {secret}")),
        secret
            .bytes()
            .map(|b| format!("%{b:02X}"))
            .collect::<String>(),
        secret
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>(),
    ] {
        assert!(!text.contains(&form), "{form} came back in {text}");
    }
    for field in [
        "plain",
        "base64_header",
        "base64_secret",
        "base64_url_safe",
        "percent",
        "percent_lower",
        "form",
        "hex",
        "unicode_escaped",
    ] {
        let v = out["body"][field].as_str().unwrap_or_default();
        assert!(v.contains("[redacted]"), "{field}: {v}");
    }
    assert!(
        !out["body"]["base64_inside"].as_str().is_some_and(|v| b64
            .decode(v)
            .is_ok_and(|d| String::from_utf8_lossy(&d).contains(secret))),
        "base64 of a text around the secret: {text}"
    );
}

/// An upstream that answers with `shape(the header value it was sent)`.
struct Shaped {
    shape: fn(&str) -> Vec<u8>,
    sent_to: std::cell::RefCell<Vec<String>>,
}

#[async_trait::async_trait(?Send)]
impl lore_base::ports::HttpClient for Shaped {
    async fn send(
        &self,
        request: lore_base::ports::OutboundRequest,
    ) -> Result<lore_base::ports::OutboundResponse, lore_base::ports::PortError> {
        let credential = request
            .headers
            .iter()
            .find(|(k, _)| k == "authorization" || k == "x-api-key")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        self.sent_to.borrow_mut().push(request.url.clone());
        Ok(lore_base::ports::OutboundResponse {
            status: 200,
            headers: Vec::new(),
            body: (self.shape)(&credential),
        })
    }
}

fn shaped_harness(shape: fn(&str) -> Vec<u8>) -> (Harness, Rc<Shaped>) {
    let upstream = Rc::new(Shaped {
        shape,
        sent_to: Default::default(),
    });
    let mut h = Harness::new();
    h.lore.engine.ports.http = Some(upstream.clone());
    (h, upstream)
}

const SHAPED_SECRET: &str = "sk_live_9c1f4e7a2b8d3f60c5e1";

#[test]
fn a_connections_credential_goes_only_where_it_was_stored_for() {
    let (h, upstream) = shaped_harness(|_| b"{}".to_vec());
    h.ok(
        "connections.create",
        json!({"name": "billing", "base_url": "https://billing.example.com", "secret": SHAPED_SECRET}),
    );
    // An edit that moves the base URL, or changes how the secret is sent, must give it again.
    for change in [
        json!({"base_url": "https://collector.example.net"}),
        json!({"base_url": "https://billing.example.com/other"}),
        json!({"auth": "header", "auth_header": "X-Api-Key"}),
        json!({"auth": "none"}),
    ] {
        let mut args = change.clone();
        args["name"] = json!("billing");
        let r = h.api(&h.owner, "connections.update", args);
        assert_eq!(
            (r.status, r.json()["error"]["field"].clone()),
            (400, json!("secret")),
            "{change}: {}",
            r.text
        );
    }
    // The record is unchanged, and calls still go where the credential was stored for.
    h.ok(
        "connections.call",
        json!({"name": "billing", "path": "/invoices"}),
    );
    assert_eq!(
        upstream.sent_to.borrow().last().unwrap(),
        "https://billing.example.com/invoices"
    );
    // With the secret given again, the connection may move.
    let moved = h.ok(
        "connections.update",
        json!({"name": "billing", "base_url": "https://billing2.example.com", "secret": "sk_other_value_123456"}),
    );
    assert_eq!(moved["base_url"], "https://billing2.example.com");
    // A description alone needs nothing.
    h.ok(
        "connections.update",
        json!({"name": "billing", "description": "the billing API"}),
    );
    h.ok("connections.call", json!({"name": "billing", "path": "/x"}));
    assert_eq!(
        upstream.sent_to.borrow().last().unwrap(),
        "https://billing2.example.com/x"
    );
}

#[test]
fn an_echo_cut_at_the_size_limit_shows_no_part_of_the_credential() {
    // The header value reflected so that the 1 MiB cut falls inside it, at every offset a
    // padded echo could choose.
    static BEFORE_CUT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    for before in [1usize, 4, 9, 20, 27, 33] {
        BEFORE_CUT.store(before, std::sync::atomic::Ordering::Relaxed);
        let (h, _) = shaped_harness(|credential| {
            let before = BEFORE_CUT.load(std::sync::atomic::Ordering::Relaxed);
            let mut body = vec![b'x'; (1 << 20) - before];
            body.extend_from_slice(credential.as_bytes());
            body.extend(std::iter::repeat_n(b'y', 1000));
            body
        });
        h.ok(
            "connections.create",
            json!({"name": "echo", "base_url": "https://echo.example.com", "secret": SHAPED_SECRET}),
        );
        let out = h.ok("connections.call", json!({"name": "echo", "path": "/"}));
        let text = out["body"].as_str().unwrap();
        assert_eq!(out["truncated"], true);
        assert!(!text.contains("sk_l"), "{}", &text[text.len() - 40..]);
        assert!(!text.contains("9c1f"), "the secret's middle");
        assert_eq!(out["may_hold_credential"], true);
    }
}

#[test]
fn a_credential_spelled_out_comes_back_redacted_and_marked() {
    for shape in [
        // A list of its characters.
        (|c: &str| {
            serde_json::to_vec(&json!({"chars": c.chars().map(String::from).collect::<Vec<_>>()}))
                .unwrap()
        }) as fn(&str) -> Vec<u8>,
        // Spaced out, upper-cased.
        |c: &str| {
            c.to_ascii_uppercase()
                .chars()
                .flat_map(|ch| [ch, ' '])
                .collect::<String>()
                .into_bytes()
        },
        // UTF-16 little-endian, as raw bytes.
        |c: &str| c.encode_utf16().flat_map(u16::to_le_bytes).collect(),
    ] {
        let (h, _) = shaped_harness(shape);
        h.ok(
            "connections.create",
            json!({"name": "echo", "base_url": "https://echo.example.com", "secret": SHAPED_SECRET}),
        );
        let out = h.ok("connections.call", json!({"name": "echo", "path": "/"}));
        let letters: String = out["body"]
            .to_string()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase();
        assert!(!letters.contains("9c1f4e7a2b8d"), "{out}");
        assert_eq!(out["may_hold_credential"], true, "{out}");
    }
    // An upstream that answers without the credential is not marked.
    let (h, _) = shaped_harness(|_| b"{\"ok\":true}".to_vec());
    h.ok(
        "connections.create",
        json!({"name": "quiet", "base_url": "https://quiet.example.com", "secret": SHAPED_SECRET}),
    );
    let out = h.ok("connections.call", json!({"name": "quiet", "path": "/"}));
    assert_eq!(out.get("may_hold_credential"), None, "{out}");
}

#[test]
fn another_orgs_agent_cannot_be_adopted_and_is_answered_as_an_unknown_id() {
    let h = Harness::new();
    let globex = block_on(admin::create_org(h.lore.ports(), "globex"))
        .unwrap()
        .token;
    let api_at = |org: &str, token: &str, name: &str, args: Value| {
        h.request(
            "POST",
            &format!("/api/{org}/{name}"),
            token,
            "application/json",
            serde_json::to_vec(&args).unwrap(),
        )
    };
    let theirs = api_at(
        "globex",
        &globex,
        "agents.create",
        json!({"name": "globex-bot"}),
    );
    assert_eq!(theirs.status, 200, "{}", theirs.text);
    let agent = theirs.json()["principal_id"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}", theirs.text));
    let unknown = format!("agt_{}", "0".repeat(26));
    let tries = |id: &str| {
        h.api(
            &h.owner,
            "members.add",
            json!({"principal_id": id, "role": "member"}),
        )
    };
    let (foreign, nobody) = (tries(&agent), tries(&unknown));
    assert_eq!(
        (foreign.status, nobody.status),
        (400, 400),
        "{} / {}",
        foreign.text,
        nobody.text
    );
    let message = |r: &Reply, id: &str| {
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .replace(id, "<id>")
    };
    assert_eq!(
        message(&foreign, &agent),
        message(&nobody, &unknown),
        "a foreign agent and an unknown id get the same answer"
    );
    assert!(!foreign.text.contains("globex"), "{}", foreign.text);
    // Not a member, so no token either; and its own org still has it.
    let token = h.api(&h.owner, "tokens.create", json!({"principal_id": agent}));
    assert_eq!(token.status, 404, "{}", token.text);
    let members = h.ok("members.list", json!({}));
    assert!(!members.to_string().contains(&agent), "{members}");
    let there = api_at("globex", &globex, "agents.list", json!({}));
    assert!(there.text.contains(&agent), "{}", there.text);
    // Its own org's admin may re-add it after removing it.
    let removed = api_at(
        "globex",
        &globex,
        "members.remove",
        json!({"principal_id": agent}),
    );
    assert_eq!(removed.status, 200, "{}", removed.text);
    let back = api_at(
        "globex",
        &globex,
        "members.add",
        json!({"principal_id": agent, "role": "viewer"}),
    );
    assert_eq!(back.status, 200, "{}", back.text);
}

#[test]
fn one_nesting_limit_holds_for_everything_stored_and_reads_back_into_scripts() {
    // Scripts run inline here: give them the stack the server's script threads have.
    std::thread::Builder::new()
        .stack_size(lore_sandbox::failure::STACK_BYTES)
        .spawn(nesting_limit_cases)
        .unwrap()
        .join()
        .expect("the nesting cases failed");
}

fn nesting_limit_cases() {
    let h = Harness::new();
    h.sample_org();
    let deep = |n: usize| -> Value {
        let mut v = json!(1);
        for _ in 0..n {
            v = json!({"a": v});
        }
        v
    };
    let limit = lore_base::schema::MAX_STORED_DEPTH;
    // Every way a value is stored refuses one level too many, naming the field and the limit.
    let refused = |name: &str, args: Value| {
        let r = h.api(&h.owner, name, args);
        assert_eq!(r.status, 400, "{name}: {}", r.text);
        assert!(
            r.text.contains(&format!("at most {limit} levels")),
            "{name}: {}",
            r.text
        );
    };
    refused(
        "memory.save",
        json!({"content": "deep", "payload": deep(limit + 1)}),
    );
    refused(
        "memory.save",
        json!({"memories": [{"content": "deep", "payload": deep(limit + 5)}]}),
    );
    refused(
        "entities.create",
        json!({"type": "support_case", "name": "d", "properties": {"meta": deep(limit)}}),
    );
    refused(
        "manage_templates",
        json!({"action": "create", "name": "deep", "schema": {"type": "object", "properties": {"x": deep(limit)}}}),
    );
    let t = h.ok(
        "Ticket.create",
        json!({"name": "t", "properties": {"title": "t"}}),
    );
    refused(
        "relationships.create",
        json!({"type": "x", "from": t["id"], "to": t["id"], "properties": {"p": deep(limit)}}),
    );
    // A webhook body too.
    h.ok("manage_feeds", json!({"action": "create", "name": "inbox", "kind": "webhook", "auth": "bearer", "secret": "hook-secret-1234"}));
    let hook = h.request(
        "POST",
        "/hooks/acme/inbox",
        "hook-secret-1234",
        "application/json",
        serde_json::to_vec(&deep(limit + 1)).unwrap(),
    );
    assert_eq!(hook.status, 400, "{}", hook.text);
    // At the limit it is stored, and every script that reads it back gets it whole.
    h.ok(
        "memory.save",
        json!({"content": "deep enough", "payload": deep(limit)}),
    );
    let viewer = h.token(Role::Viewer, "mcp:read");
    for code in [
        "return await client.memory.search({ query: 'deep enough' })",
        "return (await client.sql(\"SELECT payload FROM events WHERE content = 'deep enough'\"))",
        "const r = await client.memory.search({ query: 'deep enough' }); return JSON.parse(JSON.stringify(r))",
    ] {
        for token in [&h.owner, &viewer] {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "query_sdk", "arguments": {"code": code},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
            let req = http::Request::builder()
                .method("POST")
                .uri("/mcp/acme")
                .header("host", "127.0.0.1:8787")
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "query_sdk")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap();
            let response = block_on(h.lore.handle(req));
            let text = String::from_utf8(response.into_body()).unwrap();
            let reply: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(reply["result"]["isError"], false, "{code}: {text}");
        }
    }
}
