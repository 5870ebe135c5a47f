#!/usr/bin/env bash
# Memory with the built-in embedder: the embedder alone, save_memory (one memory per call and
# 100 per call) on native SQLite with synchronous=FULL, search_memory p50/p99, and the
# retrieval evaluation (recall@5 and MRR@10 for BM25, vectors and hybrid on bench/retrieval).
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (the debug example the test command built), 200
# memories (the example checks every call's answer); the retrieval evaluation is left to
# `cargo test` (tests/it/retrieval.rs), which the same test command runs, and which fails below
# its recall thresholds.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
if smoke; then
  BIN=$(smoke_example memory_bench)
  smoke_note
  "$BIN" --memories "${1:-200}"
  echo "retrieval evaluation: not in a smoke run (tests/it/retrieval.rs, run by cargo test)"
  exit 0
fi
N=${1:-10000}
cargo build --release --example memory_bench --quiet
"$CARGO_TARGET_DIR/release/examples/memory_bench" --memories "$N"
cargo test --quiet --test retrieval -- --nocapture 2>&1 | grep -E 'recall@5'
