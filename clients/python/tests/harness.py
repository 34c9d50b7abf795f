"""Real components for the Python tests: a tidemark server process (the
repository's binary), Paimon tables written with pypaimon, and a Spark sink
that records exactly what reached it."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

import grpc

REPO = pathlib.Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tidemark_binary() -> str:
    """The tidemark binary: $TIDEMARK_BIN, or target/debug/tidemark (built
    on demand)."""
    binary = os.environ.get("TIDEMARK_BIN")
    if binary:
        return binary
    binary = REPO / "target" / "debug" / "tidemark"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "tidemark"], cwd=REPO, check=True)
    return str(binary)


def local_spark(app_name: str, **conf):
    """A local[2] SparkSession kept on loopback, with the tidemark_paimon
    source registered; `conf` adds Spark settings (dots as underscores:
    `spark_driver_memory="4g"`)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from tidemark.paimon_source import register

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("_", "."), value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    register(session)
    return session


class TidemarkServer:
    """`tidemark serve` on a fixed loopback port; stop/kill and start again
    on the same port and database, as an operator would."""

    def __init__(
        self,
        database_url: str,
        log_path: pathlib.Path,
        extra_args: Optional[List[str]] = None,
        host: str = "127.0.0.1",
        port: Optional[int] = None,
        env: Optional[Dict[str, str]] = None,
    ):
        self.database_url = database_url
        self.env = dict(env or {})
        self.port = port or free_port()
        self.endpoint = f"{host}:{self.port}"
        self.log_path = log_path
        self.extra_args = list(extra_args or [])
        self.process: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 30.0) -> "TidemarkServer":
        args = [
            tidemark_binary(),
            "serve",
            "--listen",
            self.endpoint,
            "--database-url",
            self.database_url,
            "--metrics-listen",
            "off",
        ] + self.extra_args
        log = open(self.log_path, "ab")
        env = dict(os.environ, TIDEMARK_LOG="info,tidemark=debug")
        env.pop("TIDEMARK_AUTH", None)
        env.update(self.env)
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"tidemark exited with {self.process.returncode}; see {self.log_path}")
            try:
                with grpc.insecure_channel(self.endpoint) as channel:
                    grpc.channel_ready_future(channel).result(timeout=0.5)
                return self
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"tidemark did not start in {timeout} s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-flight."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def write_table(table, data, overwrite: Optional[dict] = None) -> int:
    """Commits `data` (an Arrow table, or a list of them written one after
    the other into the one commit) to a pypaimon table — an append, or an
    INSERT OVERWRITE of the partition `overwrite` names ({} for the whole
    table) — and returns the new snapshot id."""
    builder = table.new_batch_write_builder()
    if overwrite is not None:
        builder = builder.overwrite(overwrite or None)
    write, commit = builder.new_write(), builder.new_commit()
    try:
        for piece in data if isinstance(data, list) else [data]:
            write.write_arrow(piece)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()
    return table.snapshot_manager().get_latest_snapshot().id


