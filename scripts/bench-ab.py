#!/usr/bin/env python3
"""Two tidemark builds side by side: the commit throughput of runs of build A
against runs of build B made alternately in one session (run n of A beside
run n of B), per worker count — each build's runs and median, the change of
the medians, and the median of the paired ratios (B/A), which cancels most
of a shared machine's drift between pairs.

    for n in 1 2 3 4 5; do
      tidemark-bench --tidemark-bin A/tidemark --db-cpu 1 --scenarios commit --concurrency 16,64 --json a-$n.json
      tidemark-bench --tidemark-bin B/tidemark --db-cpu 1 --scenarios commit --concurrency 16,64 --json b-$n.json
    done
    python3 scripts/bench-ab.py 'a-*.json' 'b-*.json'
"""

import glob
import json
import re
import statistics
import sys


def runs(pattern):
    """{workers: [(run number, commits/s, tidemark CPU ms per commit)]} of the files `pattern` names."""
    out = {}
    for path in glob.glob(pattern):
        number = int(re.findall(r"(\d+)\.json$", path)[0])
        for row in json.load(open(path))["rows"]:
            if row["scenario"] == "commit" and row["system"] == "tidemark":
                out.setdefault(row["concurrency"], []).append(
                    (number, row["throughput"], row["cpu_per_1k"]["tidemark"])
                )
    return {workers: sorted(found) for workers, found in out.items()}


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = runs(sys.argv[1]), runs(sys.argv[2])
    print("| workers | runs | A commits/s (median) | B commits/s (median) | change of medians | paired B/A: median (spread) | tidemark CPU ms per commit, A / B |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for workers in sorted(set(a) & set(b)):
        pairs = {n: (t, c) for n, t, c in a[workers]}
        paired = [(pairs[n], (t, c)) for n, t, c in b[workers] if n in pairs]
        if not paired:
            continue
        a_t = [x[0][0] for x in paired]
        b_t = [x[1][0] for x in paired]
        ratios = sorted(bt / at for at, bt in zip(a_t, b_t))
        change = statistics.median(b_t) / statistics.median(a_t) - 1
        cpu_a = statistics.median(x[0][1] for x in paired)
        cpu_b = statistics.median(x[1][1] for x in paired)
        print(
            f"| {workers} | {len(paired)} | {statistics.median(a_t):,.0f} | {statistics.median(b_t):,.0f} | "
            f"{100 * change:+.1f}% | {statistics.median(ratios):.3f} ({ratios[0]:.2f}–{ratios[-1]:.2f}) | "
            f"{cpu_a:.4f} / {cpu_b:.4f} |"
        )


if __name__ == "__main__":
    main()
