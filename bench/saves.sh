#!/usr/bin/env bash
# Concurrent single saves (group commit): `bash bench/saves.sh`; see bench/saves.mjs. Builds
# `lore` (release) first; LORE_BASELINE_BIN=<an earlier lore> runs the same against it as the
# peer, in the same run. BENCH_SMOKE=1 (bench/lib.sh): the test command's debug binary, 8
# clients for 2 s.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source bench/lib.sh
if smoke; then
    LORE_BIN=$(smoke_lore)
    # The debug build's transformer is slow beyond use: the static table.
    export SAVES_SECONDS=${SAVES_SECONDS:-2} SAVES_CLIENTS=${SAVES_CLIENTS:-8} EMBEDDER=${EMBEDDER:-builtin}
    smoke_note "rate limits off"
else
    cargo build --release --bin lore -q
    LORE_BIN=${LORE_BIN:-$CARGO_TARGET_DIR/release/lore}
fi
NODE=${NODE:-node}
"$NODE" bench/saves.mjs "$LORE_BIN" ${LORE_BASELINE_BIN:+"$LORE_BASELINE_BIN"}
