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
consumer store: each snapshot's splits are planned as Paimon's streaming read
plans them (paimon_plan.py: a full plan for an initial full scan, then APPEND
deltas, changelog files, overwrites when asked; COMPACT snapshots deliver
nothing) and indexed in a stable order; offsets are shaped like Paimon's (`snapshotId`, `index`,
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
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from tidemark import paimon_limits

from tidemark.paimon_plan import (
    ROWKIND_COLUMN,
    Planned,
    Planner,
    ReadOptions,
    changelog_decoupled,
    first_snapshot_at_or_after,
    fingerprint,
    parse_duration_ms,
    query_fields,
    read_planned,
    spark_schema,
)

FORMAT = "tidemark_paimon"
LOG = logging.getLogger("tidemark.paimon_source")

# A CommitBatch needs a batch id that grows with the batch's end, but Spark
# does not pass its batch id to commit(end). The id is derived from the end
# offset instead: a repeated end gives the same id (DUPLICATE) and an older,
# late end a lower one (a no-op), exactly as tidemark's rule C5 expects.
SPLITS_PER_SNAPSHOT_LIMIT = 1_000_000

# Spark's own sizing of file-source partitions (`spark.sql.files.maxPartitionBytes`,
# `spark.sql.files.openCostInBytes`).
PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024

STARTUP_MODES = {
    "latest-full": "STARTUP_MODE_LATEST_FULL",
    "latest": "STARTUP_MODE_LATEST",
    "from-snapshot": "STARTUP_MODE_FROM_SNAPSHOT",
    "from-snapshot-full": "STARTUP_MODE_FROM_SNAPSHOT_FULL",
    "from-timestamp": "STARTUP_MODE_FROM_SNAPSHOT",
    # A full scan of the latest compaction (the latest snapshot without one).
    "compacted-full": "STARTUP_MODE_FROM_SNAPSHOT_FULL",
}
# Paimon's `full` is `latest-full` (CoreOptions.startupMode).
SCAN_MODES = sorted([*STARTUP_MODES, "default", "full"])

# Options of the pinned Paimon that would change which rows a streaming read
# delivers, or in what order, and that this source does not implement: each
# is refused by name rather than ignored (every other Paimon or Spark
# connector option is accepted, as Paimon accepts them). The value says why
# and what to do instead.
REFUSED_OPTIONS = {
    "scan.tag-name": "Paimon's streaming read cannot start from a tag either (\"Cannot scan from tag in streaming "
    "mode\"); start from the tag's snapshot with scan.mode=from-snapshot-full and scan.snapshot-id",
    "scan.version": "Paimon's streaming read cannot start from a tag or a watermark; use scan.snapshot-id",
    "scan.watermark": "Paimon's streaming read cannot start from a watermark either; use scan.snapshot-id or "
    "scan.timestamp-millis",
    "scan.bounded.watermark": "a stream that ends at a watermark is not implemented",
    "scan.file-creation-time-millis": "starting from file creation times is not implemented; use "
    "scan.timestamp-millis",
    "scan.creation-time-millis": "starting from a creation time is not implemented; use scan.timestamp-millis",
    "scan.bucket": "reading a single bucket is not implemented",
    "incremental-between": "incremental reads are batch reads in Paimon (\"Cannot read incremental in streaming "
    "mode\")",
    "incremental-between-timestamp": "incremental reads are batch reads in Paimon",
    "incremental-between-scan-mode": "incremental reads are batch reads in Paimon",
    "incremental-between-tag-to-snapshot": "incremental reads are batch reads in Paimon",
    "incremental-to-auto-tag": "incremental reads are batch reads in Paimon",
}
# Refused only when turned on (they drop files that cannot be read).
REFUSED_WHEN_TRUE = {
    "scan.ignore-corrupt-files": "skipping corrupt files would lose rows without a word",
    "scan.ignore-lost-files": "skipping lost files would lose rows without a word",
}
# Scan modes Paimon refuses in a streaming read, or this source does not
# implement.
REFUSED_SCAN_MODES = {
    "latest-delta": "Paimon allows 'latest-delta' only in batch reads",
    "incremental": "Paimon allows 'incremental' only in batch reads",
    "from-file-creation-time": "not implemented; use from-timestamp",
    "from-creation-timestamp": "not implemented; use from-timestamp",
}

