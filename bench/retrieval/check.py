#!/usr/bin/env python3
"""Validate the lore retrieval test set and measure how lexical it is.

Usage: python3 bench/retrieval/check.py [--dir DIR] [--pairs] [--misses N]

Checks corpus.jsonl and queries.jsonl (ids, kinds, lengths, references),
reports how many content words each (query, relevant memory) pair shares,
and runs a small BM25 over the corpus as the keyword-only baseline.
Exits nonzero when the set is too small or too lexical.
Python 3.11 standard library only.
"""

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

KINDS = {"fact", "preference", "decision", "observation", "note"}
MIN_MEMORIES = 2000
MIN_QUERIES = 200
MIN_ZERO_SHARE = 0.70   # fraction of pairs that must share no content word
MAX_SHARED = 2          # no pair may share more content words than this
MIN_WORDS, MAX_WORDS = 8, 40
MAX_RELEVANT = 3

# NLTK's English stopword list (179 words).
STOPWORDS = set("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours
yourself yourselves he him his himself she she's her hers herself it it's its
itself they them their theirs themselves what which who whom this that that'll
these those am is are was were be been being have has had having do does did
doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how
all any both each few more most other some such no nor not only own same so
than too very s t can will just don don't should should've now d ll m o re ve
y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't
shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
wouldn't
""".split())
# The list's contractions only matter as pieces once tokens are alphabetic runs.
STOPWORDS |= {piece for w in list(STOPWORDS) for piece in re.findall(r"[a-z]+", w)}

WORD = re.compile(r"[a-z]+")


def stem(w: str) -> str:
    """Light stemming: plural s/es/ies, -ing, -ed, then a trailing e."""
    if len(w) <= 3:
        return w
    if w.endswith("ies") or w.endswith("ied"):
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    elif w.endswith("ing") and len(w) > 5:
        w = _undouble(w[:-3])
    elif w.endswith("ed") and len(w) > 4:
        w = _undouble(w[:-2])
    if w.endswith("e") and len(w) >= 3:
        w = w[:-1]
    return w


def _undouble(w: str) -> str:
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        return w[:-1]
    return w


def content_words(text: str) -> list[str]:
    return [stem(t) for t in WORD.findall(text.lower()) if t not in STOPWORDS and len(t) > 1]


def load_jsonl(path: Path, errors: list[str]) -> list[dict]:
    rows = []
    if not path.exists():
        errors.append(f"{path}: missing")
        return rows
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            errors.append(f"{path.name}:{n}: blank line")
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{path.name}:{n}: bad JSON ({e})")
            continue
        if not isinstance(row, dict):
            errors.append(f"{path.name}:{n}: not an object")
            continue
        row["_line"] = n
        rows.append(row)
    return rows


def validate(corpus: list[dict], queries: list[dict], errors: list[str]) -> dict[str, dict]:
    by_id: dict[str, dict] = {}
    seen_text: dict[str, str] = {}
    for m in corpus:
        where = f"corpus.jsonl:{m['_line']}"
        extra = set(m) - {"id", "kind", "content", "_line"}
        if extra:
            errors.append(f"{where}: unexpected fields {sorted(extra)}")
        mid, kind, content = m.get("id"), m.get("kind"), m.get("content")
        if not isinstance(mid, str) or not re.fullmatch(r"m\d{4,}", mid):
            errors.append(f"{where}: bad id {mid!r}")
            continue
        if mid in by_id:
            errors.append(f"{where}: duplicate id {mid}")
        by_id[mid] = m
        if kind not in KINDS:
            errors.append(f"{where}: kind {kind!r} not one of {sorted(KINDS)}")
        if not isinstance(content, str) or not content.strip():
            errors.append(f"{where}: empty content")
            continue
        n = len(content.split())
        if not MIN_WORDS <= n <= MAX_WORDS:
            errors.append(f"{where}: {mid} has {n} words (want {MIN_WORDS}-{MAX_WORDS})")
        key = " ".join(content.lower().split())
        if key in seen_text:
            errors.append(f"{where}: {mid} duplicates the text of {seen_text[key]}")
        seen_text[key] = mid
    qids = set()
    for q in queries:
        where = f"queries.jsonl:{q['_line']}"
        extra = set(q) - {"id", "query", "relevant", "_line"}
        if extra:
            errors.append(f"{where}: unexpected fields {sorted(extra)}")
        qid, text, rel = q.get("id"), q.get("query"), q.get("relevant")
        if not isinstance(qid, str) or not re.fullmatch(r"q\d{3,}", qid):
            errors.append(f"{where}: bad id {qid!r}")
        elif qid in qids:
            errors.append(f"{where}: duplicate id {qid}")
        qids.add(qid)
        if not isinstance(text, str) or not text.strip():
            errors.append(f"{where}: empty query")
        if not isinstance(rel, list) or not 1 <= len(rel) <= MAX_RELEVANT:
            errors.append(f"{where}: relevant must list 1-{MAX_RELEVANT} memory ids")
            continue
        if len(set(rel)) != len(rel):
            errors.append(f"{where}: repeated relevant id")
        for r in rel:
            if r not in by_id:
                errors.append(f"{where}: relevant id {r!r} is not in the corpus")
    return by_id


class BM25:
    def __init__(self, docs: list[tuple[str, list[str]]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.ids = [d for d, _ in docs]
        self.tfs = [Counter(toks) for _, toks in docs]
        self.lens = [len(toks) for _, toks in docs]
        self.avg = sum(self.lens) / max(len(self.lens), 1)
        df = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self.tfs):
            for t in tf:
                self.postings.setdefault(t, []).append(i)

    def search(self, terms: list[str]) -> list[tuple[str, float]]:
        scores: dict[int, float] = {}
        for t in set(terms):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i in self.postings[t]:
                f = self.tfs[i][t]
                norm = f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.lens[i] / self.avg))
                scores[i] = scores.get(i, 0.0) + idf * norm
        # Ties break by corpus order, so the result is deterministic.
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(self.ids[i], s) for i, s in ranked]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--pairs", action="store_true", help="print every pair that shares a content word")
    ap.add_argument("--misses", type=int, default=0, help="print N queries with BM25's top hit")
    args = ap.parse_args()
    root = Path(args.dir)

    errors: list[str] = []
    corpus = load_jsonl(root / "corpus.jsonl", errors)
    queries = load_jsonl(root / "queries.jsonl", errors)
    by_id = validate(corpus, queries, errors)
    for e in errors[:50]:
        print("error:", e)
    if len(errors) > 50:
        print(f"error: ... and {len(errors) - 50} more")

    docs = [(m["id"], content_words(m.get("content", ""))) for m in corpus if m.get("id") in by_id]
    doc_words = {d: set(toks) for d, toks in docs}
    kinds = Counter(m.get("kind") for m in corpus)
    words = [len(m.get("content", "").split()) for m in corpus]

    df = Counter(w for ws in doc_words.values() for w in ws)
    shared_counts: list[int] = []
    overlaps: list[tuple[str, str, list[str]]] = []
    rare_distractor = two_word_distractor = 0
    for q in queries:
        qw = set(content_words(q.get("query", "")))
        rel = [r for r in q.get("relevant", []) if r in doc_words]
        for r in rel:
            shared = sorted(qw & doc_words[r])
            shared_counts.append(len(shared))
            if shared:
                overlaps.append((q["id"], r, shared))
        # Lexical distractors: memories that are not relevant but share query words.
        others = [ws for d, ws in doc_words.items() if d not in rel]
        known = [w for w in qw if df[w]]
        if known:
            rarest = min(known, key=lambda w: (df[w], w))
            if any(rarest in ws for ws in others):
                rare_distractor += 1
        if any(len(qw & ws) >= 2 for ws in others):
            two_word_distractor += 1

    bm25 = BM25(docs)
    recall5, rr, fooled = [], [], 0
    misses = []
    for q in queries:
        rel = set(q.get("relevant", []))
        if not rel:
            continue
        ranked = bm25.search(content_words(q.get("query", "")))
        top5 = [d for d, _ in ranked[:5]]
        recall5.append(len(rel & set(top5)) / len(rel))
        rank = next((i for i, (d, _) in enumerate(ranked, 1) if d in rel), None)
        rr.append(1.0 / rank if rank else 0.0)
        if ranked and ranked[0][0] not in rel:
            fooled += 1
            misses.append((q, ranked[0][0]))

    npairs = len(shared_counts)
    zero = sum(1 for c in shared_counts if c == 0)
    le1 = sum(1 for c in shared_counts if c <= 1)
    over = [o for o in overlaps if len(o[2]) > MAX_SHARED]
    nq = len(queries)

    print(f"memories:              {len(corpus)}  ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})")
    if words:
        print(f"memory length (words): min {min(words)}, mean {sum(words) / len(words):.1f}, max {max(words)}")
    print(f"queries:               {nq}")
    print(f"(query, memory) pairs: {npairs}")
    if npairs:
        print(f"shared content words:  mean {sum(shared_counts) / npairs:.3f} per pair")
        print(f"pairs sharing 0:       {zero} ({100 * zero / npairs:.1f}%)")
        print(f"pairs sharing <= 1:    {le1} ({100 * le1 / npairs:.1f}%)")
        print(f"pairs sharing > {MAX_SHARED}:     {len(over)}")
    if nq:
        print(f"queries where a non-relevant memory shares the query's rarest word: "
              f"{rare_distractor} ({100 * rare_distractor / nq:.1f}%)")
        print(f"queries where a non-relevant memory shares >= 2 query words: "
              f"{two_word_distractor} ({100 * two_word_distractor / nq:.1f}%)")
        print(f"queries whose BM25 top hit is a non-relevant memory: {fooled} ({100 * fooled / nq:.1f}%)")
    if recall5:
        print(f"BM25 recall@5:         {sum(recall5) / len(recall5):.3f}")
        print(f"BM25 MRR:              {sum(rr) / len(rr):.3f}")

    if args.pairs:
        for qid, r, shared in overlaps:
            print(f"  shared {qid} {r}: {' '.join(shared)}")
    for q, top in misses[: args.misses]:
        print(f"  {q['id']} {q['query']!r}\n      want {q['relevant']}: {by_id[q['relevant'][0]]['content']}\n      bm25 {top}: {by_id[top]['content']}")

    failures = []
    if errors:
        failures.append(f"{len(errors)} validation errors")
    if len(corpus) < MIN_MEMORIES:
        failures.append(f"{len(corpus)} memories < {MIN_MEMORIES}")
    if nq < MIN_QUERIES:
        failures.append(f"{nq} queries < {MIN_QUERIES}")
    if npairs and zero / npairs < MIN_ZERO_SHARE:
        failures.append(f"only {100 * zero / npairs:.1f}% of pairs share 0 content words (< {100 * MIN_ZERO_SHARE:.0f}%)")
    for qid, r, shared in over:
        failures.append(f"{qid} and {r} share {len(shared)} content words: {' '.join(shared)}")
    if failures:
        print("FAIL:")
        for f in failures:
            print("  -", f)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
