"""The peer of bench/encoder.sh: all-MiniLM-L6-v2 in PyTorch sentence-transformers on the same
texts, then the cosine of its vectors to lore's.

    python encoder.py MODEL_DIR TEXTS.jsonl LORE_VECTORS.f32 ROUNDS THREADS

MODEL_DIR is the sentence-transformers folder of the registry package lore's weights come
from (the same weights). Prints one JSON line: texts per second per round, and the minimum and
mean cosine between each text's two vectors.
"""
import json
import sys
import time

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

model_dir, texts_path, lore_path, rounds, threads = sys.argv[1:6]
torch.set_num_threads(int(threads))
texts = [json.loads(line) for line in open(texts_path, encoding="utf-8") if line.strip()]
model = SentenceTransformer(model_dir, device="cpu")
model.max_seq_length = 256  # lore's MAX_TOKENS, the model's training length
per_second = []
vectors = None
with torch.inference_mode():
    for _ in range(int(rounds)):
        started = time.perf_counter()
        vectors = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
        per_second.append(len(texts) / (time.perf_counter() - started))
lore = np.fromfile(lore_path, dtype="<f4").reshape(len(texts), -1)
cosine = (lore * vectors).sum(axis=1) / (np.linalg.norm(lore, axis=1) * np.linalg.norm(vectors, axis=1))
print(json.dumps({
    "texts": len(texts),
    "per_second": per_second,
    "cosine_min": float(cosine.min()),
    "cosine_mean": float(cosine.mean()),
    "torch": torch.__version__,
}))