# Source options a table may also set as a property (the query's wins), as
# Paimon reads dynamic options over table options.
TABLE_DEFAULTS = (
    "consumer-id",
    "scan.mode",
    "scan.snapshot-id",
    "scan.timestamp-millis",
    "scan.timestamp",
    "consumer.ignore-progress",
    "streaming.read.snapshot.delay",
    *(key.lower() for key in paimon_limits.KEYS),
    *REFUSED_OPTIONS,
    *REFUSED_WHEN_TRUE,
)
# Read options passed on to the planner and reader (table options unless
# the query sets them).
READ_OPTIONS = ("streaming-read-overwrite", "streaming-read-append-overwrite", "read.changelog", "scan.partitions")
# Split sizing and read batching the query may override for its reads.
SPLIT_OPTIONS = ("source.split.target-size", "source.split.open-file-cost", "read.batch-size")
# Storage options passed to pypaimon's file IO (S3 endpoint, credentials...).
STORAGE_PREFIXES = ("fs.", "s3.", "oss.", "hadoop.")


def register(spark) -> None:
    """Makes `spark.readStream.format("tidemark_paimon")` available."""
    spark.dataSource.register(TidemarkPaimonDataSource)


class SourceOptions:
    """The source's options (Spark passes them case-insensitively). Options a
    table may set as properties are resolved against it in `resolve`."""

    def __init__(self, options):
        raw = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None and str(v) != ""}
        self.raw = raw

        def get(key: str, default: Optional[str] = None) -> Optional[str]:
            return raw.get(key, default)

        self.path = get("path")
        if not self.path:
            raise ValueError('option "path" (the Paimon table directory) is required')
        self.path = self.path.rstrip("/")
        self.branch = get("branch", "main")
        self.storage = {k: v for k, v in raw.items() if k.startswith(STORAGE_PREFIXES)}
        self.endpoint = get("tidemark.endpoint", "127.0.0.1:50051")
        self.token = get("tidemark.token") or os.environ.get("TIDEMARK_TOKEN")
        self.tls_ca = get("tidemark.tls-ca")
        self.tls_cert = get("tidemark.tls-cert")
        self.tls_key = get("tidemark.tls-key")
        self.lease_ttl = float(get("tidemark.lease-ttl", "30"))
        # How long a call keeps retrying a tidemark that is away (a restart),
        # and each attempt's deadline.
        self.retry_budget = float(get("tidemark.retry-budget", "30"))
        self.call_timeout = float(get("tidemark.call-timeout", "5"))
        self.holder = get("tidemark.holder")
        self.clamp = get("tidemark.on-expired", "fail").lower() == "clamp"
        self.commit_log = get("tidemark.commit-log")
        # A column carrying the lease epoch each row was read under, so a
        # sink can refuse a batch from a lease that was taken over.
        self.epoch_column = get("tidemark.epoch-column")
        # How much of a batch one Spark task reads, and into how many tasks
        # at least a batch is spread (see group_splits).
        partition_size = get("tidemark.partition-size")
        self.partition_bytes = parse_size("tidemark.partition-size", partition_size) if partition_size else PARTITION_BYTES
        min_partitions = get("tidemark.min-partitions")
        self.min_partitions = (
            parse_count("tidemark.min-partitions", min_partitions) if min_partitions else default_min_partitions()
        )
        self.table_id = get("tidemark.table") or table_id_from_path(self.path)
        self.resolved = False

    def resolve(self, table) -> "SourceOptions":
        """Fills what the query left unset from the table's properties, and
        resolves `scan.mode=default` as Paimon does: `from-timestamp` when
        `scan.timestamp-millis` is set, `from-snapshot` when
        `scan.snapshot-id` is, `latest-full` otherwise."""
        properties = {str(k).lower(): str(v) for k, v in table.options.options.to_map().items()}

        def get(key: str, default: Optional[str] = None) -> Optional[str]:
            if key in self.raw:
                return self.raw[key]
            if key in TABLE_DEFAULTS and properties.get(key, "") != "":
                return properties[key]
            return default

        self.consumer_id = get("consumer-id")
        if not self.consumer_id:
            raise ValueError('option "consumer-id" is required (or the table property): it names the tidemark consumer')
        for key, why in REFUSED_OPTIONS.items():
            if get(key) is not None:
                raise ValueError(f'option "{key}" is not supported by tidemark_paimon: {why}')
        for key, why in REFUSED_WHEN_TRUE.items():
            if (get(key) or "").strip().lower() == "true":
                raise ValueError(f'option "{key}" is not supported by tidemark_paimon: {why}')
        self.scan_mode = get("scan.mode", "default").lower()
        if self.scan_mode in REFUSED_SCAN_MODES:
            raise ValueError(f'scan.mode "{self.scan_mode}" is not supported: {REFUSED_SCAN_MODES[self.scan_mode]}')
        if self.scan_mode not in SCAN_MODES:
            raise ValueError(f'option "scan.mode" must be one of {SCAN_MODES}, not {self.scan_mode!r}')
        if self.scan_mode == "full":
            self.scan_mode = "latest-full"
        snapshot_id = get("scan.snapshot-id")
        timestamp = get("scan.timestamp-millis")
        if timestamp is None and get("scan.timestamp") is not None:
            timestamp = str(parse_scan_timestamp(get("scan.timestamp")))
        if self.scan_mode == "default":
            self.scan_mode = "from-timestamp" if timestamp else "from-snapshot" if snapshot_id else "latest-full"
        self.scan_snapshot_id = int(snapshot_id or "0")
        self.scan_timestamp_millis = int(timestamp) if timestamp else None
        if self.scan_mode == "from-timestamp" and self.scan_timestamp_millis is None:
            raise ValueError('scan.mode "from-timestamp" needs option "scan.timestamp-millis" or "scan.timestamp"')
        delay = get("streaming.read.snapshot.delay")
        self.snapshot_delay_ms = parse_duration_ms("streaming.read.snapshot.delay", delay) if delay else 0
        if self.scan_mode.startswith("from-snapshot") and self.scan_snapshot_id < 1:
            raise ValueError(f'scan.mode "{self.scan_mode}" needs option "scan.snapshot-id" (>= 1)')
        self.ignore_progress = (get("consumer.ignore-progress", "false") or "false").lower() == "true"
        self.limits = paimon_limits.TriggerLimits.from_options(get)
        self.read_overrides = {k: self.raw[k] for k in READ_OPTIONS if k in self.raw}
        self.split_overrides = {k: self.raw[k] for k in SPLIT_OPTIONS if k in self.raw}
        self.resolved = True
        return self


