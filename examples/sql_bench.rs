//! `query_sql` beside rusqlite running the same SQL on the same rows, in one process and one run
//! (`bench/sql.sh`; BENCHMARKS.md, "SQL").
//!
//! ```sh
//! cargo run --release --example sql_bench -- --entities 100000 --runs 10
//! ```
//!
//! Seeds `--entities` entities of 8 types into a fresh lore database (native SQLite storage,
//! through `entities.create_many`, 500 per call), copies the same rows into an in-memory SQLite
//! table `entities` with the columns of lore's `entities` table (properties as JSON text, no
//! index: both engines scan), checks that both answer each query with the same rows, then times
//! each query `--runs` times on each and prints the medians:
//!
//! - lore cold: `sql::query` end to end for the owner on an instance without the table cache
//!   (catalog read, loading the table through the storage port, GlueSQL, the page), and its
//!   parts: the raw storage scan of the key prefixes the load reads (after push-down), and the
//!   load (scan + JSON decoding + building GlueSQL rows of the columns the query names);
//! - lore warm: the same on an instance whose table cache holds the table (the query repeated
//!   with no write in between: a read of the org's records version, then GlueSQL and the page);
//! - lore after a write: the same instance, the query right after an `entities.update` of one
//!   entity through it (the first query after a write: the write applied itself to the cached
//!   tables), and that update's own time;
//! - rusqlite: prepare, step through every row, and collect the values.
#![allow(clippy::disallowed_methods)] // a native bench: wall time from the OS

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use futures_executor::block_on;
use rusqlite::Connection;
use serde_json::{Value, json};

use lore::ports::{OsRandom, SystemClock};
use lore::sqlite::SqliteStorage;
use lore_base::model::Tier;
use lore_base::ports::Ports;
use lore_directory::admin::{self, InitOutcome};
use lore_engine::call_method;
use lore_front::{Config, Lore};
use lore_records::entities::Entity;
use lore_records::sql::QuerySql;
use lore_records::sql::budget::Budget;
use lore_records::sql::catalog::{Catalog, Needed};

const TYPES: &[&str] = &[
    "ticket",
    "person",
    "company",
    "deal",
    "note_card",
    "project",
    "task",
    "asset",
];

const QUERIES: &[(&str, &str)] = &[
    (
        "group by type",
        "SELECT type, COUNT(*) AS n FROM entities GROUP BY type ORDER BY type",
    ),
    (
        "filtered sorted page",
        "SELECT id, name, version FROM entities WHERE type = 'ticket' AND name >= '8' ORDER BY name DESC LIMIT 100",
    ),
];

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A stable pseudo-random name, so that sorting by name is real work.
fn name_of(i: usize) -> String {
    let mut h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 31;
    format!("{:016x}", h.wrapping_mul(0xBF58_476D_1CE4_E5B9))
}

