//! `query_sdk` and `run_sdk` in-process through `tools/call`, on the in-memory store with a
//! clock whose sleeps advance it: reads, writes, atomic runs, dry runs, both script forms,
//! positions of errors in the TypeScript, the caps, and the Action each run leaves.

use crate::common;

/// The memory cap counts through the allocator, as in `lore serve`.
use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::Harness;
use lore_base::model::Role;
use lore_base::ports::Ports;
use lore_base::storage::memory::MemoryStorage;
use lore_testing::ports::{JumpClock, SeqRandom};

/// Org `acme` on the in-memory store with `clock` and randomness seeded with `seed`.
fn harness_on(clock: Rc<dyn lore_base::ports::Clock>, seed: u64) -> Harness {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock,
        random: Rc::new(SeqRandom::seeded(seed)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    Harness::on(ports, "acme")
}

fn harness() -> Harness {
    let h = harness_on(Rc::new(JumpClock::starting_at(1_767_225_600_000)), 7);
    let r = run(
        &h,
        "await client.templates.create({name: 'ticket', schema: {type: 'object', properties: {title: {type: 'string'}, points: {type: 'integer'}}}}); return 'ok';",
        None,
    );
    assert_eq!(r["structuredContent"]["result"], "ok", "{r}");
    h
}

fn token(h: &Harness, role: Role, scopes: &str) -> String {
    common::token(&h.lore, "acme", role, scopes)
}

fn run(h: &Harness, code: &str, args: Option<Value>) -> Value {
    let mut a = json!({"code": code});
    if let Some(args) = args {
        a["args"] = args;
    }
    h.call(&h.owner, "run_sdk", a)
}

fn query(h: &Harness, code: &str) -> Value {
    h.call(&h.owner, "query_sdk", json!({"code": code}))
}

fn query_as(h: &Harness, token: &str, code: &str) -> Value {
    h.call(token, "query_sdk", json!({"code": code}))
}

fn ok(r: &Value) -> &Value {
    assert_eq!(r["isError"], false, "{r}");
    &r["structuredContent"]
}

/// The structured error of a failed run.
fn failed(r: &Value) -> Value {
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["error"].clone()
}

fn tickets(h: &Harness) -> usize {
    let r = query(
        h,
        "return (await client.entities.list({type: 'ticket'})).items.length",
    );
    ok(&r)["result"].as_u64().unwrap() as usize
}

#[test]
fn a_query_reads_through_the_sdk_with_types_stripped() {
    let h = harness();
    ok(&run(
        &h,
        "await client.entities.create({type: 'ticket', name: 'A', properties: {points: 3}}); return 1",
        None,
    ));
    let r = query(
        &h,
        "interface Page { items: { name: string }[] }\nconst page: Page = await client.entities.list({ type: 'ticket' });\nctx.log('found', page.items.length);\nreturn page.items.map((t): string => t.name);",
    );
    let out = ok(&r);
    assert_eq!(out["result"], json!(["A"]));
    assert_eq!(out["logs"], json!(["found 1"]));
    assert_eq!(out["calls"][0]["method"], "entities.list");
    assert!(out["action_id"].as_str().unwrap().starts_with("act_"));
}

#[test]
fn the_module_form_and_the_dollar_alias_work() {
    let h = harness();
    let r = query(
        &h,
        "type T = number;\nexport default async (ctx: any, client: any) => {\n  const n: T = (await client.templates.list({})).length;\n  return { n, args: ctx.args };\n};",
    );
    assert_eq!(ok(&r)["result"]["n"], 1);
    let r = query(&h, "return (await $.Ticket.list({})).items.length");
    assert_eq!(ok(&r)["result"], 0);
}

#[test]
fn numeric_loops_count_their_turns_in_every_place_a_loop_can_be() {
    let h = harness();
    // At a module's top level, in a class's static block, in a generator, nested and labelled:
    // each finds its counter, and all compute what they would without it.
    for (source, expected) in [
        (
            "let s = 0;\nfor (let i = 0; i < 100000; i++) s += i;\nexport default async () => s;",
            json!(4_999_950_000_i64),
        ),
        (
            "class C { static n = 0; static { let t = 0; for (let i = 0; i < 20000; i++) t += 2; C.n = t; } }\nreturn C.n;",
            json!(40_000),
        ),
        (
            "function* g() { let t = 0; while (t < 30000) t++; yield t; }\nreturn g().next().value;",
            json!(30_000),
        ),
        (
            "let t = 0; a: for (let i = 0; i < 300; i++) { for (let j = 0; j < 300; j++) { if (j > i) continue a; t += 1; } }\nreturn t;",
            json!(45_150),
        ),
    ] {
        let r = query(&h, source);
        assert_eq!(ok(&r)["result"], expected, "{source}");
    }
}

#[test]
fn a_run_writes_reads_its_own_writes_and_commits_once() {
    let h = harness();
    let r = run(
        &h,
        "const t = await client.entities.create({type: 'ticket', name: 'first'});\nconst again = await client.entities.get({id: t.id});\nconst page = await client.entities.list({type: 'ticket'});\nreturn {same: again.name, listed: page.items.length, id: t.id};",
        None,
    );
    let out = ok(&r);
    assert_eq!(out["result"]["same"], "first");
    assert_eq!(out["result"]["listed"], 1);
    assert!(out["writes"].as_u64().unwrap() >= 2);
    assert_eq!(tickets(&h), 1);
}

#[test]
fn a_throw_writes_nothing_and_is_recorded() {
    let h = harness();
    let r = run(
        &h,
        "await client.entities.create({type: 'ticket', name: 'doomed'});\nawait client.memory.save({content: 'never saved'});\nthrow new Error('changed my mind');",
        None,
    );
    let e = failed(&r);
    assert_eq!(e["code"], "script_error", "{e}");
    assert!(e["message"].as_str().unwrap().contains("changed my mind"));
    assert_eq!(e["line"], 3, "{e}");
    assert_eq!(e["calls_made"], 2);
    assert_eq!(tickets(&h), 0, "a failed run writes nothing");
    let found = h.search(&h.owner, json!({"query": "never saved"}));
    assert!(found.is_empty(), "{found:?}");
    let action = ok(&query(
        &h,
        &format!(
            "return await client.actions.get({{id: '{}'}})",
            e["action_id"].as_str().unwrap()
        ),
    ))["result"]
        .clone();
    assert_eq!(action["status"], "error");
    assert_eq!(action["source"], "run_sdk");
    assert_eq!(action["steps"].as_array().unwrap().len(), 2);
}

#[test]
fn an_uncaught_sdk_error_keeps_its_code_and_a_caught_one_does_not_fail_the_run() {
    let h = harness();
    let e = failed(&run(
        &h,
        "await client.entities.get({id: 'ent_01JNOTTHERE000000000000000'});",
        None,
    ));
    assert_eq!(e["code"], "not_found", "{e}");
    let r = run(
        &h,
        "try { await client.entities.get({id: 'nope'}) } catch (e) { return e.code }",
        None,
    );
    assert_eq!(ok(&r)["result"], "invalid_argument");
}

#[test]
fn query_sdk_may_only_read() {
    let h = harness();
    let e = failed(&query(
        &h,
        "await client.entities.create({type: 'ticket', name: 'x'})",
    ));
    assert_eq!(e["code"], "needs_write", "{e}");
    let viewer = token(&h, Role::Viewer, "mcp:read");
    let r = h.call(
        &viewer,
        "query_sdk",
        json!({"code": "return (await client.templates.list({})).length"}),
    );
    assert_eq!(ok(&r)["result"], 1);
    let member = token(&h, Role::Member, "mcp:read mcp:write");
    let e = failed(&h.call(
        &member,
        "run_sdk",
        json!({"code": "await client.templates.create({name: 'x', schema: {type: 'object'}})"}),
    ));
    assert_eq!(e["code"], "needs_admin", "{e}");
}

#[test]
fn a_dry_run_previews_writes_and_dispatches_none() {
    let h = harness();
    let r = h.call(
        &h.owner,
        "run_sdk",
        json!({"dry_run": true, "code": "const before = (await client.entities.list({type: 'ticket'})).items.length;\nconst t = await client.entities.create({type: 'ticket', name: 'maybe'});\nawait client.memory.save({content: 'maybe'});\nreturn {before, id: t.id};"}),
    );
    let out = ok(&r);
    assert_eq!(out["result"]["before"], 0);
    assert_eq!(out["result"]["id"], "dry_run_1");
    let preview = out["side_effect_preview"].as_array().unwrap();
    assert_eq!(preview.len(), 2, "{preview:?}");
    assert_eq!(preview[0]["method"], "entities.create");
    assert_eq!(preview[0]["args"]["name"], "maybe");
    assert_eq!(preview[1]["method"], "memory.save");
    assert_eq!(tickets(&h), 0);
    // A dry run still checks the method path and the access tier.
    let e = failed(&h.call(
        &h.owner,
        "run_sdk",
        json!({"dry_run": true, "code": "await client.entities.explode({})"}),
    ));
    assert_eq!(e["code"], "not_found", "{e}");
}

#[test]
fn syntax_and_runtime_errors_point_at_the_typescript() {
    let h = harness();
    let e = failed(&query(&h, "const a: number = 1;\n\nconst b = a +;\n"));
    assert_eq!(e["code"], "syntax_error", "{e}");
    assert_eq!(e["line"], 3, "{e}");
    let e = failed(&query(
        &h,
        "type X = { a: number };\nconst x: X = { a: 1 };\n\n\nconst y: any = null;\nreturn y.field;",
    ));
    assert_eq!(e["code"], "script_error", "{e}");
    assert_eq!(e["line"], 6, "{e}");
}

#[test]
fn sleep_promise_all_and_the_host_clock() {
    let h = harness();
    let r = query(
        &h,
        "const t0 = Date.now();\nawait ctx.sleep(1000);\nconst [a, b] = await Promise.all([client.templates.list({}), client.entities.list({})]);\nconst r = Math.random();\nreturn {slept: Date.now() - t0 >= 1000, a: a.length, b: b.items.length, r: r >= 0 && r < 1, now: typeof ctx.now()};",
    );
    assert_eq!(
        ok(&r)["result"],
        json!({"slept": true, "a": 1, "b": 0, "r": true, "now": "string"})
    );
}

fn cap_of(r: &Value) -> (String, u64) {
    let e = failed(r);
    assert_eq!(e["code"], "cap_exceeded", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains(e["cap"].as_str().unwrap())
    );
    (
        e["cap"].as_str().unwrap().to_string(),
        e["limit"].as_u64().unwrap(),
    )
}

#[test]
fn every_cap_names_itself_and_its_limit() {
    let h = harness();
    assert_eq!(
        cap_of(&run(
            &h,
            "for (let i = 0; i < 300; i++) await client.entities.create({type: 'ticket', name: 'n' + i});",
            None
        )),
        ("sdk_calls".into(), 200)
    );
    assert_eq!(tickets(&h), 0, "a capped run writes nothing");
    assert_eq!(
        cap_of(&query(&h, "while (true) {}")),
        ("steps".into(), 20_000_000)
    );
    assert_eq!(
        cap_of(&query(&h, "await ctx.sleep(31000)")),
        ("sleep".into(), 30_000)
    );
    assert_eq!(
        cap_of(&query(
            &h,
            "for (let i = 0; i < 7; i++) await ctx.sleep(29000)"
        )),
        ("wall_clock".into(), 180_000)
    );
    assert_eq!(
        cap_of(&query(
            &h,
            "return 'x'.repeat(2000000) + 'y'.repeat(2000000) + 'z'"
        ))
        .0,
        "output"
    );
    assert_eq!(
        cap_of(&query(
            &h,
            "for (let i = 0; i < 20000; i++) ctx.log('a'.repeat(100))"
        ))
        .0,
        "output"
    );
    assert_eq!(
        cap_of(&query(&h, "await new Promise(() => {})")).0,
        "never_settles"
    );
    assert_eq!(
        cap_of(&query(
            &h,
            "function f(n) { return f(n + 1) + 1 }\nreturn f(0)"
        ))
        .0,
        "recursion"
    );
    assert_eq!(
        cap_of(&query(&h, "return 'x'.repeat(1e9)")).0,
        "string_length"
    );
    assert_eq!(
        cap_of(&query(&h, "return new Array(1e8).fill(0).length")).0,
        "array_length"
    );
}

#[test]
fn eval_and_function_are_refused() {
    let h = harness();
    for code in [
        "return eval('1 + 1')",
        "return Function('return 1')()",
        "return (0, eval)('1')",
        "return new (Object.getPrototypeOf(async function () {}).constructor)('return 1')",
    ] {
        let e = failed(&query(&h, code));
        assert!(
            e["message"].as_str().unwrap().contains("disabled"),
            "{code}: {e}"
        );
    }
}

#[test]
fn actions_list_shows_each_run() {
    let h = harness();
    ok(&query(&h, "return 1"));
    let r = query(
        &h,
        "return (await client.actions.list({})).items.map((a: any) => [a.source, a.status, a.dry_run])",
    );
    let items = ok(&r)["result"].as_array().unwrap().clone();
    assert!(
        items.contains(&json!(["query_sdk", "ok", false])),
        "{items:?}"
    );
    assert!(
        items.contains(&json!(["run_sdk", "ok", false])),
        "{items:?}"
    );
}

#[test]
fn client_sql_is_the_query_engine_and_its_namespace_stays_reachable() {
    let h = harness();
    ok(&run(
        &h,
        "await client.entities.create_many({type: 'ticket', items: [{name: 'A', properties: {points: 3}}, {name: 'B', properties: {points: 5}}]}); return 1",
        None,
    ));
    let r = query(
        &h,
        "const byCall = await client.sql('SELECT name FROM ticket WHERE points > $1 ORDER BY name', [2]);\nconst byMethod = await client.sql.query({ sql: 'SELECT COUNT(*) AS n FROM entities' });\nreturn [byCall.rows, byMethod.rows];",
    );
    let out = ok(&r);
    assert_eq!(out["result"], json!([[["A"], ["B"]], [[2]]]), "{out}");
    assert_eq!(out["calls"][0]["method"], "sql.query");
}

#[test]
fn loops_and_functions_keep_working_with_the_memory_ticks() {
    let h = harness();
    let r = query(
        &h,
        "let n = 0;\nfor (let i = 0; i < 10; i++) n += i;\nfor (const x of [1, 2]) n += x;\nfor (const k in { a: 1 }) n += k.length;\nlet j = 0; while (j < 3) j++;\ndo { j-- } while (j > 0);\nlabel: for (;;) { for (;;) { break label; } }\nconst f = (x: number) => x * 2;\nfunction g(this: any) { 'use strict'; return this === undefined; }\nreturn [n, j, f(4), g(), 'a,b'.split(',')];",
    );
    assert_eq!(ok(&r)["result"], json!([49, 0, 8, true, ["a", "b"]]));
}

/// What a script is given before it runs (the SDK, `ctx`, the script's `RegExp`, the capped
/// built-ins) behaves as the standard says and cannot be changed by the script.
const RUNTIME_CHECKS: &str = r#"
const get = client.entities.get;
const sdkChecks = [
  get === client.entities.get, client.then === undefined, client.entities.toJSON === undefined,
  Reflect.set(client, 'x', 1), Reflect.defineProperty(client.entities, 'y', { value: 1 }),
  Reflect.deleteProperty(client, 'entities'), Reflect.setPrototypeOf(client, {}),
  typeof client.sql, typeof client.sql.query, JSON.stringify(client.entities),
];
const ctxChecks = [Object.isFrozen(ctx), Reflect.set(ctx, 'log', null), typeof ctx.now()];
const re = new RegExp('b+', 'g');
const regexpChecks = [
  RegExp(re) === re, new RegExp(re).flags, RegExp(re, 'i').flags,
  Object.isExtensible(re), Object.isExtensible(/x/), re instanceof RegExp, /x/.constructor === RegExp,
  'abbc'.match('b+')[0], [...'a1b2'.matchAll('\\d')].length, 'xyz'.search('z'),
  'abbc'.replace(re, '-'), 'a-b'.split(/-/).length, /(\d)/.exec('x7')[1],
  Reflect.set(RegExp.prototype, 'exec', null), Object.isFrozen(RegExp.prototype),
  (() => { try { class X extends RegExp {}; new X('a'); return 'made' } catch (e) { return e.name } })(),
  (() => { try { new RegExp('('); return 'made' } catch (e) { return e.name } })(),
];
const r = Math.random();
const builtinChecks = [
  r >= 0 && r < 1, Reflect.set(Math, 'random', () => 1),
  'ab'.repeat(2), 'a'.padStart(3, '-'), 'a'.concat('b', 'c'), [1, 2].join('+'), [0, 0].fill(7),
  Array.from({ length: 2 }, (_, i) => i), JSON.stringify({ a: [1] }), JSON.parse('{"a":[1]}').a[0],
  (function () { return this.v }).bind({ v: 3 })(), 'a'.replaceAll('a', 'b'),
];
return { sdkChecks, ctxChecks, regexpChecks, builtinChecks };
"#;

fn runtime_checks_answer() -> Value {
    json!({
        "sdkChecks": [true, true, true, false, false, false, false, "function", "function", "{}"],
        "ctxChecks": [true, false, "string"],
        "regexpChecks": [true, "g", "i", false, false, true, true, "bb", 2, 2, "a-c", 2, "7",
            false, true, "TypeError", "SyntaxError"],
        "builtinChecks": [true, false, "abab", "--a", "abc", "1+2", [7, 7], [0, 1],
            "{\"a\":[1]}", 1, 3, "b"],
    })
}

#[test]
fn the_runtime_a_script_is_given_holds_and_cannot_be_changed() {
    let h = harness();
    let r = query(&h, RUNTIME_CHECKS);
    assert_eq!(ok(&r)["result"], runtime_checks_answer());
}

/// As `lore serve` runs scripts: each top-level run in a script process, which made the run's
/// realm while it waited and serves its org's next run (`lore::scripts`, `lore_sandbox::Spare`).
#[test]
fn a_realm_made_ahead_of_its_run_is_the_runs_own_and_holds_the_same() {
    let _alone = common::scripts_alone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&runtime, async {
        // The script processes keep the system's time, as `lore serve` does.
        let h = harness_on(Rc::new(lore::ports::SystemClock), 7);
        let h = Harness {
            lore: h
                .lore
                .with_script_threads(lore::scripts::ScriptProcesses::new(
                    env!("CARGO_BIN_EXE_lore").into(),
                )),
            owner: h.owner,
        };
        let query = |code: &'static str| h.call_async(&h.owner, "query_sdk", json!({"code": code}));
        for _ in 0..3 {
            let r = query(RUNTIME_CHECKS).await;
            assert_eq!(ok(&r)["result"], runtime_checks_answer());
        }
        // Each run's own arguments, clock and globals; nothing one run leaves reaches the
        // next, although the same process serves them.
        for n in 1..=3 {
            let r = h
                .call_async(
                    &h.owner,
                    "run_sdk",
                    json!({"code": "const seen = [typeof globalThis.left, typeof ({}).polluted]; \
                        globalThis.left = ctx.args.n; Object.prototype.polluted = 1; \
                        return [ctx.args.n, seen, Date.now() > 1.7e12]", "args": {"n": n}}),
                )
                .await;
            assert_eq!(
                ok(&r)["result"],
                json!([n, ["undefined", "undefined"], true]),
                "run {n}"
            );
        }
        // The memory cap counts the realm made ahead as the run's own and still ends a hog.
        let r = query("const a = []; for (;;) { a.push(new Array(1000).fill(a.length)); }").await;
        assert_eq!(cap_of(&r).0, "memory", "{r}");
        let r = query(RUNTIME_CHECKS).await;
        assert_eq!(
            ok(&r)["result"],
            runtime_checks_answer(),
            "after a run ended at a cap"
        );
    });
}

