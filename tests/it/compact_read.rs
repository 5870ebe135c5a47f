//! The compact profile's `search` and `fetch`, in-process on the in-memory store: an org with
//! the Noun `Offer`, its script Verb `publish`, an entity and a memory; search finds each kind
//! and every hit's id fetches; `/$.d.ts` is the caller's own; another org's records never show;
//! unknown paths say what exists; the ChatGPT connector shape; the `GET /api/{org}/fetch` route.

use crate::common;

use std::cell::Cell;
use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Harness, V26};
use lore_base::model::Role;
use lore_base::ports::{Embedder, Ports};
use lore_directory::admin;
use lore_testing::ports::{JumpClock, WordHashEmbedder};

use common::START_MS;

struct Org {
    h: Harness,
    entity: String,
    memory: String,
}

struct Reply {
    status: u16,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }
}

fn ports(embedder: Option<Rc<dyn Embedder>>) -> Ports {
    Ports {
        embedder,
        ..common::memory_ports(5)
    }
}

fn http(h: &Harness, method: &str, uri: &str, token: Option<&str>, body: Option<Value>) -> Reply {
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1:8787");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let body = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    let response = block_on(h.lore.handle(req.body(body).unwrap()));
    Reply {
        status: response.status().as_u16(),
        text: String::from_utf8(response.into_body()).unwrap(),
    }
}

fn api(h: &Harness, name: &str, args: Value) -> Value {
    let r = h.api("acme", &h.owner, name, args);
    assert_eq!(r.status, 200, "{name}: {}", r.json);
    r.json
}

/// A stateless MCP request to the compact profile; the JSON-RPC `result`.
fn mcp(h: &Harness, token: &str, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V26,
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = http::Request::builder()
        .method("POST")
        .uri("/mcp?profile=compact")
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V26)
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        req = req.header("mcp-name", name);
    }
    let response = block_on(
        h.lore
            .handle(req.body(serde_json::to_vec(&body).unwrap()).unwrap()),
    );
    assert_eq!(response.status(), 200);
    common::rpc_message(&String::from_utf8(response.into_body()).unwrap())["result"].clone()
}

/// A compact tool call: the structured result, checked to be a success whose one text item
/// holds the same JSON (the ChatGPT connector shape).
fn tool(h: &Harness, token: &str, name: &str, args: Value) -> Value {
    let r = mcp(
        h,
        token,
        "tools/call",
        json!({"name": name, "arguments": args}),
    );
    assert_eq!(r["isError"], false, "{name} {r}");
    let content = r["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{r}");
    assert_eq!(content[0]["type"], "text");
    let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, r["structuredContent"]);
    text
}

/// A compact tool call expected to fail: the error object.
fn tool_error(h: &Harness, token: &str, name: &str, args: Value) -> Value {
    let r = mcp(
        h,
        token,
        "tools/call",
        json!({"name": name, "arguments": args}),
    );
    assert_eq!(r["isError"], true, "{name} {r}");
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    text["error"].clone()
}

fn search(org: &Org, query: &str) -> Vec<Value> {
    tool(&org.h, &org.h.owner, "search", json!({"query": query}))["results"]
        .as_array()
        .unwrap()
        .clone()
}

fn ids(results: &[Value]) -> Vec<&str> {
    results.iter().map(|r| r["id"].as_str().unwrap()).collect()
}

