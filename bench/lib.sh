# What the bench scripts share (sourced, bash): the target dir, where outputs land, and the smoke
# mode.
#
# BENCH_SMOKE=1 is the short mode the test command runs (scripts/test, through bench/smoke): the
# script builds nothing (the caller built the binaries; they are taken from LORE_BIN, default
# $CARGO_TARGET_DIR/lore-e2e, the debug server the test command copies, and from
# $CARGO_TARGET_DIR/debug/examples/), uses tiny sizes and durations, still checks every answer
# and still prints its table beside its peer. Its numbers measure nothing. Without it every
# script keeps its full defaults (release builds, full sizes).
#
# BENCH_OUT_DIR: where a script writes its output (default bench/out; bench/smoke points it at
# a temporary directory it removes).

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
BENCH_SMOKE=${BENCH_SMOKE:-0}
BENCH_OUT_DIR=${BENCH_OUT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/out}

smoke() { [[ $BENCH_SMOKE == 1 ]]; }

# smoke_note [WHAT]: in smoke mode, says so on stdout (with WHAT, e.g. the rate limits).
smoke_note() {
    if smoke; then
        printf 'SMOKE RUN (BENCH_SMOKE=1): debug binaries, tiny sizes and durations; the numbers are meaningless%s\n' "${1:+; $1}"
    fi
}

# smoke_lore: the lore server binary of a smoke run ($LORE_BIN, default the test command's
# debug copy); fails if it is missing.
smoke_lore() {
    local bin=${LORE_BIN:-$CARGO_TARGET_DIR/lore-e2e}
    [[ -x $bin ]] || { echo "BENCH_SMOKE=1: no lore binary at $bin (set LORE_BIN)" >&2; return 1; }
    echo "$bin"
}

# smoke_example NAME: a debug example binary the test command built (cargo test builds them).
smoke_example() {
    local bin=$CARGO_TARGET_DIR/debug/examples/$1
    [[ -x $bin ]] || { echo "BENCH_SMOKE=1: no $bin (cargo test --no-run builds it)" >&2; return 1; }
    echo "$bin"
}
