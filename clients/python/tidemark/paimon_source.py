"""A Spark Structured Streaming source for Apache Paimon tables, coordinated
by tidemark.

    from tidemark.paimon_source import register
    register(spark)
    df = (spark.readStream.format("tidemark_paimon")
          .option("path", "/warehouse/db.db/orders")
          .option("consumer-id", "orders-etl")
          .option("tidemark.endpoint", "tidemark:50051")
          .load())

It behaves like Paimon's own Spark source (PR #9273) with tidemark as the
consumer store: each snapshot's splits are planned with pypaimon (a full plan
for an initial full scan, delta plans afterwards) and indexed in a stable
order; offsets are shaped like Paimon's (`snapshotId`, `index`,
`scanSnapshot`, `totalSplits`); a query without a checkpoint starts where
GetRecoveryPosition says; every `commit(end)` is a CommitBatch (a failure
fails the query); a replayed logged batch is checked with
GetRecoveryPosition before it is planned; and the query holds the consumer's
lease for its whole life. See docs/spark.md.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from typing import Dict, Iterator, List, Optional, Tuple

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles, SupportsTriggerAvailableNow

FORMAT = "tidemark_paimon"
LOG = logging.getLogger("tidemark.paimon_source")

# A CommitBatch needs a batch id that grows with the batch's end, but Spark
# does not pass its batch id to commit(end). The id is derived from the end
# offset instead: a repeated end gives the same id (DUPLICATE) and an older,
# late end a lower one (a no-op), exactly as tidemark's rule C5 expects.
SPLITS_PER_SNAPSHOT_LIMIT = 1_000_000

STARTUP_MODES = {
    "latest-full": "STARTUP_MODE_LATEST_FULL",
    "default": "STARTUP_MODE_LATEST_FULL",
    "latest": "STARTUP_MODE_LATEST",
    "from-snapshot": "STARTUP_MODE_FROM_SNAPSHOT",
    "from-snapshot-full": "STARTUP_MODE_FROM_SNAPSHOT_FULL",
}


def register(spark) -> None:
    """Makes `spark.readStream.format("tidemark_paimon")` available."""
    spark.dataSource.register(TidemarkPaimonDataSource)


class SourceOptions:
    """The source's options (Spark passes them case-insensitively)."""

    def __init__(self, options):
        def get(key: str, default: Optional[str] = None) -> Optional[str]:
            value = options.get(key)
            return default if value is None or value == "" else value

        self.path = get("path")
        if not self.path:
            raise ValueError('option "path" (the Paimon table directory) is required')
        self.path = self.path.rstrip("/")
        self.consumer_id = get("consumer-id")
        if not self.consumer_id:
            raise ValueError('option "consumer-id" is required: it names the tidemark consumer')
        self.branch = get("branch", "main")
        self.scan_mode = get("scan.mode", "latest-full").lower()
        if self.scan_mode not in STARTUP_MODES:
            raise ValueError(f'option "scan.mode" must be one of {sorted(STARTUP_MODES)}, not {self.scan_mode!r}')
        self.scan_snapshot_id = int(get("scan.snapshot-id", "0"))
        self.ignore_progress = get("consumer.ignore-progress", "false").lower() == "true"
        self.max_splits = int(get("max-splits-per-batch", "0"))
        self.endpoint = get("tidemark.endpoint", "127.0.0.1:50051")
        self.token = get("tidemark.token") or os.environ.get("TIDEMARK_TOKEN")
        self.tls_ca = get("tidemark.tls-ca")
        self.tls_cert = get("tidemark.tls-cert")
        self.tls_key = get("tidemark.tls-key")
        self.lease_ttl = float(get("tidemark.lease-ttl", "30"))
        self.holder = get("tidemark.holder")
        self.clamp = get("tidemark.on-expired", "fail").lower() == "clamp"
        self.commit_log = get("tidemark.commit-log")
        self.table_id = get("tidemark.table") or table_id_from_path(self.path)


def table_id_from_path(path: str) -> str:
    """`<warehouse>/<db>.db/<table>` -> `db.table` (tidemark's table id)."""
    table = os.path.basename(path)
    database = os.path.basename(os.path.dirname(path))
    if database.endswith(".db"):
        database = database[: -len(".db")]
    return f"{database}.{table}"


