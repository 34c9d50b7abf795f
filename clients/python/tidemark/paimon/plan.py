"""Which rows each snapshot of a Paimon table delivers to a streaming
reader, decided as Paimon's own streaming read decides it, and the Spark
schema of those rows. Used by the stream (stream.py); the only user of
pypaimon's private API.

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

import contextvars
import importlib.metadata
import json
import os
from typing import Dict, List, Optional, Tuple

from tidemark.paimon.options import effective, truthy
from tidemark.paimon.partition_order import PartitionOrder

PYPAIMON_VERSION = "2.1.0"

# Paimon's bucket number of a postpone-bucket table (`bucket = -2`), whose
# new files wait in bucket -2 until compaction moves them to real buckets.
POSTPONE_BUCKET = -2

# Row kinds as Paimon writes them.
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
ROWKIND_COLUMN = "rowkind"
# The column Paimon's audit log adds after `rowkind` when the table reads
# sequence numbers (Java `SpecialFields.SEQUENCE_NUMBER`).
SEQUENCE_COLUMN = "_SEQUENCE_NUMBER"


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


# The attribute marking a full-scan split read as Paimon's audit log reads it
# (read.changelog): Java `AuditLogRead` calls `forceKeepDelete()`, so the
# merge keeps a key's delete that compaction has not dropped yet and the
# query receives it as -D; pypaimon's merge read always drops them
# (`DropDeleteRecordReader`). The mark travels with the split to executors.
KEEP_DELETES = "tidemark_keep_deletes"
_keeping_deletes = contextvars.ContextVar("tidemark_keeping_deletes", default=False)


# The attribute through which a split being read collects the sequence
# numbers of its records (read.changelog with table-read.sequence-number.enabled):
# Java's `ValueContentRowDataRecordIterator` joins `kv.sequenceNumber()` in
# front of each row; pypaimon's `KeyValueUnwrapIterator` drops it, so the
# numbers are taken as the records pass and joined to the rows they became.
SEQUENCE_SINK = "tidemark_sequence_sink"
_sequence_sink = contextvars.ContextVar("tidemark_sequence_sink", default=None)


class _SequenceRecorder:
    """A KeyValue reader that appends each record's sequence number to
    `sink` as it hands the record on."""

    def __init__(self, reader, sink):
        self._reader, self._sink = reader, sink

    def read_batch(self):
        batch = self._reader.read_batch()
        return None if batch is None else _SequenceRecordingIterator(batch, self._sink)

    def close(self) -> None:
        self._reader.close()


class _SequenceRecordingIterator:
    def __init__(self, batch, sink):
        self._batch, self._sink = batch, sink

    def next(self):
        kv = self._batch.next()
        if kv is not None:
            self._sink.append(kv.sequence_number)
        return kv


def install_audit_read() -> None:
    """Teaches pypaimon's primary-key read the two things Paimon's audit log
    does, for the split being read only (every other read is unchanged):
    keep the deletes of a split marked KEEP_DELETES, and hand the sequence
    number of every record it unwraps to the split's SEQUENCE_SINK (deletes
    are dropped before the unwrap, and tidemark reads with no filter or
    limit, so the sink holds one number per delivered row, in the rows'
    order). Both marks are read where the split's reader is built, one
    patch of `create_reader`. Idempotent; called where marked splits are
    read."""
    from pypaimon.read import split_read

    if getattr(split_read, "_tidemark_audit_read", False):
        return
    drop_deletes = split_read.DropDeleteRecordReader
    unwrap = split_read.KeyValueUnwrapRecordReader
    create_reader = split_read.MergeFileSplitRead.create_reader

    def maybe_drop_deletes(reader):
        return reader if _keeping_deletes.get() else drop_deletes(reader)

    def unwrap_recording(kv_reader):
        sink = _sequence_sink.get()
        return unwrap(kv_reader if sink is None else _SequenceRecorder(kv_reader, sink))

    def create_reader_marked(self):
        keep = bool(getattr(self.split, KEEP_DELETES, False))
        sink = getattr(self.split, SEQUENCE_SINK, None)
        if not keep and sink is None:
            return create_reader(self)
        tokens = (_keeping_deletes.set(keep), _sequence_sink.set(sink))
        try:
            return create_reader(self)
        finally:
            _sequence_sink.reset(tokens[1])
            _keeping_deletes.reset(tokens[0])

    split_read.DropDeleteRecordReader = maybe_drop_deletes
    split_read.KeyValueUnwrapRecordReader = unwrap_recording
    split_read.MergeFileSplitRead.create_reader = create_reader_marked
    split_read._tidemark_audit_read = True


class ReadOptions:
    """What shapes a table's stream: its own options, overridden by the
    query's (Paimon: dynamic options over table options)."""

    def __init__(self, table, overrides: Dict[str, str]):
        merged = effective(table.options.options.to_map(), overrides)
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
        # Paimon's BUCKET_UNAWARE mode, decided by the table (its files are
        # stored in bucket 0, so the manifest's bucket cannot tell).
        self.unaware_buckets = not self.primary_key and str(merged.get("bucket", "-1")).strip() == "-1"
        self.changelog_producer = str(merged.get("changelog-producer", "none")).lower()
        if self.primary_key:
            self.read_overwrite = truthy(merged.get("streaming-read-overwrite"))
        else:
            self.read_overwrite = truthy(merged.get("streaming-read-append-overwrite"))
        self.read_changelog = truthy(merged.get("read.changelog"))
        reads_sequence = truthy(merged.get("table-read.sequence-number.enabled"))
        if reads_sequence and not self.primary_key:
            # Java SchemaValidation.validateChangelogReadSequenceNumber.
            raise ValueError(
                "Cannot enable 'table-read.sequence-number.enabled' for non-primary-key table. "
                "Sequence number is only available for primary key tables."
            )
        # Java AuditLogTable: `_SEQUENCE_NUMBER` after `rowkind`.
        self.sequence_numbers = self.read_changelog and reads_sequence
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


