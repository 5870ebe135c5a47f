#!/usr/bin/env bash
# Loading an org's history through MCP, natively: `bash bench/ingest.sh` (see bench/ingest.mjs:
# 10,000 short and 1,000 long memories, the seconds until every save was acknowledged and until
# every memory had its vectors). Builds `lore` (release) first; the default embedder
# (all-MiniLM-L6-v2), EMBEDDER=builtin for the static table.
#
# BENCH_SMOKE=1 (bench/lib.sh): the test command's debug binary with the static table (the
# debug build's transformer is slow beyond use), 200 short and 20 long memories.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source bench/lib.sh
if smoke; then
    LORE_BIN=$(smoke_lore)
    export INGEST_SHORT=${INGEST_SHORT:-200} INGEST_LONG=${INGEST_LONG:-20} EMBEDDER=${EMBEDDER:-builtin}
    smoke_note "rate limits off"
else
    cargo build --release --bin lore -q
    LORE_BIN=${LORE_BIN:-$CARGO_TARGET_DIR/release/lore}
fi
NODE=${NODE:-node}
"$NODE" bench/ingest.mjs "$LORE_BIN"
