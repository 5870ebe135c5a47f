#!/usr/bin/env bash
# Cold and warm latency of lore on Workers (workerd via Miniflare, D1, KV) beside `lore serve`,
# in one run: `bash bench/worker.sh` (ROUNDS, WARM, SEED_N override the defaults 7, 200, 1000).
# Builds `lore` (release) and the Workers product bundle first. Loopback traffic only.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
# shellcheck source=scripts/worker-tools
source scripts/worker-tools
cargo build --release --bin lore -q
bash scripts/build-worker >/dev/null
LORE_RELEASE_BIN=$CARGO_TARGET_DIR/release/lore "$NODE" bench/worker_latency.mjs
