"""Which rows each snapshot of a Paimon table delivers to a streaming
reader, decided as Paimon's own streaming read decides it, and the Spark
schema of those rows. Used by the tidemark_paimon source (paimon_source.py).

Snapshot selection follows Paimon's follow-up scanners (Java
`DataTableStreamScan.nextPlan`, pypaimon's `AsyncStreamingTableScan`):

- the first snapshot of an initial full scan is read whole (merged rows);
- afterwards, an OVERWRITE snapshot is read first when the table asks for it
  (`streaming-read-overwrite` on primary-key tables, read per bucket from the
  overwrite's own removed and added files as Paimon's streaming read of an
  `IncrementalSplit` reads them: `-D` for every row the removed files held,
  then the rows the added files hold, with their own kinds;
  `streaming-read-append-overwrite` on append tables, read as the files it
  added), and skipped otherwise;
- without a `changelog-producer`, APPEND snapshots are read as deltas (the
  files they added) and every other kind (COMPACT, ANALYZE) is skipped: a
  compaction never delivers a row twice;
- with a `changelog-producer` (input, lookup, full-compaction), a snapshot
  is read from its changelog files when it has any, and skipped otherwise.

A skipped snapshot plans no split, so the reader moves past it and the
consumer with it (SPEC C3 is unchanged).

The planning uses private methods of pypaimon (its manifest readers and
split generators), so it is pinned to one pypaimon version; another version
fails at once with an error naming the one required.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from typing import Dict, Iterator, List, Optional, Tuple

PYPAIMON_VERSION = "2.1.0"

# Paimon's bucket number of a postpone-bucket table (`bucket = -2`), whose
# new files wait in bucket -2 until compaction moves them to real buckets.
POSTPONE_BUCKET = -2

# Row kinds as Paimon writes them.
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
ROWKIND_COLUMN = "rowkind"


def check_pypaimon() -> None:
    """Refuses a pypaimon other than the one this planner was written for."""
    try:
        found = importlib.metadata.version("pypaimon")
    except importlib.metadata.PackageNotFoundError:
        found = None
    if found != PYPAIMON_VERSION:
        raise RuntimeError(
            f"tidemark_paimon plans snapshots with pypaimon {PYPAIMON_VERSION}'s internal planners and found "
            f"pypaimon {found}; install pypaimon=={PYPAIMON_VERSION} (see docs/spark.md)"
        )


def truthy(value: Optional[str]) -> bool:
    return str(value).strip().lower() == "true"


def parse_duration_ms(key: str, text: str) -> int:
    """A Paimon duration (`500 ms`, `10 s`, `2 min`, `1 h`, `1 d`, or bare
    milliseconds) in milliseconds; a bad one raises ValueError naming `key`."""
    import re

    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    units = {"": 1, "ms": 1, "milli": 1, "millis": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
             "min": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000,
             "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}
    if not match or match.group(2).lower() not in units:
        raise ValueError(f'option "{key}" must be a duration such as "10 s", not {text!r}')
    return int(match.group(1)) * units[match.group(2).lower()]


def changelog_decoupled(options: Dict[str, str]) -> bool:
    """Whether the table's changelog outlives its snapshots (Java
    `CoreOptions.changelogLifecycleDecoupled`): a `changelog.*` retention
    above the snapshots' (each defaults to the snapshots')."""

    def number(key: str, default: int) -> int:
        return int(options.get(key, default))

    snapshot_min = number("snapshot.num-retained.min", 10)
    snapshot_max = number("snapshot.num-retained.max", 2**31 - 1)
    snapshot_time = parse_duration_ms("snapshot.time-retained", options.get("snapshot.time-retained", "1 h"))
    changelog_min = number("changelog.num-retained.min", snapshot_min)
    changelog_max = number("changelog.num-retained.max", snapshot_max)
    changelog_time = (
        parse_duration_ms("changelog.time-retained", options["changelog.time-retained"])
        if "changelog.time-retained" in options
        else snapshot_time
    )
    return changelog_max > snapshot_max or changelog_time > snapshot_time or changelog_min > snapshot_min


class ReadOptions:
    """What shapes a table's stream: its own options, overridden by the
    query's (Paimon: dynamic options over table options)."""

    def __init__(self, table, overrides: Dict[str, str]):
        table_options = table.options.options.to_map()
        merged = {**table_options, **{k: v for k, v in overrides.items() if v is not None}}
        self.primary_key = bool(table.is_primary_key_table)
        if not self.primary_key and truthy(merged.get("streaming-read-overwrite")):
            # Paimon's SchemaValidation refuses it on append tables.
            raise ValueError(
                "Doesn't support streaming read the changes from overwrite when the primary keys are not "
                "defined. Please use streaming-read-append-overwrite to enable the streaming read overwrite "
                "commit for append table."
            )
        self.postpone_bucket = str(merged.get("bucket", "")).strip() == str(POSTPONE_BUCKET)
        # Whether the rows of one bucket have an order a sink may rely on:
        # a key's changes (primary keys) or a bucket key's rows (a fixed-bucket
        # append table). A bucket-unaware append table (`bucket = -1`) has
        # none, so its files may be read by any task.
        try:
            fixed_buckets = int(str(merged.get("bucket", "-1")).strip() or "-1") > 0
        except ValueError:
            fixed_buckets = False
        self.ordered_buckets = self.primary_key or fixed_buckets
        self.changelog_producer = str(merged.get("changelog-producer", "none")).lower()
        if self.primary_key:
            self.read_overwrite = truthy(merged.get("streaming-read-overwrite"))
        else:
            self.read_overwrite = truthy(merged.get("streaming-read-append-overwrite"))
        self.read_changelog = truthy(merged.get("read.changelog"))
        partitions = str(merged.get("scan.partitions") or "").strip()
        self.partitions = PartitionFilter(table, partitions) if partitions else None
        self.num_levels = int(merged.get("num-levels") or int(merged.get("num-sorted-run.compaction-trigger", "5")) + 1)
        if self.read_overwrite and self.changelog_producer in ("lookup", "full-compaction"):
            # Paimon refuses this combination: the compaction would deliver
            # the overwrite's changes a second time.
            raise ValueError(
                f"streaming-read-overwrite cannot be used with changelog-producer={self.changelog_producer}: "
                "the changes of an overwrite would be read twice"
            )


