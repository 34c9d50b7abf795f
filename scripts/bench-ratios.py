#!/usr/bin/env python3
"""The commit comparison of several tidemark-bench runs, as docs/performance.md
quotes it: per Postgres CPU limit and worker count, tidemark's throughput
against the raw-SQL peer's (the ratio of each run, their median and spread),
p99 latency, Postgres CPU per commit (from the cgroup with --db-cpu), WAL
bytes per commit, and commits per Postgres write transaction (tidemark's mean
batch size; runs from before 2026-12-05's step 3 lack it) for both systems.

    scripts/bench.sh --db-cpu 0.5 --scenarios commit --concurrency 16,64 --json half-1.json
    python3 scripts/bench-ratios.py half-*.json one-*.json
"""

import json
import statistics
import sys
from collections import defaultdict


def spread(values, fmt="{:.2f}"):
    values = sorted(values)
    return f"{fmt.format(statistics.median(values))} ({fmt.format(values[0])}–{fmt.format(values[-1])})"


def per_transaction(transactions_per_op):
    """Commits per write transaction (the median run's), or a dash when the runs did not record it."""
    known = [t for t in transactions_per_op if t]
    return f"{1 / statistics.median(known):.1f}" if known else "—"


def main() -> None:
    paths = sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    # (limit, concurrency) -> list of per-run {system: row}
    runs = defaultdict(list)
    for path in paths:
        report = json.load(open(path))
        limit = report["machine"].get("postgres_cpu_limit_cores", "shared")
        by_point = defaultdict(dict)
        for row in report["rows"]:
            if row["scenario"] == "commit":
                by_point[row["concurrency"]][row["system"]] = row
        for concurrency, systems in by_point.items():
            if "tidemark" in systems and "raw-sql" in systems:
                runs[(limit, concurrency)].append(systems)
    print("| Postgres CPU | workers | runs | tidemark commits/s | raw-SQL commits/s | ratio | p99 ms tidemark / raw SQL "
          "| Postgres CPU ms per commit, tidemark / raw SQL (ratio) | WAL bytes per commit, tidemark / raw SQL "
          "| commits per Postgres transaction, tidemark / raw SQL |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (limit, concurrency), points in sorted(runs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        ours = [p["tidemark"] for p in points]
        peer = [p["raw-sql"] for p in points]
        ratio = [o["throughput"] / p["throughput"] for o, p in zip(ours, peer)]
        pg = lambda r: r["cpu_per_1k"].get("postgres", float("nan"))  # noqa: E731  (seconds per 1k = ms per op)
        cpu_ratio = [pg(o) / pg(p) for o, p in zip(ours, peer)]
        wal = lambda rows: statistics.median(r.get("wal_bytes_per_op") or float("nan") for r in rows)  # noqa: E731
        batch = lambda rows: per_transaction([r.get("write_transactions_per_op") for r in rows])  # noqa: E731
        cores = f"{limit} core" if limit != "shared" else "shared (no cgroup)"
        print(
            f"| {cores} | {concurrency} | {len(points)} "
            f"| {statistics.median(r['throughput'] for r in ours):,.0f} "
            f"| {statistics.median(r['throughput'] for r in peer):,.0f} "
            f"| **{spread(ratio)}×** "
            f"| {statistics.median(r['p99_ms'] for r in ours):.1f} / {statistics.median(r['p99_ms'] for r in peer):.1f} "
            f"| {statistics.median(pg(r) for r in ours):.3f} / {statistics.median(pg(r) for r in peer):.3f} "
            f"({spread(cpu_ratio)}×) "
            f"| {wal(ours):,.0f} / {wal(peer):,.0f} "
            f"| {batch(ours)} / {batch(peer)} |"
        )


if __name__ == "__main__":
    main()
