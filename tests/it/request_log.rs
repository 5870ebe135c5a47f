//! The structured line every request leaves (SPEC 10): request id (the client's, when sane),
//! org, principal, JSON-RPC method, tool, status, error code and cap, and nothing secret.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Harness, V26};
use lore_base::storage::memory::MemoryStorage;
use lore_front::request_log::{Line, REQUEST_ID_HEADER};
use lore_testing::ports::step_ports;

fn harness() -> Harness {
    Harness::on(step_ports(Rc::new(MemoryStorage::new()), 3), "acme")
}

/// A stateless `tools/call` to `/mcp?profile=compact&k=secret-in-query`; the response's line.
fn call(
    h: &Harness,
    token: &str,
    tool: &str,
    args: Value,
    request_id: Option<&str>,
) -> (Value, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": V26,
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let mut builder = http::Request::builder()
        .method("POST")
        .uri("/mcp?profile=compact&k=query-string-secret")
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", V26)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool);
    if let Some(id) = request_id {
        builder = builder.header(REQUEST_ID_HEADER, id);
    }
    let response = block_on(
        h.lore
            .handle(builder.body(serde_json::to_vec(&body).unwrap()).unwrap()),
    );
    let line = Line::of(&response)
        .expect("every response carries its line")
        .to_string();
    let header = response.headers()[REQUEST_ID_HEADER]
        .to_str()
        .unwrap()
        .to_string();
    let parsed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(parsed["request_id"], header.as_str());
    (parsed, line)
}

#[test]
fn each_request_logs_who_what_and_how_it_ended_without_secrets() {
    let h = harness();
    let owner = h.owner.clone();
    let marker = "SOURCE-MARKER-7f3a";
    let (ok, text) = call(
        &h,
        &owner,
        "do",
        json!({"code": format!("// {marker}\nreturn 1")}),
        Some("client-req-42"),
    );
    assert_eq!(ok["request_id"], "client-req-42");
    assert_eq!(ok["org"], "acme");
    assert!(
        ok["principal"].as_str().unwrap().starts_with("usr_"),
        "{ok}"
    );
    assert_eq!(ok["rpc_method"], "tools/call");
    assert_eq!(ok["tool"], "do");
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["path"], "/mcp");
    assert!(ok["error_code"].is_null(), "{ok}");
    for secret in [owner.as_str(), marker, "query-string-secret"] {
        assert!(!text.contains(secret), "{text}");
    }

    // A script that hits a cap: the code and the cap are in the line.
    let (capped, text) = call(
        &h,
        &owner,
        "do",
        json!({"code": "await ctx.sleep(600000)"}),
        Some("bad id with spaces"),
    );
    assert_eq!(capped["error_code"], "cap_exceeded", "{capped}");
    assert_eq!(capped["cap"], "sleep");
    assert_ne!(capped["request_id"], "bad id with spaces");
    assert!(!text.contains("600000"), "{text}");

    // A bad token: no principal, a 401, and the token nowhere.
    let (refused, text) = call(
        &h,
        "lore_notarealtoken0000000000",
        "search",
        json!({"query": "x"}),
        None,
    );
    assert_eq!(refused["status"], 401);
    assert!(refused["principal"].is_null());
    assert!(!text.contains("notarealtoken"), "{text}");
}

#[test]
fn requests_without_an_id_get_distinct_ones_of_sixteen_hex_digits() {
    let h = harness();
    let owner = h.owner.clone();
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let (line, _) = call(&h, &owner, "search", json!({"query": "x"}), None);
            line["request_id"].as_str().unwrap().to_string()
        })
        .collect();
    for id in &ids {
        assert_eq!(id.len(), 16, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
}
