#!/usr/bin/env python3
"""Checks a `tidemark-bench --db-cpu` result: the limit is recorded, every
commit row has Postgres CPU (from the cgroup), WAL bytes and write
transactions per commit (the peer's about one; tidemark's fewer, when its
commits share transactions at four workers or more), and no bench cgroup is
left behind. Usage: check-db-cpu-bench.py RESULT.json CORES
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
    transactions = row.get("write_transactions_per_op")
    if transactions is None or not transactions > 0:
        problems.append(f"{name}: no write transactions per commit")
    elif row["system"] == "raw-sql" and not 0.9 <= transactions <= 1.2:
        problems.append(f"{name}: {transactions:.2f} write transactions per commit, not about one")
    elif row["system"] == "tidemark" and row["concurrency"] >= 4 and not transactions < 0.9:
        problems.append(f"{name}: {transactions:.2f} write transactions per commit: commits are not batched")
left = glob.glob("/sys/fs/cgroup/*/tidemark-bench-*") + glob.glob("/sys/fs/cgroup/tidemark-bench-*")
if left:
    problems.append(f"cgroups left behind: {left}")
if problems:
    sys.exit("database-bound bench: " + "; ".join(problems))
print(f"database-bound bench: Postgres at {cores} cores, CPU, WAL and write transactions per commit reported for both systems")