/// The system clock, telling the test when a script starts a long sleep, and counting them.
struct SignalClock(Rc<tokio::sync::Notify>, Rc<std::cell::Cell<u32>>);

impl lore_base::ports::Clock for SignalClock {
    fn now_ms(&self) -> i64 {
        lore::ports::SystemClock.now_ms()
    }

    fn sleep(&self, ms: u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        if ms == 500 {
            self.1.set(self.1.get() + 1);
            self.0.notify_one();
        }
        lore::ports::SystemClock.sleep(ms)
    }
}

/// Appends commute: a script's saves are numbered again when its writes commit if another agent
/// saved in the org while it ran, rather than failing the run with `conflict`.
#[test]
fn a_script_that_saves_while_another_agent_saves_commits_both_memories() {
    let sleeping = Rc::new(tokio::sync::Notify::new());
    let sleeps = Rc::new(std::cell::Cell::new(0));
    let h = harness_on(Rc::new(SignalClock(sleeping.clone(), sleeps.clone())), 9);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let script = h.request(
        &h.owner,
        "run_sdk",
        json!({"code": "const r = await client.memory.save({content: 'noted by the script'}); await ctx.sleep(500); return r.ids[0]"}),
    );
    let save = h.request(
        &h.owner,
        "save_memory",
        json!({"content": "noted by another agent"}),
    );
    // The other agent saves while the script, its own save made, sleeps.
    let (ran, saved) = runtime.block_on(async {
        tokio::join!(h.lore.handle(script), async {
            sleeping.notified().await;
            h.lore.handle(save).await
        })
    });
    let result = |r: http::Response<Vec<u8>>| {
        common::rpc_message(&String::from_utf8(r.into_body()).unwrap())["result"].clone()
    };
    let (ran, saved) = (result(ran), result(saved));
    assert_eq!(saved["isError"], false, "{saved}");
    let script_event = ok(&ran)["result"].as_str().unwrap().to_string();
    // It ran once: its commit numbered its event after the other's, not a second run.
    assert_eq!(sleeps.get(), 1, "the script ran {} times", sleeps.get());
    let rows = h.call(
        &h.owner,
        "query_sql",
        json!({"sql": "SELECT id, content FROM events ORDER BY content"}),
    );
    let rows = &rows["structuredContent"]["rows"];
    assert_eq!(
        rows,
        &json!([
            [
                saved["structuredContent"]["ids"][0],
                "noted by another agent"
            ],
            [script_event, "noted by the script"],
        ]),
        "{rows}"
    );
    // Both are in the memory index, each once.
    let found = h.call(&h.owner, "search_memory", json!({"query": "noted"}));
    assert_eq!(
        found["structuredContent"]["results"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{found}"
    );
}

type Head = (u16, Vec<(String, String)>);

/// A reply stream that keeps what it was given.
#[derive(Default)]
struct Recorder {
    head: std::cell::RefCell<Option<Head>>,
    chunks: std::cell::RefCell<Vec<Vec<u8>>>,
}

impl lore_front::mcp::reply::ReplyStream for Recorder {
    fn start(&self, status: u16, headers: &[(String, String)]) {
        assert!(self.chunks.borrow().is_empty(), "the head goes first");
        *self.head.borrow_mut() = Some((status, headers.to_vec()));
    }
    fn send(&self, bytes: Vec<u8>) {
        self.chunks.borrow_mut().push(bytes);
    }
}

fn sse_messages(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_script_call_with_a_progress_token_streams_its_progress() {
    let h = harness();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "query_sdk", "_meta": {"progressToken": "p1",
            "io.modelcontextprotocol/protocolVersion": common::V26,
            "io.modelcontextprotocol/clientCapabilities": {}},
        "arguments": {"code": "await ctx.sleep(10);\nawait client.templates.list({});\nreturn 'done'"}}});
    let request = |accept: &str| {
        http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", "127.0.0.1:8787")
            .header("origin", "http://127.0.0.1:8787")
            .header("authorization", format!("Bearer {}", h.owner))
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-protocol-version", common::V26)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "query_sdk")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let recorder = Rc::new(Recorder::default());
    let rest = block_on(h.lore.handle_streaming(
        request("application/json, text/event-stream"),
        recorder.clone(),
    ));
    let (status, headers) = recorder
        .head
        .borrow()
        .clone()
        .unwrap_or_else(|| panic!("not streamed: {}", String::from_utf8_lossy(rest.body())));
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-type".into(), "text/event-stream".into())));
    assert!(
        headers.contains(&(
            "access-control-allow-origin".into(),
            "http://127.0.0.1:8787".into()
        )),
        "{headers:?}"
    );
    let streamed: Vec<Value> = recorder
        .chunks
        .borrow()
        .iter()
        .flat_map(|c| sse_messages(c))
        .collect();
    let messages: Vec<&str> = streamed
        .iter()
        .map(|m| m["params"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        vec!["started", "ctx.sleep(10)", "templates.list", "done"]
    );
    let progress: Vec<f64> = streamed
        .iter()
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, vec![0.0, 1.0, 2.0, 3.0]);
    let last = sse_messages(rest.body());
    assert_eq!(last.len(), 1, "the rest of the body is the response");
    assert_eq!(last[0]["id"], 7);
    assert_eq!(last[0]["result"]["structuredContent"]["result"], "done");
    // A client that does not read SSE gets one JSON reply, and the stream is not used.
    let recorder = Rc::new(Recorder::default());
    let whole = block_on(
        h.lore
            .handle_streaming(request("application/json"), recorder.clone()),
    );
    assert!(recorder.head.borrow().is_none());
    let v: Value = serde_json::from_slice(whole.body()).unwrap();
    assert_eq!(v["result"]["structuredContent"]["result"], "done");
}

