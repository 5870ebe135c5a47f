#!/usr/bin/env bash
# query_sql beside rusqlite: the same SQL on the same rows, in one process and one run.
#
#   bash bench/sql.sh            # 100,000 entities, 10 runs per query
#   ENTITIES=20000 RUNS=5 bash bench/sql.sh
#
# Builds and runs `examples/sql_bench.rs` in release mode: it seeds $ENTITIES entities of 8
# types into a fresh lore database (native SQLite, through entities.create_many), copies the
# same rows into an in-memory SQLite table, checks that both engines return the same rows for
# each query, and prints a Markdown table of medians (lore end to end and its parts, rusqlite,
# and the ratio) to stdout and to bench/out/sql-<timestamp>.md.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (the debug example the test command built), 2,000
# entities, 2 runs per query; the rows are still compared.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
if smoke; then ENTITIES=${ENTITIES:-2000} RUNS=${RUNS:-2}; fi
ENTITIES=${ENTITIES:-100000}
RUNS=${RUNS:-10}
OUT=$BENCH_OUT_DIR
mkdir -p "$OUT"
REPORT="$OUT/sql-$(date -u +%Y%m%dT%H%M%SZ).md"

cd "$ROOT"
if smoke; then
  BIN=$(smoke_example sql_bench)
else
  cargo build --release --example sql_bench >&2
  BIN=$CARGO_TARGET_DIR/release/examples/sql_bench
fi
{
  smoke_note
  echo "# query_sql vs rusqlite ($ENTITIES entities, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  "$BIN" --entities "$ENTITIES" --runs "$RUNS"
} | tee "$REPORT"
echo "report: $REPORT" >&2
