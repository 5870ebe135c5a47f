//! The compact profile's tool set and `do` (SPEC 1.2, 4.5), in-process through `/mcp`:
//! profile selection (`?profile=`, the org default), the golden `tools/list`, and each mode
//! against a flaky local HTTP operation (a real server on loopback that fails twice, then
//! answers), with idempotency keys that must not repeat side effects.

use crate::common;

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use expect_test::expect_file;
use serde_json::{Value, json};

use common::Harness;
use lore_base::model::Role;
use lore_base::ports::Ports;

/// A loopback HTTP server: while `fail` is above zero it takes one off and answers 503;
/// otherwise 200 with `{"published": <path>, "n": <request number>}`. It logs every path.
struct Flaky {
    url: String,
    fail: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Flaky {
    fn start() -> Self {
        let fail = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (f, l) = (fail.clone(), log.clone());
        let url = common::serve_http(move |target, _body| {
            let path = target.split_whitespace().nth(1).unwrap_or("").to_string();
            let n = {
                let mut log = l.lock().unwrap();
                log.push(path.clone());
                log.len()
            };
            let failing = f
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
                .is_ok();
            if failing {
                (
                    "503 Service Unavailable".into(),
                    json!({"error": "try later"}).to_string(),
                )
            } else {
                (
                    "200 OK".into(),
                    json!({"published": path, "n": n}).to_string(),
                )
            }
        });
        Self { url, fail, log }
    }

    /// The next `n` requests fail.
    fn fail_next(&self, n: usize) {
        self.fail.store(n, Ordering::SeqCst);
    }

    /// Requests made to `path` so far.
    fn hits(&self, path: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

struct World {
    h: Harness,
    shop: Flaky,
}

const COMPACT: &str = "/mcp?profile=compact";

impl World {
    fn new() -> Self {
        let ports = Ports {
            http: Some(Rc::new(common::loopback_client())),
            ..common::memory_ports(11)
        };
        let h = Harness::on_with(
            ports,
            "acme",
            lore_front::Config {
                outbound: common::loopback_upstreams(),
                ..lore_front::Config::default()
            },
        );
        let shop = Flaky::start();
        let w = Self { h, shop };
        w.admin(
            "connections.create",
            json!({"name": "shop", "base_url": w.shop.url}),
        );
        w.admin(
            "templates.create",
            json!({"name": "offer", "description": "Something we sell.",
                "schema": {"type": "object", "properties": {"price": {"type": "number"}}}}),
        );
        // `publish` keeps the default mode (try); `announce` is durable by default.
        w.admin(
            "operations.create",
            json!({"name": "publish", "entity_type": "offer", "kind": "http", "connection": "shop",
                "method": "POST", "path": "/offers/{offer}/publish",
                "args_schema": {"type": "object", "properties": {"offer": {"type": "string"}}, "required": ["offer"]}}),
        );
        w.admin(
            "operations.create",
            json!({"name": "announce", "entity_type": "offer", "kind": "http", "connection": "shop",
                "method": "POST", "path": "/offers/{offer}/announce", "mode": "do",
                "args_schema": {"type": "object", "properties": {"offer": {"type": "string"}}, "required": ["offer"]}}),
        );
        w
    }

    /// An admin SDK call through the REST surface as the owner.
    fn admin(&self, method: &str, args: Value) -> Value {
        let r = self.h.api("acme", &self.h.owner, method, args);
        assert_eq!(r.status, 200, "{method}: {}", r.json);
        r.json
    }

    fn token(&self, role: Role, scopes: &str) -> String {
        common::token(&self.h.lore, "acme", role, scopes)
    }

    /// `do` as `token`, with `args` (`code`, `mode`, ...) and `_meta`: the tool result.
    fn run(&self, token: &str, args: Value, meta: Value) -> Value {
        let (status, v) = self.h.rpc(
            COMPACT,
            token,
            "tools/call",
            json!({"name": "do", "arguments": args, "_meta": meta}),
        );
        assert_eq!(status, 200, "{v}");
        v["result"].clone()
    }

    fn ok(&self, args: Value) -> Value {
        let r = self.run(&self.h.owner, args, json!({}));
        assert_eq!(r["isError"], false, "{r}");
        r["structuredContent"].clone()
    }

    fn fails(&self, args: Value) -> Value {
        let r = self.run(&self.h.owner, args, json!({}));
        assert_eq!(r["isError"], true, "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        serde_json::from_str::<Value>(text).unwrap()["error"].clone()
    }

    fn action(&self, id: &str) -> Value {
        self.admin("actions.get", json!({"id": id}))
    }

    fn count(&self, sql: &str) -> i64 {
        let r = self.admin("sql.query", json!({"sql": sql}));
        r["rows"][0][0].as_i64().unwrap()
    }
}

const PUBLISH: &str = "return await $.Offer.publish({ offer: 'offer_1' })";

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_profile_comes_from_the_url_then_the_org_default() {
    let w = World::new();
    let owner = w.h.owner.clone();
    let (_, compact) = w.h.rpc(COMPACT, &owner, "tools/list", json!({}));
    assert_eq!(tool_names(&compact), ["search", "fetch", "do"]);
    let golden = serde_json::to_string_pretty(&compact["result"]["tools"]).unwrap() + "\n";
    expect_file!["snapshots/compact_tools.json"].assert_eq(&golden);
    // The seed's input schemas, exactly.
    let tools = compact["result"]["tools"].as_array().unwrap();
    assert_eq!(
        tools[2]["inputSchema"],
        json!({"type": "object", "properties": {
            "code": {"type": "string", "description": "The body of an async function. `$` is in scope; return the result."},
            "mode": {"type": "string", "enum": ["try", "send", "do"], "description": "The Mode for every call in the program. Defaults to each Verb default."}},
            "required": ["code"]})
    );
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], false);
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);

    let (_, workspace) = w.h.rpc("/mcp", &owner, "tools/list", json!({}));
    assert!(tool_names(&workspace).contains(&"run_sdk".to_string()));
    let (_, pinned) =
        w.h.rpc("/mcp/acme?profile=compact", &owner, "tools/list", json!({}));
    assert_eq!(tool_names(&pinned), ["search", "fetch", "do"]);

    // The org's default, set through the admin surface; the URL still wins.
    let info = w.admin(
        "organizations.update",
        json!({"default_profile": "compact"}),
    );
    assert_eq!(info["default_profile"], "compact");
    let (_, by_default) = w.h.rpc("/mcp", &owner, "tools/list", json!({}));
    assert_eq!(tool_names(&by_default), ["search", "fetch", "do"]);
    let (_, overridden) =
        w.h.rpc("/mcp?profile=workspace", &owner, "tools/list", json!({}));
    assert!(tool_names(&overridden).contains(&"query_sql".to_string()));
    let (_, discover) = w.h.rpc("/mcp", &owner, "server/discover", json!({}));
    assert!(
        discover["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("search, then fetch, then do"),
        "{discover}"
    );

    // A profile that does not exist, and a tool of the other profile.
    let (status, bad) =
        w.h.rpc("/mcp?profile=tiny", &owner, "tools/list", json!({}));
    assert_eq!(status, 400, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("workspace or compact")
    );
    let (_, wrong) = w.h.rpc(
        COMPACT,
        &owner,
        "tools/call",
        json!({"name": "run_sdk", "arguments": {"code": "return 1"}}),
    );
    let message = wrong["error"]["message"].as_str().unwrap();
    assert!(message.contains("search, fetch, do"), "{message}");
    assert!(message.contains("?profile=workspace"), "{message}");
}

#[test]
fn try_makes_one_attempt_and_the_failure_throws_into_the_program() {
    let w = World::new();
    w.shop.fail_next(2);
    let e = w.fails(json!({"code": PUBLISH, "mode": "try"}));
    assert_eq!(e["code"], "upstream_error", "{e}");
    assert!(e["message"].as_str().unwrap().contains("503"), "{e}");
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 1);
    // The program sees the failure and may handle it.
    let out = w.ok(json!({"mode": "try", "code":
        "try { await $.Offer.publish({ offer: 'offer_1' }) } catch (e) { return [e.code, e.status] }"}));
    assert_eq!(out["result"], json!(["upstream_error", 503]));
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 2);
    // The third request succeeds.
    let out = w.ok(json!({"code": PUBLISH, "mode": "try"}));
    assert_eq!(out["result"]["status"], 200);
    assert_eq!(out["mode"], "try");
}

