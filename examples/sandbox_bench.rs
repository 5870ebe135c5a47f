//! A cold script run in lore's sandbox (TypeScript strip + fresh realm + run), timed in process
//! (`bench/sandbox.sh`; BENCHMARKS.md, "Script sandbox"). Node's peer, `bench/sandbox_node.mjs`,
//! runs the same TypeScript against the same database with esbuild's transform and a fresh
//! `vm` context; the shell script runs both in one session.
//!
//! ```sh
//! cargo run --release --example sandbox_bench -- --runs 300 --out /tmp/sandbox-bench.json
//! ```
//!
//! Seeds 1,000 entities into a fresh lore database (native SQLite storage), then times, `--runs`
//! times each:
//! - `10 reads`: a TypeScript script that reads 10 entities by id (`client.entities.get`) and
//!   sums a property: the whole `sandbox::run` for the owner through `query_sdk`'s path;
//! - `return 1`: the fixed cost (strip, realm, bootstrap, actions-log write);
//! - both again as `lore serve` runs them: each run's JavaScript on a script thread of its
//!   own, started one run ahead with its realm made while it waits (`lore::threads`), its SDK
//!   calls answered by the thread that asked for the run;
//! - `hot loop`: a million iterations of `s += i` under the step budget and lore's guards,
//!   beside the same loop in a bare Boa context (same build: the instruction counter is always
//!   compiled in; the difference is lore's realm, `+` guard and tick).
//!
//! - parts of the fixed cost, each alone: the TypeScript strip of the 10-read script, a bare
//!   Boa context built and dropped, and a one-key storage commit (the Action's write).
//!
//! It writes `--out` (JSON): the database path, the ids, the storage keys of those ids, and the
//! script, for the Node peer.
#![allow(clippy::disallowed_methods)] // a native bench: wall time from the OS

use std::rc::Rc;
use std::time::Instant;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore::ports::{OsRandom, SystemClock};
use lore::sqlite::SqliteStorage;
use lore_base::model::Tier;
use lore_base::ports::Ports;
use lore_directory::admin::{self, InitOutcome};
use lore_engine::call_method;
use lore_engine::scripts::{Surface, run};
use lore_front::{Config, Lore};
use lore_meter::Metered;

#[global_allocator]
static ALLOCATOR: Metered<std::alloc::System> = Metered(std::alloc::System);

pub const TEN_READS: &str = r#"interface Ticket {
  id: string;
  name: string;
  properties: { points: number; priority: string };
}
const ids: string[] = ctx.args.ids;
let total = 0;
for (const id of ids) {
  const t: Ticket = await client.entities.get({ id });
  total += t.properties.points;
}
return total;"#;

const HOT_LOOP: &str = "let s = 0; for (let i = 0; i < 1000000; i++) { s += i; } return s;";

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn pct(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let i = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[i]
}