class PartitionFilter:
    """`scan.partitions` (the name of Paimon's own option, Java
    `FlinkConnectorOptions.SCAN_PARTITIONS`, read as its `StaticPartitionLoader`
    reads it): partitions as `k1=v1,k2=v2`, several separated by `;`; a
    partition key left out means the default partition name (a null value).
    Values are compared as the partition's types compare them (an INT
    partition `dt=01` is partition 1), as Java converts each spec to an
    internal row before comparing. `max_pt()` / `max_two_pt()` are refused:
    Paimon decides them once when a job starts, so a restarted query would
    quietly read a different partition."""

    def __init__(self, table, text: str):
        keys = list(getattr(table, "partition_keys", None) or [])
        if not keys:
            raise ValueError("scan.partitions is not supported for non-partitioned table.")
        if "max_pt()" in text.lower() or "max_two_pt()" in text.lower():
            raise ValueError(
                'option "scan.partitions": max_pt() and max_two_pt() are not supported by tidemark_paimon '
                "(Paimon picks the partition when a job starts, so a restarted query could read another one); "
                "name the partitions, e.g. dt=20261203"
            )
        default = table.options.options.to_map().get("partition.default-name", "__DEFAULT_PARTITION__")
        types = {field.name: str(getattr(field.type, "type", field.type)).upper() for field in table.partition_keys_fields}
        self.keys = keys
        self.chosen = set()
        for spec_text in text.split(";"):
            spec: Dict[str, str] = {}
            for pair in spec_text.split(","):
                if not pair.strip():
                    continue
                key, sep, value = pair.partition("=")
                if not sep:
                    raise ValueError(
                        f'option "scan.partitions": invalid key-value string {pair.strip()!r}. Please use format '
                        "'key=value'"
                    )
                key = key.strip()
                if key not in keys:
                    raise ValueError(
                        f'option "scan.partitions" names {key!r}, which is not a partition key of this table '
                        f"(partition keys: {', '.join(keys)})"
                    )
                spec[key] = value.strip()
            if not spec:
                continue
            values = []
            for key in keys:
                text_value = spec.get(key, default)
                values.append(None if text_value == default else _partition_value(types[key], text_value, key))
            self.chosen.add(tuple(values))
        if not self.chosen:
            raise ValueError('option "scan.partitions" names no partition')
        self._types = [types[key] for key in keys]

    def accepts(self, partition) -> bool:
        values = list(getattr(partition, "values", None) or [])
        stored = tuple(
            None if value is None else _partition_value(kind, str(value), key)
            for kind, value, key in zip(self._types, values, self.keys)
        )
        return stored in self.chosen


