"""Distils sentence-transformers/all-MiniLM-L6-v2 into lore's static embedding table.

Run through scripts/distill-embedder, which prepares a numpy-only virtualenv and the model.

For every WordPiece token of the model's vocabulary, `[CLS] token [SEP]` goes through the
6-layer BERT encoder (implemented below in numpy, reading model.safetensors directly); the
three output vectors are mean-pooled, as the sentence model pools. The vocabulary's vectors
are reduced with PCA (less the two top components), scaled by a Zipf/SIF weight by vocabulary
rank, and quantised to int8 with one scale per row. At run time an embedding is the mean of its tokens' rows, normalised:
no transformer runs.

The asset layout (all integers little-endian) is read by crates/embed/src/builtin.rs:

    b"LORESTE1"                      magic
    u32 dims, u32 vocab_size, u32 vocab_bytes
    vocab_bytes of UTF-8             the tokens, one per line, in id order
    vocab_size x f32                 each row's scale (dequantised row = scale * int8 row)
    vocab_size x dims x i8           the rows
"""

import argparse
import json
import math
import struct
import sys
import unicodedata

import numpy as np

MAGIC = b"LORESTE1"


# --- safetensors ----------------------------------------------------------------------------


def load_safetensors(path):
    """The tensors of a .safetensors file: an 8-byte header length, a JSON header, the data."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    dtypes = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[base + start : base + end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


# --- the BERT encoder -----------------------------------------------------------------------


def erf(x):
    """Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7); numpy has no erf."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def layer_norm(x, weight, bias, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class Bert:
    def __init__(self, tensors, layers=6, heads=12):
        self.t = tensors
        self.layers = layers
        self.heads = heads

    def linear(self, x, name):
        # Flattened to 2-D: numpy multiplies a 3-D array by a matrix an order of magnitude
        # slower than the same rows as one matrix.
        weight = self.t[name + ".weight"]
        out = x.reshape(-1, x.shape[-1]) @ weight.T + self.t[name + ".bias"]
        return out.reshape(*x.shape[:-1], weight.shape[0])

    def forward(self, ids, mask):
        """Last hidden states, shape (batch, length, 384), for token ids (batch, length)."""
        t = self.t
        batch, length = ids.shape
        x = (
            t["embeddings.word_embeddings.weight"][ids]
            + t["embeddings.position_embeddings.weight"][:length][None]
            + t["embeddings.token_type_embeddings.weight"][0]
        )
        x = layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
        hidden = x.shape[-1]
        head = hidden // self.heads
        bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        for n in range(self.layers):
            p = f"encoder.layer.{n}."

            def split(y):
                return y.reshape(batch, length, self.heads, head).transpose(0, 2, 1, 3)

            q = split(self.linear(x, p + "attention.self.query"))
            k = split(self.linear(x, p + "attention.self.key"))
            v = split(self.linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            attended = layer_norm(
                self.linear(context, p + "attention.output.dense") + x,
                t[p + "attention.output.LayerNorm.weight"],
                t[p + "attention.output.LayerNorm.bias"],
            )
            inner = gelu(self.linear(attended, p + "intermediate.dense"))
            x = layer_norm(
                self.linear(inner, p + "output.dense") + attended,
                t[p + "output.LayerNorm.weight"],
                t[p + "output.LayerNorm.bias"],
            )
        return x


# --- the BERT tokenizer (uncased), for the teacher's sentence embeddings ----------------------


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class WordPiece:
    def __init__(self, vocab):
        self.vocab = vocab
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.unk = self.ids["[UNK]"]

    def words(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
                out.append(" ")
            elif unicodedata.category(ch).startswith("C"):
                continue
            elif is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        words = []
        for word in "".join(out).split():
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(c for c in word if unicodedata.category(c) != "Mn")
            current = ""
            for ch in word:
                if is_punctuation(ch):
                    if current:
                        words.append(current)
                    words.append(ch)
                    current = ""
                else:
                    current += ch
            if current:
                words.append(current)
        return words

    def encode(self, text):
        ids = []
        for word in self.words(text):
            if len(word) > 100:
                ids.append(self.unk)
                continue
            pieces = []
            start = 0
            while start < len(word):
                end = len(word)
                found = None
                while start < end:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    if piece in self.ids:
                        found = self.ids[piece]
                        break
                    end -= 1
                if found is None:
                    pieces = [self.unk]
                    break
                pieces.append(found)
                start = end
            ids.extend(pieces)
        return ids


# --- distillation ---------------------------------------------------------------------------


def token_vectors(bert, vocab, batch=1024):
    """Mean of the encoder's outputs for `[CLS] token [SEP]`, for every token."""
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    out = np.zeros((len(vocab), 384), dtype=np.float32)
    mask = np.ones((batch, 3), dtype=np.float32)
    for start in range(0, len(vocab), batch):
        n = min(batch, len(vocab) - start)
        ids = np.stack(
            [np.full(n, cls), np.arange(start, start + n), np.full(n, sep)], axis=1
        )
        hidden = bert.forward(ids, mask[:n])
        out[start : start + n] = hidden.mean(1)
        print(f"\r  tokens {start + n}/{len(vocab)}", end="", file=sys.stderr)
    print(file=sys.stderr)
    return out


def pca(vectors, dims, skip):
    """The vectors centred and projected on their principal components `skip` to
    `skip + dims`: dropping the first few ("all-but-the-top", Mu and Viswanath 2018) removes
    directions every token shares, which otherwise make unrelated texts look alike."""
    centred = vectors - vectors.mean(0)
    # Eigenvectors of the covariance, largest first (numpy.linalg.eigh sorts ascending).
    values, vecs = np.linalg.eigh(centred.T @ centred / len(centred))
    order = np.argsort(values)[::-1][skip : skip + dims]
    components = vecs[:, order]
    # A deterministic sign: the largest coordinate of each component is positive.
    signs = np.sign(components[np.abs(components).argmax(0), np.arange(dims)])
    return centred @ (components * signs)


# BERT's vocabulary lists [PAD], [unused*], the other specials and the single characters
# (punctuation among them) first, then word pieces roughly by frequency from "the" (1996) on.
FIRST_WORD = 1996
# The rank given to the specials and single characters: frequent, not as frequent as "the".
CHARACTER_RANK = 50


def sif_weights(vocab_size, coefficient):
    """SIF weights a / (a + p), with p the Zipf probability of each token's frequency rank
    (Arora et al. 2017; model2vec weights its tables the same way)."""
    ids = np.arange(vocab_size)
    rank = np.where(ids >= FIRST_WORD, ids - FIRST_WORD + 1, CHARACTER_RANK).astype(np.float64)
    probability = (1.0 / rank) / (1.0 / rank).sum()
    return coefficient / (coefficient + probability)


def quantise(table):
    scales = np.abs(table).max(1) / 127.0
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(table / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales.astype(np.float32)


def write_asset(path, vocab, q, scales):
    vocab_bytes = "\n".join(vocab).encode("utf-8")
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<III", q.shape[1], len(vocab), len(vocab_bytes)))
        f.write(vocab_bytes)
        f.write(scales.astype("<f4").tobytes())
        f.write(q.tobytes())


# --- evaluation -----------------------------------------------------------------------------


def normalise(m):
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def teacher_embed(bert, tok, texts):
    cls, sep = tok.ids["[CLS]"], tok.ids["[SEP]"]
    out = []
    for text in texts:
        ids = np.array([[cls] + tok.encode(text)[:254] + [sep]])
        hidden = bert.forward(ids, np.ones(ids.shape, dtype=np.float32))
        out.append(hidden[0].mean(0))
    return normalise(np.array(out))


def student_embed(table, tok, texts):
    out = []
    for text in texts:
        ids = [i for i in tok.encode(text) if i != tok.unk]
        out.append(table[ids].mean(0) if ids else np.zeros(table.shape[1]))
    return normalise(np.array(out))


def spearman(a, b):
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def score(queries, memories, teacher_sims, embed):
    q, m = embed(queries), embed(memories)
    sims = q @ m.T
    ranks = (sims > np.diag(sims)[:, None]).sum(1) + 1
    off = ~np.eye(len(queries), dtype=bool)
    return {
        "mrr": float((1.0 / ranks).mean()),
        "top1": float((ranks == 1).mean()),
        "spearman_vs_teacher": spearman(sims.ravel(), teacher_sims.ravel()),
        "pair_mean": float(np.diag(sims).mean()),
        "unrelated_mean": float(sims[off].mean()),
    }


def read_eval(path):
    pairs = []
    for line in open(path, encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            query, memory = line.rstrip("\n").split("\t")
            pairs.append((query, memory))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="directory with model.safetensors and vocab.txt")
    parser.add_argument("--eval", required=True, action="append", help="query<TAB>memory pairs")
    parser.add_argument("--out", help="where to write the asset")
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--skip", type=int, default=2, help="principal components dropped first")
    parser.add_argument("--sif", type=float, default=5e-5, help="SIF coefficient (0: no weights)")
    parser.add_argument("--cache", help="an .npy file caching the per-token vectors")
    parser.add_argument("--explore", action="store_true", help="score other settings too")
    args = parser.parse_args()

    vocab = open(f"{args.model}/vocab.txt", encoding="utf-8").read().split("\n")
    if vocab[-1] == "":
        vocab.pop()
    tok = WordPiece(vocab)
    bert = Bert(load_safetensors(f"{args.model}/model.safetensors"))

    sets = []
    for path in args.eval:
        queries, memories = read_eval(path)
        teacher_sims = teacher_embed(bert, tok, queries) @ teacher_embed(bert, tok, memories).T
        sets.append((queries, memories, teacher_sims))

    def report(name, embed):
        scores = [score(q, m, sims, embed) for q, m, sims in sets]
        print(f"{name:34}", " | ".join(
            " ".join(f"{k} {v:.3f}" for k, v in s.items()) for s in scores
        ))

    report("teacher (all-MiniLM-L6-v2)", lambda t: teacher_embed(bert, tok, t))

    if args.cache:
        try:
            vectors = np.load(args.cache)
        except FileNotFoundError:
            vectors = token_vectors(bert, vocab)
            np.save(args.cache, vectors)
    else:
        vectors = token_vectors(bert, vocab)
    vectors = vectors.astype(np.float64)

    def build(dims, skip, sif):
        table = pca(vectors, dims, skip)
        if sif:
            table = table * sif_weights(len(vocab), sif)[:, None]
        return table

    def int8_table(table):
        q, scales = quantise(table)
        return q.astype(np.float32) * scales[:, None]

    if args.explore:
        for dims in (128, 256, 384):
            for skip in (0, 2):
                if skip + dims > vectors.shape[1]:
                    continue
                for sif in (0, 5e-5, 1e-4, 1e-3):
                    table = int8_table(build(dims, skip, sif))
                    report(f"dims={dims} skip={skip} sif={sif}", lambda t: student_embed(table, tok, t))

    table = build(args.dims, args.skip, args.sif)
    q, scales = quantise(table)
    report("chosen, float", lambda t: student_embed(table, tok, t))
    report("chosen, int8", lambda t: student_embed(int8_table(table), tok, t))

    if args.out:
        write_asset(args.out, vocab, q, scales)
        print(f"wrote {args.out}: {len(vocab)} tokens x {args.dims} dims", file=sys.stderr)


if __name__ == "__main__":
    main()
