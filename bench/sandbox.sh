#!/usr/bin/env bash
# A cold TypeScript script run: lore's sandbox (oxc strip + fresh Boa realm + run, in process)
# beside Node (esbuild transform + fresh vm context + run) on the same database, one session.
# lore's rows: the run on the calling thread (as on Workers and Spin), then the 10 reads and
# `return 1` as `lore serve` runs them (in a script process of the `lore` binary, which made the
# run's realm while it waited; the SDK calls answered by the calling thread over its pipes).
#
#   bash bench/sandbox.sh            # 300 runs of each script on each side
#   RUNS=100 bash bench/sandbox.sh
#   SANDBOX_BENCH_BIN=/path/examples/sandbox_bench bash bench/sandbox.sh   # a binary built elsewhere
#
# Builds `examples/sandbox_bench.rs` in release mode; it seeds 1,000 entities into a fresh lore
# database and writes the ids and storage keys of the 10 the script reads, which the Node peer
# (`bench/sandbox_node.mjs`, Node 22 with node:sqlite, esbuild as pinned by scripts/worker-tools)
# reads from the same file. Prints both JSON lines and a Markdown table, also written to
# bench/out/sandbox-<timestamp>.md.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (the debug example the test command built), 3 runs of
# each script on each side; every run's answer is still checked.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
if smoke; then RUNS=${RUNS:-3}; fi
RUNS=${RUNS:-300}
OUT=$BENCH_OUT_DIR
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
SPEC="$OUT/sandbox-$STAMP.json"

cd "$ROOT"
source scripts/worker-tools >/dev/null
export ESBUILD_MODULE="$WORKER_NODE_MODULES/esbuild/lib/main.js"
if [[ -n "${SANDBOX_BENCH_BIN:-}" ]]; then
  # A bench binary built elsewhere (another commit's, to compare; its `lore` beside `examples/`).
  BIN=$SANDBOX_BENCH_BIN
elif smoke; then
  BIN=$(smoke_example sandbox_bench)
else
  cargo build --release --bin lore --example sandbox_bench >&2
  BIN=$CARGO_TARGET_DIR/release/examples/sandbox_bench
fi
LORE=$("$BIN" --runs "$RUNS" --out "$SPEC")
NODE_OUT=$("$NODE" "$HERE/sandbox_node.mjs" "$SPEC" "$RUNS")
smoke_note
echo "lore: $LORE"
echo "node: $NODE_OUT"
python3 - "$LORE" "$NODE_OUT" "$RUNS" <<'PY' | tee "$OUT/sandbox-$STAMP.md"
import json, sys
lore, node, runs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(f"| script ({runs} cold runs each) | lore p50 | lore p99 | Node {node['node']} p50 | Node p99 | lore / Node (p50) |")
print("|---|---:|---:|---:|---:|---:|")
for key, name in [("ten_reads_ms", "10 reads (`entities.get`)"), ("return_1_ms", "`return 1`"), ("hot_loop_ms", "hot loop, 1e6 `s += i`")]:
    l, n = lore[key], node[key]
    print(f"| {name} | {l['p50']:.2f} ms | {l['p99']:.2f} ms | {n['p50']:.2f} ms | {n['p99']:.2f} ms | {l['p50']/n['p50']:.2f}× |")
for key, name in [("ten_reads_ms", "10 reads, as `lore serve` runs it"), ("return_1_ms", "`return 1`, as `lore serve` runs it")]:
    l, n = lore["served"][key], node[key]
    print(f"| {name} | {l['p50']:.2f} ms | {l['p99']:.2f} ms | {n['p50']:.2f} ms | {n['p99']:.2f} ms | {l['p50']/n['p50']:.2f}× |")
b = lore["hot_loop_bare_boa_ms"]
print(f"| hot loop in a bare Boa context (same build) | {b['p50']:.2f} ms | {b['p99']:.2f} ms | | | |")
p = lore["parts_p50"]
print()
print(f"lore's parts, p50, each alone: TypeScript strip of the 10-read script {p['strip_ten_reads_ms']:.2f} ms; "
      f"a bare Boa context built and dropped {p['bare_boa_context_ms']:.2f} ms; one-key storage commit {p['one_key_commit_ms']:.2f} ms.")
PY
rm -rf "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["db"])' "$SPEC" | xargs dirname)"
