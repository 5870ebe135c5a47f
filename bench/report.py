"""Prints the results table of bench/run.sh from its per-run JSON files.

Usage: python3 report.py OUT_DIR ROUNDS
Reads OUT_DIR/<target>.r<N>.json (wrk summaries from mcp.lua, plus CPU use) and, per target,
reports the round with the median throughput among the rounds that other work on the machine did
not disturb (the lower median when their number is even).
"""

import json
import os
import sys

TARGETS = [
    ("lore-tools-list", "lore tools/list"),
    ("lore-search", f"lore search_memory ({int(os.environ.get('SEED_N', 1000)):,} events)"),
    ("everything-tools-list", "server-everything tools/list"),
    ("python-tools-list", "python mcp tools/list"),
    ("python2-tools-list", "(extra) python mcp tools/list, 2 uvicorn workers"),
    ("lore-quiet-tools-list", "(extra) lore tools/list, RUST_LOG=warn"),
    ("lore-quiet-search", "(extra) lore search_memory, RUST_LOG=warn"),
    ("baseline-tools-list", "(baseline) LORE_BASELINE_BIN tools/list"),
    ("baseline-search", "(baseline) LORE_BASELINE_BIN search_memory"),
]
P99_TARGET_MS = 5.0
RATIO_TARGET = 5.0
NOISE_PCT = 15.0  # CPU % (of one core) used by other processes during a round that marks it noisy


def lopsided(run):
    """'*' when one lore worker thread did almost all the work (the others got no connections)."""
    split = run.get("worker_cpu_pct") or []
    total = sum(split)
    return "*" if len(split) > 1 and total > 0 and max(split) / total >= 0.9 else ""


def noisy(run):
    """'!' when other processes used more than NOISE_PCT of a core during the round."""
    return "!" if run.get("other_cpu_pct", 0) > NOISE_PCT else ""


def main():
    out, rounds = sys.argv[1], int(sys.argv[2])
    rows = {}
    for key, _ in TARGETS:
        runs = []
        for n in range(1, rounds + 1):
            path = os.path.join(out, f"{key}.r{n}.json")
            if os.path.exists(path):
                with open(path) as f:
                    runs.append(json.load(f))
        if runs:
            # Rounds during which other work took a noticeable share of the machine are left out
            # of the median (unless every round was noisy).
            clean = [r for r in runs if r.get("other_cpu_pct", 0) <= NOISE_PCT] or runs
            clean.sort(key=lambda r: r["rps"])
            rows[key] = (clean[(len(clean) - 1) // 2], runs)

    lines = []
    lines.append("| target | req/s | p50 ms | p99 ms | max ms | CPU server / wrk | checked OK / all | errors | rounds req/s |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for key, label in TARGETS:
        if key not in rows:
            lines.append(f"| {label} | (not run) | | | | | | | |")
            continue
        r, runs = rows[key]
        errors = r["non2xx"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
        lines.append(
            f"| {label} | {r['rps']:,.0f} | {r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.2f} | "
            f"{r['max_us'] / 1000:.1f} | {r.get('server_cpu_pct', 0):.0f}% / {r.get('wrk_cpu_pct', 0):.0f}% | "
            f"{r['good']:,} / {r['requests']:,} | {errors} | "
            + ", ".join(f"{x['rps']:,.0f}{lopsided(x)}{noisy(x)}" for x in sorted(runs, key=lambda x: x['round'])) + " |"
        )
    print("\n".join(lines))
    if any(lopsided(x) for _, runs in rows.values() for x in runs):
        print("\n`*`: a round in which one lore worker thread did >= 90% of the work (CPU) because the")
        print("other worker(s) accepted (almost) none of the connections.")
    if any(noisy(x) for _, runs in rows.values() for x in runs):
        print(f"\n`!`: a round during which other processes used more than {NOISE_PCT:.0f}% of a core; left out of")
        print("the median unless every round of that target was noisy.")

    bad = [(k, x) for k, (_, runs) in rows.items() for x in runs
           if x["bad"] or x["non2xx"] or x["connect_errors"] or x["read_errors"] or x["write_errors"] or x["timeouts"]
           # A smoke run (BENCH_SMOKE=1) also fails a round that got no good answer at all.
           or (os.environ.get("BENCH_SMOKE") == "1" and not x["good"])]
    for k, x in bad:
        print(f"\nWARNING {k} round {x['round']}: {x['bad']} bad responses, {x['non2xx']} non-2xx, "
              f"{x['timeouts']} timeouts, socket errors c/r/w {x['connect_errors']}/{x['read_errors']}/"
              f"{x['write_errors']}; first bad: {x['first_bad']}")

    print()
    lore = {k: rows[k][0] for k in ("lore-tools-list", "lore-search") if k in rows}
    peer_cols = [("everything-tools-list", "server-everything tools/list", True),
                 ("python-tools-list", "python mcp tools/list", True),
                 ("python2-tools-list", "(extra) python mcp, 2 workers", False)]
    print("| lore / peer throughput | " + " | ".join(label for _, label, _ in peer_cols) + " |")
    print("| --- |" + " ---: |" * len(peer_cols))
    verdicts = []
    for lk, llabel in (("lore-tools-list", "lore tools/list"), ("lore-search", "lore search_memory")):
        if lk not in lore:
            continue
        cells = []
        for pk, _, counts in peer_cols:
            if pk in rows:
                ratio = lore[lk]["rps"] / rows[pk][0]["rps"]
                cells.append(f"{ratio:.1f}x")
                if counts:
                    verdicts.append((f"{llabel} >= {RATIO_TARGET:.0f}x {pk.replace('-tools-list', '')} ({ratio:.1f}x)",
                                     ratio >= RATIO_TARGET))
            else:
                cells.append("n/a")
        print(f"| {llabel} | " + " | ".join(cells) + " |")
    for lk, llabel in (("lore-tools-list", "lore tools/list"), ("lore-search", "lore search_memory")):
        if lk in lore:
            p99 = lore[lk]["p99_us"] / 1000
            verdicts.append((f"{llabel} p99 {p99:.2f} ms <= {P99_TARGET_MS:.0f} ms", p99 <= P99_TARGET_MS))
    if "baseline-tools-list" in rows or "baseline-search" in rows:
        print()
        print("| lore / baseline (LORE_BASELINE_BIN) | req/s | p99 |")
        print("| --- | ---: | ---: |")
        for lk, bk, label in (("lore-tools-list", "baseline-tools-list", "tools/list"),
                              ("lore-search", "baseline-search", "search_memory")):
            if lk in rows and bk in rows:
                a, b = rows[lk][0], rows[bk][0]
                print(f"| {label} | {a['rps'] / b['rps']:.3f}x | {a['p99_us'] / b['p99_us']:.3f}x |")
    print()
    for text, ok in verdicts:
        print(f"target {'MET   ' if ok else 'MISSED'} {text}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