/// A revocation in a script holds once its run commits, and not before: the run's writes
/// (the token record and its org's auth stamp) are one batch, and the cached credential is
/// trusted only under the stamp it was verified with.
#[test]
fn a_script_revocation_holds_at_once_when_its_run_commits_and_not_when_it_fails() {
    let clock = Rc::new(JumpClock::starting_at(1_767_225_600_000));
    let storage = Rc::new(MemoryStorage::new());
    let cache = Rc::new(lore_testing::ports::MemoryCache::new(clock.clone()));
    let ports = Ports {
        storage: storage.clone(),
        clock,
        random: Rc::new(SeqRandom::seeded(7)),
        http: None,
        embedder: None,
        cache: Some(cache.clone()),
        background: None,
    };
    let h = Harness::on(ports, "acme");
    let agent = token(&h, Role::Member, "mcp:read");
    let id = block_on(lore_directory::tokens::verify_token(
        h.lore.ports(),
        &agent,
        None,
    ))
    .unwrap()
    .token
    .unwrap()
    .id;
    let key = lore_base::keys::cached_credential(&lore_base::keys::sha256_hex(&agent));
    // Warm: the agent's credential is cached, and the next call is answered by the caller this
    // instance resolved from it (`lore_directory::callers`), without the cache port.
    ok(&query_as(&h, &agent, "return 1"));
    assert!(cache.contains(&key));
    let hits = cache.hits.get();
    ok(&query_as(&h, &agent, "return 1"));
    assert_eq!(
        cache.hits.get(),
        hits,
        "a warm call is answered by the kept caller"
    );
    // A revocation in a run that then throws revokes nothing.
    let r = run(
        &h,
        &format!(
            "await client.tokens.revoke({{ id: '{id}' }}); throw new Error('changed my mind')"
        ),
        None,
    );
    failed(&r);
    ok(&query_as(&h, &agent, "return 1"));
    // A run that succeeds: the token stops at once, its cached copy still in the cache.
    ok(&run(
        &h,
        &format!("await client.tokens.revoke({{ id: '{id}' }}); return 1"),
        None,
    ));
    assert!(cache.contains(&key), "the copy is not trusted, not deleted");
    assert_eq!(
        h.status(&agent, "query_sdk", json!({"code": "return 1"})),
        401,
        "a revoked token is refused at once"
    );
}