def _partition_value(kind: str, text: str, key: str):
    """A partition value in a form that compares as its type does."""
    import decimal

    base = kind.split("(")[0].replace(" NOT NULL", "").strip()
    try:
        if base in ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT"):
            return int(text)
        if base in ("FLOAT", "DOUBLE"):
            return float(text)
        if base == "DECIMAL":
            return decimal.Decimal(text)
        if base == "BOOLEAN":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
    except (ValueError, decimal.InvalidOperation):
        raise ValueError(f'option "scan.partitions": {key}={text!r} is not a {base} value') from None
    return text


class OverwriteBucket:
    """What a primary-key overwrite changed in one bucket (Java
    `IncrementalSplit`): the files it removed and the files it added, those
    in both left out."""

    def __init__(self, snapshot_id: int, partition, bucket: int, before: list, after: list):
        self.snapshot_id = snapshot_id
        self.partition = partition
        self.bucket = bucket
        self.before = before
        self.after = after


class Planned:
    """One split of a snapshot's plan, as shipped to a Spark task: a pypaimon
    DataSplit, or one bucket of a primary-key overwrite (read where it is
    read)."""

    def __init__(self, split=None, overwrite: Optional[OverwriteBucket] = None):
        self.split = split
        self.overwrite = overwrite

    def stats(self) -> Tuple[int, int]:
        """(rows, bytes) of the split's data files, for read limits (Java
        `PaimonReadLimitGuard.getBytesAndRows`)."""
        files = self.split.files if self.split is not None else self.overwrite.after
        return sum(f.row_count for f in files), sum(f.file_size for f in files)

    def lane(self) -> Tuple[Tuple[str, ...], int]:
        """The (partition, bucket) whose rows this split reads: a key's
        changes never leave their bucket."""
        source = self.split if self.split is not None else self.overwrite
        values = getattr(source.partition, "values", None) or []
        return tuple(str(v) for v in values), source.bucket

    def identity(self) -> str:
        """What makes this split this split: its files (or the overwrite and
        partition it diffs), for the replay check."""
        if self.overwrite is not None:
            change = self.overwrite
            partition = [str(v) for v in getattr(change.partition, "values", []) or []]
            names = ",".join(f.file_name for f in change.before) + "|" + ",".join(f.file_name for f in change.after)
            return f"overwrite:{change.snapshot_id}:{json.dumps(partition)}:{change.bucket}:{names}"
        files = sorted(getattr(f, "file_name", "") for f in (self.split.files or []))
        partition = tuple(str(v) for v in getattr(self.split.partition, "values", []) or [])
        return f"{json.dumps(list(partition))}:{self.split.bucket}:{','.join(files)}"


