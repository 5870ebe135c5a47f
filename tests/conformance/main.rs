//! Checks of the conformance fixtures that the official suite does not make: the MRTR
//! `requestState` is bound to its tool and cannot be forged, partial answers survive a round,
//! and malformed `inputResponses` are protocol errors. Runs only with
//! `--features conformance-fixtures`; `run.sh` in this directory runs the suite itself.
#![cfg(feature = "conformance-fixtures")]

use std::cell::Cell;
use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::ports::{Clock, Ports, Randomness};
use lore_base::storage::memory::MemoryStorage;
use lore_directory::admin;
use lore_front::{Config, Lore};

struct FixedClock;
impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        1_767_225_600_000
    }
}

struct Counter(Cell<u8>);
impl Randomness for Counter {
    fn fill(&self, buf: &mut [u8]) {
        for b in buf {
            self.0.set(self.0.get().wrapping_add(37));
            *b = self.0.get();
        }
    }
}

fn lore() -> Lore {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(FixedClock),
        random: Rc::new(Counter(Cell::new(1))),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let config = Config {
        no_auth: true,
        ..Config::default()
    };
    let lore = Lore::new(ports, config);
    block_on(admin::init(lore.ports(), "default")).unwrap();
    lore
}

fn all_caps() -> Value {
    json!({ "elicitation": {}, "sampling": {}, "roots": {} })
}

/// A 2026-07-28 `tools/call` of `tool` with `extra` params; returns (HTTP status, body).
fn call(lore: &Lore, tool: &str, extra: Value, caps: Value) -> (u16, Value) {
    let mut params = extra;
    params["name"] = json!(tool);
    params["arguments"] = json!({});
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let request = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "127.0.0.1:8787")
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let response = block_on(lore.handle(request));
    let status = response.status().as_u16();
    (status, serde_json::from_slice(response.body()).unwrap())
}

fn accept(key: &str, field: &str, value: &str) -> Value {
    json!({ key: { "action": "accept", "content": { field: value } } })
}

#[test]
fn request_state_is_signed_bound_to_its_tool_and_advances_rounds() {
    let lore = lore();
    let tool = "test_input_required_result_multi_round";
    let (_, r1) = call(&lore, tool, json!({}), all_caps());
    assert_eq!(r1["result"]["resultType"], "input_required", "{r1}");
    let s1 = r1["result"]["requestState"].as_str().unwrap().to_string();

    for bad in [format!("{s1}-TAMPERED"), format!("x{s1}"), "garbage".into()] {
        let extra =
            json!({ "requestState": bad, "inputResponses": accept("step1", "name", "Ann") });
        let (_, r) = call(&lore, tool, extra, all_caps());
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
    }
    // A genuine state of another tool is refused as well.
    let other = json!({ "requestState": s1, "inputResponses": accept("confirm", "ok", "x") });
    let (_, r) = call(
        &lore,
        "test_input_required_result_request_state",
        other,
        all_caps(),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");

    let extra = json!({ "requestState": s1, "inputResponses": accept("step1", "name", "Ann") });
    let (_, r2) = call(&lore, tool, extra, all_caps());
    assert!(r2["result"]["inputRequests"]["step2"].is_object(), "{r2}");
    let s2 = r2["result"]["requestState"].as_str().unwrap();
    assert_ne!(s1, s2);
    let extra = json!({ "requestState": s2, "inputResponses": accept("step2", "color", "teal") });
    let (_, r3) = call(&lore, tool, extra, all_caps());
    assert_eq!(r3["result"]["resultType"], "complete", "{r3}");
    assert_eq!(
        r3["result"]["content"][0]["text"],
        "Multi-round complete for Ann who likes teal"
    );
}

#[test]
fn input_responses_are_validated_and_missing_ones_asked_again() {
    let lore = lore();
    let tool = "test_input_required_result_elicitation";
    for bad in [json!(null), json!([]), json!({ "user_name": 12345 })] {
        let (_, r) = call(&lore, tool, json!({ "inputResponses": bad }), all_caps());
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    let wrong = json!({ "inputResponses": accept("wrong_key", "name", "Ann") });
    let (_, r) = call(&lore, tool, wrong, all_caps());
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");

    let (status, r) = call(&lore, tool, json!({}), json!({ "sampling": {} }));
    assert_eq!(status, 400);
    assert_eq!(r["error"]["code"], -32021);
    assert_eq!(
        r["error"]["data"],
        json!({ "requiredCapabilities": { "elicitation": {} } })
    );
}

#[test]
fn partial_answers_travel_in_the_state() {
    let lore = lore();
    let tool = "test_input_required_result_multiple_inputs";
    let (_, r1) = call(&lore, tool, json!({}), all_caps());
    assert_eq!(
        r1["result"]["inputRequests"].as_object().unwrap().len(),
        3,
        "{r1}"
    );
    let name = accept("user_name", "name", "Ann");
    let extra = json!({ "requestState": r1["result"]["requestState"], "inputResponses": name });
    let (_, r2) = call(&lore, tool, extra, all_caps());
    let asked: Vec<&String> = r2["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(asked, ["client_roots", "greeting"]);
    let rest = json!({
        "greeting": { "role": "assistant", "content": { "type": "text", "text": "Hi" }, "model": "m" },
        "client_roots": { "roots": [{ "uri": "file:///r" }] }
    });
    let extra = json!({ "requestState": r2["result"]["requestState"], "inputResponses": rest });
    let (_, r3) = call(&lore, tool, extra, all_caps());
    assert_eq!(
        r3["result"]["content"][0]["text"], "Name: Ann; Greeting: Hi; Roots: 1",
        "{r3}"
    );
}