#[test]
fn a_write_the_script_did_not_await_is_made_or_fails_the_run_never_dropped() {
    let h = harness();
    // Returning without awaiting: the calls still run, and their writes commit with the run.
    for code in [
        "client.entities.create({type: 'ticket', name: 'a'}); return 'done'",
        "client.entities.create({type: 'ticket', name: 'b'}).then(() => client.entities.create({type: 'ticket', name: 'c'})); return 'done'",
        "ctx.sleep(10).then(() => client.entities.create({type: 'ticket', name: 'd'})); return 'done'",
        "export default async (ctx, client) => { void client.entities.create({type: 'ticket', name: 'e'}); return 'done' }",
    ] {
        let before = tickets(&h);
        let r = run(&h, code, None);
        let out = ok(&r);
        assert_eq!(out["result"], "done", "{code}: {r}");
        assert!(out["writes"].as_u64().unwrap() > 0, "{code}: {r}");
        assert!(
            tickets(&h) > before,
            "{code}: the un-awaited write was made"
        );
    }
    // An un-awaited call that fails fails the run, naming it, and nothing of the run is written.
    let before = tickets(&h);
    let e = failed(&run(
        &h,
        "await client.entities.create({type: 'ticket', name: 'ok'}); client.entities.create({type: 'nope', name: 'x'}); return 'done'",
        None,
    ));
    assert_eq!(e["code"], "script_error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("client.entities.create"),
        "{e}"
    );
    assert!(
        e["message"].as_str().unwrap().contains("without awaiting"),
        "{e}"
    );
    assert_eq!(tickets(&h), before);
}

