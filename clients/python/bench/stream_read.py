"""Throughput of a tidemark_paimon streaming read against pypaimon's own
batch read of the same snapshots, in one run (issue 30; docs/spark.md).

A Paimon append table of `--rows` rows (id BIGINT, part STRING over 4
partitions, value STRING, amount DOUBLE) is written with pypaimon in
`--commits` commits. Then, `--rounds` times, alternating:

- peer: pypaimon's batch read of the latest snapshot (its scan plan, then
  `to_arrow` of every split, in this process) — rows/s;
- tidemark: a Spark Structured Streaming query (`local[2]`, `availableNow`,
  the `noop` sink) of `tidemark_paimon` with `scan.mode=latest-full`, a fresh
  consumer each round, against a `tidemark serve` on an SQLite file — rows/s
  over the query's batches (Spark's `triggerExecution`: planning, reading,
  the rows into the JVM and the sink), and over the whole query, its start
  included (the lease, Spark starting the source's Python process);
- and the same for the snapshots' deltas: tidemark from snapshot 1
  (`from-snapshot`), the peer reading each snapshot's delta (pypaimon's
  `StreamReadBuilder`, its own streaming read).

- and Spark's ceiling for any Python source here: a Python data source
  yielding the same rows made in memory (no read at all) to the same sink.

Prints each round, the medians and the ratios (tidemark / peer, and tidemark
/ the ceiling), and writes them as JSON with `--json`. It also counts the CPU
each spent: pypaimon's read (this process), and for the tidemark query and
the ceiling Spark's JVM and its Python workers (from /proc); the workers' CPU
less the ceiling's is the source's own read.

    scripts/bench-spark-read.sh                      # 10 million rows
    scripts/bench-spark-read.sh --rows 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import uuid
from typing import Dict, Optional, Tuple

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import TidemarkServer, local_spark, write_table  # noqa: E402


def bench_schema():
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.string()), ("amount", pa.float64())])


def write_table_of(warehouse: pathlib.Path, rows: int, commits: int):
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    schema = bench_schema()
    catalog.create_table("bench.events", Schema.from_pyarrow_schema(schema, partition_keys=["part"]), False)
    table = catalog.get_table("bench.events")
    per_commit = rows // commits
    parts = np.array(["p0", "p1", "p2", "p3"])
    for n in range(commits):
        ids = np.arange(n * per_commit, (n + 1) * per_commit, dtype=np.int64)
        data = pa.table(
            {
                "id": ids,
                "part": pa.array(parts[ids % 4]),
                "value": pa.array(np.char.add("v", (ids % 100_000).astype(str))),
                "amount": (ids % 1000).astype(np.float64) / 10,
            },
            schema=schema,
        )
        write_table(table, data)
    return table, str(warehouse / "bench.db" / "events")


def peer_full(table) -> int:
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    return builder.new_read().to_arrow(splits).num_rows


def peer_deltas(table) -> int:
    """pypaimon's own streaming read from snapshot 1 to the latest."""
    builder = table.new_stream_read_builder()
    scan = builder.new_streaming_scan()
    scan.next_snapshot_id = 1
    scan._prefetch_enabled = False
    latest = table.snapshot_manager().get_latest_snapshot().id
    read = builder.new_read()
    total = 0

    async def collect():
        nonlocal total
        stream = scan.stream()
        while scan.next_snapshot_id is None or scan.next_snapshot_id <= latest:
            plan = await asyncio.wait_for(stream.__anext__(), timeout=600)
            total += read.to_arrow(plan.splits()).num_rows
    asyncio.run(collect())
    return total


def ceiling_source(rows: int, batch_rows: int, partitions: int):
    """Spark's ceiling for any Python source on this machine: a Python data
    source yielding the same rows (schema, row count, batch size) made in
    memory, no file read at all, written to the same `noop` sink."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class CeilingReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            ids = np.arange(batch_rows, dtype=np.int64)
            batch = pa.RecordBatch.from_pydict(
                {
                    "id": ids,
                    "part": pa.array(np.array(["p0", "p1", "p2", "p3"])[ids % 4]),
                    "value": pa.array(np.char.add("v", ids.astype(str))),
                    "amount": ids.astype(np.float64),
                }
            )
            for _ in range(rows // partitions // batch_rows):
                yield batch

    class CeilingSource(DataSource):
        @classmethod
        def name(cls):
            return "tidemark_bench_ceiling"

        def schema(self):
            return "id bigint, part string, value string, amount double"

        def reader(self, schema):
            return CeilingReader()

    return CeilingSource


def spark_ceiling(spark) -> float:
    started = time.perf_counter()
    spark.read.format("tidemark_bench_ceiling").load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def process_kind(cmdline: str) -> Optional[str]:
    if cmdline.split(" ", 1)[0].endswith("java"):
        return "spark_jvm"
    if "pyspark.daemon" in cmdline or "pyspark/daemon" in cmdline:
        return "python_workers"  # the daemon and the workers it forks
    if "python_streaming_source_runner" in cmdline:
        return "source_runner"
    return None


def descendants_cpu() -> Dict[Tuple[int, str], float]:
    """CPU seconds so far (user + system) of this process's descendants that
    Spark runs: its JVM, the Python workers that read partitions, and the
    Python process that plans the streaming source's batches."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, stats = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(pid)] = int(fields[1])
        stats[int(pid)] = (cmdline, (int(fields[11]) + int(fields[12])) / tick)
    out = {}
    for pid, (cmdline, seconds) in stats.items():
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, os.getpid()):
            ancestor = parents.get(ancestor)
        kind = process_kind(cmdline)
        if ancestor == os.getpid() and kind is not None:
            out[(pid, kind)] = seconds
    return out