def parse_size(key: str, text: str) -> int:
    """A size as Paimon spells one (`128 mb`, `1 gb`, `0`) in bytes."""
    import re

    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}
    if not match or match.group(2).lower() not in units:
        raise ValueError(f'option "{key}" must be a size such as "128 mb", not {text!r}')
    return int(match.group(1)) * units[match.group(2).lower()]


def parse_count(key: str, text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f'option "{key}" must be a whole number of at least 1, not {text!r}')
    return value


def default_min_partitions() -> int:
    """The CPUs the query's driver may use: Spark's own default parallelism
    in local mode (`local[*]`); a Python source cannot read Spark's conf, so
    on a cluster `tidemark.min-partitions` says how many cores read."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_scan_timestamp(text: str) -> int:
    """`scan.timestamp` (`yyyy-MM-dd HH:mm:ss[.SSS]`, or only the date, in
    the runner's local time zone, as Java DateTimeUtils.parseTimestampData
    reads it with the JVM's default zone) in epoch milliseconds."""
    import datetime

    value = text.strip().replace("T", " ")
    for layout in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            parsed = datetime.datetime.strptime(value, layout)
        except ValueError:
            continue
        return int(parsed.astimezone().timestamp() * 1000)
    raise ValueError(f'option "scan.timestamp" must look like "2026-12-03 10:15:00" (local time), not {text!r}')


def table_id_from_path(path: str) -> str:
    """`<warehouse>/<db>.db/<table>` -> `db.table` (tidemark's table id)."""
    table = os.path.basename(path)
    database = os.path.basename(os.path.dirname(path))
    if database.endswith(".db"):
        database = database[: -len(".db")]
    return f"{database}.{table}"


def load_table(path: str, branch: str, storage: Optional[dict] = None, split_overrides: Optional[dict] = None):
    """The pypaimon table at `path` (on `branch`), opened with the storage
    options, with the query's split sizing."""
    from pypaimon.table.file_store_table import FileStoreTable

    if branch == "main":
        table = FileStoreTable.from_path(path, dict(storage or {}))
    else:
        from pypaimon import CatalogFactory

        database_dir = os.path.dirname(path)
        catalog = CatalogFactory.create({"warehouse": os.path.dirname(database_dir), **(storage or {})})
        table = catalog.get_table(f"{table_id_from_path(path)}$branch_{branch}")
    if split_overrides:
        table = table.copy_without_time_travel(dict(split_overrides))
    return table


def open_source(options: SourceOptions):
    """The table, the query's options resolved against it, and how its
    stream is read."""
    table = load_table(options.path, options.branch, options.storage)
    options.resolve(table)
    if options.split_overrides:
        table = load_table(options.path, options.branch, options.storage, options.split_overrides)
    return table, ReadOptions(table, options.read_overrides)


class TidemarkPaimonDataSource(DataSource):
    """`spark.readStream.format("tidemark_paimon")`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        options = SourceOptions(self.options)
        table, read_options = open_source(options)
        schema = spark_schema(table, read_options)
        if options.epoch_column:
            from pyspark.sql.types import LongType, StructField, StructType

            if options.epoch_column in schema.names:
                raise ValueError(f"tidemark.epoch-column {options.epoch_column!r} is already a column of the table")
            schema = StructType(list(schema.fields) + [StructField(options.epoch_column, LongType(), False)])
        return schema

    def streamReader(self, schema):
        return TidemarkPaimonStreamReader(SourceOptions(self.options), schema)


class SplitsPartition(InputPartition):
    """Consecutive planned splits of a batch, read one after the other by
    one Spark task."""

    def __init__(self, options: SourceOptions, planned: List[Planned], epoch: int):
        super().__init__(1)
        self.options = options
        self.planned = planned
        # The lease epoch the batch was planned under.
        self.epoch = epoch


def group_splits(
    planned: List[Planned], target_bytes: int, min_partitions: int = 1, keep_buckets_together: bool = False
) -> List[List[Planned]]:
    """A batch's splits as Spark partitions, each reading its splits in the
    batch's order. Each split weighs its data files' bytes plus Spark's 4 MB
    open cost.

    As Paimon's Spark batch scan packs (Java `BinPackingSplits`
    `computeMaxSplitBytes`: at most `spark.sql.files.maxPartitionBytes`, and
    the total over Spark's default parallelism when that is less), there are
    `max(min_partitions, total / target_bytes)` partitions of about equal
    weight, never more than there are splits: a small batch still keeps every
    core busy, and a large one is read about `target_bytes` per task.

    With `keep_buckets_together` (tables whose buckets have an order: see
    `ReadOptions.ordered_buckets`) every split of one (partition, bucket) is
    read by one task, in order, so a key's changes from several snapshots of
    one batch reach a sink in commit order even when it writes task by task;
    a bucket is then never cut, whatever its size. Otherwise partitions are
    runs of consecutive splits.

    Paimon's Spark streaming source makes one partition per split; a task of
    a Python source costs about 0.2 s of Spark's and PySpark's own work
    before its first row, which one partition per small split pays again
    and again (docs/spark.md, "Throughput"). `target_bytes` 0: one split per
    partition."""
    if target_bytes <= 0:
        return [[split] for split in planned]
    weights = [split.stats()[1] + OPEN_COST_BYTES for split in planned]
    total = sum(weights)
    wanted = max(min_partitions, -(-total // target_bytes))
    if keep_buckets_together:
        lanes: Dict[tuple, List[int]] = {}
        for index, split in enumerate(planned):
            lanes.setdefault(split.lane(), []).append(index)
        count = min(len(lanes), wanted)
        # The heaviest bucket first, each to the least loaded task (ties to
        # the first), then each task's splits in the batch's order.
        loads = [0] * count
        tasks: List[List[int]] = [[] for _ in range(count)]
        by_weight = sorted(lanes.values(), key=lambda lane: (-sum(weights[i] for i in lane), lane[0]))
        for lane in by_weight:
            task = loads.index(min(loads))
            tasks[task] += lane
            loads[task] += sum(weights[i] for i in lane)
        ordered = sorted((sorted(task) for task in tasks if task), key=lambda task: task[0])
        return [[planned[i] for i in task] for task in ordered]
    count = min(len(planned), wanted)
    if count == 0:
        return []
    share = total / count
    runs: List[List[Planned]] = [[] for _ in range(count)]
    before = 0
    for split, weight in zip(planned, weights):
        # By where the split's middle falls: runs stay consecutive, and each
        # is within half a split of an equal share.
        runs[min(count - 1, int((before + weight / 2) // share))].append(split)
        before += weight
    return [run for run in runs if run]


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

    _RUNNER_STATE = ("_client", "_lease", "_keeper", "_table", "_planner", "_plans", "_lock", "_changelog_decoupled")

    def __init__(self, options: SourceOptions, schema=None):
        self.opts = options
        self.schema = schema
        self.holder: Optional[str] = options.holder
        self._planner = None
        self._schema_id: Optional[int] = None
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
        # When latestOffset last returned a new batch (Paimon's
        # lastTriggerMillis; 0: never, so the first batch is never held back).
        self._last_batch_ms = 0
        self.commit_latencies: List[float] = []
        # Resolves the options against the table (its properties are
        # defaults) before anything names the consumer.
        self._paimon()
        # The query's columns, by Paimon field id, as of its start: rows of
        # later schemas are read as these (read_planned).
        self._fields = None
        if schema is not None:
            added = {ROWKIND_COLUMN} if self._planner.options.read_changelog else set()
            if options.epoch_column:
                added.add(options.epoch_column)
            self._fields = query_fields(self._table, schema, leave_out=added)

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

            from tidemark.client import RetryPolicy

            self._client = Client(
                self.opts.endpoint,
                token=self.opts.token,
                ca=read(self.opts.tls_ca),
                cert=read(self.opts.tls_cert),
                key=read(self.opts.tls_key),
                timeout=self.opts.call_timeout,
                retry=RetryPolicy(budget=self.opts.retry_budget),
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

        import time

        sent_at = time.monotonic()
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
        self._keeper = client.keep_lease(self._lease, sent_at=sent_at)
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
            self._table, read_options = open_source(self.opts)
            self._planner = Planner(self._table, read_options)
            if self._schema_id is None:
                self._schema_id = self._table.table_schema.id
            # Whether changelogs outlive snapshots here (the table's options,
            # the query's over them): fixed for the table this runner opened.
            self._changelog_decoupled = changelog_decoupled(
                {**self._table.options.options.to_map(), **self.opts.raw}
            )
        return self._table

    def _snapshot_range(self) -> Tuple[int, int]:
        sm = self._paimon().snapshot_manager()
        latest = sm.get_latest_snapshot()
        if latest is None:
            return 0, 0
        earliest = sm.try_get_earliest_snapshot()
        return (earliest.id if earliest is not None else 1), latest.id

    def _decoupled(self) -> bool:
        self._paimon()
        return self._changelog_decoupled

    def _recovery_position(self, **kwargs):
        """GetRecoveryPosition with what this query sees of the table: its
        snapshots and, when changelogs outlive them, its earliest changelog
        (from which a delta read can still start; SPEC R2)."""
        earliest, latest = self._snapshot_range()
        decoupled = self._decoupled()
        # The earliest long-lived changelog (changelog/changelog-N, kept
        # after snapshot N expired).
        earliest_changelog = None
        if decoupled:
            earliest_changelog = self._paimon().changelog_manager().earliest_long_lived_changelog_id()
        return self._connect().get_recovery_position(
            self.opts.table_id,
            self.opts.consumer_id,
            earliest,
            latest,
            branch=self.opts.branch,
            earliest_changelog=earliest_changelog,
            changelog_decoupled=decoupled,
            **kwargs,
        )

    def _latest(self) -> int:
        earliest, latest = self._snapshot_range()
        if self._target_snapshot is not None:
            latest = min(latest, self._target_snapshot)
        if self.opts.snapshot_delay_ms and latest > 0:
            # streaming.read.snapshot.delay: a snapshot is read only once it
            # is that old (Java NextSnapshotFetcher / DataTableStreamScan).
            import time

            manager = self._paimon().snapshot_manager()
            now_ms = int(time.time() * 1000)
            while latest >= earliest:
                snapshot = manager.get_snapshot_by_id(latest)
                if snapshot is None or snapshot.time_millis <= now_ms - self.opts.snapshot_delay_ms:
                    break
                latest -= 1
        return latest

    def _plan(self, snapshot_id: int, full: bool) -> List[Planned]:
        """The splits of one snapshot's plan (full, or its follow-up plan as
        Paimon's streaming read makes it), in a stable order."""
        key = (snapshot_id, full)
        with self._lock:
            if key in self._plans:
                return self._plans[key]
        table = self._paimon()
        snapshot = table.snapshot_manager().get_snapshot_by_id(snapshot_id)
        if snapshot is None and not full and self._decoupled():
            # The snapshot expired but its changelog is kept: Paimon reads
            # changelog-N then (Java NextSnapshotFetcher).
            snapshot = table.changelog_manager().try_get_changelog(snapshot_id)
        if snapshot is None:
            raise QueryFailed(
                f"snapshot {snapshot_id} of {self.opts.table_id} no longer exists; it was expired before this "
                "query read it. Check retention against tidemark's fence, then restart"
            )
        # A snapshot of a newer schema is read with the schema the query
        # started with, column by column by field id (read_planned), as
        # Paimon's streaming read does: a new schema stops nothing.
        splits = self._planner.plan(snapshot, full)
        if len(splits) >= SPLITS_PER_SNAPSHOT_LIMIT:
            raise QueryFailed(f"snapshot {snapshot_id} has {len(splits)} splits; at most 999999 are supported")
        with self._lock:
            if len(self._plans) > 64:
                self._plans.clear()
            self._plans[key] = splits
        return splits

    def _identity(self, snapshot_id: int, index: int, full: bool) -> str:
        return f"{snapshot_id}:{index}:{'full' if full else 'delta'}:{self._plan(snapshot_id, full)[index].identity()}"

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

    def _startup(self, latest: int) -> Tuple[int, int]:
        """The startup mode and snapshot to ask tidemark for. `from-timestamp`
        becomes `from-snapshot` at the first snapshot at or after the time
        (SPEC §11's rule), or `latest` when every snapshot is older."""
        from tidemark.v1 import coordinator_pb2

        mode = self.opts.scan_mode
        if mode == "from-timestamp":
            start = self._first_snapshot_at_or_after(self.opts.scan_timestamp_millis, latest)
            if start is None:
                return coordinator_pb2.StartupMode.Value("STARTUP_MODE_LATEST"), 0
            return coordinator_pb2.StartupMode.Value("STARTUP_MODE_FROM_SNAPSHOT"), start
        if mode == "compacted-full":
            return coordinator_pb2.StartupMode.Value(STARTUP_MODES[mode]), self._latest_compaction(latest)
        snapshot = self.opts.scan_snapshot_id if mode.startswith("from-snapshot") else 0
        return coordinator_pb2.StartupMode.Value(STARTUP_MODES[mode]), snapshot

    def _latest_compaction(self, latest: int) -> int:
        """`compacted-full`'s snapshot: the latest COMPACT snapshot (with
        `changelog-producer=full-compaction` or `full-compaction.delta-commits`,
        the latest full compaction: its commit identifier a multiple of the
        delta commits), else the latest snapshot (Java
        CompactedStartingScanner, FullCompactedStartingScanner)."""
        table = self._paimon()
        properties = {**table.options.options.to_map(), **self.opts.raw}
        delta_commits = properties.get("full-compaction.delta-commits")
        full_only = str(properties.get("changelog-producer", "")).lower() == "full-compaction" or delta_commits
        every = int(delta_commits or 1)
        manager = table.snapshot_manager()
        earliest = self._snapshot_range()[0]
        for snapshot_id in range(latest, earliest - 1, -1):
            snapshot = manager.get_snapshot_by_id(snapshot_id)
            if snapshot is None or snapshot.commit_kind != "COMPACT":
                continue
            identifier = snapshot.commit_identifier
            if not full_only or identifier % every == 0 or identifier == 2**63 - 1:
                return snapshot_id
        return latest

    def _first_snapshot_at_or_after(self, at_millis: int, latest: int) -> Optional[int]:
        """Binary search over the live snapshots' commit times (Paimon keeps
        them in commit order), with the rule of `first_snapshot_at_or_after`."""
        if latest < 1:
            return None
        manager = self._paimon().snapshot_manager()
        earliest = self._snapshot_range()[0]

        def millis(snapshot_id: int) -> int:
            return manager.get_snapshot_by_id(snapshot_id).time_millis

        low, high = earliest, latest
        # The last snapshot committed strictly before the time, if any.
        last_before = None
        while low <= high:
            middle = (low + high) // 2
            if millis(middle) < at_millis:
                last_before, low = middle, middle + 1
            else:
                high = middle - 1
        pairs = [(earliest, millis(earliest)), (latest, millis(latest))]
        if last_before is not None:
            pairs.append((last_before, millis(last_before)))
            if last_before + 1 <= latest:
                pairs.append((last_before + 1, millis(last_before + 1)))
        return first_snapshot_at_or_after(pairs, at_millis)

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

        _, latest = self._snapshot_range()
        startup_mode, startup_snapshot = self._startup(latest)
        response = self._recovery_position(
            startup_mode=startup_mode,
            snapshot_id=startup_snapshot,
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
        # Spark's Python API has no composite limit: Spark is told one of
        # them (so it knows the batches are limited) and latestOffset
        # applies them all.
        limits = self.opts.limits
        if limits.max_files is not None:
            return ReadMaxFiles(limits.max_files)
        if limits.max_rows is not None:
            return ReadMaxRows(limits.max_rows)
        if limits.max_bytes is not None:
            return ReadMaxBytes(limits.max_bytes)
        if limits.min_rows is not None:
            return ReadMinRows(limits.min_rows)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target_snapshot = self._snapshot_range()[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        import time

        self._ensure_lease(start.get("holder"))
        now_ms = int(time.time() * 1000)
        # Spark asks for everything (Trigger.Once) or for the default limit
        # (then every limit the options set applies, split by split).
        guard = None
        if not isinstance(limit, ReadAllAvailable) and self.opts.limits.any():
            guard = self.opts.limits.guard(self._last_batch_ms, now_ms)
        latest = self._latest()
        snapshot_id, index, full, _ = position(start)
        end = None
        identities = []
        while True:
            step = self._next_position(snapshot_id, index, full, latest)
            if step is None:
                break
            if guard is not None:
                rows, size = self._plan(step[0], step[2])[step[1]].stats()
                if not guard.admit(rows, size):
                    break
            snapshot_id, index, full, total = step
            identities.append(self._identity(snapshot_id, index, full))
            end = make_offset(snapshot_id, index, full, total, self.holder)
        if end is None or (guard is not None and guard.skip_batch):
            return start
        self._last_batch_ms = now_ms
        # What identifies this batch's plan, so a replay can prove it reads
        # the same splits (REPLAY_PLAN_MISMATCH otherwise).
        end["batchFingerprint"] = fingerprint(identities)
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

        _, latest = self._snapshot_range()
        startup_mode, startup_snapshot = self._startup(latest)
        try:
            response = self._recovery_position(
                startup_mode=startup_mode,
                snapshot_id=startup_snapshot,
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
        replayed = False
        if not self._replay_checked:
            # The first batch this runner builds is either one it just
            # planned (latestOffset returned its end) or the logged batch
            # Spark replays after a restart: only the latter needs R4.
            if position(end) != self._planned_end:
                checked = self._check_replay(start, end)
                replayed = checked is start
                start = checked
            self._replay_checked = True
        positions = self._check_replayed_plan(start, end) if replayed else self._positions(start, end)
        epoch = self._lease.epoch
        planned = [self._plan(s, full)[i] for s, i, full in positions]
        groups = group_splits(
            planned,
            self.opts.partition_bytes,
            self.opts.min_partitions,
            keep_buckets_together=self._planner.options.ordered_buckets,
        )
        return [SplitsPartition(self.opts, group, epoch) for group in groups]

    def _check_replayed_plan(self, start: dict, end: dict) -> List[Tuple[int, int, bool]]:
        """A logged batch is replayed only if its plan is still the one it
        logged: the same number of splits in its last snapshot, and the same
        splits throughout (their files), else the query fails rather than
        deliver other rows than the first run did."""
        snapshot_id, _, full, total = position(end)
        planned = len(self._plan(snapshot_id, full))
        if total is not None and planned != total:
            raise QueryFailed(
                f"REPLAY_PLAN_MISMATCH: the logged batch ends at split {end['index']} of {total} of snapshot "
                f"{snapshot_id}, whose plan now has {planned} splits (the split size or pypaimon changed); "
                "replaying it would skip or repeat rows. Restore the table's split options, or start a new "
                "checkpoint (the consumer keeps its position)"
            )
        try:
            positions = self._positions(start, end)
        except QueryFailed as error:
            raise QueryFailed(
                f"REPLAY_PLAN_MISMATCH: the logged batch from {dict(start)} to {dict(end)} cannot be planned again "
                f"({error}); start a new checkpoint (the consumer keeps its position)"
            ) from error
        logged = end.get("batchFingerprint")
        if logged is not None:
            now = fingerprint([self._identity(s, i, full) for s, i, full in positions])
            if now != logged:
                raise QueryFailed(
                    f"REPLAY_PLAN_MISMATCH: the logged batch ending at {dict(end)} planned other splits than "
                    "the table plans now (the split size, the files or pypaimon changed); replaying it would "
                    "deliver different rows. Restore the table's split options, or start a new checkpoint (the "
                    "consumer keeps its position)"
                )
        return positions

    def read(self, partition: SplitsPartition) -> Iterator:
        table, read_options = open_source(partition.options)
        column = partition.options.epoch_column
        fields = getattr(self, "_fields", None)
        if not column:
            for planned in partition.planned:
                yield from read_planned(table, read_options, planned, self.schema, fields)
            return
        import pyarrow as pa
        from pyspark.sql.types import StructType

        rows_schema = StructType([f for f in self.schema.fields if f.name != column])
        batches = (b for planned in partition.planned for b in read_planned(table, read_options, planned, rows_schema, fields))
        for batch in batches:
            epochs = pa.repeat(pa.scalar(partition.epoch, pa.int64()), batch.num_rows)
            yield pa.RecordBatch.from_arrays(
                list(batch.columns) + [epochs],
                schema=batch.schema.append(pa.field(column, pa.int64(), nullable=False)),
            )

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
            "end": {k: v for k, v in end.items() if k not in ("holder", "batchFingerprint")},
            "batch_fingerprint": end.get("batchFingerprint"),
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
