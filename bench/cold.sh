#!/usr/bin/env bash
# Cold and warm `search_memory` by org size on `lore serve`, Workers (workerd) and Spin (dev
# host), side by side in one run: `bash bench/cold.sh`. SIZES (default "0 1000 10000"; add
# 100000 for the largest), ROUNDS (5), WARM (60), TARGETS ("native worker spin"; `worker-d1` is
# the Worker over D1 as before org objects) and DELAY_MS (0; a wait before every Workers
# subrequest) override the defaults; see bench/cold.mjs. Builds `lore` (release), the Workers
# bundle and its test build, and the Spin component and dev host first, and runs copies of the
# native and Spin ones. Loopback traffic only.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e; the
# Workers bundle in build/, and build-test/ for DELAY_MS or `worker-d1`; the Spin component and
# dev host in $CARGO_TARGET_DIR/spin), sizes 0 and 20, 1 restart, 3 warm requests; every
# response is still checked.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
# shellcheck source=scripts/worker-tools
source scripts/worker-tools
if smoke; then
    [[ -f build/index_bg.wasm ]] || { echo "BENCH_SMOKE=1: no Workers bundle in build/ (scripts/build-worker)" >&2; exit 1; }
    export SIZES=${SIZES:-"0 20"} ROUNDS=${ROUNDS:-1} WARM=${WARM:-3}
    smoke_note "rate limits off on every target"
    LORE_RELEASE_BIN=$(smoke_lore) SPIN_HOST=$CARGO_TARGET_DIR/spin/lore-spin-host SPIN_COMPONENT=$CARGO_TARGET_DIR/spin/lore_spin.wasm \
        exec "$NODE" bench/cold.mjs
fi
cargo build --release --bin lore -q
bash scripts/build-worker >/dev/null
# The test build: DELAY_MS and the `worker-d1` target need its test variables.
bash scripts/build-worker --test >/dev/null
bash scripts/build-spin >/dev/null
# Copies, so that another build into the shared target dir cannot swap them mid-run.
BIN=$(mktemp -d "${TMPDIR:-/tmp}/lore-bench-cold-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
cp "$CARGO_TARGET_DIR/release/lore" "$CARGO_TARGET_DIR/spin/lore-spin-host" "$CARGO_TARGET_DIR/spin/lore_spin.wasm" "$BIN/"
LORE_RELEASE_BIN=$BIN/lore SPIN_HOST=$BIN/lore-spin-host SPIN_COMPONENT=$BIN/lore_spin.wasm \
    "$NODE" bench/cold.mjs