fn main() {
    let runs: usize = arg("--runs").and_then(|v| v.parse().ok()).unwrap_or(200);
    let out = arg("--out").unwrap_or_else(|| "/tmp/lore-sandbox-bench.json".into());
    let dir = std::env::temp_dir().join(format!("lore-sandbox-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("lore.db");
    let ports = Ports {
        storage: Rc::new(SqliteStorage::open(&db).unwrap()),
        clock: Rc::new(SystemClock),
        random: Rc::new(OsRandom),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let lore = Lore::new(ports.clone(), Config::default());
    // The same database and org, its scripts run as `lore serve` runs them: in script
    // processes of the `lore` binary beside this example (or LORE_BIN).
    let program = std::env::var_os("LORE_BIN").map_or_else(
        || {
            let exe = std::env::current_exe().unwrap();
            exe.parent().unwrap().parent().unwrap().join("lore")
        },
        std::path::PathBuf::from,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let _entered = runtime.enter();
    let served = Lore::new(ports, Config::default())
        .with_script_threads(lore::scripts::ScriptProcesses::new(program));
    let InitOutcome::Created(_) = block_on(admin::init(lore.ports(), "bench")).unwrap() else {
        panic!("fresh database expected");
    };
    let caller = block_on(lore.local_caller(Some("bench"))).unwrap();
    let call = |path: &str, args: Value| -> Value {
        let json = block_on(call_method(&lore.engine, &caller, path, args, Tier::Admin))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(json.get()).unwrap()
    };
    call(
        "templates.create",
        json!({"name": "ticket", "schema": {"type": "object", "properties": {
            "priority": {"type": "string"}, "points": {"type": "integer"}}}}),
    );
    let mut ids = Vec::new();
    for chunk in 0..2 {
        let items: Vec<Value> = (0..500)
            .map(|k| json!({"name": format!("ticket {chunk}-{k}"), "properties": {"priority": "low", "points": k % 13}}))
            .collect();
        let made = call(
            "entities.create_many",
            json!({"type": "ticket", "items": items}),
        );
        for e in made["items"].as_array().into_iter().flatten() {
            ids.push(e["id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(ids.len(), 1000, "seeded");
    let picked: Vec<String> = ids.iter().step_by(100).cloned().collect();
    let keys: Vec<String> = picked
        .iter()
        .map(|id| caller.keys().entity(id.trim_start_matches("ent_")))
        .collect();
    let expected = {
        let mut total = 0;
        for id in &picked {
            total += call("entities.get", json!({"id": id}))["properties"]["points"]
                .as_i64()
                .unwrap();
        }
        total
    };
    std::fs::write(
        &out,
        serde_json::to_vec_pretty(&json!({
            "db": db, "ids": picked, "keys": keys, "script": TEN_READS, "expected": expected,
        }))
        .unwrap(),
    )
    .unwrap();

    let args = json!({ "ids": picked });
    let served_caller = block_on(served.local_caller(Some("bench"))).unwrap();
    // Runs on this thread's runtime and local tasks, as a worker of `lore serve` does (the
    // script processes' pipes are read by local tasks).
    let time_on =
        |lore: &Lore, caller, code: &str, args: Option<Value>, want: Value| -> (f64, f64) {
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let t = Instant::now();
                let r = local
                    .block_on(
                        &runtime,
                        run(
                            &lore.engine,
                            caller,
                            Surface::Query,
                            code,
                            args.clone(),
                            false,
                        ),
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                assert_eq!(r["result"], want);
            }
            (pct(&mut times, 0.5), pct(&mut times, 0.99))
        };
    let time =
        |code: &str, args: Option<Value>, want: Value| time_on(&lore, &caller, code, args, want);
    let ten = time(TEN_READS, Some(args.clone()), json!(expected));
    let one = time("return 1", None, json!(1));
    let hot = time(HOT_LOOP, None, json!(499_999_500_000u64));
    let served_ten = time_on(
        &served,
        &served_caller,
        TEN_READS,
        Some(args),
        json!(expected),
    );
    let served_one = time_on(&served, &served_caller, "return 1", None, json!(1));
    // The same loop in a bare Boa context of this build.
    let bare = {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            // The build's `fuzz` feature starts a context with no instructions left.
            let mut context = boa_engine::Context::builder()
                .instructions_remaining(usize::MAX)
                .build()
                .unwrap();
            let v = context
                .eval(boa_engine::Source::from_bytes(
                    "(function () { let s = 0; for (let i = 0; i < 1000000; i++) { s += i; } return s; })()",
                ))
                .unwrap();
            assert_eq!(v.as_number(), Some(499_999_500_000.0));
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        (pct(&mut times, 0.5), pct(&mut times, 0.99))
    };
    // Parts of the fixed cost, each alone.
    let parts = {
        let caps = lore_sandbox::caps::ScriptCaps::default();
        let mut strip = Vec::with_capacity(runs);
        let mut realm = Vec::with_capacity(runs);
        let mut commit = Vec::with_capacity(runs);
        for i in 0..runs {
            let t = Instant::now();
            lore_sandbox::strip::strip(TEN_READS, &caps).unwrap();
            strip.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            let context = boa_engine::Context::builder()
                .instructions_remaining(usize::MAX)
                .build()
                .unwrap();
            drop(context);
            realm.push(t.elapsed().as_secs_f64() * 1000.0);
            let mut batch = lore_base::storage::Batch::new();
            batch.put(format!("bench/commit/{i}"), vec![b'x'; 600]);
            let t = Instant::now();
            block_on(lore.ports().storage.commit(batch)).unwrap();
            commit.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        json!({
            "strip_ten_reads_ms": pct(&mut strip, 0.5),
            "bare_boa_context_ms": pct(&mut realm, 0.5),
            "one_key_commit_ms": pct(&mut commit, 0.5),
        })
    };
    println!(
        "{}",
        json!({
            "parts_p50": parts,
            "runs": runs,
            "ten_reads_ms": {"p50": ten.0, "p99": ten.1},
            "return_1_ms": {"p50": one.0, "p99": one.1},
            "hot_loop_ms": {"p50": hot.0, "p99": hot.1},
            "hot_loop_bare_boa_ms": {"p50": bare.0, "p99": bare.1},
            "served": {
                "ten_reads_ms": {"p50": served_ten.0, "p99": served_ten.1},
                "return_1_ms": {"p50": served_one.0, "p99": served_one.1},
            },
        })
    );
    eprintln!("database kept for the Node peer: {}", db.display());
}