fn main() {
    let entities = arg("--entities", 100_000);
    let runs = arg("--runs", 10).max(1);
    let dir = std::env::temp_dir().join(format!("lore-sql-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db: PathBuf = dir.join("lore.db");
    let ports = Ports {
        storage: Rc::new(SqliteStorage::open(&db).unwrap()),
        clock: Rc::new(SystemClock),
        random: Rc::new(OsRandom),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let mut config = Config::default();
    // The bench measures speed, not the guard rails.
    config.sql.time_ms = 600_000;
    // An instance without the table cache, on the same storage: every query reads and decodes.
    let mut cold_config = config.clone();
    cold_config.sql.cache_bytes = 0;
    let cold = Lore::new(ports.clone(), cold_config);
    let lore = Lore::new(ports, config);
    let InitOutcome::Created(_) = block_on(admin::init(lore.ports(), "bench")).unwrap() else {
        panic!("fresh database expected");
    };
    let caller = block_on(lore.local_caller(Some("bench"))).unwrap();
    let call = |path: &str, args: Value| -> Value {
        let json = block_on(call_method(&lore.engine, &caller, path, args, Tier::Admin))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(json.get()).unwrap()
    };

    let seeding = Instant::now();
    for t in TYPES {
        call(
            "templates.create",
            json!({"name": t, "schema": {"type": "object", "properties": {
                "priority": {"type": "string"}, "points": {"type": "integer"}}}}),
        );
    }
    let mut i = 0;
    while i < entities {
        let t = TYPES[(i / 500) % TYPES.len()];
        let n = 500.min(entities - i);
        let items: Vec<Value> = (i..i + n)
            .map(|k| json!({"name": name_of(k), "properties": {"priority": if k % 3 == 0 {"high"} else {"low"}, "points": k % 13}}))
            .collect();
        call("entities.create_many", json!({"type": t, "items": items}));
        i += n;
    }
    eprintln!(
        "seeded {entities} entities in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );

    // The same rows in SQLite.
    let prefix = caller.keys().entities();
    let stored = block_on(lore.ports().storage.scan_all(&prefix)).unwrap();
    let sqlite = Connection::open_in_memory().unwrap();
    sqlite
        .execute_batch(
            "CREATE TABLE entities (id TEXT, type TEXT, name TEXT, properties TEXT, author TEXT, \
             version INTEGER, created_at TEXT, updated_at TEXT);",
        )
        .unwrap();
    {
        let tx = sqlite.unchecked_transaction().unwrap();
        let mut insert = tx
            .prepare("INSERT INTO entities VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            .unwrap();
        for (_, bytes) in &stored {
            let e: Entity = serde_json::from_slice(bytes).unwrap();
            insert
                .execute(rusqlite::params![
                    e.id,
                    e.type_name,
                    e.name,
                    serde_json::to_string(&e.properties).unwrap(),
                    e.author,
                    e.version as i64,
                    e.created_at,
                    e.updated_at
                ])
                .unwrap();
        }
        drop(insert);
        tx.commit().unwrap();
    }

    let run_sqlite = |sql: &str| -> Vec<Vec<Value>> {
        let mut stmt = sqlite.prepare(sql).unwrap();
        let columns = stmt.column_count();
        let rows = stmt
            .query_map([], |row| {
                (0..columns)
                    .map(|c| {
                        Ok(match row.get_ref(c)? {
                            rusqlite::types::ValueRef::Integer(n) => json!(n),
                            rusqlite::types::ValueRef::Real(f) => json!(f),
                            rusqlite::types::ValueRef::Text(t) => {
                                json!(String::from_utf8_lossy(t))
                            }
                            _ => Value::Null,
                        })
                    })
                    .collect()
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let run_on = |lore: &Lore, sql: &str| -> Vec<Vec<Value>> {
        let args = QuerySql {
            sql: sql.to_string(),
            params: Vec::new(),
            limit: Some(1000),
            cursor: None,
            order_by: None,
        };
        block_on(lore_records::sql::query(
            lore.ports(),
            &caller,
            &lore.config.sql,
            &lore.engine.sql_cache,
            None,
            args,
        ))
        .unwrap()
        .rows
    };

    // Entities the writes between queries update: people, whose properties no query reads.
    let people: Vec<String> = {
        let r = call("entities.list", json!({"type": "person", "limit": 100}));
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        !people.is_empty(),
        "--entities must be at least 1000: the writes update people, the second 500"
    );
    let mut writes = 0usize;
    let mut write = || -> f64 {
        let id = &people[writes % people.len()];
        writes += 1;
        let t = Instant::now();
        call(
            "entities.update",
            json!({"id": id, "properties": {"points": writes % 13}}),
        );
        ms(t)
    };

    println!(
        "| query | rusqlite (ms) | lore cold (ms) | ratio | lore warm (ms) | ratio | lore after a write (ms) | ratio | the write (ms) | cold: storage scan (ms) | cold: load (ms) | cold: engine + page (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (label, sql) in QUERIES {
        let want = run_sqlite(sql);
        assert_eq!(
            run_on(&cold, sql),
            want,
            "{label}: lore and rusqlite disagree"
        );
        assert_eq!(
            run_on(&lore, sql),
            want,
            "{label}: lore (cached) and rusqlite disagree"
        );
        let parsed = lore_records::sql::statement::parse(sql).unwrap();
        let types = lore_records::sql::entity_types(&parsed.entity_types, &[]);
        // The prefixes the load reads: the whole table, or one per pushed-down type.
        let prefixes: Vec<String> = match &types {
            None => vec![prefix.clone()],
            Some(ts) => ts
                .iter()
                .map(|t| caller.keys().entities_of_type(t))
                .collect(),
        };
        let (mut peer, mut total, mut warm, mut scan, mut load) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut after_write, mut writing) = (vec![], vec![]);
        for _ in 0..runs {
            let t = Instant::now();
            std::hint::black_box(run_sqlite(sql));
            peer.push(ms(t));
            let t = Instant::now();
            std::hint::black_box(run_on(&cold, sql));
            total.push(ms(t));
            let t = Instant::now();
            std::hint::black_box(run_on(&lore, sql));
            warm.push(ms(t));
            writing.push(write());
            let t = Instant::now();
            std::hint::black_box(run_on(&lore, sql));
            after_write.push(ms(t));
            let t = Instant::now();
            for p in &prefixes {
                std::hint::black_box(block_on(lore.ports().storage.scan_all(p)).unwrap());
            }
            scan.push(ms(t));
            let t = Instant::now();
            let needed = Needed {
                all: parsed.wildcard,
                names: &parsed.identifiers,
                entity_types: types.as_ref(),
            };
            let catalog = block_on(Catalog::read(lore.ports(), &caller)).unwrap();
            let mut budget = Budget::new(lore.ports().clock.clone(), i64::MAX, usize::MAX);
            std::hint::black_box(
                block_on(catalog.load(lore.ports(), &caller, "entities", &mut budget, &needed))
                    .unwrap()
                    .0,
            );
            load.push(ms(t));
        }
        assert_eq!(
            run_on(&lore, sql),
            want,
            "{label}: lore (cached, after writes) and rusqlite disagree"
        );
        let (p, l, w, s, d) = (
            median(peer),
            median(total),
            median(warm),
            median(scan),
            median(load),
        );
        let (a, u) = (median(after_write), median(writing));
        println!(
            "| {label} | {p:.1} | {l:.1} | {:.1}× | {w:.1} | {:.1}× | {a:.1} | {:.1}× | {u:.2} | {s:.1} | {d:.1} | {:.1} |",
            l / p,
            w / p,
            a / p,
            l - d
        );
    }
    let (entries, bytes, hits, misses) = lore.engine.sql_cache.stats();
    println!(
        "\n{entities} entities. Cold: an instance without the table cache (every query scans and decodes, after predicate push-down). Warm: the same query repeated on an instance with the cache ({entries} tables kept, ~{:.0} MiB estimated; {hits} hits, {misses} misses).",
        bytes as f64 / (1 << 20) as f64
    );
    println!(
        "\n`{}` and `{}`; medians of {runs} runs.",
        QUERIES[0].1, QUERIES[1].1
    );
    let _ = std::fs::remove_dir_all(&dir);
}
