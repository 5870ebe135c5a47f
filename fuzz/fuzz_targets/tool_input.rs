//! Tool-input validation: the input is the `arguments` of one tool of either profile
//! (the tool table's listed tools: validated against the tool's JSON Schema, then run, as
//! `Lore::call_tool` does) or the JSON body of `POST /api/fuzz/{method}` for one SDK method or
//! admin tool, on one core per process (rebuilt now and then) whose other org, `rival`, has
//! every text marked.
//!
//! Input: byte 0 picks the tool or method (bit 7: as the member, else the owner); the rest is
//! the arguments: JSON if it parses, else a JSON value built from the bytes
//! (`arbitrary`, with object keys mostly drawn from the tools' field names).
//!
//! Properties: no panic; an invalid argument is an `invalid_argument` error naming a field
//! (`field` non-empty); no internal error (500); no answer or error holds the rival org's
//! marker. Scripts (`query_sdk`, `run_sdk`, `do`) are only validated, not run: the `script`
//! target runs scripts. Methods that could lock the caller out (tokens, members) or run
//! scripts later (operations, behaviors) are left out.
#![no_main]

mod common;

use std::cell::RefCell;

use arbitrary::Unstructured;
use common::Core;
use futures_executor::block_on;
use libfuzzer_sys::fuzz_target;
use lore_base::error::LoreError;
use lore_engine::tools::{TOOLS, ToolSpec};
use lore_front::Config;
use lore_meter::Metered;
use serde_json::{Map, Value};

#[global_allocator]
static ALLOCATOR: Metered<std::alloc::System> = Metered(std::alloc::System);

/// Inputs between rebuilds of the core (writes pile up).
const REBUILD_EVERY: u64 = 5_000;

/// REST method paths (and admin tools) the input may call.
const METHODS: &[&str] = &[
    "entities.get",
    "entities.list",
    "entities.create",
    "entities.create_many",
    "entities.update",
    "entities.delete",
    "entities.link",
    "relationships.get",
    "relationships.list",
    "relationships.create",
    "relationships.delete",
    "memory.search",
    "memory.save",
    "memory.get",
    "templates.list",
    "templates.get",
    "templates.create",
    "templates.update",
    "feeds.list",
    "feeds.get",
    "feeds.create",
    "feeds.read",
    "connections.list",
    "connections.get",
    "actions.list",
    "actions.get",
    "metrics.list",
    "metrics.query",
    "metrics.define",
    "sql.query",
    "organizations.get",
    "organizations.list",
    "members.list",
    "Ticket.list",
    "Ticket.get",
    "Ticket.create",
    "Ticket.update",
    "manage_templates",
    "manage_feeds",
    "query_metric",
    "list_metrics",
    "list_organizations",
    "search_memory",
    "query_sql",
];

/// Field names the tools and methods take: built values use them as keys most of the time,
/// so they get past `deny_unknown_fields` and reach the handlers.
const KEYS: &[&str] = &[
    "sql",
    "params",
    "limit",
    "cursor",
    "order_by",
    "query",
    "id",
    "ids",
    "type",
    "name",
    "names",
    "properties",
    "content",
    "kind",
    "entity_ids",
    "supersedes_event_id",
    "from",
    "to",
    "description",
    "schema",
    "version",
    "filter",
    "where",
    "since",
    "until",
    "author",
    "code",
    "args",
    "dry_run",
    "mode",
    "idempotency_key",
    "namespace",
    "detail",
    "path",
    "items",
    "entities",
    "title",
    "points",
    "done",
    "labels",
    "metric",
    "expression",
    "window",
    "group_by",
    "include_superseded",
    "direction",
    "as_of",
    "offset",
    "role",
    "feed",
    "source",
    "url",
    "tags",
    "text",
    "action",
    "op",
    "verb",
    "noun",
];

thread_local! {
    static CORE: RefCell<Option<Core>> = const { RefCell::new(None) };
}

fn tools() -> impl Iterator<Item = &'static ToolSpec> {
    TOOLS.iter().filter(|t| t.profile().is_some())
}

