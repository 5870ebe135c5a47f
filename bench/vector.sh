#!/usr/bin/env bash
# Vector search comparison: lore's sketch scan with exact reranking
# (crates/engine/src/memory/vector.rs) beside the HNSW graphs of hnsw_rs 0.3.5 (native only) and
# rust-cv hnsw 0.11, on the same seeded data in one binary (bench/vector/), natively and as
# wasm32-unknown-unknown under node (V8, the engine of Cloudflare Workers).
#
#   bash bench/vector.sh                 everything but rust-cv hnsw on wasm at 100k (about an
#                                        hour on 2 busy cores)
#   SIZES="10000" bash bench/vector.sh   a quicker pass
#   WASM_ALL=1 bash bench/vector.sh      rust-cv hnsw on wasm at every size too (its 100k
#                                        builds take about 10 minutes each under V8)
#
# Per distribution (clustered sentence-like and uniform random unit vectors, 384-d, seed 42)
# and size: build time, heap bytes (a counting allocator, the same for every candidate),
# snapshot size and restore time where a candidate has one, then p50/p99 per query
# (single-threaded, k = 10) and recall@10 against the f32 brute force of the same binary, at
# ef 16 to 512 (for lore: the nearest sketches ranked exactly); the int8 exact scan as the
# speed baseline. Times are CPU time (the thread's natively, the process's
# under node), so time spent preempted by other work on a shared machine does not count. Then lore
# beside the int8 scan by size (threshold) and filtered search at several selectivities (native). Output: bench/out/vector-<timestamp>/ (native.md,
# wasm.md, machine.txt); each run is also timed by /usr/bin/time (CPU vs wall: anything else
# on the machine shows as wall > CPU).
#
# BENCH_SMOKE=1 (bench/lib.sh): no build: the debug builds the test command makes
# (`cargo build -p lore-vector-bench` and the same with `--lib --target wasm32-unknown-unknown`);
# 300 vectors, 20 queries, filters at 2,000, no threshold suite (its sizes are fixed, up to
# 32,000); fails unless lore's recall@10 at ef 512 is at least 0.5 everywhere.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
if smoke; then SIZES=${SIZES:-300} QUERIES=${QUERIES:-20} WASM_QUERIES=${WASM_QUERIES:-20}; fi
SIZES=${SIZES:-"10000 100000"}
QUERIES=${QUERIES:-500}
WASM_QUERIES=${WASM_QUERIES:-300}
OUT="$BENCH_OUT_DIR/vector-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"

cd "$ROOT"
if smoke; then
    NATIVE="$CARGO_TARGET_DIR/debug/lore-vector-bench"
    WASM="$CARGO_TARGET_DIR/wasm32-unknown-unknown/debug/lore_vector_bench.wasm"
    for f in "$NATIVE" "$WASM"; do
        [[ -f $f ]] || { echo "BENCH_SMOKE=1: no $f (cargo build -p lore-vector-bench [--lib --target wasm32-unknown-unknown])" >&2; exit 1; }
    done
    smoke_note | tee "$OUT/smoke.txt"
else
    nice cargo build --release -p lore-vector-bench
    rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
    nice cargo build --release -p lore-vector-bench --lib --target wasm32-unknown-unknown
    NATIVE="$CARGO_TARGET_DIR/release/lore-vector-bench"
    WASM="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/lore_vector_bench.wasm"
fi

{
    echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
    grep -m1 'model name' /proc/cpuinfo
    echo "nproc $(nproc)"
    rustc --version
    echo "node $(node --version)"
    echo "load before: $(cat /proc/loadavg)"
} > "$OUT/machine.txt"

timed() { /usr/bin/time -f '(%e s wall, %U s user, %S s sys)' "$@"; }

for n in $SIZES; do
    for dist in clustered uniform; do
        timed "$NATIVE" compare "$dist" "$n" "$QUERIES" 2>&1 | tee -a "$OUT/native.md"
        only=lore,hnsw
        [ "$n" -gt 10000 ] && [ "${WASM_ALL:-0}" != 1 ] && only=lore
        timed node bench/vector_wasm.mjs "$WASM" compare "$dist" "$n" "$WASM_QUERIES" "$only" 2>&1 | tee -a "$OUT/wasm.md"
    done
done
if ! smoke; then
    for dist in clustered uniform; do
        timed "$NATIVE" threshold "$dist" 300 2>&1 | tee -a "$OUT/native.md"
    done
    timed node bench/vector_wasm.mjs "$WASM" threshold clustered 0 300 2>&1 | tee -a "$OUT/wasm.md"
fi
if smoke; then
    timed "$NATIVE" filters clustered 2000 20 2>&1 | tee -a "$OUT/native.md"
else
    timed "$NATIVE" filters clustered 100000 200 2>&1 | tee -a "$OUT/native.md"
fi
echo "load after: $(cat /proc/loadavg)" >> "$OUT/machine.txt"
python3 "$HERE/vector_report.py" "$OUT" > "$OUT/report.md"
if smoke; then
    cat "$OUT/report.md"
    # lore's rows at ef 512 (`| lore | n | 512 | p50 | p99 | recall | ...`): a real ranking.
    python3 - "$OUT/native.md" "$OUT/wasm.md" <<'PY'
import sys
for path in sys.argv[1:]:
    rows = [l.split("|") for l in open(path) if l.startswith("| lore | ")]
    recalls = [float(r[6]) for r in rows if r[3].strip() == "512"]
    if not recalls or min(recalls) < 0.5:
        sys.exit(f"{path}: lore's recall@10 at ef 512 is {recalls or 'missing'}, expected >= 0.5")
    print(f"{path}: lore's recall@10 at ef 512: {', '.join(f'{r:.3f}' for r in recalls)}")
PY
fi
echo "results in $OUT (tables for BENCHMARKS.md: report.md)"
