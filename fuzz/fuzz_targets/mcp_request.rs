//! HTTP/JSON-RPC request decoding: the input is a `POST` to `/mcp` through `Lore::handle`,
//! with a valid token, on one in-memory core per process (rebuilt now and then).
//!
//! Input: three bytes choose the request's shape, the rest is the body.
//! - byte 0: bits 0-1 the path (`/mcp`, `/mcp/fuzz`, `/mcp/rival`, `/mcp/Not_An-Org`),
//!   bits 2-3 `?profile=` (none, `workspace`, `compact`, `bogus`),
//!   bits 4-6 `MCP-Protocol-Version` (none, 2026-07-28, the three legacy ones, `2099-01-01`,
//!   empty), bit 7 unused;
//! - byte 1: bits 0-1 `Content-Type`, bits 2-3 `Accept`, bits 4-5 `Mcp-Session-Id` (none, a
//!   live legacy session of the owner, an unknown one, garbage), bits 6-7 the token (owner,
//!   member, none, not a lore token);
//! - byte 2: bits 0-1 `Mcp-Method` (none, the body's method, `tools/call`, garbage),
//!   bits 2-3 `Mcp-Name` (none, the body's `params.name`, `query_sql`, garbage).
//!
//! Properties: no panic; a status that is not a server error (5xx other than 501/503); a 2xx
//! answer with a body is JSON-RPC (JSON, or SSE whose `data:` lines are); no answer holds the
//! rival org's marker. Bodies with a `"code"` (a script for `query_sdk`/`run_sdk`/`do`) are
//! skipped: the `script` target runs scripts, and they would make this one slow.
#![no_main]

mod common;

use std::cell::RefCell;

use common::Core;
use futures_executor::block_on;
use libfuzzer_sys::fuzz_target;
use lore_front::Config;
use lore_meter::Metered;
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: Metered<std::alloc::System> = Metered(std::alloc::System);

/// Inputs between rebuilds of the core (sessions and memories pile up).
const REBUILD_EVERY: u64 = 20_000;

struct State {
    core: Core,
    /// A live legacy session of the owner (initialize with 2025-06-18).
    session: String,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn fresh() -> State {
    let core = common::build(Config::default());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"}}});
    let mut request = common::post("/mcp", &core.owner, serde_json::to_vec(&body).unwrap());
    request.headers_mut().insert(
        "accept",
        http::HeaderValue::from_static("application/json, text/event-stream"),
    );
    let response = block_on(core.lore.handle(request));
    assert_eq!(response.status(), 200, "initialize");
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a legacy session")
        .to_str()
        .unwrap()
        .to_string();
    State { core, session }
}

fn pick<'a>(choices: &[&'a str], bits: u8) -> &'a str {
    choices[bits as usize % choices.len()]
}