/// A JSON value from raw bytes, at most `depth` levels deep.
fn value(u: &mut Unstructured, depth: u32) -> arbitrary::Result<Value> {
    let kind = if depth == 0 {
        u.int_in_range(0..=4)?
    } else {
        u.int_in_range(0..=6)?
    };
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => match u.int_in_range(0..=3)? {
            0 => Value::from(u.arbitrary::<i64>()?),
            1 => Value::from(u.int_in_range(-2..=1001)?),
            2 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
            _ => Value::from(u.arbitrary::<u64>()?),
        },
        3 | 4 => Value::String(if u.ratio(1, 3)? {
            KEYS[u.choose_index(KEYS.len())?].to_string()
        } else {
            u.arbitrary()?
        }),
        5 => {
            let n = u.int_in_range(0..=4)?;
            Value::Array(
                (0..n)
                    .map(|_| value(u, depth - 1))
                    .collect::<arbitrary::Result<_>>()?,
            )
        }
        _ => {
            let n = u.int_in_range(0..=5)?;
            let mut map = Map::new();
            for _ in 0..n {
                let key = if u.ratio(7, 8)? {
                    KEYS[u.choose_index(KEYS.len())?].to_string()
                } else {
                    u.arbitrary()?
                };
                map.insert(key, value(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

fn arguments(bytes: &[u8]) -> Value {
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        return v;
    }
    let mut u = Unstructured::new(bytes);
    // An object most of the time: that is what every tool takes.
    let mut map = Map::new();
    while !u.is_empty() && map.len() < 8 {
        let Ok(key) = u.choose_index(KEYS.len()) else {
            break;
        };
        let Ok(v) = value(&mut u, 3) else {
            break;
        };
        map.insert(KEYS[key].to_string(), v);
    }
    Value::Object(map)
}

fn check_error(e: &LoreError, what: &str) {
    match e {
        LoreError::InvalidArgument { field, .. } => {
            assert!(
                !field.is_empty(),
                "{what}: an invalid_argument naming no field: {e}"
            );
        }
        LoreError::Internal(_) | LoreError::Storage(_) => {
            panic!("{what}: an internal error for user input: {e}")
        }
        _ => {}
    }
    common::assert_no_leak(&e.to_string(), what);
}

fn run_tool(core: &Core, spec: &'static ToolSpec, member: bool, args: Value) {
    let caller = if member {
        &core.member_caller
    } else {
        &core.owner_caller
    };
    let what = spec.name;
    let validated = spec.validate(&args);
    if let Err(e) = &validated {
        check_error(e, what);
    }
    if spec.runs_script {
        return;
    }
    match block_on(core.lore.call_tool(caller, spec.name, args)) {
        Ok(v) => {
            assert!(
                validated.is_ok(),
                "{what}: ran with arguments its schema refuses"
            );
            common::assert_no_leak(&v.to_string(), what);
        }
        Err(e) => check_error(&e, what),
    }
}

fn run_method(core: &Core, method: &str, member: bool, args: &Value) {
    let token = if member { &core.member } else { &core.owner };
    let request = common::post(
        &format!("/api/{}/{method}", common::ORG),
        token,
        serde_json::to_vec(args).unwrap(),
    );
    let response = block_on(core.lore.handle(request));
    let status = response.status().as_u16();
    let text = common::body_text(response.body());
    assert!(
        status < 500 || status == 501 || status == 502,
        "{method}: status {status}: {text}"
    );
    common::assert_no_leak(&text, method);
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{method}: the answer is not JSON ({e}): {text}"));
    if status >= 400 {
        let error = &body["error"];
        assert!(
            error["code"].is_string(),
            "{method}: an error without a code: {body}"
        );
        if error["code"] == "invalid_argument" {
            assert!(
                error["field"].as_str().is_some_and(|f| !f.is_empty()),
                "{method}: an invalid_argument naming no field: {body}"
            );
        }
    }
}

fn run(data: Vec<u8>) {
    let member = data[0] & 0x80 != 0;
    let pick = (data[0] & 0x7f) as usize;
    let args = arguments(&data[1..]);
    if common::has_marker(&args.to_string()) {
        return;
    }
    CORE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|c| c.served >= REBUILD_EVERY) {
            *slot = Some(common::build(Config::default()));
        }
        let core = slot.as_mut().unwrap();
        core.served += 1;
        let n_tools = tools().count();
        if pick < n_tools {
            run_tool(core, tools().nth(pick).unwrap(), member, args);
        } else {
            run_method(
                core,
                METHODS[(pick - n_tools) % METHODS.len()],
                member,
                &args,
            );
        }
    });
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() || common::input_names_marker(&data[1..]) {
        return;
    }
    let data = data.to_vec();
    common::on_worker(move || run(data));
});
