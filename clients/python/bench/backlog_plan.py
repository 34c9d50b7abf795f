"""How long the source takes to make one batch over a backlog of B
snapshots, through Spark's own callbacks without Spark: `latestOffset` walks
the backlog, `partitions` asks for the same batch (served from the walk, so
it should cost next to nothing). Prints the medians of three queries.

    .tools/venv/bin/python clients/python/bench/backlog_plan.py --snapshots 1000
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import PaimonTable, TidemarkServer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from pyspark.sql.datasource import CaseInsensitiveDict

    from tidemark.paimon_source import TidemarkPaimonDataSource

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="tidemark-backlog-"))
    server = TidemarkServer(f"sqlite://{workdir / 'tidemark.db'}", workdir / "server.log").start()
    try:
        table = PaimonTable(workdir / "warehouse", "backlog")
        for _ in range(args.snapshots):
            table.commit(rows=3)
        walks, partitions = [], []
        for run in range(args.runs):
            options = {
                "path": table.path,
                "consumer-id": f"backlog-{run}",
                "scan.mode": "from-snapshot",
                "scan.snapshot-id": "1",
                "tidemark.endpoint": server.endpoint,
            }
            source = TidemarkPaimonDataSource(CaseInsensitiveDict(options))
            reader = source.streamReader(source.schema())
            try:
                start = reader.initialOffset()
                began = time.perf_counter()
                end = reader.latestOffset(start, None)
                walked = time.perf_counter()
                reader.partitions(start, end)
                walks.append(walked - began)
                partitions.append(time.perf_counter() - walked)
            finally:
                reader.stop()
        print(
            f"backlog of {args.snapshots} snapshots: latestOffset median {statistics.median(walks) * 1e3:.0f} ms, "
            f"partitions median {statistics.median(partitions) * 1e3:.0f} ms ({args.runs} queries)"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