#[test]
fn do_retries_transient_failures_with_backoff_and_records_the_attempts() {
    let w = World::new();
    w.shop.fail_next(2);
    let out = w.ok(json!({"code": PUBLISH, "mode": "do"}));
    assert_eq!(out["result"]["status"], 200, "{out}");
    assert_eq!(
        out["result"]["body"]["published"],
        "/offers/offer_1/publish"
    );
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 3);
    assert_eq!(out["calls"][0]["attempts"], 3, "{out}");
    assert_eq!(out["calls"][0]["mode"], "do");
    let action = w.action(out["action_id"].as_str().unwrap());
    assert_eq!(action["mode"], "do");
    assert_eq!(action["source"], "do");
    assert_eq!(action["steps"][0]["attempts"], 3, "{action}");

    // More failures than attempts: the last failure throws, after 5 attempts.
    w.shop.fail_next(10);
    let e = w.fails(json!({"code": PUBLISH, "mode": "do"}));
    assert_eq!(e["code"], "upstream_error");
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 8);
    w.shop.fail_next(0);
}

#[test]
fn without_a_mode_each_verb_takes_its_own_default() {
    let w = World::new();
    // announce is durable by default; publish is try.
    w.shop.fail_next(2);
    let out = w.ok(json!({"code": "return await $.Offer.announce({ offer: 'offer_1' })"}));
    assert_eq!(out["mode"], "default");
    assert_eq!(out["calls"][0]["mode"], "do");
    assert_eq!(w.shop.hits("/offers/offer_1/announce"), 3);
    w.shop.fail_next(2);
    let e = w.fails(json!({"code": PUBLISH}));
    assert_eq!(e["code"], "upstream_error");
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 1);
    w.shop.fail_next(0);
}