def cpu_spent(before: Dict[Tuple[int, str], float], after: Dict[Tuple[int, str], float]) -> Dict[str, float]:
    """CPU seconds by kind of process between two `descendants_cpu` (a
    process that ended in between is not counted)."""
    spent: Dict[str, float] = {}
    for key, seconds in after.items():
        spent[key[1]] = spent.get(key[1], 0.0) + seconds - before.get(key, 0.0)
    return spent


def spark_session():
    return local_spark("tidemark-read-bench", spark_driver_memory="4g")


def tidemark_read(spark, path: str, endpoint: str, checkpoints: pathlib.Path, options: dict):
    """(seconds from the query's start to its end, seconds its batches took
    (Spark's `triggerExecution`: planning, reading, the sink), rows read)."""
    name = uuid.uuid4().hex[:8]
    reader = (
        spark.readStream.format("tidemark_paimon")
        .option("path", path)
        .option("consumer-id", f"bench-{name}")
        .option("tidemark.endpoint", endpoint)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    started = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoints / name))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    elapsed = time.perf_counter() - started
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    read = sum(p["numInputRows"] for p in progress)
    batches = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
    return elapsed, batches, read


def cpu_summary(rounds: list, rows: int) -> dict:
    """Median CPU seconds per million rows: pypaimon's read (this process,
    all its threads), and for the tidemark query and Spark's ceiling each
    kind of process Spark runs. The Python workers' CPU in the ceiling is
    Spark's hand-off of Arrow batches alone, so the workers' CPU of the
    tidemark query less the ceiling's is the source's own read."""
    per_million = 1e6 / rows
    out = {}
    for mode in ("full", "deltas"):
        out[f"pypaimon_{mode}"] = statistics.median(r[f"peer_{mode}_cpu_s"] for r in rounds) * per_million
        for kind in ("spark_jvm", "python_workers"):
            out[f"tidemark_{mode}_{kind}"] = (
                statistics.median(r[f"tidemark_{mode}_cpu_s"].get(kind, 0.0) for r in rounds) * per_million
            )
    for kind in ("spark_jvm", "python_workers"):
        out[f"ceiling_{kind}"] = statistics.median(r["spark_ceiling_cpu_s"].get(kind, 0.0) for r in rounds) * per_million
    for mode in ("full", "deltas"):
        own = out[f"tidemark_{mode}_python_workers"] - out["ceiling_python_workers"]
        out[f"tidemark_{mode}_source_read"] = own
        print(
            f"{mode}: CPU s per million rows: pypaimon's read {out[f'pypaimon_{mode}']:.3f}; tidemark_paimon's query: "
            f"Spark's JVM {out[f'tidemark_{mode}_spark_jvm']:.3f}, Python workers "
            f"{out[f'tidemark_{mode}_python_workers']:.3f} (the ceiling's: JVM {out['ceiling_spark_jvm']:.3f}, "
            f"workers {out['ceiling_python_workers']:.3f}); the source's own read {own:.3f} = "
            f"{own / out[f'pypaimon_{mode}']:.2f}x pypaimon's"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--workdir", type=pathlib.Path, help="where the table is written (a temporary directory)")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a tidemark_paimon option for every query"
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.option)

    workdir = args.workdir or pathlib.Path(tempfile.mkdtemp(prefix="tidemark-read-bench-"))
    started = time.perf_counter()
    table, path = write_table_of(workdir / "warehouse", args.rows, args.commits)
    rows = (args.rows // args.commits) * args.commits
    print(f"wrote {rows:,} rows in {args.commits} commits in {time.perf_counter() - started:.1f} s: {path}", flush=True)

    server = TidemarkServer(f"sqlite://{workdir / 'tidemark.db'}", workdir / "server.log").start()
    spark = spark_session()
    # The ceiling hands Spark batches of the rows the source's batches have.
    from tidemark.paimon_plan import batch_rows as default_batch_rows

    batch_rows = int(extra["read.batch-size"]) if "read.batch-size" in extra else default_batch_rows(bench_schema())
    spark.dataSource.register(ceiling_source(rows, batch_rows, 2))
    results = {"rows": rows, "commits": args.commits, "options": extra, "rounds": [], "cpus": os.cpu_count()}
    try:
        # One untimed query first: the JVM, Python workers and imports warm.
        tidemark_read(spark, path, server.endpoint, workdir / "checkpoints", {"scan.mode": "latest-full", **extra})
        spark_ceiling(spark)
        for n in range(args.rounds):
            round_ = {}
            t, cpu = time.perf_counter(), time.process_time()
            assert peer_full(table) == rows
            round_["peer_full_s"] = time.perf_counter() - t
            round_["peer_full_cpu_s"] = time.process_time() - cpu
            before = descendants_cpu()
            elapsed, batches, read = tidemark_read(
                spark, path, server.endpoint, workdir / "checkpoints", {"scan.mode": "latest-full", **extra}
            )
            round_["tidemark_full_cpu_s"] = cpu_spent(before, descendants_cpu())
            assert read == rows, f"the full scan delivered {read} rows, not {rows}"
            round_["tidemark_full_s"], round_["tidemark_full_batches_s"] = elapsed, batches
            t, cpu = time.perf_counter(), time.process_time()
            assert peer_deltas(table) == rows
            round_["peer_deltas_s"] = time.perf_counter() - t
            round_["peer_deltas_cpu_s"] = time.process_time() - cpu
            before = descendants_cpu()
            elapsed, batches, read = tidemark_read(
                spark, path, server.endpoint, workdir / "checkpoints", {"scan.mode": "from-snapshot", "scan.snapshot-id": "1", **extra}
            )
            round_["tidemark_deltas_cpu_s"] = cpu_spent(before, descendants_cpu())
            assert read == rows, f"the deltas delivered {read} rows, not {rows}"
            round_["tidemark_deltas_s"], round_["tidemark_deltas_batches_s"] = elapsed, batches
            before = descendants_cpu()
            round_["spark_ceiling_s"] = spark_ceiling(spark)
            round_["spark_ceiling_cpu_s"] = cpu_spent(before, descendants_cpu())
            results["rounds"].append(round_)
            print(
                f"round {n + 1}: "
                + "; ".join(
                    f"{mode}: pypaimon {rows / round_[f'peer_{mode}_s']:,.0f} rows/s, tidemark_paimon "
                    f"{rows / round_[f'tidemark_{mode}_batches_s']:,.0f} rows/s streaming "
                    f"({rows / round_[f'tidemark_{mode}_s']:,.0f} with the query's start)"
                    for mode in ("full", "deltas")
                ),
                flush=True,
            )
    finally:
        spark.stop()
        server.stop()

    # Two figures for tidemark: streaming (the query's batches, what a
    # running query sustains) and with the query's start (Spark starting the
    # query and its Python source process, which imports pyspark and
    # pypaimon: a one-off cost of seconds per query start).
    summary = {}
    for mode in ("full", "deltas"):
        peer = [rows / r[f"peer_{mode}_s"] for r in results["rounds"]]
        for kind, key in (("streaming", f"tidemark_{mode}_batches_s"), ("with_start", f"tidemark_{mode}_s")):
            ours = [rows / r[key] for r in results["rounds"]]
            ratios = [o / p for o, p in zip(ours, peer)]
            figures = {
                "pypaimon_rows_per_s_median": statistics.median(peer),
                "tidemark_rows_per_s_median": statistics.median(ours),
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
            summary[f"{mode}_{kind}"] = figures
            print(
                f"{mode} ({kind.replace('_', ' ')}): pypaimon median {figures['pypaimon_rows_per_s_median']:,.0f} rows/s, "
                f"tidemark_paimon median {figures['tidemark_rows_per_s_median']:,.0f} rows/s; ratio median "
                f"{figures['ratio_median']:.2f}x (spread {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)"
            )
    ceiling = statistics.median(rows / r["spark_ceiling_s"] for r in results["rounds"])
    peer = summary["full_streaming"]["pypaimon_rows_per_s_median"]
    summary["spark_python_source_ceiling_rows_per_s_median"] = ceiling
    print(
        f"Spark's ceiling for a Python source here (the same rows made in memory, no read): median {ceiling:,.0f} rows/s, "
        f"{ceiling / peer:.2f}x pypaimon's read; tidemark_paimon streaming: full scan "
        f"{summary['full_streaming']['tidemark_rows_per_s_median'] / ceiling:.2f}x, deltas "
        f"{summary['deltas_streaming']['tidemark_rows_per_s_median'] / ceiling:.2f}x of that ceiling"
    )
    summary["cpu_s_per_million_rows"] = cpu_summary(results["rounds"], rows)
    results["summary"] = summary
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