fn org_on(ports: Ports) -> Org {
    let h = Harness::on(ports, "acme");
    api(
        &h,
        "manage_templates",
        json!({"action": "create", "name": "offer", "description": "A priced bundle customers can buy.",
            "schema": {"type": "object", "properties": {
                "price": {"type": "number"}, "status": {"type": "string"}}}}),
    );
    api(
        &h,
        "manage_operations",
        json!({"action": "create", "name": "publish", "entity_type": "offer",
            "description": "Make an offer visible in the storefront.",
            "kind": "script", "code": "return { published: ctx.args.offer }",
            "args_schema": {"type": "object", "properties": {"offer": {"type": "string"}}, "required": ["offer"]}}),
    );
    let entity = api(
        &h,
        "Offer.create",
        json!({"name": "Spring bundle", "properties": {"price": 49, "status": "draft"}}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let memory = h.save(
        &h.owner,
        json!({"content": "Customers keep asking for a cheaper annual plan with invoicing.", "kind": "observation"}),
    )[0]
    .clone();
    Org { h, entity, memory }
}

fn org() -> Org {
    org_on(ports(None))
}

fn viewer(h: &Harness) -> String {
    common::token(&h.lore, "acme", Role::Viewer, "mcp:read")
}

#[test]
fn the_compact_profile_lists_exactly_search_fetch_and_do() {
    let o = org();
    let r = mcp(&o.h, &o.h.owner, "tools/list", json!({}));
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["search", "fetch", "do"]);
}

#[test]
fn search_finds_each_kind_and_every_hit_fetches() {
    let o = org();
    let cases = [
        ("Offer", "noun", "/types/Offer".to_string()),
        ("Offer.publish", "verb", "/verbs/Offer.publish".to_string()),
        ("storefront", "verb", "/verbs/Offer.publish".to_string()),
        ("Spring bundle", "entity", format!("/entities/{}", o.entity)),
        (
            o.entity.as_str(),
            "entity",
            format!("/entities/{}", o.entity),
        ),
        (
            "annual plan invoicing",
            "memory",
            format!("/memory/{}", o.memory),
        ),
        ("idempotency key", "doc", "/docs/modes".to_string()),
        ("caps", "doc", "/docs/caps".to_string()),
    ];
    for (query, kind, want) in cases {
        let results = search(&o, query);
        let hit = results
            .iter()
            .find(|r| r["id"] == want.as_str())
            .unwrap_or_else(|| panic!("{query}: no {want} in {results:#?}"));
        assert_eq!(hit["kind"], kind, "{query}");
        for r in &results {
            for field in ["id", "title", "url", "kind", "snippet"] {
                assert!(
                    r[field].as_str().is_some_and(|s| !s.is_empty()),
                    "{field} of {r}"
                );
            }
            assert!(r["snippet"].as_str().unwrap().chars().count() <= 300);
            assert!(r["score"].as_f64().unwrap() > 0.0);
            let page = tool(&o.h, &o.h.owner, "fetch", json!({"id": r["id"]}));
            assert_eq!(page["id"], r["id"], "{page}");
            assert_eq!(page["url"], r["url"]);
            assert!(page["text"].as_str().is_some_and(|t| !t.is_empty()));
            assert_eq!(page["metadata"]["kind"], r["kind"], "{page}");
        }
    }
    // Exact names come first.
    assert_eq!(search(&o, "Offer.publish")[0]["id"], "/verbs/Offer.publish");
    assert_eq!(search(&o, "offer")[0]["id"], "/types/Offer");
    assert_eq!(
        search(&o, &o.memory)[0]["id"],
        format!("/memory/{}", o.memory)
    );
}

#[test]
fn pages_show_schemas_signatures_and_the_records() {
    let o = org();
    let noun = tool(&o.h, &o.h.owner, "fetch", json!({"id": "/types/Offer"}));
    let text: Value = serde_json::from_str(noun["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["schema"]["properties"]["price"]["type"], "number");
    let publish = text["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"] == "Offer.publish")
        .expect("publish is a verb of Offer");
    assert!(
        publish["signature"]
            .as_str()
            .unwrap()
            .contains("offer: string"),
        "{publish}"
    );
    assert_eq!(noun["metadata"]["type"], "offer");

    for id in ["/verbs/Offer.publish", "Offer.publish", "$.Offer.publish"] {
        let verb = tool(&o.h, &o.h.owner, "fetch", json!({"id": id}));
        assert_eq!(verb["id"], "/verbs/Offer.publish");
        assert_eq!(verb["metadata"]["access"], "write");
        assert_eq!(verb["metadata"]["mode"], "try");
        let text: Value = serde_json::from_str(verb["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["args_schema"]["required"], json!(["offer"]));
        assert_eq!(
            text["description"],
            "Make an offer visible in the storefront."
        );
    }
    let create = tool(
        &o.h,
        &o.h.owner,
        "fetch",
        json!({"id": "/verbs/entities.create"}),
    );
    assert!(create["text"].as_str().unwrap().contains("\"args_schema\""));

    let entity = tool(&o.h, &o.h.owner, "fetch", json!({"id": o.entity}));
    assert_eq!(entity["id"], format!("/entities/{}", o.entity));
    assert_eq!(entity["title"], "Offer Spring bundle");
    assert_eq!(entity["metadata"]["type"], "offer");
    assert!(entity["metadata"]["created_at"].is_string());
    let record: Value = serde_json::from_str(entity["text"].as_str().unwrap()).unwrap();
    assert_eq!(record["properties"]["price"], 49);
    let by_type = tool(
        &o.h,
        &o.h.owner,
        "fetch",
        json!({"id": format!("/offers/{}", o.entity)}),
    );
    assert_eq!(by_type["id"], entity["id"]);

    let memory = tool(&o.h, &o.h.owner, "fetch", json!({"id": o.memory}));
    assert_eq!(memory["metadata"]["memory_kind"], "observation");
    assert!(memory["text"].as_str().unwrap().contains("annual plan"));

    let doc = tool(&o.h, &o.h.owner, "fetch", json!({"id": "/docs/sdk"}));
    assert_eq!(doc["metadata"]["format"], "markdown");
    assert!(doc["text"].as_str().unwrap().contains("$.Offer.publish"));

    for (list, needle) in [
        ("/types", "/types/Offer".to_string()),
        ("/verbs", "Offer.publish".to_string()),
        ("/docs", "/docs/search-fetch-do".to_string()),
        ("/entities", o.entity.clone()),
        ("/memory", o.memory.clone()),
        ("/offer", o.entity.clone()),
    ] {
        let page = tool(&o.h, &o.h.owner, "fetch", json!({"id": list}));
        assert_eq!(page["metadata"]["kind"], "list", "{list}");
        assert!(
            page["text"].as_str().unwrap().contains(&needle),
            "{list}: {page}"
        );
    }
}

#[test]
fn declarations_are_the_callers_own() {
    let o = org();
    let owner = tool(&o.h, &o.h.owner, "fetch", json!({"id": "/$.d.ts"}));
    let ts = owner["text"].as_str().unwrap();
    assert!(ts.contains("Offer") && ts.contains("publish("), "{ts}");
    assert!(ts.contains("create("));
    assert_eq!(owner["metadata"]["format"], "typescript");

    let viewer = viewer(&o.h);
    let seen = tool(&o.h, &viewer, "fetch", json!({"id": "/$.d.ts"}));
    let ts = seen["text"].as_str().unwrap();
    assert!(ts.contains("Offer"), "{ts}");
    assert!(!ts.contains("create(") && !ts.contains("publish("), "{ts}");
    // Nor do a viewer's search or Verb pages offer write Verbs.
    let results = tool(&o.h, &viewer, "search", json!({"query": "Offer.publish"}));
    assert!(!ids(results["results"].as_array().unwrap()).contains(&"/verbs/Offer.publish"));
    let e = tool_error(
        &o.h,
        &viewer,
        "fetch",
        json!({"id": "/verbs/Offer.publish"}),
    );
    assert_eq!(e["code"], "not_found", "{e}");
    assert!(e["message"].as_str().unwrap().contains("Offer.get"), "{e}");
}

#[test]
fn another_orgs_records_are_not_found_and_never_found() {
    let o = org();
    let other = block_on(admin::create_org(o.h.lore.ports(), "globex"))
        .unwrap()
        .token;
    let r = http(
        &o.h,
        "POST",
        "/api/globex/manage_templates",
        Some(&other),
        Some(json!({"action": "create", "name": "offer"})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let r = http(
        &o.h,
        "POST",
        "/api/globex/Offer.create",
        Some(&other),
        Some(json!({"name": "Zanzibar bundle"})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let theirs = r.json()["id"].as_str().unwrap().to_string();
    let r = mcp(
        &o.h,
        &other,
        "tools/call",
        json!({"name": "search", "arguments": {"query": "annual plan invoicing"}}),
    );
    assert!(
        !r["structuredContent"].to_string().contains(&o.memory),
        "{r}"
    );

    for id in [
        format!("/entities/{}", o.entity),
        format!("/memory/{}", o.memory),
        o.entity.clone(),
    ] {
        let e = tool_error(&o.h, &other, "fetch", json!({"id": id}));
        assert_eq!(e["code"], "not_found", "{id}: {e}");
    }
    let e = tool_error(&o.h, &o.h.owner, "fetch", json!({"id": theirs}));
    assert_eq!(e["code"], "not_found", "{e}");
    let e = tool_error(
        &o.h,
        &o.h.owner,
        "fetch",
        json!({"id": format!("lore://globex/entities/{theirs}")}),
    );
    assert_eq!(e["code"], "not_found", "{e}");
    for query in ["zanzibar", theirs.as_str(), "Spring bundle"] {
        let results = search(&o, query);
        assert!(
            !results
                .iter()
                .any(|r| r.to_string().contains(&theirs) || r.to_string().contains("Zanzibar")),
            "{query}: {results:?}"
        );
    }
}

#[test]
fn unknown_paths_say_what_exists() {
    let o = org();
    let e = tool_error(&o.h, &o.h.owner, "fetch", json!({"id": "/types/Invoice"}));
    assert_eq!(e["code"], "not_found");
    assert!(
        e["message"].as_str().unwrap().contains("Nouns: Offer"),
        "{e}"
    );
    let e = tool_error(&o.h, &o.h.owner, "fetch", json!({"id": "/docs/billing"}));
    assert_eq!(e["code"], "not_found");
    assert!(
        e["message"].as_str().unwrap().contains("search-fetch-do"),
        "{e}"
    );
    let e = tool_error(&o.h, &o.h.owner, "fetch", json!({"id": "/widgets"}));
    assert_eq!(e["code"], "not_found");
    assert!(
        e["message"].as_str().unwrap().contains("/types/{Noun}"),
        "{e}"
    );
    let e = tool_error(
        &o.h,
        &o.h.owner,
        "fetch",
        json!({"id": "/verbs/Offer.archive"}),
    );
    assert_eq!(e["code"], "not_found");
    assert!(
        e["message"].as_str().unwrap().contains("Offer.publish"),
        "{e}"
    );
    let e = tool_error(&o.h, &o.h.owner, "fetch", json!({"id": "/a/b/c"}));
    assert_eq!(e["code"], "invalid_argument");
    let e = tool_error(
        &o.h,
        &o.h.owner,
        "fetch",
        json!({"id": "/memory/not-an-id"}),
    );
    assert_eq!(e["code"], "invalid_argument");
    let e = tool_error(
        &o.h,
        &o.h.owner,
        "fetch",
        json!({"id": "/entities/ent_01kbd7zvqk0000000000000000"}),
    );
    assert_eq!(e["code"], "not_found");
    let e = tool_error(&o.h, &o.h.owner, "search", json!({"query": "   "}));
    assert_eq!(e["code"], "invalid_argument");
    assert_eq!(e["field"], "query");
}

#[test]
fn urls_point_at_the_fetch_route_which_needs_a_token() {
    let o = org();
    let results = search(&o, "Offer.publish");
    let url = results[0]["url"].as_str().unwrap();
    assert_eq!(
        url,
        "http://127.0.0.1:8787/api/acme/fetch?id=%2Fverbs%2FOffer.publish"
    );
    let path = url.strip_prefix("http://127.0.0.1:8787").unwrap();
    let r = http(&o.h, "GET", path, Some(&o.h.owner), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let page = r.json();
    assert_eq!(page["id"], "/verbs/Offer.publish");
    assert_eq!(page["url"], url);
    for field in ["title", "text"] {
        assert!(page[field].is_string(), "{page}");
    }
    assert_eq!(page["metadata"]["kind"], "verb");
    // The url itself, as an id, fetches the same page.
    let again = tool(&o.h, &o.h.owner, "fetch", json!({"id": url}));
    assert_eq!(again["id"], "/verbs/Offer.publish");
    let r = http(
        &o.h,
        "GET",
        "/api/acme/fetch?id=%2F%24.d.ts",
        Some(&o.h.owner),
        None,
    );
    assert_eq!(r.status, 200);
    assert!(r.json()["text"].as_str().unwrap().contains("publish("));

    let r = http(&o.h, "GET", path, None, None);
    assert_eq!(r.status, 401, "{}", r.text);
    let r = http(&o.h, "GET", path, Some("lore_not_a_token"), None);
    assert_eq!(r.status, 401, "{}", r.text);
    let r = http(
        &o.h,
        "GET",
        "/api/acme/fetch?id=%2Fdocs%2Fnope",
        Some(&o.h.owner),
        None,
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "not_found");
    let r = http(&o.h, "GET", "/api/acme/fetch", Some(&o.h.owner), None);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["field"], "id");
}

/// The owner's `Caller`, for calling the core directly.
fn owner(o: &Org) -> lore_directory::Caller {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {}", o.h.owner).parse().unwrap(),
    );
    block_on(o.h.lore.authenticate(&headers, Some("acme")))
        .map_err(|(e, _)| e)
        .unwrap()
}

#[test]
fn without_a_base_url_ids_are_lore_urls() {
    let o = org();
    let page = block_on(lore_engine::compact_profile::fetch(
        &o.h.lore.engine,
        &owner(&o),
        "/types/Offer",
        None,
    ))
    .unwrap();
    assert_eq!(page["url"], "lore://acme/types/Offer");
    assert_eq!(page["id"], "/types/Offer");
    let page = block_on(lore_engine::compact_profile::fetch(
        &o.h.lore.engine,
        &owner(&o),
        "lore://acme/docs/caps",
        None,
    ))
    .unwrap();
    assert_eq!(page["id"], "/docs/caps");
}

#[test]
fn the_entity_scan_reads_the_newest_windows_first() {
    const DAY: i64 = 86_400_000;
    let time = Rc::new(Cell::new(START_MS));
    let mut p = ports(None);
    p.clock = Rc::new(JumpClock(time.clone()));
    let o = org_on(p);
    let mut made: Vec<(&str, String)> = Vec::new();
    for (label, day) in [("old", 400), ("mid", 438), ("new", 440)] {
        time.set(START_MS + day * DAY);
        for i in 0..3 {
            let id = api(
                &o.h,
                "Offer.create",
                json!({"name": format!("{label} {i}")}),
            )["id"]
                .as_str()
                .unwrap()
                .to_string();
            made.push((label, id));
        }
    }
    let caller = owner(&o);
    let all = block_on(lore_engine::compact_profile::newest_entities(
        &o.h.lore.engine,
        &caller,
        20,
    ))
    .unwrap();
    let names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "new 2",
            "new 1",
            "new 0",
            "mid 2",
            "mid 1",
            "mid 0",
            "old 2",
            "old 1",
            "old 0",
            "Spring bundle"
        ]
    );
    // Five: the whole last day, then the 30-day window fills the rest (its oldest first).
    let five = block_on(lore_engine::compact_profile::newest_entities(
        &o.h.lore.engine,
        &caller,
        5,
    ))
    .unwrap();
    let names: Vec<&str> = five.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names.len(), 5);
    assert_eq!(names[..3], ["new 2", "new 1", "new 0"]);
    assert!(names[3..].iter().all(|n| n.starts_with("mid")), "{names:?}");
    // Search still finds an older entity by its id.
    let old = &made[0].1;
    assert_eq!(search(&o, old)[0]["id"], format!("/entities/{old}"));
}

#[test]
fn with_an_embedder_candidates_are_embedded_once_and_a_failure_is_keyword_only() {
    let embedder = Rc::new(WordHashEmbedder::new("compact-read-test", 64));
    let o = org_on(ports(Some(embedder.clone() as Rc<dyn Embedder>)));
    assert!(ids(&search(&o, "storefront")).contains(&"/verbs/Offer.publish"));
    let after_first = embedder.texts.get();
    search(&o, "visible offers");
    // Only the query is new (and the memory search's own query vector).
    assert!(
        embedder.texts.get() - after_first <= 2,
        "{} then {}",
        after_first,
        embedder.texts.get()
    );
    embedder.fail.set(true);
    let results = search(&o, "storefront");
    assert!(ids(&results).contains(&"/verbs/Offer.publish"));
}
