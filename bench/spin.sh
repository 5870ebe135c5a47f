#!/usr/bin/env bash
# Per-request latency of the lore Spin component in the wasmtime dev host beside `lore serve`, in
# one run: `bash bench/spin.sh` (SIZES, REQS, ROUNDS override the defaults "0 1000", 300, 7; see
# bench/spin_latency.mjs). Builds `lore` (release), the product component and the dev host
# (scripts/build-spin) first, and runs copies of them. Loopback traffic only.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e;
# the component and dev host scripts/build-spin left in $CARGO_TARGET_DIR/spin), sizes 0 and 50,
# 3 requests per row after 2 warm-up rounds, 1 restart, the dev host's start not timed; every
# response is still checked and both targets must still find the same memories.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
NODE=${NODE:-node}   # Node >= 20
if smoke; then
    export SIZES=${SIZES:-"0 50"} REQS=${REQS:-3} ROUNDS=${ROUNDS:-1} WARMUP=${WARMUP:-2} START_ROUNDS=${START_ROUNDS:-0}
    smoke_note "rate limits off on both targets"
    LORE_RELEASE_BIN=$(smoke_lore) SPIN_HOST=$CARGO_TARGET_DIR/spin/lore-spin-host SPIN_COMPONENT=$CARGO_TARGET_DIR/spin/lore_spin.wasm \
        exec "$NODE" bench/spin_latency.mjs
fi
cargo build --release --bin lore -q
bash scripts/build-spin >/dev/null
# Copies, so that another build into the shared target dir cannot swap them mid-run.
BIN=$(mktemp -d "${TMPDIR:-/tmp}/lore-bench-spin-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
cp "$CARGO_TARGET_DIR/release/lore" "$CARGO_TARGET_DIR/spin/lore-spin-host" "$CARGO_TARGET_DIR/spin/lore_spin.wasm" "$BIN/"
# The model where the dev host looks for it (`.spin/ai-models/` beside the component, as
# scripts/build-spin laid it out): without it the component embeds with the built-in table, and
# the two targets' answers differ.
ln -s "$CARGO_TARGET_DIR/spin/.spin" "$BIN/.spin"
LORE_RELEASE_BIN=$BIN/lore SPIN_HOST=$BIN/lore-spin-host SPIN_COMPONENT=$BIN/lore_spin.wasm \
    "$NODE" bench/spin_latency.mjs
