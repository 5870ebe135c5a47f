//! Hostile scripts: each must end as a clean, structured error (most of them a named cap)
//! while the server keeps serving — after every case a second org's client gets its answer.
//! The cases run on a thread with the stack the native server gives the threads that run
//! scripts ([`lore_sandbox::failure::STACK_BYTES`]); a case that overflowed it would abort this test.

use crate::common;

/// The memory cap counts through the allocator, as in `lore serve`.
use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::Harness;
use lore_base::ports::Ports;
use lore_base::storage::memory::MemoryStorage;
use lore_testing::ports::SeqRandom;

enum Expect {
    /// `cap_exceeded` with this cap.
    Cap(&'static str),
    /// `cap_exceeded` with one of these caps.
    AnyCap(&'static [&'static str]),
    /// A failure with this code.
    Code(&'static str),
    /// Success with this result.
    Result(Value),
    /// Success with this result, or `cap_exceeded` with this cap (work that is either done in
    /// bounded time or stopped by the cap).
    ResultOrCap(Value, &'static str),
}
use Expect::{AnyCap, Cap, Code, Result, ResultOrCap};

fn deep_parens(n: usize) -> String {
    format!("return {}1{};", "(".repeat(n), ")".repeat(n))
}

fn cases(other_entity: &str) -> Vec<(&'static str, String, Expect)> {
    let c = |s: &str| s.to_string();
    vec![
        ("endless loop", c("while (true) {}"), Cap("steps")),
        (
            "arrays of a million numbers kept until memory runs out",
            c("const a = []; for (;;) a.push(new Array(1000000).fill(0));"),
            Cap("memory"),
        ),
        (
            "small objects kept in a loop until memory runs out",
            c("const a = []; for (let i = 0; ; i++) a.push({ i, s: 'item ' + i });"),
            Cap("memory"),
        ),
        (
            "a map callback that keeps a large object per element",
            c(
                "const big = new Array(1000000).fill(0); return big.map((_, i) => ({ i, tags: ['a', 'b', 'c'] })).length;",
            ),
            Cap("memory"),
        ),
        (
            "garbage made and dropped in a loop is not held against the script",
            c(
                "let n = 0; for (let i = 0; i < 12; i++) { const a = new Array(1000000).fill(i); n += a.length; } return n;",
            ),
            Result(json!(12_000_000u64)),
        ),
        (
            "a long string split into characters",
            c("return 'x'.repeat(4000000).split('').length;"),
            Cap("array_length"),
        ),
        (
            "a function bound 200,000 times, then called",
            c(
                "let f = function () { return 1 }; for (let i = 0; i < 200000; i++) f = f.bind(null); return f();",
            ),
            Cap("recursion"),
        ),
        (
            "a prototype chain 200,000 deep",
            c(
                "let o = {}; for (let i = 0; i < 200000; i++) o = Object.create(o); return o.missing === undefined;",
            ),
            Result(json!(true)),
        ),
        (
            "arrays nested 200,000 deep, then String()",
            c("let a = []; for (let i = 0; i < 200000; i++) a = [a]; return String(a).length;"),
            Cap("recursion"),
        ),
        (
            "a bound chain within the limit still runs",
            c(
                "let f = function () { return 7 }; for (let i = 0; i < 100; i++) f = f.bind(null); return f();",
            ),
            Result(json!(7)),
        ),
        (
            "nested endless loops",
            c("for (;;) { for (let i = 0; ; i++) {} }"),
            Cap("steps"),
        ),
        (
            "endless loop of awaits",
            c("while (true) { await null }"),
            Cap("jobs"),
        ),
        (
            "endless awaited promises",
            c("for (;;) await Promise.resolve(1)"),
            Cap("jobs"),
        ),
        (
            // Each promise is resolved with the next, still pending one: the chain only grows,
            // and which of its two caps it reaches first depends on what the thread holds.
            "endless microtask chain",
            c("const f = () => Promise.resolve().then(f); f(); await new Promise(() => {})"),
            AnyCap(&["jobs", "memory"]),
        ),
        (
            "endless allocation",
            c("const a = []; for (;;) a.push({ n: a.length })"),
            Cap("memory"),
        ),
        (
            "catch the step cap and go on",
            c("for (;;) { try { while (true) {} } catch (e) {} }"),
            Cap("steps"),
        ),
        (
            "repeat a billion",
            c("return 'x'.repeat(1e9).length"),
            Cap("string_length"),
        ),
        (
            "doubling with +=",
            c("let s = 'x'; for (;;) s += s;"),
            Cap("string_length"),
        ),
        (
            "doubling with +",
            c("let s = 'x'; for (;;) s = s + s;"),
            Cap("string_length"),
        ),
        (
            "doubling in a template",
            c("let s = 'x'; for (;;) s = `${s}${s}`;"),
            Cap("string_length"),
        ),
        (
            "doubling a property",
            c("const o = {s: 'x'}; for (;;) o.s += o.s;"),
            Cap("string_length"),
        ),
        (
            "doubling with concat",
            c("let s = 'x'; for (;;) s = s.concat(s);"),
            Cap("string_length"),
        ),
        (
            "pad to a billion",
            c("return 'ab'.padStart(1e9).length"),
            Cap("string_length"),
        ),
        (
            "join with a huge separator",
            c("return new Array(100000).join('x'.repeat(100000)).length"),
            Cap("string_length"),
        ),
        (
            "replaceAll blow-up",
            c("return 'a'.repeat(1000000).replaceAll('a', 'b'.repeat(1000)).length"),
            Cap("string_length"),
        ),
        (
            "fill a hundred million",
            c("return new Array(1e8).fill(0).length"),
            Cap("array_length"),
        ),
        (
            "Array.from a length",
            c("return Array.from({length: 1e8}).length"),
            Cap("array_length"),
        ),
        (
            "huge ArrayBuffer",
            c("return new ArrayBuffer(1e9).byteLength"),
            Code("script_error"),
        ),
        (
            "deep JSON.stringify",
            c(
                "let o = {}; for (let i = 0; i < 100000; i++) o = {o}; return JSON.stringify(o).length",
            ),
            Cap("value_depth"),
        ),
        (
            "deep JSON.parse",
            c("return JSON.parse('['.repeat(100000) + ']'.repeat(100000))"),
            Cap("value_depth"),
        ),
        (
            "deep result",
            c("let o = {}; for (let i = 0; i < 100000; i++) o = {o}; return o"),
            Cap("value_depth"),
        ),
        (
            "deep SDK arguments",
            c(
                "let o = {}; for (let i = 0; i < 100000; i++) o = {o}; return await client.entities.list({where: o})",
            ),
            Cap("value_depth"),
        ),
        ("300 nested parentheses", deep_parens(300), Cap("nesting")),
        (
            "deep nested array literal",
            format!("return {}{};", "[".repeat(2000), "]".repeat(2000)),
            Cap("nesting"),
        ),
        (
            "long prefix operator run",
            format!("return {}1;", "-".repeat(100_000)),
            Cap("nesting"),
        ),
        // Regular expressions: every shape of super-linear backtracking either finishes in
        // time proportional to the text (lore's matcher memoizes what it can) or ends at the
        // steps cap; none holds the thread, and no way around the matcher reaches the engine's.
        (
            "exponential backtracking through test",
            c("return /(a+)+$/.test('a'.repeat(40) + 'b')"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "exponential backtracking through match",
            c("return ('a'.repeat(40) + '!').match(/^(a|aa)*$/)"),
            ResultOrCap(Value::Null, "steps"),
        ),
        (
            "exponential backtracking through replace",
            c("return ('x'.repeat(30) + 'y').replace(/(x*)*z/, '')"),
            ResultOrCap(json!(format!("{}y", "x".repeat(30))), "steps"),
        ),
        (
            "polynomial backtracking: a run of stars on a long string",
            c("return /a*a*a*a*a*a*b/.test('a'.repeat(100000))"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "polynomial backtracking: repeated whitespace before the end",
            c("return /^(\\s*)+$/.test(' '.repeat(50000) + 'x')"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "polynomial backtracking: words and optional spaces",
            c("return /^(\\w+\\s?)*$/.test('ab '.repeat(20000) + '!')"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "backtracking with a back-reference",
            c("return /(a*)*\\1b/.test('a'.repeat(5000))"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "a look-ahead scanned from every start of a long string",
            c("return /(?=.*x)y/.test('a'.repeat(200000))"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "a look-behind over a long string",
            c("return /(?<=a*)b/.test('a'.repeat(200000))"),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "a pattern given as a string to match",
            c("return ('a'.repeat(40) + '!').match('(a+)+$')"),
            ResultOrCap(Value::Null, "steps"),
        ),
        (
            "a pattern given as a string to search",
            c("return ('a'.repeat(40) + '!').search('(a|a)*$b')"),
            ResultOrCap(json!(-1), "steps"),
        ),
        (
            "matchAll and split with a backtracking pattern",
            c(
                "const s = 'a'.repeat(3000) + '!'; return [...s.matchAll(/(a|aa)+!/g)].length + s.split(/(a*)*\\1!/).length",
            ),
            ResultOrCap(json!(4), "steps"),
        ),
        (
            "the engine's own replace called on a regexp directly",
            c("return RegExp.prototype[Symbol.replace].call(/(a+)+$/, 'a'.repeat(40) + 'b', '')"),
            ResultOrCap(json!(format!("{}b", "a".repeat(40))), "steps"),
        ),
        (
            "an own exec that is not callable, to reach the engine's matcher",
            c(
                "const r = /(a+)+$/; Object.defineProperty(r, 'exec', { value: undefined }); return r.test('a'.repeat(40) + 'b')",
            ),
            Code("script_error"),
        ),
        (
            "a regexp moved off its prototype, to reach the engine's matcher",
            c(
                "const r = /(a+)+$/; Object.setPrototypeOf(r, null); return RegExp.prototype.test.call(r, 'a'.repeat(40) + 'b')",
            ),
            Code("script_error"),
        ),
        (
            "a RegExp subclass with its own exec",
            c(
                "class X extends RegExp { get exec() { return undefined } } return new X('(a+)+$').test('a'.repeat(40) + 'b')",
            ),
            Code("script_error"),
        ),
        (
            "replacing exec on the prototype",
            c(
                "try { RegExp.prototype.exec = null } catch (e) {} try { delete RegExp.prototype.exec } catch (e) {} return typeof RegExp.prototype.exec",
            ),
            Result(json!("function")),
        ),
        (
            "recompiling a regexp into a backtracking one",
            c(
                "const r = /x/; if (typeof r.compile === 'function') r.compile('(a+)+$'); return r.test('a'.repeat(40) + 'b')",
            ),
            ResultOrCap(json!(false), "steps"),
        ),
        (
            "a pattern nested too deep for a parser",
            c("return new RegExp('('.repeat(100000) + ')'.repeat(100000)).test('')"),
            Code("script_error"),
        ),
        (
            "a pattern string given to match, nested too deep for a parser",
            c("return ''.match('('.repeat(100000) + ')'.repeat(100000))"),
            Code("script_error"),
        ),
        (
            "a regexp matched in a loop until the steps run out",
            c("let n = 0; for (;;) { if (/^(a|b)*c$/.test('ab'.repeat(5000))) n++; }"),
            Cap("steps"),
        ),
        (
            "plain recursion",
            c("function f(n) { return f(n + 1) + 1 } return f(0)"),
            Cap("recursion"),
        ),
        (
            "recursion through a built-in",
            c("function f() { return [1].map(f) } return f()"),
            Cap("recursion"),
        ),
        (
            "recursion through getters",
            c("const o = { get x() { return this.x } }; return o.x"),
            Cap("recursion"),
        ),
        // Boa answers a string conversion that re-enters itself with "" rather than recursing.
        (
            "recursion through toString",
            c("const o = { toString() { return String(this) } }; return String(o)"),
            Result(json!("")),
        ),
        (
            "recursion through a template",
            c("const o = { toString() { return `<${this}>` } }; return typeof String(o)"),
            Result(json!("string")),
        ),
        (
            "giant result",
            c("return 'x'.repeat(4000000)"),
            Cap("output"),
        ),
        (
            "giant logs",
            c("for (let i = 0; i < 100000; i++) ctx.log('y'.repeat(100))"),
            Cap("output"),
        ),
        (
            "a promise that never settles",
            c("await new Promise(() => {})"),
            Cap("never_settles"),
        ),
        (
            "a flood of SDK calls",
            c("await Promise.all(Array.from({length: 300}, () => client.templates.list({})))"),
            Cap("sdk_calls"),
        ),
        (
            "a sleep past the cap",
            c("await ctx.sleep(60000)"),
            Cap("sleep"),
        ),
        ("eval", c("return eval('1')"), Code("script_error")),
        (
            "Function through a constructor chain",
            c("return ({}).constructor.constructor('return globalThis')()"),
            Code("script_error"),
        ),
        (
            "tampering with ctx and the SDK",
            c(
                "try { ctx.sleep = null } catch (e) {}\ntry { Object.setPrototypeOf(client, {}) } catch (e) {}\ntry { client.templates = 1 } catch (e) {}\ntry { Object.defineProperty($, 'templates', {value: 1}) } catch (e) {}\nObject.prototype.then = undefined;\nreturn [typeof ctx.sleep, (await client.templates.list({})).length]",
            ),
            Result(json!(["function", 0])),
        ),
        (
            "tampering with built-ins the host uses",
            c(
                "Object.keys = () => ['x'];\nJSON.stringify = () => 'x';\nArray.prototype.map = null;\nreturn {a: 1, b: [1, 2]}",
            ),
            Result(json!({"a": 1, "b": [1, 2]})),
        ),
        (
            "reaching another org's entity by id",
            format!("return await client.entities.get({{id: '{other_entity}'}})"),
            Code("not_found"),
        ),
        // Host functions that call one another with no script frame between them: a getter
        // that is a bound host function reading the same property again.
        (
            "a Symbol.match getter that is match bound to it",
            c(
                "const o: any = {}; Object.defineProperty(o, Symbol.match, { get: String.prototype.match.bind('x', o) }); return 'x'.match(o)",
            ),
            Cap("recursion"),
        ),
        (
            "a length getter that is join bound to it",
            c(
                "const o: any = {}; Object.defineProperty(o, 'length', { get: Array.prototype.join.bind(o) }); return Array.prototype.join.call(o)",
            ),
            Cap("recursion"),
        ),
        (
            "a constructor getter that is the script's RegExp bound to it",
            c(
                "const o: any = {}; Object.defineProperty(o, 'constructor', { get: RegExp.bind(null, o) }); return String(RegExp(o))",
            ),
            Cap("recursion"),
        ),
        (
            // Two numbers add without the guard only where both are the script's own
            // variables: a global's accessor can answer numbers to the type test, then strings.
            "a global accessor that answers numbers, then strings, added to itself",
            c(
                "declare let g: any; let n = 0; let big = 'x'; Object.defineProperty(globalThis, 'g', { get() { n++; return n % 4 === 1 || n % 4 === 2 ? 1 : big } }); for (;;) { const d = g + g; if (typeof d === 'string') big = d; }",
            ),
            Cap("string_length"),
        ),
        (
            // Two of the script's own numeric variables add without the guard.
            "a numeric loop, forever",
            c("let i = 0; let x = 1; while (true) { i = (i + 1) | 0; x = x * 3 % 7; }"),
            Cap("steps"),
        ),
        (
            "a number a closure turns into a string, then doubled",
            c("let s = 1; const f = () => { s = 'ab'; }; f(); for (;;) { s += s; }"),
            Cap("string_length"),
        ),
        (
            "a var redeclared as a for-of variable holding a string, then doubled",
            c("var s = 0; for (var s of ['ab']) {} for (;;) { s = s + s; }"),
            Cap("string_length"),
        ),
        (
            // eval is disabled; were it not, the analysis gives up on a script naming it.
            "a direct eval aimed at a numeric variable",
            c("let s = 1; eval(\"s = 'ab'\"); for (;;) { s += s; }"),
            Code("script_error"),
        ),
        (
            "naming the guards",
            c("const __lore_add = (a, b) => a; return 1"),
            Code("syntax_error"),
        ),
        (
            "an import",
            c("import fs from 'fs';\nexport default async () => 1"),
            Code("syntax_error"),
        ),
    ]
}

#[test]
fn hostile_scripts_end_cleanly_and_other_orgs_keep_being_served() {
    let _alone = common::scripts_alone();
    let worker = std::thread::Builder::new()
        .stack_size(lore_sandbox::failure::STACK_BYTES)
        .spawn(run_cases)
        .unwrap();
    worker
        .join()
        .expect("the hostile scripts took the thread down");
}

fn run_cases() {
    assert!(
        lore_meter::installed(),
        "the memory cases need the metered allocator"
    );
    let ports = common::memory_ports(3);
    let h = Harness::on(ports, "acme");
    let other = block_on(lore_directory::admin::create_org(h.lore.ports(), "globex"))
        .unwrap()
        .token;
    let made = h.call(&other, "run_sdk", json!({"code": "await client.templates.create({name: 'secret', schema: {type: 'object'}}); return (await client.entities.create({type: 'secret', name: 'plans'})).id"}));
    assert_eq!(made["isError"], false, "{made}");
    let other_entity = made["structuredContent"]["result"]
        .as_str()
        .unwrap()
        .to_string();
    let mut cases = cases(&other_entity);
    assert!(cases.len() >= 25);
    // `LORE_HOSTILE_CASE=<part of a name>` runs only the matching cases, to debug one.
    if let Ok(only) = std::env::var("LORE_HOSTILE_CASE") {
        cases.retain(|(name, _, _)| name.contains(only.as_str()));
    }
    let mut failures = Vec::new();
    for (name, code, expect) in &cases {
        #[allow(clippy::disallowed_methods)] // a native test: wall time from the OS
        let started = std::time::Instant::now();
        let r = h.call(&h.owner, "run_sdk", json!({"code": code}));
        let outcome = if r["isError"] == true {
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            let e: Value = serde_json::from_str::<Value>(text)
                .map(|v| v["error"].clone())
                .unwrap_or(Value::Null);
            Err(e)
        } else {
            Ok(r["structuredContent"]["result"].clone())
        };
        let good = match (expect, &outcome) {
            (Cap(cap), Err(e)) => {
                e["code"] == "cap_exceeded"
                    && e["cap"] == *cap
                    && e["message"].as_str().is_some_and(|m| m.contains(cap))
            }
            (AnyCap(caps), Err(e)) => {
                e["code"] == "cap_exceeded"
                    && caps.iter().any(|cap| {
                        e["cap"] == *cap && e["message"].as_str().is_some_and(|m| m.contains(cap))
                    })
            }
            (Code(code), Err(e)) => e["code"] == *code,
            (Result(v), Ok(got)) | (ResultOrCap(v, _), Ok(got)) => got == v,
            (ResultOrCap(_, cap), Err(e)) => e["code"] == "cap_exceeded" && e["cap"] == *cap,
            _ => false,
        };
        if !good {
            failures.push(format!("{name}: {outcome:?}"));
        }
        if std::env::var_os("LORE_HOSTILE_VERBOSE").is_some() {
            eprintln!("{name} ({:?}): {outcome:?}", started.elapsed());
        }
        // The other org is answered after every case, and sees its own data only.
        let r = h.call(&other, "query_sdk", json!({"code": "return (await client.entities.list({})).items.map((e: any) => e.name)"}));
        assert_eq!(
            r["structuredContent"]["result"],
            json!(["plans"]),
            "after {name}: {r}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // Nothing any hostile run did was written.
    let r = h.call(
        &h.owner,
        "query_sdk",
        json!({"code": "return (await client.entities.list({})).items.length"}),
    );
    assert_eq!(r["structuredContent"]["result"], 0, "{r}");
}

/// The wall clock is a hard bound on a run, whatever the script calls: with a 400 ms cap set
/// for the test and a real clock, each of these ends with the `wall_clock` cap, soon after the
/// cap, not when the work (or the steps cap, set out of reach here) would have ended it.
#[test]
fn a_script_never_runs_past_its_wall_clock_cap_whatever_it_calls() {
    let _alone = common::scripts_alone();
    let worker = std::thread::Builder::new()
        .stack_size(lore_sandbox::failure::STACK_BYTES)
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(wall_clock_cases());
        })
        .unwrap();
    worker
        .join()
        .expect("the wall-clock cases took the thread down");
}

async fn wall_clock_cases() {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(lore::ports::SystemClock),
        random: Rc::new(SeqRandom::seeded(5)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let lore = lore_front::Lore::new(ports, lore_front::Config::default());
    lore_directory::admin::init(lore.ports(), "acme")
        .await
        .unwrap();
    let caller = lore.local_caller(Some("acme")).await.unwrap();
    let caps = lore_sandbox::caps::ScriptCaps {
        wall_ms: 400,
        steps: 1 << 40,
        ..Default::default()
    };
    for code in [
        "await ctx.sleep(300); while (true) {}",
        "await ctx.sleep(300); for (;;) /(a*)*\\1b/.test('a'.repeat(25))",
        "await ctx.sleep(300); return /(a*)*\\1b/.test('a'.repeat(5000))",
        "await ctx.sleep(300); let s = 0; for (let i = 0; i < 1e12; i++) s += i; return s",
        "await ctx.sleep(390); return 'a'.repeat(2000000).replace(/a/g, 'b').length",
        "for (;;) { await ctx.sleep(50) }",
        "await ctx.sleep(350); for (;;) { try { while (true) {} } catch (e) {} }",
        // Loops of numeric arithmetic take their tick once per few thousand steps of weight
        // (`strip::COUNTER`): nested, labelled, long-bodied, or inside a nested function.
        "await ctx.sleep(300); let t = 0; a: for (;;) { for (let j = 0; j < 1e12; j++) { t = (t + j) % 7; if (t > 9) continue a; } }",
        &format!(
            "await ctx.sleep(300); let x = 0; do {{ {} }} while (x === x)",
            "x = (x * 3 + 1) % 1000003; ".repeat(3000)
        ),
        "await ctx.sleep(300); const f = () => { let n = 0; while (n >= 0) { n = (n + 1) | 0; } return n; }; return f()",
        "await ctx.sleep(300); let i = 0; while (true) i++",
    ] {
        if std::env::var_os("LORE_HOSTILE_VERBOSE").is_some() {
            eprintln!("wall clock case: {code}");
        }
        #[allow(clippy::disallowed_methods)] // a native test: wall time from the OS
        let started = std::time::Instant::now();
        let r = lore_engine::scripts::run_with_caps(
            &lore.engine,
            &caller,
            lore_engine::scripts::Surface::Query,
            code,
            None,
            false,
            caps.clone(),
        )
        .await;
        let elapsed = started.elapsed();
        let failure = match r {
            Err(lore_base::error::LoreError::Script(f)) => f,
            other => panic!("{code}: {other:?}"),
        };
        assert_eq!(failure.cap, Some("wall_clock"), "{code}: {failure:?}");
        // Generous for a loaded machine; without the bound these run for minutes.
        assert!(
            elapsed < std::time::Duration::from_millis(400 + 1500),
            "{code}: ran {elapsed:?} past a 400 ms cap"
        );
    }
}

/// `lore serve`'s way: every run in a script process (`lore::scripts`), with `caps` and at most
/// `slots` scripts at once (each token a quarter of them, at least one).
fn served(caps: lore_sandbox::caps::ScriptCaps, slots: usize) -> Harness {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(lore::ports::SystemClock),
        random: Rc::new(SeqRandom::seeded(13)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let config = lore_front::Config {
        scripts: caps,
        ..lore_front::Config::default()
    };
    let h = Harness::on_with(ports, "acme", config);
    Harness {
        lore: h
            .lore
            .with_script_threads(lore::scripts::ScriptProcesses::new(
                env!("CARGO_BIN_EXE_lore").into(),
            ))
            .with_script_slots(lore_base::ratelimit::ScriptSlots::new(slots)),
        owner: h.owner,
    }
}

/// This process's resident memory, from `/proc`.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// The script processes this process started that are running (not waiting) now.
fn busy_script_processes() -> usize {
    busy_script_pids().len()
}

/// The ids of the script processes this process started that are running (not waiting) now.
fn busy_script_pids() -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let dir = e.path();
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            // `pid (comm) state ppid ...`
            let after = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest)
                .unwrap_or_default();
            let mut fields = after.split_whitespace();
            let (state, ppid) = (fields.next(), fields.next());
            String::from_utf8_lossy(&cmdline).contains(lore::script_child::ARG)
                && ppid == Some(me.as_str())
                && state == Some("R")
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn tokio_local<F: std::future::Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&runtime, f)
}

/// Natively the bounds hold outside the engine: whatever a built-in does, a run in its process
/// ends at its wall clock or its memory cap (small ones, set for the test), and the server's
/// own memory does not grow with what the scripts built.
#[test]
fn no_built_in_takes_a_script_past_its_wall_clock_or_memory_in_its_process() {
    let _alone = common::scripts_alone();
    let caps = lore_sandbox::caps::ScriptCaps {
        wall_ms: 1_500,
        memory_bytes: 16 << 20,
        steps: 1 << 40,
        ..Default::default()
    };
    tokio_local(async {
        let h = served(caps.clone(), 4);
        let warm = h
            .call_async(&h.owner, "query_sdk", json!({"code": "return 1"}))
            .await;
        assert_eq!(warm["isError"], false, "{warm}");
        let before = resident_bytes();
        for code in [
            // The shapes of the probe: one built-in call past the caps.
            "return Array.prototype.indexOf.call({length: 2 ** 53 - 1}, 1)",
            "const a = new Array(100000).fill('xxxxxxxxxxxxxxxx'); return JSON.stringify([a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a]).length",
            "let a = [[1]]; for (let i = 0; i < 26; i++) a = [a, a]; return a.flat(Infinity).length",
            "const s = [,]; s.length = 2 ** 28; return [...s].length",
            "const a = new Array(2 ** 20).fill(1); let b = []; for (let i = 0; i < 64; i++) b = b.concat(a); return b.length",
            "return '\\u1e9b\\u0323'.repeat(2000000).normalize('NFKD').length",
            // Shapes not in the probe: other built-ins that loop or build natively.
            "return Array.prototype.lastIndexOf.call({length: 2 ** 53 - 1}, 1)",
            "return Array.prototype.join.call({length: 2 ** 31}, 'ab').length",
            "return Object.keys(Array.prototype.fill.call({length: 2 ** 26}, 7)).length",
            "const m = new Map(); for (const k of Array.prototype.keys.call({length: 2 ** 40})) m.set(k, [k]); return m.size",
        ] {
            #[allow(clippy::disallowed_methods)] // a native test: wall time from the OS
            let started = std::time::Instant::now();
            let r = h
                .call_async(&h.owner, "query_sdk", json!({"code": code}))
                .await;
            let elapsed = started.elapsed();
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            let e: Value = serde_json::from_str::<Value>(text)
                .map(|v| v["error"].clone())
                .unwrap_or(Value::Null);
            assert_eq!(r["isError"], true, "{code}: {r}");
            assert_eq!(e["code"], "cap_exceeded", "{code}: {e}");
            assert!(
                ["wall_clock", "memory", "array_length", "string_length"]
                    .contains(&e["cap"].as_str().unwrap_or_default()),
                "{code}: {e}"
            );
            // The cap, the grace the process gets, and a loaded machine's slack.
            assert!(
                elapsed < std::time::Duration::from_millis(caps.wall_ms + 1_000 + 2_500),
                "{code}: ran {elapsed:?}"
            );
            // The server still runs scripts after each.
            let r = h
                .call_async(&h.owner, "query_sdk", json!({"code": "return 2"}))
                .await;
            assert_eq!(r["structuredContent"]["result"], 2, "after {code}: {r}");
        }
        let grown = resident_bytes().saturating_sub(before);
        assert!(
            grown < 48 << 20,
            "the server grew by {} MiB while scripts built gigabytes in their processes",
            grown >> 20
        );
    });
}

/// A run's slot is held until its JavaScript has stopped: a run whose request goes away is
/// killed with its process, and only then is its slot given back.
#[test]
fn a_dropped_run_stops_its_process_before_its_slot_is_given_back() {
    let _alone = common::scripts_alone();
    tokio_local(async {
        let h = served(lore_sandbox::caps::ScriptCaps::default(), 1);
        let busy = json!({"code": "return Array.prototype.indexOf.call({length: 2 ** 53 - 1}, 1)"});
        for _ in 0..3 {
            // The request goes away while its script computes, in a process of its own.
            let mut request = Box::pin(h.lore.handle(h.request(
                &h.owner,
                "query_sdk",
                busy.clone(),
            )));
            let _ = tokio::time::timeout(std::time::Duration::from_millis(400), &mut request).await;
            let computing = busy_script_pids();
            assert_eq!(computing.len(), 1, "the run computes in its process");
            drop(request);
            // Its process is killed and reaped, and only then is the slot free again: until
            // then another run is refused (overloaded), not run beside it.
            let mut served = false;
            for _ in 0..300 {
                let r = h
                    .call_async(&h.owner, "query_sdk", json!({"code": "return 3"}))
                    .await;
                if r["structuredContent"]["result"] == 3 {
                    served = true;
                    break;
                }
                let text = r["content"][0]["text"].as_str().unwrap_or_default();
                assert!(text.contains("overloaded"), "{r}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert!(served, "a dropped run's slot was never given back");
            // The slot came back once the process was reaped: it is gone.
            assert!(
                !std::path::Path::new("/proc").join(&computing[0]).exists(),
                "the slot came back while the dropped run's process was still there"
            );
        }
        // While one runs, the only slot is taken: another is refused, not run beside it.
        let request = h
            .lore
            .handle(h.request(&h.owner, "query_sdk", busy.clone()));
        tokio::pin!(request);
        let _ = tokio::time::timeout(std::time::Duration::from_millis(300), &mut request).await;
        let second = h
            .call_async(&h.owner, "query_sdk", json!({"code": "return 4"}))
            .await;
        let text = second["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("overloaded"), "{second}");
        assert!(busy_script_processes() <= 1);
    });
}