fn request(state: &State, head: [u8; 3], body: &[u8]) -> http::Request<Vec<u8>> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let path = pick(
        &["/mcp", "/mcp/fuzz", "/mcp/rival", "/mcp/Not_An-Org"],
        head[0] & 3,
    );
    let profile = pick(
        &[
            "",
            "?profile=workspace",
            "?profile=compact",
            "?profile=bogus",
        ],
        (head[0] >> 2) & 3,
    );
    let version = pick(
        &[
            "",
            "2026-07-28",
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2099-01-01",
            "-",
            "",
        ],
        (head[0] >> 4) & 7,
    );
    let mut builder = http::Request::builder()
        .method("POST")
        .uri(format!("{path}{profile}"))
        .header("host", "127.0.0.1:8787");
    if !version.is_empty() {
        builder = builder.header(
            "mcp-protocol-version",
            if version == "-" { "" } else { version },
        );
    }
    let content_type = pick(
        &[
            "application/json",
            "",
            "text/plain",
            "application/json; charset=utf-8",
        ],
        head[1] & 3,
    );
    if !content_type.is_empty() {
        builder = builder.header("content-type", content_type);
    }
    let accept = pick(
        &[
            "application/json, text/event-stream",
            "",
            "application/json",
            "text/event-stream",
        ],
        (head[1] >> 2) & 3,
    );
    if !accept.is_empty() {
        builder = builder.header("accept", accept);
    }
    match (head[1] >> 4) & 3 {
        1 => builder = builder.header("mcp-session-id", state.session.as_str()),
        2 => builder = builder.header("mcp-session-id", "0123456789abcdef0123456789abcdef"),
        3 => builder = builder.header("mcp-session-id", "../x%00"),
        _ => {}
    }
    match (head[1] >> 6) & 3 {
        0 => builder = builder.header("authorization", format!("Bearer {}", state.core.owner)),
        1 => builder = builder.header("authorization", format!("Bearer {}", state.core.member)),
        2 => {}
        _ => builder = builder.header("authorization", "Bearer not-a-lore-token"),
    }
    let body_method = parsed
        .as_ref()
        .and_then(|v| v.get("method"))
        .and_then(Value::as_str)
        .and_then(|m| http::HeaderValue::from_str(m).ok());
    match head[2] & 3 {
        1 => {
            if let Some(m) = body_method {
                builder = builder.header("mcp-method", m);
            }
        }
        2 => builder = builder.header("mcp-method", "tools/call"),
        3 => builder = builder.header("mcp-method", "tools/ call\t"),
        _ => {}
    }
    let body_name = parsed
        .as_ref()
        .and_then(|v| v.get("params"))
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .and_then(|m| http::HeaderValue::from_str(m).ok());
    match (head[2] >> 2) & 3 {
        1 => {
            if let Some(n) = body_name {
                builder = builder.header("mcp-name", n);
            }
        }
        2 => builder = builder.header("mcp-name", "query_sql"),
        3 => builder = builder.header("mcp-name", "query_sql search_sdk"),
        _ => {}
    }
    // A header value the http crate refuses is skipped by the builder's error: fall back
    // to none of the optional headers rather than lose the input.
    builder.body(body.to_vec()).unwrap_or_else(|_| {
        common::post(&format!("/mcp{profile}"), &state.core.owner, body.to_vec())
    })
}

/// Whether `v` is one JSON-RPC 2.0 message (a response, or a notification or request the
/// server sends on a stream).
fn is_jsonrpc_message(v: &Value) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return false;
    }
    if obj.contains_key("method") {
        return obj["method"].is_string();
    }
    obj.contains_key("id") && (obj.contains_key("result") ^ obj.contains_key("error"))
}

fn is_jsonrpc(v: &Value) -> bool {
    match v {
        Value::Array(batch) => !batch.is_empty() && batch.iter().all(is_jsonrpc_message),
        other => is_jsonrpc_message(other),
    }
}

fn check(response: &http::Response<Vec<u8>>, input: &[u8]) {
    let status = response.status().as_u16();
    assert!(
        (200..500).contains(&status) || status == 501 || status == 503,
        "status {status} for {:?}: {}",
        String::from_utf8_lossy(input),
        String::from_utf8_lossy(response.body())
    );
    let text = common::body_text(response.body());
    common::assert_no_leak(&text, "mcp_request");
    if !(200..300).contains(&status) || response.body().is_empty() {
        return;
    }
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("text/event-stream") {
        for line in text.lines() {
            if let Some(data) = line.strip_prefix("data:") {
                let v: Value = serde_json::from_str(data.trim_start())
                    .unwrap_or_else(|e| panic!("an SSE data line is not JSON ({e}): {data}"));
                assert!(is_jsonrpc(&v), "an SSE event is not JSON-RPC: {v}");
            }
        }
    } else {
        assert!(
            content_type.starts_with("application/json"),
            "a 2xx answer of type {content_type:?}: {text}"
        );
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("a 2xx JSON answer does not parse ({e}): {text}"));
        assert!(is_jsonrpc(&v), "a 2xx answer is not JSON-RPC: {v}");
    }
}

fn run(data: Vec<u8>) {
    let head = [data[0], data[1], data[2]];
    let body = &data[3..];
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|s| s.core.served >= REBUILD_EVERY) {
            *slot = Some(fresh());
        }
        let state = slot.as_mut().unwrap();
        state.core.served += 1;
        let request = request(state, head, body);
        let response = block_on(state.core.lore.handle(request));
        check(&response, &data);
    });
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 || common::input_names_marker(&data[3..]) {
        return;
    }
    // Scripts are the `script` target's (see above).
    if data.windows(6).any(|w| w == b"\"code\"") {
        return;
    }
    let data = data.to_vec();
    common::on_worker(move || run(data));
});
