#!/usr/bin/env python3
"""Checks a `tidemark-bench --db-cpu` result: the limit is recorded, every
commit row has Postgres CPU (from the cgroup) and WAL bytes per commit, and
no bench cgroup is left behind. Usage: check-db-cpu-bench.py RESULT.json CORES
"""
import glob
import json
import sys

path, cores = sys.argv[1], float(sys.argv[2])
report = json.load(open(path))
machine = report["machine"]
problems = []
if float(machine.get("postgres_cpu_limit_cores", "nan")) != cores:
    problems.append(f"limit not recorded as {cores}: {machine.get('postgres_cpu_limit')}")
rows = [r for r in report["rows"] if r["scenario"] == "commit" and r["system"] in ("tidemark", "raw-sql")]
if {r["system"] for r in rows} != {"tidemark", "raw-sql"}:
    problems.append(f"commit rows missing: {[r['system'] for r in rows]}")
for row in rows:
    name = f"{row['system']} x{row['concurrency']}"
    if not row["cpu_per_1k"].get("postgres", 0) > 0:
        problems.append(f"{name}: no Postgres CPU: {row['cpu_per_1k']}")
    if not (row.get("wal_bytes_per_op") or 0) > 0:
        problems.append(f"{name}: no WAL bytes per commit")
left = glob.glob("/sys/fs/cgroup/*/tidemark-bench-*") + glob.glob("/sys/fs/cgroup/tidemark-bench-*")
if left:
    problems.append(f"cgroups left behind: {left}")
if problems:
    sys.exit("database-bound bench: " + "; ".join(problems))
print(f"database-bound bench: Postgres at {cores} cores, CPU and WAL per commit reported for both systems")
