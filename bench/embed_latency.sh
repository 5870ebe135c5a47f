#!/usr/bin/env bash
# The transformer embedder's cost through MCP on `lore serve` and on the Spin component (dev
# host), over one database seeded natively: `bash bench/embed_latency.sh` (N memories, default
# 10000; QUERIES fresh queries, default 60). See bench/embed_latency.mjs. Builds `lore`
# (release), the Spin component and the dev host first; prints the component's size.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
# shellcheck source=scripts/worker-tools
source scripts/worker-tools >/dev/null
cargo build --release --bin lore -q
LORE_BIN=$CARGO_TARGET_DIR/release/lore bash scripts/build-spin >/dev/null
printf 'Spin component (product, all-MiniLM-L6-v2 compiled in): %s bytes\n' "$(wc -c < "$CARGO_TARGET_DIR/spin/lore_spin.wasm")"
"$NODE" bench/embed_latency.mjs "$CARGO_TARGET_DIR/release/lore" bench/seed.py