@contextlib.contextmanager
def moto_s3(monkeypatch):
    """moto's S3-compatible server on loopback, with the AWS environment
    pointing at it (for tidemark's object_store) and a `lake` bucket.
    Yields (endpoint, boto3 client)."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        yield endpoint, _lake_at(monkeypatch, endpoint)
    finally:
        server.stop()


def _lake_at(monkeypatch, endpoint: str):
    """Points the AWS environment (read by tidemark's object_store) at
    `endpoint`, creates the `lake` bucket there and returns a boto3 client."""
    import boto3

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }.items():
        monkeypatch.setenv(name, value)
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="lake")
    return s3


@contextlib.contextmanager
def moto_s3_process(monkeypatch):
    """moto's S3-compatible server in a process of its own (so a test that
    loads it from several replicas does not share the interpreter with it),
    with the AWS environment pointing at it and a `lake` bucket. Yields
    (endpoint, boto3 client)."""
    import sys

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"moto's server exited with {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("moto's server did not start in 30 s")
                time.sleep(0.1)
        yield endpoint, _lake_at(monkeypatch, endpoint)
    finally:
        process.terminate()
        process.wait(timeout=30)


class PaimonTable:
    """An append-only Paimon table partitioned by `part`, written with
    pypaimon. Every data file is its own split (target split size 1 byte), so
    a commit of 6 rows over 3 partitions makes a snapshot of 3 splits."""

    def __init__(self, warehouse: pathlib.Path, database: str, name: str = "events", options=None):
        import pyarrow as pa
        from pypaimon import CatalogFactory, Schema

        self.warehouse = warehouse
        self.id = f"{database}.{name}"
        self.path = str(warehouse / f"{database}.db" / name)
        catalog = CatalogFactory.create({"warehouse": str(warehouse)})
        catalog.create_database(database, True)
        self.arrow_schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.string())])
        schema = Schema.from_pyarrow_schema(
            self.arrow_schema,
            partition_keys=["part"],
            options={"source.split.target-size": "1 b", **(options or {})},
        )
        catalog.create_table(self.id, schema, False)
        self.catalog = catalog
        self.table = catalog.get_table(self.id)
        self.rows_by_snapshot: Dict[int, List[int]] = {}
        self._next_id = 0
        self._lock = threading.Lock()

    def commit(self, rows: int = 6) -> int:
        """Appends `rows` rows with fresh ids over 3 partitions; returns the
        new snapshot id."""
        import pyarrow as pa

        with self._lock:
            ids = list(range(self._next_id, self._next_id + rows))
            self._next_id += rows
            data = pa.table(
                {
                    "id": ids,
                    "part": [f"p{i % 3}" for i in ids],
                    "value": [f"v{i}" for i in ids],
                },
                schema=self.arrow_schema,
            )
            snapshot = write_table(self.table, data)
            self.rows_by_snapshot[snapshot] = ids
            return snapshot

    def overwrite(self, rows: int = 2, part: str = "p1") -> int:
        """INSERT OVERWRITE of one partition with `rows` fresh rows (commit
        kind OVERWRITE: that partition's files deleted, new ones added);
        returns the new snapshot id. Its rows are recorded under it."""
        import pyarrow as pa

        with self._lock:
            ids = list(range(self._next_id, self._next_id + rows))
            self._next_id += rows
            data = pa.table(
                {"id": ids, "part": [part] * rows, "value": [f"v{i}" for i in ids]},
                schema=self.arrow_schema,
            )
            snapshot = write_table(self.table, data, overwrite={"part": part})
            self.rows_by_snapshot[snapshot] = ids
            return snapshot

    def compact(self) -> int:
        """A COMPACT snapshot as Paimon's compaction writes one: every live
        file deleted and the same rows added back in new files, committed
        through pypaimon's own commit path with commit kind COMPACT (pypaimon
        has no compaction of its own). Returns the new snapshot id; it adds
        no rows."""
        return compact_table(self.table)

    def live_ids(self) -> List[int]:
        """The ids a batch read of the table returns now."""
        builder = self.table.new_read_builder()
        rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        return sorted(rows.column("id").to_pylist())

    def ids(self, snapshots=None) -> List[int]:
        """Every id written (or those of `snapshots`)."""
        chosen = self.rows_by_snapshot if snapshots is None else snapshots
        return sorted(i for s in chosen for i in self.rows_by_snapshot[s])

    def latest_snapshot(self) -> int:
        return self.table.snapshot_manager().get_latest_snapshot().id

    def _snapshot_dir(self) -> pathlib.Path:
        return pathlib.Path(self.path) / "snapshot"

    def snapshot_ids(self) -> List[int]:
        return sorted(
            int(p.name[len("snapshot-"):]) for p in self._snapshot_dir().glob("snapshot-*") if p.name[9:].isdigit()
        )

    def expire_keeping_changelog_below(self, fence: int) -> List[int]:
        """Expires the snapshots below `fence` as Paimon does when the
        changelog outlives snapshots (`changelog.num-retained.*` above the
        snapshots'): each snapshot file becomes `changelog/changelog-N`
        (its data files stay), the changelog's hints are written, then the
        snapshots' EARLIEST hint moves. Returns the ids moved."""
        with self._lock:
            present = self.snapshot_ids()
            doomed = [s for s in present if s < min(fence, present[-1])]
            if not doomed:
                return []
            changelog = pathlib.Path(self.path) / "changelog"
            changelog.mkdir(exist_ok=True)
            for snapshot in doomed:
                (changelog / f"changelog-{snapshot}").write_bytes(
                    (self._snapshot_dir() / f"snapshot-{snapshot}").read_bytes()
                )
            if not (changelog / "EARLIEST").exists():
                (changelog / "EARLIEST").write_text(str(doomed[0]))
            (changelog / "LATEST").write_text(str(doomed[-1]))
            hint = self._snapshot_dir() / "EARLIEST"
            hint.with_suffix(".tmp").write_text(str(doomed[-1] + 1))
            os.replace(hint.with_suffix(".tmp"), hint)
            for snapshot in doomed:
                (self._snapshot_dir() / f"snapshot-{snapshot}").unlink()
            return doomed

    def expire_below(self, fence: int) -> List[int]:
        """Expires every snapshot strictly below `fence` (never the latest),
        as Paimon's snapshot expiration does: the EARLIEST hint moves first,
        then the snapshot files go. Returns the ids removed."""
        with self._lock:
            present = self.snapshot_ids()
            if not present:
                return []
            keep_from = min(fence, present[-1])
            doomed = [s for s in present if s < keep_from]
            if not doomed:
                return []
            hint = self._snapshot_dir() / "EARLIEST"
            tmp = hint.with_suffix(".tmp")
            tmp.write_text(str(keep_from))
            os.replace(tmp, hint)
            for snapshot in doomed:
                (self._snapshot_dir() / f"snapshot-{snapshot}").unlink(missing_ok=True)
            return doomed


def compact_table(table) -> int:
    """Rewrites every live file of `table` into new files and commits that as
    a COMPACT snapshot through pypaimon's commit path."""
    from pypaimon.manifest.schema.manifest_entry import ManifestEntry
    from pypaimon.table.row.generic_row import GenericRow

    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    rows = builder.new_read().to_arrow(splits)
    write_builder = table.new_batch_write_builder()
    write, commit = write_builder.new_write(), write_builder.new_commit()
    try:
        write.write_arrow(rows)
        messages = write.prepare_commit()
        store_commit = commit.file_store_commit
        entries = store_commit._collect_manifest_entries(messages)
        for split in splits:
            partition = GenericRow(list(split.partition.values), table.partition_keys_fields)
            for file in split.files:
                entries.append(
                    ManifestEntry(kind=1, partition=partition, bucket=split.bucket,
                                  total_buckets=table.total_buckets, file=file)
                )
        store_commit._try_commit(
            commit_kind="COMPACT",
            commit_identifier=int(time.time() * 1000),
            commit_entries_plan=lambda snapshot: entries,
            changelog_entries=[],
            detect_conflicts=False,
            allow_rollback=False,
        )
    finally:
        write.close()
        commit.close()
    latest = table.snapshot_manager().get_latest_snapshot()
    assert latest.commit_kind == "COMPACT", latest.commit_kind
    return latest.id


class PrimaryKeyTable:
    """A primary-key Paimon table (key `id`, one bucket) written with
    pypaimon, whose writes carry row kinds through the `op` column
    (`rowkind.field`): inserts, updates and deletes as a CDC source sends
    them. `options` may set `changelog-producer`."""

    def __init__(self, warehouse: pathlib.Path, database: str, name: str = "accounts", options=None):
        import pyarrow as pa
        from pypaimon import CatalogFactory, Schema

        self.id = f"{database}.{name}"
        self.path = str(warehouse / f"{database}.db" / name)
        catalog = CatalogFactory.create({"warehouse": str(warehouse)})
        catalog.create_database(database, True)
        self.arrow_schema = pa.schema(
            [pa.field("id", pa.int64(), nullable=False), ("balance", pa.int64()), ("op", pa.string())]
        )
        schema = Schema.from_pyarrow_schema(
            self.arrow_schema,
            primary_keys=["id"],
            options={"bucket": "1", "rowkind.field": "op", **(options or {})},
        )
        catalog.create_table(self.id, schema, False)
        self.table = catalog.get_table(self.id)

    def write(self, changes) -> int:
        """Commits `changes`, each (row kind, id, balance); returns the
        snapshot id."""
        import pyarrow as pa

        data = pa.table(
            {
                "id": [c[1] for c in changes],
                "balance": [c[2] for c in changes],
                "op": [c[0] for c in changes],
            },
            schema=self.arrow_schema,
        )
        return write_table(self.table, data)

    def content(self) -> Dict[int, int]:
        """id -> balance, as a batch read of the table shows it now."""
        builder = self.table.new_read_builder()
        rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
        return {row["id"]: row["balance"] for row in rows}


def raw_key_value_records(paths) -> list:
    """The oracle for sequence numbers: each record of a PrimaryKeyTable's
    data files at `paths` as Paimon wrote it, (row kind, _SEQUENCE_NUMBER,
    id, balance), file by file in path order, read with Arrow straight from
    the files."""
    import fastavro
    import pyarrow.parquet as pq

    def rows_of(path):
        if str(path).endswith(".avro"):  # a postpone bucket's files
            with open(path, "rb") as f:
                return list(fastavro.reader(f))
        return pq.read_table(path).to_pylist()

    kinds = {0: "+I", 1: "-U", 2: "+U", 3: "-D"}
    records = []
    for path in sorted(paths):
        for row in rows_of(path):
            records.append((kinds[row["_VALUE_KIND"]], row["_SEQUENCE_NUMBER"], row["id"], row["balance"]))
    return records


def paimon_stream(table, from_snapshot: int, with_row_kind: bool = True) -> List[dict]:
    """The oracle: what Paimon's own streaming read (pypaimon's
    StreamReadBuilder) delivers from `from_snapshot` up to the latest
    snapshot, in order, with `_row_kind` when asked."""
    import asyncio

    builder = table.new_stream_read_builder()
    if with_row_kind:
        builder = builder.with_include_row_kind()
    scan = builder.new_streaming_scan()
    scan.next_snapshot_id = from_snapshot
    scan._prefetch_enabled = False
    latest = table.snapshot_manager().get_latest_snapshot().id
    rows: List[dict] = []

    async def collect():
        stream = scan.stream()
        while scan.next_snapshot_id is None or scan.next_snapshot_id <= latest:
            plan = await asyncio.wait_for(stream.__anext__(), timeout=30)
            rows.extend(builder.new_read().to_arrow(plan.splits()).to_pylist())

    asyncio.run(collect())
    return rows


class RowSink:
    """A foreachBatch sink keeping whole rows (as dicts), one file per batch
    id, replaced on a re-run, like `Sink`."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.fail_once = set()
        self.calls: List[int] = []
        self.schemas: List[object] = []

    def __call__(self, frame, batch_id: int) -> None:
        self.calls.append(batch_id)
        self.schemas.append(frame.schema)
        if batch_id in self.fail_once:
            self.fail_once.discard(batch_id)
            raise RuntimeError(f"injected sink failure in batch {batch_id}")
        rows = [row.asDict(recursive=True) for row in frame.collect()]
        out = self.directory / f"batch-{batch_id:06d}.json"
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, default=str))
        os.replace(tmp, out)

    def batches(self) -> Dict[int, List[dict]]:
        return {
            int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in sorted(self.directory.glob("batch-*.json"))
        }

    def rows(self) -> List[dict]:
        """Every row that reached the sink, in batch order."""
        return [row for rows in self.batches().values() for row in rows]

    def ids(self) -> List[int]:
        return sorted(row["id"] for row in self.rows())


class Sink:
    """A foreachBatch sink writing each micro-batch to its own file, named by
    batch id and replaced on a re-run (an idempotent sink, as Spark's
    exactly-once contract assumes). `fail_once` injects one failure into the
    named batch ids."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.fail_once = set()
        self.calls: List[int] = []

    def __call__(self, frame, batch_id: int) -> None:
        self.calls.append(batch_id)
        if batch_id in self.fail_once:
            self.fail_once.discard(batch_id)
            raise RuntimeError(f"injected sink failure in batch {batch_id}")
        rows = [row["id"] for row in frame.select("id").collect()]
        out = self.directory / f"batch-{batch_id:06d}.json"
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, out)

    def batches(self) -> Dict[int, List[int]]:
        return {
            int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in sorted(self.directory.glob("batch-*.json"))
        }

    def ids(self) -> List[int]:
        """Every row that reached the sink, sorted (duplicates kept)."""
        return sorted(i for rows in self.batches().values() for i in rows)

    def reset(self) -> None:
        shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True)


