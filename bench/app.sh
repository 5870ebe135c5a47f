#!/usr/bin/env bash
# The web app's pages at an org's size on `lore serve`, each beside the SDK calls it
# makes, in one run: `bash bench/app.sh` (N memories and E entities, default 100000 each; A more
# actions, default 20000; ROUNDS loads of each
# page, default 40). See bench/app.mjs. Builds `lore` (release) first.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e),
# 300 memories, 1,200 entities, 60 actions, 3 loads; every page and answer is still checked.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
# shellcheck source=scripts/worker-tools
source scripts/worker-tools >/dev/null
if smoke; then
    LORE=$(smoke_lore)
    export N=${N:-300} E=${E:-1200} A=${A:-60} ROUNDS=${ROUNDS:-3}
    smoke_note "rate limits off, the built-in embedder"
else
    cargo build --release --bin lore -q
    LORE=$CARGO_TARGET_DIR/release/lore
fi
"$NODE" bench/app.mjs "$LORE"