#[test]
fn send_returns_a_receipt_and_dispatches_after_the_program() {
    let w = World::new();
    w.shop.fail_next(2);
    let code = "const r = await $.Offer.publish({ offer: 'offer_1' }); \
                const made = await $.Offer.create({ name: 'Spring sale', properties: { price: 10 } }); \
                return { receipt: r, made: made.id }";
    let out = w.ok(json!({"code": code, "mode": "send"}));
    let receipt = &out["result"]["receipt"];
    assert_eq!(receipt["status"], "queued", "{out}");
    assert!(receipt["id"].as_str().unwrap().starts_with("snd_"));
    // The create was queued too: the program got a receipt, not an entity.
    assert!(out["result"]["made"].as_str().unwrap().starts_with("snd_"));
    assert_eq!(out["sends"].as_array().unwrap().len(), 2, "{out}");
    // Without a background port the queued calls were made before the answer, in order,
    // the flaky one retried; the outcomes are in the Action.
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 3);
    let action = w.action(out["action_id"].as_str().unwrap());
    let sends = action["sends"].as_array().unwrap();
    assert_eq!(sends[0]["id"], receipt["id"]);
    assert_eq!(sends[0]["status"], "ok", "{action}");
    assert_eq!(sends[0]["attempts"], 3);
    assert_eq!(sends[0]["result"]["status"], 200);
    assert_eq!(sends[1]["method"], "Offer.create");
    assert_eq!(sends[1]["status"], "ok");
    assert_eq!(w.count("SELECT COUNT(*) FROM offer"), 1);

    // A program that fails sends nothing.
    let e = w.fails(json!({"mode": "send", "code":
        "await $.Offer.publish({ offer: 'offer_9' }); throw new Error('changed my mind')"}));
    assert_eq!(e["code"], "script_error");
    assert_eq!(w.shop.hits("/offers/offer_9/publish"), 0);
    // A bad call is refused when it is queued, not later.
    let e =
        w.fails(json!({"mode": "send", "code": "await $.Offer.create({ name: 'x', colour: 1 })"}));
    assert_eq!(e["code"], "invalid_argument", "{e}");
}

#[test]
fn a_repeated_idempotency_key_replays_finished_steps() {
    let w = World::new();
    let code = "const p = await $.Offer.publish({ offer: 'offer_1' }); \
                const o = await $.Offer.create({ name: 'Launch', properties: { price: 5 } }); \
                return { n: p.body.n, id: o.id }";
    let first = w.run(
        &w.h.owner,
        json!({"code": code, "mode": "do", "idempotency_key": "launch-1"}),
        json!({}),
    );
    assert_eq!(first["isError"], false, "{first}");
    let first = &first["structuredContent"];
    assert_eq!(first["replayed"], 0);
    // The same key in `_meta`: nothing is made again, the answers are the first run's.
    let again = w.run(
        &w.h.owner,
        json!({"code": code, "mode": "do"}),
        json!({"io.lore/idempotency_key": "launch-1"}),
    );
    let again = &again["structuredContent"];
    assert_eq!(again["replayed"], 2, "{again}");
    assert_eq!(again["result"], first["result"]);
    assert!(again["calls"][0]["replayed"].as_bool().unwrap());
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 1);
    assert_eq!(w.count("SELECT COUNT(*) FROM offer"), 1);
    // A new key runs again; a key reused for other code is refused.
    let other = w.ok(json!({"code": code, "mode": "do", "idempotency_key": "launch-2"}));
    assert_eq!(other["replayed"], 0);
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 2);
    let e = w.fails(json!({"code": "return 1", "mode": "do", "idempotency_key": "launch-1"}));
    assert_eq!(e["code"], "conflict");
    assert!(e["message"].as_str().unwrap().contains("different program"));
    // Another member's same key is their own.
    let member = w.token(Role::Member, "mcp:read mcp:write");
    let theirs = w.run(
        &member,
        json!({"code": code, "mode": "do", "idempotency_key": "launch-1"}),
        json!({}),
    );
    assert_eq!(theirs["structuredContent"]["replayed"], 0, "{theirs}");
}