#[test]
fn a_lone_surrogate_is_refused_where_it_would_leave_the_script_never_stored_as_escapes() {
    let h = harness();
    for code in [
        "return '\\uD800'",
        "return {k: 'a\\uDC00b'}",
        "return {['\\uD83D']: 1}",
        "await client.entities.create({type: 'ticket', name: 'x\\uD800'})",
        "await client.memory.save({content: 'lone \\uDBFF'})",
    ] {
        let e = failed(&run(&h, code, None));
        assert!(
            e["message"].as_str().unwrap().contains("lone surrogate"),
            "{code}: {e}"
        );
    }
    assert_eq!(tickets(&h), 0);
    // A backslash string is only ever itself, and well-formed pairs pass.
    let r = run(
        &h,
        "return ['\\\\uD800', '\\uD83D\\uDE00', 'x'.toWellFormed ? '\\uD800'.toWellFormed() : '\\uFFFD']",
        None,
    );
    assert_eq!(
        ok(&r)["result"],
        json!(["\\uD800", "😀", "\u{FFFD}"]),
        "{r}"
    );
    // A log shows U+FFFD for it.
    let r = run(&h, "ctx.log('a\\uD800b'); return 1", None);
    assert_eq!(ok(&r)["logs"], json!(["a\u{FFFD}b"]), "{r}");
}

