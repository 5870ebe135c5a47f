//! SQL through the member-safe layer: the input is `query_sql`'s arguments, run by the `fuzz`
//! org's owner or a member on one core per process whose other org, `rival`, has the same
//! tables with every text marked.
//!
//! Input: byte 0 is flags (bit 0: as the member, else the owner; bit 1: through the SDK
//! method `sql.query`, else the MCP tool `query_sql`; bit 2: pass `limit` = byte 1; bit 3:
//! fetch the next page too, with the answer's `next_cursor`); byte 1 the limit; the rest is
//! UTF-8 split on U+001E into `sql`, `params` (split on U+001F, each JSON if it parses, else a
//! string), `order_by` (JSON if it parses, else a string) and `cursor`.
//!
//! Properties: no panic; no internal error; no answer or error holds the rival org's marker.
#![no_main]

mod common;

use std::cell::RefCell;

use common::Core;
use futures_executor::block_on;
use libfuzzer_sys::fuzz_target;
use lore_base::error::LoreError;
use lore_front::Config;
use lore_meter::Metered;
use serde_json::{Map, Value, json};

#[global_allocator]
static ALLOCATOR: Metered<std::alloc::System> = Metered(std::alloc::System);

thread_local! {
    static CORE: RefCell<Option<Core>> = const { RefCell::new(None) };
}

fn config() -> Config {
    let mut config = Config::default();
    // Small tables: a budget this size still lets a few self-joins run, and keeps each
    // input well under a second.
    config.sql.max_row_visits = 500_000;
    config
}

fn json_or_string(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn args(data: &[u8], text: &str) -> Value {
    let mut parts = text.split('\u{1e}');
    let mut args = Map::new();
    args.insert("sql".into(), json!(parts.next().unwrap_or("")));
    if let Some(params) = parts.next().filter(|p| !p.is_empty()) {
        let params: Vec<Value> = params.split('\u{1f}').map(json_or_string).collect();
        args.insert("params".into(), Value::Array(params));
    }
    if let Some(order_by) = parts.next().filter(|o| !o.is_empty()) {
        args.insert("order_by".into(), json_or_string(order_by));
    }
    if let Some(cursor) = parts.next() {
        args.insert("cursor".into(), json!(cursor));
    }
    if data[0] & 4 != 0 {
        args.insert("limit".into(), json!(data[1]));
    }
    Value::Object(args)
}

fn check(outcome: &Result<Value, LoreError>) {
    match outcome {
        Ok(v) => common::assert_no_leak(&v.to_string(), "sql"),
        Err(e) => {
            assert!(
                !matches!(e, LoreError::Internal(_)),
                "an internal error for user input: {e}"
            );
            common::assert_no_leak(&e.to_string(), "sql error");
        }
    }
}

fn run(data: Vec<u8>, text: String) {
    let args = args(&data, &text);
    if common::has_marker(&args.to_string()) {
        return;
    }
    let tool = if data[0] & 2 != 0 {
        "sql.query"
    } else {
        "query_sql"
    };
    CORE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let core = slot.get_or_insert_with(|| common::build(config()));
        let caller = if data[0] & 1 != 0 {
            &core.member_caller
        } else {
            &core.owner_caller
        };
        let first = block_on(core.lore.call_tool(caller, tool, args.clone()));
        check(&first);
        if data[0] & 8 != 0
            && let Ok(page) = &first
            && let Some(cursor) = page.get("next_cursor").and_then(Value::as_str)
        {
            let mut next = args;
            next["cursor"] = json!(cursor);
            check(&block_on(core.lore.call_tool(caller, tool, next)));
        }
    });
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let Ok(text) = std::str::from_utf8(&data[2..]) else {
        return;
    };
    if common::has_marker(text) {
        return;
    }
    let text = text.to_string();
    let data = data.to_vec();
    common::on_worker(move || run(data, text));
});