def order_splits(table, splits: list, order: Optional[PartitionOrder] = None) -> list:
    """A plan's splits in the order Paimon's Spark source indexes them
    (Java `StreamHelper.convertPlanToIndexedSplits`): by partition as Spark
    spells its path (partition_order), then bucket, and a stable sort, so
    the splits of one bucket keep the order the split generator gave them
    (for the files of a bucket, commit order)."""
    order = order or PartitionOrder(table)
    return sorted(splits, key=lambda split: (order.key(split.partition), split.bucket))


def filter_levels(splits, keep) -> list:
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


class Planner:
    """Plans one snapshot at a time, as Paimon's streaming read would."""

    def __init__(self, table, options: ReadOptions):
        check_pypaimon()
        from pypaimon.manifest.manifest_file_manager import ManifestFileManager
        from pypaimon.manifest.manifest_list_manager import ManifestListManager

        self.table = table
        # How this table's partitions sort (fixed for the planner's table).
        self._order = PartitionOrder(table)
        self.options = options
        self._lists = ManifestListManager(table)
        self._files = ManifestFileManager(table)

    def plan(self, snapshot, full: bool) -> List[Planned]:
        """The splits `snapshot` delivers: whole when `full`, otherwise its
        follow-up plan (empty when Paimon skips it)."""
        if full:
            splits = self._initial(snapshot)
            if self.options.read_changelog and self.options.primary_key:
                for split in splits:
                    setattr(split, KEEP_DELETES, True)
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
        return [Planned(split=s) for s in order_splits(self.table, self._chosen_partitions(splits), self._order)]

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
            return filter_levels(splits, lambda level: level > 0)
        if self.options.primary_key and self.options.changelog_producer == "full-compaction":
            top = self.options.num_levels - 1
            return filter_levels(splits, lambda level: level == top)
        return splits

    def _streaming_splits(self, snapshot, manifest_files) -> list:
        """Splits of the files a snapshot added (its ADD entries, in the
        order its manifests list them), as Paimon's streaming read makes them
        (Java `SnapshotReaderImpl.generateSplits` with `isStreaming`): one
        split per (partition, bucket) holding that bucket's files in commit
        order (`MergeTreeSplitGenerator.splitForStreaming`,
        `AppendOnlySplitGenerator.splitForStreaming`), read one file after
        the other without merging; only a bucket-unaware append table
        (`bucket = -1`, its files in bucket 0) is packed as a batch read packs it
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
            if self.options.unaware_buckets:
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
            return [Planned(split=s) for s in order_splits(self.table, self._chosen_partitions(splits), self._order)]
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
        changes.sort(key=lambda c: (self._order.key(c.partition), c.bucket))
        return [Planned(overwrite=change) for change in changes]
