"""Prints the results table of bench/sdk.sh from its per-run JSON files.

Usage: python3 sdk_report.py OUT_DIR ROUNDS
Reads OUT_DIR/<target>.r<N>.json (wrk summaries from sdk.lua, plus CPU use) and, per target,
reports the round with the median throughput among the rounds that other work on the machine did
not disturb (the lower median when their number is even). Then the peer/lore throughput ratio per
method against the target (lore within 3x of the rusqlite peer): the median of the per-round
ratios, each from one lore round and the peer round run just before it, so both saw about the same
load from other work. Rounds where either was disturbed are left out, unless that leaves none.
Also the ratio of server CPU time per request (lore's over the peer's, median over the same
rounds), which other work on the machine skews less than throughput.
"""

import json
import os
import statistics
import sys

TARGETS = [
    ("lore-get", "lore entities.get"),
    ("peer-get", "rusqlite peer get"),
    ("lore-list", "lore entities.list (100 of 100k)"),
    ("peer-list", "rusqlite peer list (100 of 100k)"),
    ("lore-quiet-get", "(extra) lore entities.get, RUST_LOG=warn"),
    ("lore-quiet-list", "(extra) lore entities.list, RUST_LOG=warn"),
]
PAIRS = [  # (lore, peer, label, counts toward the target)
    ("lore-get", "peer-get", "entities.get", True),
    ("lore-list", "peer-list", "entities.list", True),
    ("lore-quiet-get", "peer-get", "(extra) entities.get, RUST_LOG=warn", False),
    ("lore-quiet-list", "peer-list", "(extra) entities.list, RUST_LOG=warn", False),
]
RATIO_TARGET = 3.0
NOISE_PCT = 15.0  # CPU % (of one core) used by other processes during a round that marks it noisy


def noisy(run):
    return "!" if run.get("other_cpu_pct", 0) > NOISE_PCT else ""


def cpu_us(run):
    """Server CPU time per request, in microseconds (user + system, all threads)."""
    return 1e4 * run.get("server_cpu_pct", 0) / run["rps"] if run["rps"] else 0.0


def lopsided(run):
    split = run.get("worker_cpu_pct") or []
    total = sum(split)
    return "*" if len(split) > 1 and total > 0 and max(split) / total >= 0.9 else ""


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
            clean = [r for r in runs if r.get("other_cpu_pct", 0) <= NOISE_PCT] or runs
            clean.sort(key=lambda r: r["rps"])
            rows[key] = (clean[(len(clean) - 1) // 2], runs)

    print("| target | req/s | p50 ms | p99 ms | max ms | CPU server / wrk | server CPU µs/req | checked OK / all | errors | rounds req/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for key, label in TARGETS:
        if key not in rows:
            print(f"| {label} | (not run) | | | | | | | | |")
            continue
        r, runs = rows[key]
        errors = r["non2xx"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
        print(
            f"| {label} | {r['rps']:,.0f} | {r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.2f} | "
            f"{r['max_us'] / 1000:.1f} | {r.get('server_cpu_pct', 0):.0f}% / {r.get('wrk_cpu_pct', 0):.0f}% | "
            f"{cpu_us(r):,.0f} | {r['good']:,} / {r['requests']:,} | {errors} | "
            + ", ".join(f"{x['rps']:,.0f}{lopsided(x)}{noisy(x)}" for x in sorted(runs, key=lambda x: x["round"]))
            + " |"
        )
    if any(lopsided(x) for _, runs in rows.values() for x in runs):
        print("\n`*`: a round in which one worker thread did >= 90% of the work (CPU).")
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
    print("| method | peer ÷ lore req/s (median of per-round ratios) | per-round ratios | "
          "lore ÷ peer server CPU per request | median rounds: lore / peer req/s | lore p99 / peer p99 ms |")
    print("| --- | ---: | --- | ---: | --- | --- |")
    verdicts = []
    for lk, pk, label, counts in PAIRS:
        if lk not in rows or pk not in rows:
            continue
        lore_runs = {x["round"]: x for x in rows[lk][1]}
        peer_runs = {x["round"]: x for x in rows[pk][1]}
        paired = [(n, lore_runs[n], peer_runs[n]) for n in sorted(lore_runs) if n in peer_runs]
        clean = [p for p in paired if not noisy(p[1]) and not noisy(p[2])] or paired
        ratio = statistics.median(p[2]["rps"] / p[1]["rps"] for p in clean)
        cost = statistics.median(cpu_us(p[1]) / cpu_us(p[2]) for p in clean if cpu_us(p[2]))
        cells = ", ".join(f"{p[2]['rps'] / p[1]['rps']:.2f}x{noisy(p[1]) or noisy(p[2])}" for p in paired)
        lore, peer = rows[lk][0], rows[pk][0]
        print(f"| {label} | {ratio:.2f}x | {cells} | {cost:.2f}x | {lore['rps']:,.0f} / {peer['rps']:,.0f} | "
              f"{lore['p99_us'] / 1000:.2f} / {peer['p99_us'] / 1000:.2f} |")
        if counts:
            verdicts.append((f"{label}: rusqlite peer / lore = {ratio:.2f}x (target <= {RATIO_TARGET:.0f}x)",
                             ratio <= RATIO_TARGET))
    print()
    for text, ok in verdicts:
        print(f"target {'MET   ' if ok else 'MISSED'} {text}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