def read_commit_log(path: pathlib.Path) -> List[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    """Polls `predicate` until it returns a truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# Every commit log the Spark tests wrote, for the latency summary at the end.
COMMIT_LOGS: List[pathlib.Path] = []


def commit_latency_summary() -> Optional[str]:
    """Median/p90/max of the CommitBatch round trips seen from commit()."""
    first, later = [], []
    for path in COMMIT_LOGS:
        latencies = [entry["latency_ms"] for entry in read_commit_log(path)]
        if latencies:
            first.append(latencies[0])
            later.extend(latencies[1:])
    if not first:
        return None

    def describe(values: List[float]) -> str:
        if not values:
            return "none"
        ordered = sorted(values)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
        return f"n={len(ordered)} median={pick(0.5):.1f} ms p90={pick(0.9):.1f} ms max={ordered[-1]:.1f} ms"

    return (
        f"commit() -> CommitBatch latency: first commit of a query: {describe(first)}; "
        f"later commits: {describe(later)}"
    )


def partition_fragment_cases() -> list:
    """testdata/spark_partition_fragments.json, each case's values decoded
    to what pypaimon gives for a partition (date, datetime, Decimal, ...)."""
    import datetime
    import decimal
    import struct

    def decode(value):
        kind = value["kind"]
        if kind == "null":
            return None
        if kind == "date":
            return datetime.date.fromisoformat(value["text"])
        if kind == "timestamp":
            return datetime.datetime.fromisoformat(value["text"])
        if kind == "decimal":
            return decimal.Decimal(value["text"])
        if kind == "double":
            return float(value["text"])
        if kind == "float":
            # pypaimon reads a FLOAT as the Python float of its 32 bits.
            return struct.unpack(">f", struct.pack(">f", float(value["text"])))[0]
        if kind == "string":
            return value["text"]
        return value["value"]

    document = json.loads((REPO / "testdata" / "spark_partition_fragments.json").read_text())
    cases = []
    for case in document["cases"]:
        cases.append({**case, "decoded": [decode(v) for v in case["values"]], "default_name": document["default_name"]})
    return cases


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def slow_puts_proxy(store_endpoint: str, delay_ms: int, *options: str) -> tuple:
    """The slow-puts proxy in front of the store (`options` as its command
    line takes them); (process, its endpoint)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(pathlib.Path(__file__).with_name("slow_puts_proxy.py")),
         str(port), store_endpoint.rsplit(":", 1)[1], str(delay_ms), *options],
    )
    wait_for(lambda: port_open(port), timeout=30, what="the slow-puts proxy")
    return process, f"http://127.0.0.1:{port}"
