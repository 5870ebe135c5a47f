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
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
ENTITIES=${ENTITIES:-100000}
RUNS=${RUNS:-10}
OUT="$HERE/out"
mkdir -p "$OUT"
REPORT="$OUT/sql-$(date -u +%Y%m%dT%H%M%SZ).md"

cd "$ROOT"
cargo build --release --example sql_bench >&2
{
  echo "# query_sql vs rusqlite ($ENTITIES entities, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  "$CARGO_TARGET_DIR/release/examples/sql_bench" --entities "$ENTITIES" --runs "$RUNS"
} | tee "$REPORT"
echo "report: $REPORT" >&2
