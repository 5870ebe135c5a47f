#!/usr/bin/env bash
# The transformer embedder's cost through MCP on `lore serve` and on the Spin component (dev
# host), over one database seeded natively: `bash bench/embed_latency.sh` (N memories, default
# 10000; QUERIES fresh queries, default 60). See bench/embed_latency.mjs. Builds `lore`
# (release), the Spin component and the dev host first; prints the component's size.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e;
# the component and dev host scripts/build-spin left in $CARGO_TARGET_DIR/spin), 50 memories, 3
# queries; every answer is still checked.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
# shellcheck source=scripts/worker-tools
source scripts/worker-tools >/dev/null
if smoke; then
    LORE=$(smoke_lore)
    export N=${N:-50} QUERIES=${QUERIES:-3}
    smoke_note "rate limits off"
else
    cargo build --release --bin lore -q
    LORE_BIN=$CARGO_TARGET_DIR/release/lore bash scripts/build-spin >/dev/null
    LORE=$CARGO_TARGET_DIR/release/lore
fi
printf 'Spin component (product; all-MiniLM-L6-v2 from the platform): %s bytes\n' "$(wc -c < "$CARGO_TARGET_DIR/spin/lore_spin.wasm")"
"$NODE" bench/embed_latency.mjs "$LORE" bench/seed.py
