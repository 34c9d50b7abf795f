#!/usr/bin/env python3
"""Plots throughput against concurrency from tidemark-bench --json output.

    scripts/bench.sh --json bench.json
    .tools/venv/bin/python scripts/plot-bench.py bench.json docs/performance.png

One panel per scenario (commit, recover, churn); one line per system
(tidemark, raw SQL, etcd, tidemark on SQLite). With several JSON files (runs),
each point is the median of the runs. Also prints the results table (medians,
ratios against the peers) as Markdown, for docs/performance.md.
"""

import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "tidemark": ("tidemark (Postgres)", "tab:blue", "o"),
    "raw-sql": ("raw SQL (Postgres)", "tab:gray", "s"),
    "etcd": ("etcd", "tab:green", "^"),
    "tidemark-sqlite": ("tidemark (SQLite)", "tab:orange", "D"),
}


def main() -> None:
    *inputs, output = sys.argv[1:]
    if not inputs:
        sys.exit(__doc__)
    points = defaultdict(list)  # (scenario, system, concurrency) -> [throughput]
    rows = defaultdict(list)  # (scenario, system, concurrency) -> [row]
    memory = []
    machine = {}
    for path in inputs:
        with open(path) as f:
            report = json.load(f)
        machine = report["machine"]
        if report.get("memory"):
            memory.append(report["memory"])
        for row in report["rows"]:
            rows[(row["scenario"], row["system"], row["concurrency"])].append(row)
            scenario = "commit" if row["scenario"] == "sqlite" else row["scenario"]
            points[(scenario, row["system"], row["concurrency"])].append(row["throughput"])
    panels = [s for s in ("commit", "recover", "churn") if any(k[0] == s for k in points)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    for ax, scenario in zip(axes[0], panels):
        for system, (label, color, marker) in STYLE.items():
            series = sorted((c, statistics.median(v), min(v), max(v))
                            for (s, sys_, c), v in points.items() if s == scenario and sys_ == system)
            if series:
                # The median, with the runs' spread (min to max) as error bars.
                ax.errorbar([c for c, *_ in series], [m for _, m, _, _ in series],
                            yerr=[[m - lo for _, m, lo, _ in series], [hi - m for _, m, _, hi in series]],
                            marker=marker, color=color, label=label, capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 4, 16, 64], labels=["1", "4", "16", "64"])
        ax.set_xlabel("concurrent workers")
        ax.set_ylabel("operations / s")
        ax.set_title({"commit": "commit a micro-batch", "recover": "read the recovery position",
                      "churn": "acquire + renew + release"}[scenario])
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    runs = f"median of {len(inputs)} runs" if len(inputs) > 1 else "one run"
    fig.suptitle(f"tidemark vs its peers, {machine.get('cores', '?')} cores, fsync {machine.get('postgres_fsync', '?')} ({runs})", fontsize=10)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    print(f"wrote {output}")
    print_table(rows, memory, len(inputs))
    print_ratios(inputs)


def print_table(rows, memory, runs) -> None:
    """Medians over runs; tidemark's ratios against raw SQL and etcd."""
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("throughput", "p50_ms", "p99_ms")} for k, v in rows.items()}
    print(f"\n| scenario | workers | system | ops/s | p50 ms | p99 ms | vs raw SQL (ops/s, p99) | vs etcd (ops/s) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for (scenario, system, conc), m in sorted(med.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1] != "tidemark", kv[0][1])):
        peer = med.get((scenario, "raw-sql", conc))
        etcd = med.get((scenario, "etcd", conc))
        vs_sql = vs_etcd = ""
        if system == "tidemark" and peer:
            vs_sql = f"{m['throughput'] / peer['throughput']:.2f}x, {m['p99_ms'] / peer['p99_ms']:.2f}x"
        if system == "tidemark" and etcd:
            vs_etcd = f"{m['throughput'] / etcd['throughput']:.2f}x"
        print(f"| {scenario} | {conc} | {system} | {m['throughput']:.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | {vs_sql} | {vs_etcd} |")
    if memory:
        rss = statistics.median(m["rss_mib"] for m in memory)
        peak = statistics.median(m["peak_rss_mib"] for m in memory)
        print(f"\nmemory ({runs} runs, median): RSS {rss:.1f} MiB, peak {peak:.1f} MiB")


def print_ratios(inputs) -> None:
    """tidemark against each peer, paired within each run (the systems of a
    point ran minutes apart at most, on the same machine): the median ratio
    over the runs and its spread."""
    ratios = defaultdict(list)  # (scenario, concurrency, peer, what) -> [ratio per run]
    for path in inputs:
        with open(path) as f:
            by = {(r["scenario"], r["system"], r["concurrency"]): r for r in json.load(f)["rows"]}
        for (scenario, system, conc), row in by.items():
            if system != "tidemark":
                continue
            for peer in ("raw-sql", "etcd"):
                other = by.get((scenario, peer, conc))
                if other and other["throughput"] and other["p99_ms"]:
                    ratios[(scenario, conc, peer, "ops/s")].append(row["throughput"] / other["throughput"])
                    ratios[(scenario, conc, peer, "p99")].append(row["p99_ms"] / other["p99_ms"])
    if not ratios:
        return
    print(f"\n| scenario | workers | tidemark vs | ops/s ratio, median (min–max) | p99 ratio, median (min–max) | runs |")
    print("|---|---:|---|---:|---:|---:|")
    for (scenario, conc, peer) in sorted({k[:3] for k in ratios}):
        ops, p99 = ratios[(scenario, conc, peer, "ops/s")], ratios[(scenario, conc, peer, "p99")]
        spread = lambda v: f"{statistics.median(v):.2f}x ({min(v):.2f}–{max(v):.2f})"
        print(f"| {scenario} | {conc} | {peer} | {spread(ops)} | {spread(p99)} | {len(ops)} |")


if __name__ == "__main__":
    main()
