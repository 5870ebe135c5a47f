#!/usr/bin/env bash
# Cold and warm latency of lore on Workers (workerd via Miniflare, D1, KV) beside `lore serve`,
# in one run: `bash bench/worker.sh` (ROUNDS, WARM, SEED_N override the defaults 7, 200, 1000).
# Builds `lore` (release) and the Workers product bundle first. Loopback traffic only.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e;
# the bundle scripts/build-worker left in build/), 50 memories, 1 restart, 3 warm requests;
# every response is still checked.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
# shellcheck source=scripts/worker-tools
source scripts/worker-tools
if smoke; then
    [[ -f build/index_bg.wasm ]] || { echo "BENCH_SMOKE=1: no Workers bundle in build/ (scripts/build-worker)" >&2; exit 1; }
    export ROUNDS=${ROUNDS:-1} WARM=${WARM:-3} SEED_N=${SEED_N:-50}
    smoke_note "rate limits off on both targets"
    LORE_RELEASE_BIN=$(smoke_lore) exec "$NODE" bench/worker_latency.mjs
fi
cargo build --release --bin lore -q
bash scripts/build-worker >/dev/null
LORE_RELEASE_BIN=$CARGO_TARGET_DIR/release/lore "$NODE" bench/worker_latency.mjs