#[test]
fn after_a_failed_run_only_the_steps_outside_lore_are_replayed() {
    let w = World::new();
    // The first run publishes (outside lore: done for good), creates an offer (rolled back
    // with the run) and then fails; the re-run must not publish again but must create.
    let code = "const p = await $.Offer.publish({ offer: 'offer_2' }); \
                await $.Offer.create({ name: 'Promo', properties: { price: 1 } }); \
                const flags = await $.entities.list({ type: 'flag' }); \
                if (flags.items.length === 0) throw new Error('not ready'); \
                return p.body.n";
    w.admin("templates.create", json!({"name": "flag"}));
    let e = w.fails(json!({"code": code, "mode": "do", "idempotency_key": "promo"}));
    assert_eq!(e["code"], "script_error", "{e}");
    assert_eq!(w.shop.hits("/offers/offer_2/publish"), 1);
    assert_eq!(w.count("SELECT COUNT(*) FROM offer"), 0);
    w.admin("entities.create", json!({"type": "flag", "name": "go"}));
    let out = w.ok(json!({"code": code, "mode": "do", "idempotency_key": "promo"}));
    assert_eq!(out["replayed"], 1, "{out}");
    assert_eq!(w.shop.hits("/offers/offer_2/publish"), 1);
    assert_eq!(w.count("SELECT COUNT(*) FROM offer"), 1);
}

#[test]
fn a_viewer_runs_read_programs_and_nothing_that_takes_effect() {
    let w = World::new();
    w.ok(json!({"code": "await $.Offer.create({ name: 'Seen', properties: {} })"}));
    let viewer = w.token(Role::Viewer, "mcp:read");
    let r = w.run(
        &viewer,
        json!({"code": "return (await $.Offer.list()).items.map(o => o.name)"}),
        json!({}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["result"], json!(["Seen"]));
    for mode in ["try", "send", "do"] {
        let r = w.run(&viewer, json!({"code": PUBLISH, "mode": mode}), json!({}));
        assert_eq!(r["isError"], true, "{mode}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("insufficient_scope") || text.contains("needs_write"),
            "{mode}: {text}"
        );
    }
    assert_eq!(w.shop.hits("/offers/offer_1/publish"), 0);
}

#[test]
fn a_failed_rerun_keeps_what_the_successful_run_committed() {
    let w = World::new();
    // The first run commits an offer; a re-run with the same key fails after replaying it
    // (the flag type is gone); a third run must still replay the committed create.
    w.admin("templates.create", json!({"name": "flag"}));
    w.admin("entities.create", json!({"type": "flag", "name": "go"}));
    let code = "const o = await $.Offer.create({ name: 'Kept', properties: { price: 2 } }); \
                const flags = await $.entities.list({ type: 'flag' }); \
                if (flags.items.length === 0) throw new Error('no flag'); \
                return o.id";
    let first = w.ok(json!({"code": code, "mode": "do", "idempotency_key": "keep"}));
    let flag = w.admin("entities.list", json!({"type": "flag"}))["items"][0]["id"].clone();
    w.admin("entities.delete", json!({"id": flag}));
    let e = w.fails(json!({"code": code, "mode": "do", "idempotency_key": "keep"}));
    assert_eq!(e["code"], "script_error", "{e}");
    w.admin(
        "entities.create",
        json!({"type": "flag", "name": "go again"}),
    );
    let third = w.ok(json!({"code": code, "mode": "do", "idempotency_key": "keep"}));
    assert_eq!(third["replayed"], 1, "{third}");
    assert_eq!(third["result"], first["result"]);
    assert_eq!(w.count("SELECT COUNT(*) FROM offer"), 1);
}
