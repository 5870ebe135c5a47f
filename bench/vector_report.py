#!/usr/bin/env python3
"""Turns one bench/vector.sh output directory into the markdown tables of BENCHMARKS.md.

    python3 bench/vector_report.py bench/out/vector-<timestamp>
"""
import re
import sys
from pathlib import Path

SEARCH_HEAD = ("| index | ef | p50 µs | p99 µs | recall@10 | speedup vs int8 scan (p50) "
               "| vs f32 brute force |\n| --- | --- | --- | --- | --- | --- | --- |")
BUILD_HEAD = ("| index | build s | heap MB (counting allocator) | snapshot |\n"
              "| --- | --- | --- | --- |")


def report(path: Path, platform: str) -> None:
    if not path.exists():
        return
    print(f"\n### {platform}\n")
    section = None
    builds, rows = [], []
    brute = scan = 0.0

    def flush():
        if section:
            print(f"**{section}**\n")
            print(BUILD_HEAD)
            print("\n".join(builds))
            print()
            print(SEARCH_HEAD)
            print("\n".join(rows))
            print()

    for line in path.read_text().splitlines():
        m = re.match(r"^(clustered|uniform) n=(\d+): (.*)", line)
        if m:
            flush()
            section = f"{m.group(1)}, n = {int(m.group(2)):,} ({m.group(3)})"
            builds, rows = [], []
        elif line.startswith("BUILD |"):
            _, name, _n, build, heap, snap = [c.strip() for c in line.split("|")]
            heap = heap.removeprefix("heap ")
            builds.append(f"| {name} | {build.removeprefix('build ').removesuffix(' s')} | {heap} | {snap} |")
        elif section and line.startswith("| ") and line.count("|") == 9:
            cells = [c.strip() for c in line.strip("|").split("|")]
            name, _n, ef, p50, p99, recall = cells[:6]
            if name == "f32 brute force":
                brute = float(p50)
            if name == "int8 exact scan":
                scan = float(p50)
            ratio = lambda base: f"{base / float(p50):.1f}×" if base / float(p50) < 10 else f"{base / float(p50):.0f}×"
            rows.append(f"| {name} | {ef} | {p50} | {p99} | {recall} | "
                        f"{ratio(scan) if name != 'f32 brute force' else ''} | {ratio(brute)} |")
        elif line.startswith(("threshold", "filters")):
            flush()
            section = None
            print(f"\n{line.split(':')[0]}:\n")
            head = line.split(":", 1)[1].strip()
            print(head)
            print("|" + " --- |" * (head.count("|") - 1))
        elif line.startswith("|") and section is None:
            print(line)
        elif line.startswith("("):
            print(f"\n_{line.strip('()')}_\n") if section is None else None
    flush()


run = Path(sys.argv[1])
print((run / "machine.txt").read_text())
report(run / "native.md", "Native (x86-64, release)")
report(run / "wasm.md", "wasm32-unknown-unknown under node 20 (V8)")
