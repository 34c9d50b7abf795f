"""The source's options: parsing, refusals, and the one place the query's
options are laid over the table's (Paimon's dynamic options over table
options)."""

from __future__ import annotations

import os
import re
from typing import Dict, Mapping, Optional

from tidemark.paimon import limits

# Scan modes as the server's startup modes (SPEC R3): `from-timestamp` and
# `compacted-full` are resolved to a snapshot by the source (startup.py).
SCAN_MODES = sorted(
    ["latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp", "compacted-full", "default", "full"]
)

# Options of the pinned Paimon that would change which rows a streaming read
# delivers, or in what order, and that this source does not implement: each
# is refused by name rather than ignored (every other Paimon or Spark
# connector option is accepted, as Paimon accepts them). The value says why
# and what to do instead.
REFUSED_OPTIONS = {
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

# Read options passed on to the planner and reader on executors (the table's
# unless the query sets them).
READ_OPTIONS = (
    "streaming-read-overwrite",
    "streaming-read-append-overwrite",
    "read.changelog",
    "table-read.sequence-number.enabled",
    "scan.partitions",
)
# Split sizing and read batching the query may override for its reads.
SPLIT_OPTIONS = ("source.split.target-size", "source.split.open-file-cost", "read.batch-size")
# Storage options passed to pypaimon's file IO (S3 endpoint, credentials...).
STORAGE_PREFIXES = ("fs.", "s3.", "oss.", "hadoop.")

# Spark's own sizing of file-source partitions (`spark.sql.files.maxPartitionBytes`).
PARTITION_BYTES = 128 * 1024 * 1024


def effective(table_options: Mapping[str, str], query_options: Mapping[str, str]) -> Dict[str, str]:
    """The options a read runs with: the table's, with the query's laid over
    them (Paimon's dynamic options), keys lower-cased and empty values left
    out. Every other module asks this, never the two sources apart."""

    def clean(options: Mapping[str, str]) -> Dict[str, str]:
        return {str(k).lower(): str(v) for k, v in options.items() if v is not None and str(v) != ""}

    return {**clean(table_options), **clean(query_options)}


def truthy(value: Optional[str]) -> bool:
    return str(value).strip().lower() == "true"


def parse_duration_ms(key: str, text: str) -> int:
    """A Paimon duration (`500 ms`, `10 s`, `2 min`, `1 h`, `1 d`, or bare
    milliseconds) in milliseconds; a bad one raises ValueError naming `key`."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    units = {"": 1, "ms": 1, "milli": 1, "millis": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
             "min": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000,
             "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}
    if not match or match.group(2).lower() not in units:
        raise ValueError(f'option "{key}" must be a duration such as "10 s", not {text!r}')
    return int(match.group(1)) * units[match.group(2).lower()]


def parse_size(key: str, text: str) -> int:
    """A size as Paimon spells one (`128 mb`, `1 gb`, `0`) in bytes."""
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


class SourceOptions:
    """The source's options (Spark passes them case-insensitively). Those a
    table may also set as properties are resolved against it in `resolve`."""

    def __init__(self, options):
        raw = effective({}, dict(options))
        self.raw = raw
        self.path = raw.get("path")
        if not self.path:
            raise ValueError('option "path" (the Paimon table directory) is required')
        self.path = self.path.rstrip("/")
        self.branch = raw.get("branch", "main")
        self.storage = {k: v for k, v in raw.items() if k.startswith(STORAGE_PREFIXES)}
        self.endpoint = raw.get("tidemark.endpoint", "127.0.0.1:50051")
        self.token = raw.get("tidemark.token") or os.environ.get("TIDEMARK_TOKEN")
        self.tls_ca = raw.get("tidemark.tls-ca")
        self.tls_cert = raw.get("tidemark.tls-cert")
        self.tls_key = raw.get("tidemark.tls-key")
        self.lease_ttl = float(raw.get("tidemark.lease-ttl", "30"))
        # How long a call keeps retrying a tidemark that is away (a restart),
        # and each attempt's deadline.
        self.retry_budget = float(raw.get("tidemark.retry-budget", "30"))
        self.call_timeout = float(raw.get("tidemark.call-timeout", "5"))
        self.holder = raw.get("tidemark.holder")
        self.clamp = raw.get("tidemark.on-expired", "fail").lower() == "clamp"
        self.commit_log = raw.get("tidemark.commit-log")
        # A column carrying the lease epoch each row was read under, so a
        # sink can refuse a batch from a lease that was taken over.
        self.epoch_column = raw.get("tidemark.epoch-column")
        # Every row's table position (positions.py), for sinks that deliver
        # exactly once (tidemark.sinks); it carries the epoch too.
        self.sink_columns = truthy(raw.get("tidemark.sink-columns", "false"))
        if self.sink_columns and self.epoch_column:
            raise ValueError(
                'options "tidemark.sink-columns" and "tidemark.epoch-column" cannot be set together: the sink '
                "columns carry the epoch as _tidemark_epoch; drop tidemark.epoch-column"
            )
        # How much of a batch one Spark task reads, and into how many tasks
        # at least a batch is spread (see partitions.group_splits).
        partition_size = raw.get("tidemark.partition-size")
        self.partition_bytes = parse_size("tidemark.partition-size", partition_size) if partition_size else PARTITION_BYTES
        min_partitions = raw.get("tidemark.min-partitions")
        self.min_partitions = (
            parse_count("tidemark.min-partitions", min_partitions) if min_partitions else default_min_partitions()
        )
        self.table_id = raw.get("tidemark.table") or table_id_from_path(self.path)
        self.read_overrides = {k: raw[k] for k in READ_OPTIONS if k in raw}
        self.split_overrides = {k: raw[k] for k in SPLIT_OPTIONS if k in raw}
        self.resolved = False

    def resolve(self, table) -> "SourceOptions":
        """Fills what the query left unset from the table's properties, and
        resolves `scan.mode=default` as Paimon does: `from-timestamp` when
        `scan.timestamp-millis` is set, `from-snapshot` when
        `scan.snapshot-id` is, `latest-full` otherwise."""
        self.effective = effective(table.options.options.to_map(), self.raw)
        get = self.effective.get

        self.consumer_id = get("consumer-id")
        if not self.consumer_id:
            raise ValueError('option "consumer-id" is required (or the table property): it names the tidemark consumer')
        for key, why in REFUSED_OPTIONS.items():
            if get(key) is not None:
                raise ValueError(f'option "{key}" is not supported by tidemark_paimon: {why}')
        for key, why in REFUSED_WHEN_TRUE.items():
            if (get(key) or "").strip().lower() == "true":
                raise ValueError(f'option "{key}" is not supported by tidemark_paimon: {why}')
        stream_scan_mode = (get("stream-scan-mode") or "none").strip().lower()
        if stream_scan_mode != "none":
            raise ValueError(
                f'option "stream-scan-mode" is not supported by tidemark_paimon unless "none" (it is '
                f"{stream_scan_mode!r}): Paimon's internal modes for compaction jobs and file monitors deliver "
                "every file a snapshot touched, not its rows' changes"
            )
        self.scan_mode = get("scan.mode", "default").lower()
        if self.scan_mode in REFUSED_SCAN_MODES:
            raise ValueError(f'scan.mode "{self.scan_mode}" is not supported: {REFUSED_SCAN_MODES[self.scan_mode]}')
        if self.scan_mode not in SCAN_MODES:
            raise ValueError(f'option "scan.mode" must be one of {SCAN_MODES}, not {self.scan_mode!r}')
        if self.scan_mode == "full":
            self.scan_mode = "latest-full"
        snapshot_id = get("scan.snapshot-id")
        self.scan_tag = get("scan.tag-name")
        version = get("scan.version")
        if version is not None:
            # As Paimon reads scan.version (Java TimeTravelUtil.adaptScanVersion):
            # a tag when one of that name exists, else a snapshot id when it
            # is digits; a watermark cannot start a streaming read.
            version = version.strip()
            if table.tag_manager().tag_exists(version):
                self.scan_tag = self.scan_tag or version
            elif version.isdigit():
                snapshot_id = snapshot_id or version
            else:
                raise ValueError(
                    f'option "scan.version" names no tag and no snapshot id ({version!r}): Paimon\'s streaming '
                    "read cannot start from a watermark; use scan.snapshot-id or scan.tag-name"
                )
        timestamp = get("scan.timestamp-millis")
        if timestamp is None and get("scan.timestamp") is not None:
            timestamp = str(parse_scan_timestamp(get("scan.timestamp")))
        if self.scan_mode == "default":
            self.scan_mode = (
                "from-timestamp" if timestamp else "from-snapshot" if snapshot_id or self.scan_tag else "latest-full"
            )
        self.scan_snapshot_id = int(snapshot_id or "0")
        self.scan_timestamp_millis = int(timestamp) if timestamp else None
        if self.scan_mode == "from-timestamp" and self.scan_timestamp_millis is None:
            raise ValueError('scan.mode "from-timestamp" needs option "scan.timestamp-millis" or "scan.timestamp"')
        delay = get("streaming.read.snapshot.delay")
        self.snapshot_delay_ms = parse_duration_ms("streaming.read.snapshot.delay", delay) if delay else 0
        if self.scan_tag is not None and self.scan_mode != "from-snapshot":
            raise ValueError(f'option "scan.tag-name" needs scan.mode "from-snapshot" (or unset), not {self.scan_mode!r}')
        if self.scan_tag is None and self.scan_mode.startswith("from-snapshot") and self.scan_snapshot_id < 1:
            raise ValueError(f'scan.mode "{self.scan_mode}" needs option "scan.snapshot-id" (>= 1)')
        self.ignore_progress = truthy(get("consumer.ignore-progress", "false"))
        self.limits = limits.TriggerLimits.from_options(get)
        self.resolved = True
        return self
