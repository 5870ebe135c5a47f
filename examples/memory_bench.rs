//! Memory throughput and latency with the built-in embedder, in process, on the native
//! SQLite store (`synchronous=FULL`, as `lore serve` runs it), single-threaded, every call a
//! real MCP `tools/call` through `Lore::handle`. Used by `bench/memory.sh`.
//!
//! ```sh
//! cargo run --release --example memory_bench -- --memories 10000
//! ```
//!
//! Prints one JSON object: the embedder's texts/s alone; `save_memory` memories/s with one
//! memory per call and with 100 per call; `search_memory` p50/p99 once the org holds them all.

#![allow(clippy::disallowed_methods)] // a native bench: wall time from the OS

use std::time::Instant;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore::ports::{EmbedderChoice, native_ports};
use lore_base::ports::Embedder;
use lore_directory::admin::{self, InitOutcome};
use lore_embed::builtin::BuiltinEmbedder;
use lore_front::{Config, Lore};

fn call(lore: &Lore, token: &str, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    }}});
    let request = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let response = block_on(lore.handle(request));
    let v: Value = serde_json::from_slice(response.body()).unwrap();
    assert_eq!(v["result"]["isError"], false, "{v}");
    v["result"].clone()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut total = 10_000usize;
    while let Some(a) = args.next() {
        if a == "--memories" {
            total = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--memories N");
        }
    }
    let corpus: Vec<String> = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/retrieval/corpus.jsonl"
    ))
    .expect("bench/retrieval/corpus.jsonl")
    .lines()
    .map(|l| {
        serde_json::from_str::<Value>(l).unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .collect();
    // Distinct texts (a repeated text would be deduplicated, not saved).
    let text = |i: usize| format!("{} (entry {i})", corpus[i % corpus.len()]);

    let embedder = BuiltinEmbedder::new();
    let sample: Vec<String> = (0..20_000).map(text).collect();
    let started = Instant::now();
    for chunk in sample.chunks(64) {
        block_on(embedder.embed(chunk)).unwrap();
    }
    let embed_per_s = sample.len() as f64 / started.elapsed().as_secs_f64();

    let dir = std::env::temp_dir().join(format!("lore-memory-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = native_ports(&dir.join("bench.db"), &EmbedderChoice::Builtin).unwrap();
    let lore = Lore::new(ports, Config::default());
    let token = match block_on(admin::init(lore.ports(), "bench")).unwrap() {
        InitOutcome::Created(t) => t.token,
        other => panic!("{other:?}"),
    };

    // One memory per call, then the rest in calls of 100.
    let singles = (total / 10).clamp(100, 2_000);
    let started = Instant::now();
    for i in 0..singles {
        call(&lore, &token, "save_memory", json!({"content": text(i)}));
    }
    let single_per_s = singles as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut i = singles;
    while i < total {
        let end = (i + 100).min(total);
        let memories: Vec<Value> = (i..end).map(|j| json!({"content": text(j)})).collect();
        call(
            &lore,
            &token,
            "save_memory",
            json!({ "memories": memories }),
        );
        i = end;
    }
    let batched_per_s = (total - singles) as f64 / started.elapsed().as_secs_f64();

    // The first search indexes everything; then time queries from the retrieval set.
    let started = Instant::now();
    call(&lore, &token, "search_memory", json!({"query": "warm up"}));
    let first_search_ms = started.elapsed().as_secs_f64() * 1e3;
    let queries: Vec<String> = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/retrieval/queries.jsonl"
    ))
    .unwrap()
    .lines()
    .map(|l| {
        serde_json::from_str::<Value>(l).unwrap()["query"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .collect();
    let mut times = Vec::new();
    for round in 0..3 {
        for q in &queries {
            let started = Instant::now();
            call(
                &lore,
                &token,
                "search_memory",
                json!({"query": q, "limit": 10}),
            );
            if round > 0 {
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({
            "memories": total,
            "embedder_texts_per_s": embed_per_s.round(),
            "save_one_per_call_per_s": single_per_s.round(),
            "save_100_per_call_per_s": batched_per_s.round(),
            "first_search_ms": (first_search_ms * 10.0).round() / 10.0,
            "search_p50_ms": (percentile(&times, 0.5) * 1000.0).round() / 1000.0,
            "search_p99_ms": (percentile(&times, 0.99) * 1000.0).round() / 1000.0,
        })
    );
    std::fs::remove_dir_all(&dir).ok();
}