#[test]
fn cap_messages_read_well_and_a_read_operation_says_why_it_may_not_write() {
    let h = harness();
    let e = failed(&query(&h, "await new Promise(() => {})"));
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("the never_settles cap:"), "{message}");
    assert!(!message.contains("(0 )"), "{message}");
    let e = failed(&query(&h, "while (true) {}"));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("the steps cap (20000000 interpreter steps)"),
        "{e}"
    );
    // A read operation's script that writes, called from run_sdk (which may write).
    let r = run(
        &h,
        "await client.operations.create({name: 'peek', kind: 'script', access: 'read', code: \"await client.entities.create({type: 'ticket', name: 'x'})\", args_schema: {type: 'object'}}); return 1",
        None,
    );
    ok(&r);
    let e = failed(&run(
        &h,
        "return await client.operations.run({name: 'peek', args: {}})",
        None,
    ));
    let message = e["message"].as_str().unwrap();
    assert_eq!(e["code"], "needs_write", "{e}");
    assert!(
        message.contains("operation peek has access read"),
        "{message}"
    );
    assert!(!message.contains("use run_sdk"), "{message}");
    // From query_sdk the refusal names query_sdk.
    let e = failed(&query(
        &h,
        "await client.entities.create({type: 'ticket', name: 'x'})",
    ));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("query_sdk may only read"),
        "{e}"
    );
}