def fingerprint(identities: List[str]) -> str:
    """A short digest of a batch's splits, in order."""
    digest = hashlib.sha256()
    for identity in identities:
        digest.update(identity.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def partition_path(table, partition) -> str:
    """A partition as Paimon spells it in a path (`k1=v1/k2=v2/`, the
    default partition name for a null): what Paimon's Spark source compares
    to order a plan's splits (Java `StreamHelper.compareByPartitionAndBucket`,
    through `PartitioningUtils.getPathFragment`)."""
    keys = list(getattr(table, "partition_keys", None) or [])
    values = list(getattr(partition, "values", None) or []) if partition is not None else []
    default = table.options.options.to_map().get("partition.default-name", "__DEFAULT_PARTITION__")
    return "".join(f"{key}={default if value is None else value}/" for key, value in zip(keys, values))


def order_splits(table, splits: list) -> list:
    """A plan's splits in the order Paimon's Spark source indexes them
    (Java `StreamHelper.convertPlanToIndexedSplits`): by partition path, then
    bucket, and a stable sort, so the splits of one bucket keep the order
    the split generator gave them (for the files of a bucket, commit order)."""
    return sorted(splits, key=lambda split: (partition_path(table, split.partition), split.bucket))


class Planner:
    """Plans one snapshot at a time, as Paimon's streaming read would."""

    def __init__(self, table, options: ReadOptions):
        check_pypaimon()
        from pypaimon.manifest.manifest_file_manager import ManifestFileManager
        from pypaimon.manifest.manifest_list_manager import ManifestListManager

        self.table = table
        self.options = options
        self._lists = ManifestListManager(table)
        self._files = ManifestFileManager(table)

    def plan(self, snapshot, full: bool) -> List[Planned]:
        """The splits `snapshot` delivers: whole when `full`, otherwise its
        follow-up plan (empty when Paimon skips it)."""
        if full:
            splits = self._initial(snapshot)
        elif snapshot.commit_kind == "OVERWRITE" and self.options.read_overwrite:
            return self._overwrite(snapshot)
        elif self.options.changelog_producer != "none":
            # Java ChangelogFollowUpScanner: the snapshot's changelog files.
            changelog = self._lists.read_changelog(snapshot) if snapshot.changelog_manifest_list else []
            splits = self._streaming_splits(snapshot, changelog)
        elif snapshot.commit_kind == "APPEND":
            # Java DeltaFollowUpScanner: the files the snapshot added.
            splits = self._streaming_splits(snapshot, self._lists.read_delta(snapshot))
        else:
            splits = []  # COMPACT, ANALYZE, an OVERWRITE not asked for
        return [Planned(split=s) for s in order_splits(self.table, self._chosen_partitions(splits))]

    def _in_chosen_partition(self, partition) -> bool:
        return self.options.partitions is None or self.options.partitions.accepts(partition)

    def _chosen_partitions(self, splits: list) -> list:
        """The splits of the partitions `scan.partitions` names (all when it
        is unset): every split holds one partition's files, so the others'
        data files are never opened."""
        return [split for split in splits if self._in_chosen_partition(split.partition)]

    def _scan(self):
        from pypaimon.read.streaming_table_scan import AsyncStreamingTableScan

        return AsyncStreamingTableScan(self.table, prefetch_enabled=False)

    def _initial(self, snapshot) -> list:
        if self.options.postpone_bucket and self.options.changelog_producer == "none":
            # Java DataTableStreamScan reads only real buckets when a
            # changelog producer makes the changes; otherwise the postpone
            # bucket's files (rows not compacted yet) are part of the full
            # scan, read without merging, every record with its row kind
            # (MergeFileSplitRead.createReader, createNoMergeReader).
            # pypaimon's scan always leaves them out.
            from pypaimon.read.scanner.file_scanner import FileScanner

            lists = self._lists
            scanner = FileScanner(self.table, lambda: (lists.read_all(snapshot), snapshot)).with_all_buckets()
            splits = list(scanner.scan().splits())
            for split in splits:
                if split.bucket == POSTPONE_BUCKET:
                    split.is_streaming = True  # one file after the other, no merge
            return splits
        splits = list(self._scan()._create_initial_plan(snapshot).splits())
        # Tables whose changelog comes from compaction start from the files
        # compaction already produced (Java DataTableStreamScan.tryFirstPlan).
        if self.options.primary_key and self.options.changelog_producer == "lookup":
            return self._filter_levels(splits, lambda level: level > 0)
        if self.options.primary_key and self.options.changelog_producer == "full-compaction":
            top = self.options.num_levels - 1
            return self._filter_levels(splits, lambda level: level == top)
        return splits

    @staticmethod
    def _filter_levels(splits, keep) -> list:
        """The splits with only the files of the levels kept, each with its
        deletion vector (Java applies the level filter before attaching a
        batch split's deletion files, so a kept file keeps its own; without
        it, rows deleted or replaced since the file was written came back)."""
        from pypaimon.read.split import DataSplit

        out = []
        for split in splits:
            deletions = split.data_deletion_files or [None] * len(split.files)
            kept = [(f, d) for f, d in zip(split.files, deletions) if keep(f.level)]
            if kept:
                files = [f for f, _ in kept]
                kept_deletions = [d for _, d in kept]
                out.append(
                    DataSplit(
                        files,
                        split.partition,
                        split.bucket,
                        raw_convertible=False,
                        data_deletion_files=kept_deletions if any(d is not None for d in kept_deletions) else None,
                        snapshot_id=split.snapshot_id,
                        total_buckets=split.total_buckets,
                    )
                )
        return out

    def _streaming_splits(self, snapshot, manifest_files) -> list:
        """Splits of the files a snapshot added (its ADD entries, in the
        order its manifests list them), as Paimon's streaming read makes them
        (Java `SnapshotReaderImpl.generateSplits` with `isStreaming`): one
        split per (partition, bucket) holding that bucket's files in commit
        order (`MergeTreeSplitGenerator.splitForStreaming`,
        `AppendOnlySplitGenerator.splitForStreaming`), read one file after
        the other without merging; only the buckets of a bucket-unaware
        append table (bucket -1) are packed as a batch read packs them
        (`AppendOnlySplitGenerator.splitForBatch`: by sequence number, up to
        the target split size). pypaimon's streaming scan uses its batch
        generators instead, which order a bucket's files by key range and so
        can deliver two changes to one key in one commit reversed."""
        from pypaimon.read.scanner.append_table_split_generator import AppendTableSplitGenerator
        from pypaimon.read.scanner.primary_key_table_split_generator import PrimaryKeyTableSplitGenerator

        if not manifest_files:
            return []
        entries = self._files.read_entries_parallel(
            manifest_files,
            manifest_entry_filter=lambda entry: entry.kind == 0 and self._in_chosen_partition(entry.partition),
            max_workers=max(8, self.table.options.scan_manifest_parallelism(os.cpu_count() or 8)),
        )
        if not entries:
            return []
        options = self.table.options
        generator_type = PrimaryKeyTableSplitGenerator if self.options.primary_key else AppendTableSplitGenerator
        generator = generator_type(
            self.table,
            options.source_split_target_size(),
            options.source_split_open_file_cost(),
            deletion_files_map={},
            snapshot_id=snapshot.id,
        )
        buckets: Dict[tuple, list] = {}  # insertion-ordered, as Java's LinkedHashMap
        for entry in entries:
            buckets.setdefault((tuple(entry.partition.values), entry.bucket), []).append(entry)
        splits = []
        for (_, bucket), bucket_entries in buckets.items():
            files = [entry.file for entry in bucket_entries]
            if not self.options.primary_key and bucket == -1:
                files = sorted(files, key=lambda f: f.min_sequence_number)
                packed = generator._pack_for_ordered(
                    files, lambda f: max(f.file_size, generator.open_file_cost), generator.target_split_size
                )
            else:
                packed = [files]
            splits += generator._build_split_from_pack(packed, bucket_entries, False, use_optimized_path=True)
        for split in splits:
            split.is_streaming = True
        return splits

    def _overwrite(self, snapshot) -> List[Planned]:
        if not self.options.primary_key:
            # Append tables: the files the overwrite added, as inserts.
            splits = self._streaming_splits(snapshot, self._lists.read_delta(snapshot))
            return [Planned(split=s) for s in order_splits(self.table, self._chosen_partitions(splits))]
        # Primary-key tables: per bucket, the files the overwrite removed and
        # those it added (Java SnapshotReaderImpl.readChanges; files in both
        # lists left out, as its deduplicate does). Unlike a comparison of
        # the table before and after, this needs only the overwrite's own
        # manifests (the snapshot before may be expired), reads level-0 files
        # of deletion-vector and first-row tables too, and holds one bucket
        # in memory at a time.
        from pypaimon.read.scanner.primary_key_table_split_generator import PrimaryKeyTableSplitGenerator

        manifests = self._lists.read_delta(snapshot)
        entries = []
        for manifest in manifests:
            entries += self._files.read(manifest.file_name, drop_stats=True)
        generator = PrimaryKeyTableSplitGenerator(self.table, 1, 1, deletion_files_map={}, snapshot_id=snapshot.id)
        buckets: Dict[tuple, Tuple[list, list]] = {}
        partitions = {}
        for entry in (e for e in entries if self._in_chosen_partition(e.partition)):
            key = (tuple(entry.partition.values), entry.bucket)
            partitions[key] = entry.partition
            generator._set_data_file_paths([entry.file], entry.partition, entry.bucket)
            removed, added = buckets.setdefault(key, ([], []))
            (added if entry.kind == 0 else removed).append(entry.file)
        changes = []
        for key, (removed, added) in buckets.items():
            both = {f.file_name for f in removed} & {f.file_name for f in added}
            before = [f for f in removed if f.file_name not in both]
            after = [f for f in added if f.file_name not in both]
            if before or after:
                changes.append(OverwriteBucket(snapshot.id, partitions[key], key[1], before, after))
        changes.sort(key=lambda c: (partition_path(self.table, c.partition), c.bucket))
        return [Planned(overwrite=change) for change in changes]


# ------------------------------------------------------------------ reading


def spark_schema(table, options: ReadOptions):
    """The rows' Spark schema, as Paimon declares the table (nullability and
    nested types included), with a leading `rowkind` column when
    `read.changelog` is set."""
    from pypaimon.schema.data_types import PyarrowFieldParser
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StringType, StructField, StructType
    import pyarrow as pa

    arrow = pa.schema(PyarrowFieldParser.from_paimon_schema(table.table_schema.fields))
    schema = from_arrow_schema(arrow)
    if options.read_changelog:
        if ROWKIND_COLUMN in schema.names:
            raise ValueError(f"the table has a column named {ROWKIND_COLUMN!r}, which read.changelog would add")
        schema = StructType([StructField(ROWKIND_COLUMN, StringType(), False)] + list(schema.fields))
    return schema


def query_fields(table, schema, leave_out=()) -> List[Tuple[int, str]]:
    """The query's columns as (Paimon field id, name), in the order of the
    Spark `schema` the query runs with (the table's whole schema, or the
    columns the query declared with `readStream.schema(...)`), taken from the
    table's schema when the query starts. Columns in `leave_out` (the
    `rowkind` and epoch columns the source adds) are not the table's."""
    by_name = {f.name: f for f in table.table_schema.fields}
    fields = []
    for name in schema.names:
        if name in leave_out:
            continue
        field = by_name.get(name)
        if field is None:
            raise ValueError(
                f"the query's schema has a column {name!r} that the table (schema {table.table_schema.id}) does "
                f"not have; its columns: {sorted(by_name)}"
            )
        fields.append((field.id, name))
    return fields


def read_planned(table, options: ReadOptions, planned: Planned, schema, fields=None) -> Iterator:
    """The Arrow batches of one planned split, shaped as `schema`.

    `fields` (see `query_fields`) are the columns of the schema the query
    started with: only those are read from the files, and they are found in
    the table's schema now by field id, as Paimon reads files written under
    a newer schema with the query's (Java `SchemaEvolutionUtil`): a column
    added since is not delivered, a renamed one is delivered under the name
    the query knows, one dropped since reads as null, a widened type is cast
    back to the query's type (a value that does not fit fails the read)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema)
    table, cap_bytes = _in_spark_sized_batches(table, target, merges=_merges(options, planned))
    now = {f.id: f.name for f in table.table_schema.fields}
    names = None if fields is None else [now[field_id] for field_id, _ in fields if field_id in now]
    if planned.overwrite is not None:
        pieces = iter([overwrite_changes(table, planned.overwrite, names)])
    else:
        # Batch by batch, so a split is never whole in memory and Spark
        # takes the first rows while the rest are read. Only primary-key
        # tables carry row kinds (an append table's rows are all +I, and
        # pypaimon adds the column row by row in Python).
        reader = _read_with_row_kind(table, names, with_kinds=options.primary_key)
        pieces = iter(reader.to_arrow_batch_reader([planned.split]).read_next_batch, None)
    import pyarrow as pa

    for rows in pieces:
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if fields is not None:
            rows = _as_query_columns(rows, fields, now, target)
        for batch in _shape(rows, options, target):
            yield from _within_bytes(batch, cap_bytes)


# Arrow batches handed to Spark when neither the table nor the query sets
# `read.batch-size` (docs/spark.md, "Throughput"). Each batch costs a round
# of pypaimon's Python and of Spark's hand-off whatever its size: pypaimon's
# default of 1,024 rows halved the source's throughput, and batches of about
# BATCH_BYTES read 10-16% faster than Spark's own 10,000 rows
# (`spark.sql.execution.arrow.maxRecordsPerBatch`). The rows per batch come
# from the query's columns (a string or binary value counted as
# VARIABLE_WIDTH_GUESS bytes), and a batch whose values turn out longer is
# sliced to BATCH_BYTES before Spark takes it, so one batch in the Python
# worker and in Spark's JVM stays near BATCH_BYTES whatever the row width.
BATCH_BYTES = 16 << 20
BATCH_ROWS_MIN, BATCH_ROWS_MAX = 1_024, 131_072
VARIABLE_WIDTH_GUESS = 32
# A merged split (a primary-key bucket's sorted runs) holds one batch per
# run at once, so it keeps Spark's row count rather than BATCH_BYTES each.
MERGE_BATCH_ROWS = 10_000


def _merges(options: ReadOptions, planned: Planned) -> bool:
    """Whether pypaimon merges the split's sorted runs as it reads it (a
    primary-key split read neither file by file nor raw)."""
    if not options.primary_key:
        return False
    split = planned.split
    return split is None or not (getattr(split, "is_streaming", False) or split.raw_convertible)


def row_bytes_estimate(schema) -> int:
    """About how many bytes one row of `schema` (Arrow) takes in memory."""
    import pyarrow as pa

    def width(kind) -> int:
        if pa.types.is_struct(kind):
            return sum(width(kind.field(i).type) for i in range(kind.num_fields))
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
            inner = width(kind.key_type) + width(kind.item_type) if pa.types.is_map(kind) else width(kind.value_type)
            return 4 + 4 * inner  # an offset and a few values
        try:
            return max(1, kind.bit_width // 8)
        except ValueError:  # not fixed-width: an offset and the value
            return 4 + VARIABLE_WIDTH_GUESS

    return max(1, sum(width(field.type) for field in schema))


def batch_rows(schema, merges: bool = False) -> int:
    """Rows per batch read for `schema` when no `read.batch-size` is set."""
    if merges:
        return MERGE_BATCH_ROWS
    return min(BATCH_ROWS_MAX, max(BATCH_ROWS_MIN, BATCH_BYTES // row_bytes_estimate(schema)))


def _in_spark_sized_batches(table, schema, merges: bool):
    """`table` reading in batches sized for Spark, and the bytes a batch is
    sliced to (none when the table or the query set `read.batch-size`: that
    row count is kept as asked)."""
    if "read.batch-size" in table.options.options.to_map():
        return table, None
    rows = batch_rows(schema, merges)
    return table.copy_without_time_travel({"read.batch-size": str(rows)}), BATCH_BYTES


def _within_bytes(batch, cap_bytes: Optional[int]) -> Iterator:
    """`batch`, in zero-copy slices of at most about `cap_bytes` each."""
    size = batch.nbytes
    if cap_bytes is None or size <= cap_bytes or batch.num_rows <= 1:
        yield batch
        return
    rows = max(1, batch.num_rows * cap_bytes // size)
    for offset in range(0, batch.num_rows, rows):
        yield batch.slice(offset, rows)


def _as_query_columns(rows, fields, now: Dict[int, str], target):
    """`rows` (named as the table's schema names them now) as the query's
    columns, by field id; a column the table no longer has is null."""
    import pyarrow as pa

    columns, names = [], []
    if "_row_kind" in rows.column_names:
        columns.append(rows.column("_row_kind"))
        names.append("_row_kind")
    for field_id, name in fields:
        current = now.get(field_id)
        if current is not None and current in rows.column_names:
            columns.append(rows.column(current))
        else:
            columns.append(pa.nulls(rows.num_rows, type=target.field(name).type))
        names.append(name)
    return pa.table(columns, names=names)


def _read_with_row_kind(table, names: Optional[List[str]] = None, with_kinds: bool = True):
    """A reader of `table`'s rows with their kinds (`_row_kind`, unless
    `with_kinds` is false): every column, or only `names` (only those
    columns are read from the files)."""
    from pypaimon.read.table_read import TableRead

    builder = table.new_read_builder()
    if names is not None:
        builder = builder.with_projection(list(names))
    return TableRead(table=table, predicate=None, read_type=builder.read_type(), include_row_kind=with_kinds)


def _shape(data, options: ReadOptions, target) -> Iterator:
    """Row kinds as the query asked: a `rowkind` column with
    `read.changelog`; otherwise only what a reader without row kinds can
    apply as upserts (inserts and updates' new values). Paimon's Spark
    source delivers every record without its kind instead, so a delete
    would arrive as an ordinary row: a deliberate difference
    (docs/spark.md, "Primary keys and row kinds")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if data.num_rows == 0:
        return
    kinds = data.column("_row_kind") if "_row_kind" in data.column_names else None
    data = data.drop(["_row_kind"]) if kinds is not None else data
    if options.read_changelog:
        if kinds is None:
            kinds = pa.array([INSERT] * data.num_rows, pa.string())
        data = data.add_column(0, ROWKIND_COLUMN, kinds)
    elif kinds is not None:
        keep = pc.is_in(kinds, value_set=pa.array([INSERT, UPDATE_AFTER]))
        data = data.filter(keep)
        if data.num_rows == 0:
            return
    try:
        data = data if data.schema.equals(target) else data.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        # A type changed since the query started in a way its type cannot
        # hold (Paimon's read fails here too).
        raise ValueError(
            f"SCHEMA_CHANGED: the rows cannot be read as the schema this query started with ({error}); "
            "stop the query and start it again from the same checkpoint to read the new schema"
        ) from error
    for batch in data.to_batches():
        yield batch


def overwrite_changes(table, change: OverwriteBucket, names: Optional[List[str]] = None):
    """The rows one bucket of a primary-key overwrite delivers, with their
    kinds, as Paimon's streaming read of an `IncrementalSplit` makes them
    (Java `IncrementalChangelogReadProvider`): the merged rows of the files
    the overwrite removed, each as `-D` (`ReverseReader`), then the merged
    rows of the files it added, each with its own kind."""
    import pyarrow as pa

    def merged(files):
        if not files:
            return None
        from pypaimon.read.split import DataSplit

        split = DataSplit(files, change.partition, change.bucket, raw_convertible=False, snapshot_id=change.snapshot_id)
        return _read_with_row_kind(table, names).to_arrow([split])

    before, after = merged(change.before), merged(change.after)
    parts = []
    if before is not None and before.num_rows:
        kinds = before.column("_row_kind")
        if any(kind in (UPDATE_BEFORE, DELETE) for kind in kinds.to_pylist()):
            # Java's ReverseReader refuses these too.
            raise ValueError("an overwrite removed files whose merged rows are retractions")
        parts.append(before.set_column(before.column_names.index("_row_kind"), "_row_kind",
                                       pa.array([DELETE] * before.num_rows, pa.string())))
    if after is not None and after.num_rows:
        parts.append(after.cast(parts[0].schema) if parts else after)
    if not parts:
        from pypaimon.schema.data_types import PyarrowFieldParser

        fields = [f for f in table.table_schema.fields if names is None or f.name in names]
        schema = pa.schema(
            [pa.field("_row_kind", pa.string(), nullable=False)] + list(PyarrowFieldParser.from_paimon_schema(fields))
        )
        return schema.empty_table()
    return pa.concat_tables(parts)


def first_snapshot_at_or_after(snapshots: List[Tuple[int, int]], at_millis: int) -> Optional[int]:
    """SPEC §11's one rule for "the first snapshot at or after a time", as
    Paimon's from-timestamp start resolves it (the snapshot after the last
    one committed before the time): `snapshots` are the live `(id, commit
    time in ms)` pairs; the answer is the earliest id when none was committed
    before the time, and `None` when all were (start after the latest).
    Shared test vectors: testdata/first_snapshot_at_or_after.json."""
    if not snapshots:
        return None
    ordered = sorted(snapshots)
    before = [sid for sid, millis in ordered if millis < at_millis]
    if not before:
        return ordered[0][0]
    start = max(before) + 1
    return start if start <= ordered[-1][0] else None
