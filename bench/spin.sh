#!/usr/bin/env bash
# Per-request latency of the lore Spin component in the wasmtime dev host beside `lore serve`, in
# one run: `bash bench/spin.sh` (SIZES, REQS, ROUNDS override the defaults "0 1000", 300, 7; see
# bench/spin_latency.mjs). Builds `lore` (release), the product component and the dev host
# (scripts/build-spin) first, and runs copies of them. Loopback traffic only.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
NODE=${NODE:-node}   # Node >= 20
cargo build --release --bin lore -q
bash scripts/build-spin >/dev/null
# Copies, so that another build into the shared target dir cannot swap them mid-run.
BIN=$(mktemp -d "${TMPDIR:-/tmp}/lore-bench-spin-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
cp "$CARGO_TARGET_DIR/release/lore" "$CARGO_TARGET_DIR/spin/lore-spin-host" "$CARGO_TARGET_DIR/spin/lore_spin.wasm" "$BIN/"
LORE_RELEASE_BIN=$BIN/lore SPIN_HOST=$BIN/lore-spin-host SPIN_COMPONENT=$BIN/lore_spin.wasm \
    "$NODE" bench/spin_latency.mjs