def load_table(path: str, branch: str):
    """The pypaimon table at `path` (on `branch`)."""
    from pypaimon.table.file_store_table import FileStoreTable

    if branch == "main":
        return FileStoreTable.from_path(path)
    from pypaimon import CatalogFactory

    database_dir = os.path.dirname(path)
    catalog = CatalogFactory.create({"warehouse": os.path.dirname(database_dir)})
    return catalog.get_table(f"{table_id_from_path(path)}$branch_{branch}")


def spark_ddl(table) -> str:
    """The table's schema as a Spark DDL string."""
    import pyarrow as pa
    from pypaimon.schema.data_types import PyarrowFieldParser

    arrow = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)

    def spark_type(t) -> str:
        if pa.types.is_int8(t):
            return "TINYINT"
        if pa.types.is_int16(t):
            return "SMALLINT"
        if pa.types.is_int32(t):
            return "INT"
        if pa.types.is_int64(t):
            return "BIGINT"
        if pa.types.is_float32(t):
            return "FLOAT"
        if pa.types.is_float64(t):
            return "DOUBLE"
        if pa.types.is_boolean(t):
            return "BOOLEAN"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "STRING"
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return "BINARY"
        if pa.types.is_date32(t):
            return "DATE"
        if pa.types.is_timestamp(t):
            return "TIMESTAMP" if t.tz else "TIMESTAMP_NTZ"
        if pa.types.is_decimal(t):
            return f"DECIMAL({t.precision},{t.scale})"
        raise TypeError(f"unsupported column type {t}")

    return ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in arrow)


class TidemarkPaimonDataSource(DataSource):
    """`spark.readStream.format("tidemark_paimon")`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        opts = SourceOptions(self.options)
        return spark_ddl(load_table(opts.path, opts.branch))

    def streamReader(self, schema):
        return TidemarkPaimonStreamReader(SourceOptions(self.options))


class SplitsPartition(InputPartition):
    """Some splits of one snapshot's plan, read by a Spark task."""

    def __init__(self, path: str, branch: str, splits: list):
        super().__init__(len(splits))
        self.path = path
        self.branch = branch
        self.splits = splits


# Offsets: (snapshotId, index, scanSnapshot, totalSplits) like Paimon's Spark
# offset, plus the query's holder, so a restarted query finds its identity in
# its own checkpoint (Spark's Python API does not expose the query id).
def make_offset(snapshot_id: int, index: int, full: bool, total: Optional[int], holder: str) -> dict:
    offset = {"snapshotId": snapshot_id, "index": index, "scanSnapshot": full}
    if total is not None:
        offset["totalSplits"] = total
    offset["holder"] = holder
    return offset


def position(offset: dict) -> Tuple[int, int, bool, Optional[int]]:
    return (offset["snapshotId"], offset["index"], offset["scanSnapshot"], offset.get("totalSplits"))


class QueryFailed(RuntimeError):
    """Raised to fail the query with tidemark's explanation."""


class TidemarkPaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The runner-side reader. State (client, lease, plans) lives only in the
    runner process; `read` runs on pickled copies and uses the partitions."""

    _RUNNER_STATE = ("_client", "_lease", "_keeper", "_table", "_plans", "_lock")

    def __init__(self, options: SourceOptions):
        self.opts = options
        self.holder: Optional[str] = options.holder
        self._client = None
        self._lease = None
        self._keeper = None
        self._table = None
        self._plans: Dict[Tuple[int, bool], list] = {}
        self._lock = threading.Lock()
        self._replay_checked = False
        self._planned_end: Optional[Tuple] = None
        self._initial_offset: Optional[dict] = None
        self._target_snapshot: Optional[int] = None
        self.commit_latencies: List[float] = []

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in self._RUNNER_STATE:
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in self._RUNNER_STATE:
            setattr(self, name, None)
        self._plans = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ tidemark

    def _connect(self):
        if self._client is None:
            from tidemark.client import Client

            def read(path):
                if not path:
                    return None
                with open(path, "rb") as f:
                    return f.read()

            self._client = Client(
                self.opts.endpoint,
                token=self.opts.token,
                ca=read(self.opts.tls_ca),
                cert=read(self.opts.tls_cert),
                key=read(self.opts.tls_key),
            )
        return self._client

    def _ensure_lease(self, holder: Optional[str]) -> None:
        """Takes the consumer's lease for the query's life (once per runner)."""
        if self._lease is not None:
            if self._keeper is not None and self._keeper.lost.is_set():
                raise QueryFailed(
                    f"tidemark lease on consumer {self.opts.consumer_id!r} was lost "
                    f"({self._keeper.error}); another query owns it now, so this one stops"
                )
            return
        self.holder = holder or self.holder or f"spark-{uuid.uuid4()}"
        client = self._connect()
        from tidemark.errors import TidemarkError

        try:
            response = client.acquire_lease(
                self.opts.table_id,
                self.opts.consumer_id,
                self.holder,
                branch=self.opts.branch,
                ttl=self.opts.lease_ttl,
            )
        except TidemarkError as error:
            if error.reason == "LEASE_HELD":
                raise QueryFailed(
                    f"tidemark LEASE_HELD: consumer {self.opts.consumer_id!r} of {self.opts.table_id} is held "
                    "by another query "
                    f"(holder {error.metadata.get('holder')!r}, {error.metadata.get('remaining_ms')} ms left): "
                    "one query per consumer. Stop the other query, or use another consumer-id"
                ) from error
            raise
        self._lease = response.lease
        self._keeper = client.keep_lease(self._lease)
        self._install_release_on_sigterm()
        LOG.info("tidemark lease on %s/%s, epoch %s, holder %s", self.opts.table_id,
                 self.opts.consumer_id, self._lease.epoch, self.holder)

    def _install_release_on_sigterm(self) -> None:
        # Spark stops the runner with SIGTERM rather than calling stop();
        # release the lease then so the next query starts at once (the
        # lease would expire on its own anyway).
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.stop()
            finally:
                if callable(previous) and previous not in (signal.SIG_IGN, signal.SIG_DFL):
                    previous(signum, frame)
                raise SystemExit(0)

        try:
            signal.signal(signal.SIGTERM, on_term)
        except ValueError:
            pass

    # ------------------------------------------------------------ Paimon

    def _paimon(self):
        if self._table is None:
            self._table = load_table(self.opts.path, self.opts.branch)
        return self._table

    def _snapshot_range(self) -> Tuple[int, int]:
        sm = self._paimon().snapshot_manager()
        latest = sm.get_latest_snapshot()
        if latest is None:
            return 0, 0
        earliest = sm.try_get_earliest_snapshot()
        return (earliest.id if earliest is not None else 1), latest.id

    def _latest(self) -> int:
        latest = self._snapshot_range()[1]
        if self._target_snapshot is not None:
            return min(latest, self._target_snapshot)
        return latest

    def _plan(self, snapshot_id: int, full: bool) -> list:
        """The splits of one snapshot's plan (full or delta), in a stable order."""
        key = (snapshot_id, full)
        with self._lock:
            if key in self._plans:
                return self._plans[key]
        from pypaimon.read.streaming_table_scan import AsyncStreamingTableScan

        table = self._paimon()
        snapshot = table.snapshot_manager().get_snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise QueryFailed(
                f"snapshot {snapshot_id} of {self.opts.table_id} no longer exists; it was expired before this "
                "query read it. Check retention against tidemark's fence, then restart"
            )
        scan = AsyncStreamingTableScan(table, prefetch_enabled=False)
        plan = scan._create_initial_plan(snapshot) if full else scan._create_delta_plan(snapshot)
        splits = sorted(plan.splits(), key=split_sort_key)
        if len(splits) >= SPLITS_PER_SNAPSHOT_LIMIT:
            raise QueryFailed(f"snapshot {snapshot_id} has {len(splits)} splits; at most 999999 are supported")
        with self._lock:
            if len(self._plans) > 64:
                self._plans.clear()
            self._plans[key] = splits
        return splits

    def _next_position(self, snapshot_id: int, index: int, full: bool, latest: int):
        """The split after (snapshot_id, index): (snapshot, index, full,
        total) or None when there is none yet. Empty snapshots are skipped."""
        if snapshot_id <= latest:
            splits = self._plan(snapshot_id, full)
            if index + 1 < len(splits):
                return snapshot_id, index + 1, full, len(splits)
        candidate = snapshot_id + 1
        while candidate <= latest:
            splits = self._plan(candidate, False)
            if splits:
                return candidate, 0, False, len(splits)
            candidate += 1
        return None

    # ------------------------------------------------------------ Spark API

    def initialOffset(self) -> dict:
        # A query without a checkpoint: a new holder (kept in our offsets),
        # the lease, and the start tidemark plans (R1-R3). Spark calls this
        # more than once and uses the answers for different steps, so the
        # first answer is kept: asking again after a new snapshot landed
        # would give a later full-scan start and silently skip splits.
        if self._initial_offset is not None:
            return dict(self._initial_offset)
        self._ensure_lease(self.holder)
        from tidemark.v1 import coordinator_pb2

        earliest, latest = self._snapshot_range()
        response = self._connect().get_recovery_position(
            self.opts.table_id,
            self.opts.consumer_id,
            earliest,
            latest,
            branch=self.opts.branch,
            startup_mode=coordinator_pb2.StartupMode.Value(STARTUP_MODES[self.opts.scan_mode]),
            snapshot_id=self.opts.scan_snapshot_id if self.opts.scan_mode.startswith("from-snapshot") else 0,
            ignore_progress=self.opts.ignore_progress,
            lease=self._lease,
            clamp_to_earliest=self.opts.clamp,
        )
        for warning in response.warnings:
            LOG.warning("tidemark: %s", warning)
        start = response.start
        LOG.info("starting %s/%s at snapshot %s (%s, %s)", self.opts.table_id, self.opts.consumer_id,
                 start.snapshot_id, "full" if start.scan_snapshot else "delta",
                 coordinator_pb2.RecoverySource.Name(response.source))
        self._initial_offset = make_offset(start.snapshot_id, -1, start.scan_snapshot, None, self.holder)
        return dict(self._initial_offset)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_splits > 0:
            return ReadMaxFiles(self.opts.max_splits)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target_snapshot = self._snapshot_range()[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._ensure_lease(start.get("holder"))
        if isinstance(limit, ReadMaxFiles):
            budget = limit.max_files
        elif isinstance(limit, ReadAllAvailable):
            budget = None
        else:
            budget = self.opts.max_splits or None
        latest = self._latest()
        snapshot_id, index, full, _ = position(start)
        end = None
        taken = 0
        while budget is None or taken < budget:
            step = self._next_position(snapshot_id, index, full, latest)
            if step is None:
                break
            snapshot_id, index, full, total = step
            end = make_offset(snapshot_id, index, full, total, self.holder)
            taken += 1
        if end is None:
            return start
        self._planned_end = position(end)
        return end

    def _positions(self, start: dict, end: dict) -> List[Tuple[int, int, bool]]:
        """Every split in (start, end]."""
        snapshot_id, index, full, _ = position(start)
        stop = (end["snapshotId"], end["index"])
        if (snapshot_id, index) > stop:
            raise QueryFailed(f"the batch start {start} is after its end {end}; refusing to skip splits")
        out = []
        while (snapshot_id, index) < stop:
            step = self._next_position(snapshot_id, index, full, end["snapshotId"])
            if step is None:
                raise QueryFailed(f"cannot reach the batch end {end} from {start}: snapshots are missing")
            snapshot_id, index, full, _ = step
            out.append((snapshot_id, index, full))
        return out

    def _check_replay(self, start: dict, end: dict) -> dict:
        """R4: before planning a batch this runner did not plan itself (the
        logged batch Spark replays after a restart), ask tidemark whether it
        can be replayed exactly; fail with its guidance if not."""
        from tidemark.client import offset as pb_offset
        from tidemark.errors import TidemarkError
        from tidemark.v1 import coordinator_pb2

        earliest, latest = self._snapshot_range()
        try:
            response = self._connect().get_recovery_position(
                self.opts.table_id,
                self.opts.consumer_id,
                earliest,
                latest,
                branch=self.opts.branch,
                startup_mode=coordinator_pb2.StartupMode.Value(STARTUP_MODES[self.opts.scan_mode]),
                snapshot_id=self.opts.scan_snapshot_id if self.opts.scan_mode.startswith("from-snapshot") else 0,
                ignore_progress=self.opts.ignore_progress,
                checkpoint=(pb_offset(*position(start)), pb_offset(*position(end))),
                lease=self._lease,
                clamp_to_earliest=self.opts.clamp,
            )
        except TidemarkError as error:
            if error.reason in ("REPLAY_SCAN_MISMATCH", "REPLAY_RANGE_EXPIRED", "POSITION_EXPIRED"):
                raise QueryFailed(f"tidemark {error.reason}: {error.message}") from error
            raise
        if response.source == coordinator_pb2.RECOVERY_SOURCE_CHECKPOINT:
            return start
        for warning in response.warnings:
            LOG.warning("tidemark: %s", warning)
        s = response.start
        return make_offset(s.snapshot_id, s.index, s.scan_snapshot,
                           s.total_splits if s.HasField("total_splits") else None, self.holder)

    def partitions(self, start: dict, end: dict) -> List[InputPartition]:
        self._ensure_lease(start.get("holder"))
        if not self._replay_checked:
            # The first batch this runner builds is either one it just
            # planned (latestOffset returned its end) or the logged batch
            # Spark replays after a restart: only the latter needs R4.
            if position(end) != self._planned_end:
                start = self._check_replay(start, end)
            self._replay_checked = True
        partitions = []
        for snapshot_id, index, full in self._positions(start, end):
            split = self._plan(snapshot_id, full)[index]
            partitions.append(SplitsPartition(self.opts.path, self.opts.branch, [split]))
        return partitions

    def read(self, partition: SplitsPartition) -> Iterator:
        table = load_table(partition.path, partition.branch)
        reader = table.new_read_builder().new_read()
        for batch in reader.to_arrow(partition.splits).to_batches():
            yield batch

    def commit(self, end: dict) -> None:
        import time

        from tidemark.client import offset as pb_offset

        self._ensure_lease(end.get("holder"))
        snapshot_id, index, full, total = position(end)
        batch_id = snapshot_id * SPLITS_PER_SNAPSHOT_LIMIT + (index + 1)
        started = time.perf_counter()
        response = self._connect().commit_batch(
            self._lease, batch_id, pb_offset(snapshot_id, index, full, total), latest_snapshot=self._latest()
        )
        latency = time.perf_counter() - started
        self.commit_latencies.append(latency)
        for warning in response.warnings:
            LOG.warning("tidemark: %s", warning)
        from tidemark.v1 import coordinator_pb2

        outcome = coordinator_pb2.CommitOutcome.Name(response.outcome)
        LOG.info("committed %s to %s/%s: %s in %.1f ms", end, self.opts.table_id, self.opts.consumer_id,
                 outcome, latency * 1e3)
        if self.opts.commit_log:
            self._log_commit(end, batch_id, outcome, response, latency)

    def _log_commit(self, end: dict, batch_id: int, outcome: str, response, latency: float) -> None:
        """Appends one JSON line per commit (an audit trail of what the query
        reported, with the round trip as seen from commit())."""
        import json

        record = {
            "end": {k: v for k, v in end.items() if k != "holder"},
            "batch_id": batch_id,
            "outcome": outcome,
            "next_snapshot": response.next_snapshot if response.HasField("next_snapshot") else None,
            "latency_ms": round(latency * 1e3, 3),
        }
        with open(self.opts.commit_log, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

    def stop(self) -> None:
        keeper, lease = self._keeper, self._lease
        self._keeper, self._lease = None, None
        if keeper is not None and lease is not None:
            try:
                keeper.release()
                LOG.info("released the tidemark lease on %s/%s", self.opts.table_id, self.opts.consumer_id)
            except Exception as error:  # the lease expires on its own
                LOG.warning("could not release the tidemark lease: %s", error)


def split_sort_key(split) -> tuple:
    """Paimon's Spark source orders a plan's splits by (partition, bucket)."""
    partition = getattr(split, "partition", None)
    values = tuple(str(v) for v in getattr(partition, "values", []) or []) if partition is not None else ()
    files = getattr(split, "files", None) or []
    first = min((getattr(f, "file_name", "") for f in files), default="")
    return values, getattr(split, "bucket", 0), first
