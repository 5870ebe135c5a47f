#!/usr/bin/env bash
# Memory with the built-in embedder: the embedder alone, save_memory (one memory per call and
# 100 per call) on native SQLite with synchronous=FULL, search_memory p50/p99, and the
# retrieval evaluation (recall@5 and MRR@10 for BM25, vectors and hybrid on bench/retrieval).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
N=${1:-10000}
cargo build --release --example memory_bench --quiet
"$CARGO_TARGET_DIR/release/examples/memory_bench" --memories "$N"
cargo test --quiet --test retrieval -- --nocapture 2>&1 | grep -E 'recall@5'
