"""The source's options, without Spark (the Spark side is in
test_spark_paimon_tables.py): Paimon's read limits, split by split, as Java's
`PaimonReadLimitGuard` admits them; options that would change rows refused
by name, the others accepted; `scan.timestamp`, `full` and `compacted-full`
resolved as Paimon's CoreOptions.startupMode and starting scanners do."""

from __future__ import annotations

import pytest

from tidemark.paimon_limits import TriggerLimits


def admitted(limit: TriggerLimits, splits, last_batch_ms: int = 0, now_ms: int = 10_000):
    """How many of `splits` ((rows, bytes) each) one batch takes, and
    whether it is held back."""
    guard = limit.guard(last_batch_ms, now_ms)
    taken = 0
    for rows, size in splits:
        if not guard.admit(rows, size):
            break
        taken += 1
    return taken, guard.skip_batch


SPLITS = [(10, 1000)] * 6


def test_keys_are_paimons_matched_case_insensitively_and_checked_by_name():
    assert TriggerLimits.from_options({"read.stream.maxfilespertrigger": "2"}.get).max_files == 2
    with pytest.raises(ValueError, match='"read.stream.maxRowsPerTrigger" must be a whole number'):
        TriggerLimits.from_options({"read.stream.maxrowspertrigger": "many"}.get)
    with pytest.raises(ValueError, match='"read.stream.maxFilesPerTrigger" must be at least 1'):
        TriggerLimits.from_options({"read.stream.maxfilespertrigger": "0"}.get)
    with pytest.raises(ValueError, match="go together"):
        TriggerLimits.from_options({"read.stream.minrowspertrigger": "5"}.get)
    # tidemark's older name for the file limit still works; the smaller wins.
    both = {"max-splits-per-batch": "3", "read.stream.maxfilespertrigger": "5"}
    assert TriggerLimits.from_options(both.get).max_files == 3
    assert not TriggerLimits.from_options({}.get).any()


def test_a_file_limit_counts_splits():
    assert admitted(TriggerLimits(max_files=1), SPLITS) == (1, False)
    assert admitted(TriggerLimits(max_files=4), SPLITS) == (4, False)


def test_row_and_byte_limits_admit_while_below_so_the_last_split_may_pass_them():
    # 25 rows: 10, 20 are below, the third split brings 30.
    assert admitted(TriggerLimits(max_rows=25), SPLITS) == (3, False)
    assert admitted(TriggerLimits(max_rows=20), SPLITS) == (2, False)
    assert admitted(TriggerLimits(max_bytes=1500), SPLITS) == (2, False)
    # The first split always goes, whatever its size.
    assert admitted(TriggerLimits(max_bytes=1), [(10, 10**9)]) == (1, False)
    # Every limit applies: the tightest ends the batch.
    assert admitted(TriggerLimits(max_files=5, max_rows=25, max_bytes=10**9), SPLITS) == (3, False)


def test_too_few_rows_wait_until_the_delay_has_passed():
    few = TriggerLimits(min_rows=100, max_delay_ms=5_000)
    # 60 rows available, the last batch 1 s ago: held back.
    assert admitted(few, SPLITS, last_batch_ms=9_000, now_ms=10_000) == (6, True)
    # 6 s ago: past the delay, the batch goes with what there is.
    assert admitted(few, SPLITS, last_batch_ms=4_000, now_ms=10_000) == (6, False)
    # Enough rows: no wait.
    assert admitted(TriggerLimits(min_rows=50, max_delay_ms=5_000), SPLITS, 9_000, 10_000) == (6, False)
    # The first batch of a query (no batch before) is never held back.
    assert admitted(few, SPLITS, last_batch_ms=0, now_ms=10_000) == (6, False)


def test_options_that_would_change_rows_are_refused_by_name_and_others_accepted(tmp_path):
    from harness import PaimonTable

    from tidemark.paimon_source import SourceOptions, open_source

    table = PaimonTable(tmp_path / "warehouse", "options")
    table.commit()

    def opened(**extra):
        return open_source(SourceOptions({"path": table.path, "consumer-id": "c", **extra}))[0]

    for key, value in [
        ("scan.watermark", "5"),
        ("incremental-between", "1,2"),
        ("scan.bucket", "0"),
        ("scan.ignore-lost-files", "true"),
    ]:
        with pytest.raises(ValueError, match=f'option "{key}" is not supported'):
            opened(**{key: value})
    # scan.version is a tag when one of that name exists, else a snapshot id
    # (Java TimeTravelUtil.adaptScanVersion); a tag start is checked against
    # the tag file when the query starts (test_paimon_stream.py).
    with pytest.raises(ValueError, match='option "scan.version" names no tag and no snapshot id'):
        opened(**{"scan.version": "tag-1"})
    with pytest.raises(ValueError, match='"scan.tag-name" needs scan.mode "from-snapshot"'):
        opened(**{"scan.tag-name": "t1", "scan.mode": "latest"})
    assert SourceOptions({"path": table.path, "consumer-id": "c", "scan.tag-name": "t1"}).resolve(table.table).scan_mode == "from-snapshot"
    # Sequence numbers exist on primary-key tables only (Java
    # SchemaValidation); on one they are read (test_paimon_plan.py).
    for extra in ({"read.changelog": "true"}, {}):
        with pytest.raises(ValueError, match="Cannot enable 'table-read.sequence-number.enabled' for non-primary-key"):
            opened(**{"table-read.sequence-number.enabled": "true", **extra})
    # Paimon's internal stream scan modes (file-monitor: every file a
    # snapshot touched, compaction's too) change which rows arrive.
    with pytest.raises(ValueError, match='option "stream-scan-mode" is not supported'):
        opened(**{"stream-scan-mode": "file-monitor"})
    opened(**{"stream-scan-mode": "none"})
    with pytest.raises(ValueError, match='scan.mode "latest-delta" is not supported'):
        opened(**{"scan.mode": "latest-delta"})
    # Options that change no row are accepted, as Paimon accepts them; so
    # are the incremental options Paimon reads only beside
    # incremental-between (on their own it ignores them).
    opened(**{"scan.manifest.parallelism": "4", "read.batch-size": "100", "scan.ignore-lost-files": "false"})
    for key, value in [
        ("incremental-to-auto-tag", "t1"),
        ("incremental-between-scan-mode", "delta"),
        ("incremental-between-tag-to-snapshot", "true"),
    ]:
        opened(**{key: value})
    # A numeric scan.version is a snapshot id, as Paimon reads it.
    version = SourceOptions({"path": table.path, "consumer-id": "c", "scan.version": "1"}).resolve(table.table)
    assert (version.scan_mode, version.scan_snapshot_id) == ("from-snapshot", 1)
    # Paimon's `full` is latest-full; scan.timestamp is read in local time.
    assert SourceOptions({"path": table.path, "consumer-id": "c", "scan.mode": "full"}).resolve(table.table).scan_mode == "latest-full"
    spelled = SourceOptions({"path": table.path, "consumer-id": "c", "scan.timestamp": "2026-12-03 10:15:00.250"})
    import datetime

    expected = int(datetime.datetime(2026, 12, 3, 10, 15, 0, 250000).astimezone().timestamp() * 1000)
    assert (spelled.resolve(table.table).scan_mode, spelled.scan_timestamp_millis) == ("from-timestamp", expected)
    with pytest.raises(ValueError, match='"scan.timestamp" must look like'):
        SourceOptions({"path": table.path, "consumer-id": "c", "scan.timestamp": "yesterday"}).resolve(table.table)


def test_compacted_full_starts_at_the_latest_compaction(tmp_path):
    from harness import PaimonTable

    from tidemark.paimon.options import SourceOptions
    from tidemark.paimon.runner import open_source
    from tidemark.paimon.startup import startup
    from tidemark.paimon.table import TableSnapshots

    def start_of(latest: int):
        options = SourceOptions({"path": table.path, "consumer-id": "c", "scan.mode": "compacted-full"})
        opened, _ = open_source(options)
        return startup(options, TableSnapshots(opened, options.effective), latest)

    table = PaimonTable(tmp_path / "warehouse", "compacted")
    table.commit()
    assert start_of(1) == ("from-snapshot-full", 1), "no compaction: the latest snapshot"
    table.commit()
    compacted = table.compact()
    latest = table.commit()
    assert start_of(latest) == ("from-snapshot-full", compacted)


def test_the_changelog_outlives_snapshots_as_paimon_decides_it():
    from tidemark.paimon_plan import changelog_decoupled

    assert not changelog_decoupled({})
    assert not changelog_decoupled({"snapshot.num-retained.max": "5"})
    assert changelog_decoupled({"snapshot.num-retained.max": "5", "changelog.num-retained.max": "50"})
    assert changelog_decoupled({"changelog.time-retained": "2 h"})
    assert not changelog_decoupled({"changelog.time-retained": "30 min"})
    assert changelog_decoupled({"changelog.num-retained.min": "20"})


def test_scan_partitions_is_read_as_paimons_static_partition_loader_reads_it(tmp_path):
    """Java `ParameterUtils.getPartitions` and `StaticPartitionLoader`:
    `k=v,k=v` per partition, `;` between partitions, a key left out is the
    default partition (null), values compared as the partition's type."""
    import pyarrow as pa
    from harness import write_table
    from pypaimon import CatalogFactory, Schema

    from tidemark.paimon_plan import Planner, ReadOptions

    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("db", True)
    arrow = pa.schema([("id", pa.int64()), ("dt", pa.int32()), ("region", pa.string())])
    catalog.create_table("db.t", Schema.from_pyarrow_schema(arrow, partition_keys=["dt", "region"]), False)
    table = catalog.get_table("db.t")
    write_table(
        table,
        pa.table({"id": [1, 2, 3, 4], "dt": [1, 1, 2, 1], "region": ["eu", "us", "eu", None]}, schema=arrow),
    )
    latest = table.snapshot_manager().get_latest_snapshot()

    def chosen(text):
        planned = Planner(table, ReadOptions(table, {"scan.partitions": text})).plan(latest, True)
        return sorted(tuple(p.split.partition.values) for p in planned)

    assert chosen("dt=1,region=eu") == [(1, "eu")]
    assert chosen(" dt = 01 , region=eu ") == [(1, "eu")], "an INT compares as a number"
    assert chosen("dt=1,region=eu;dt=2,region=eu") == [(1, "eu"), (2, "eu")]
    assert chosen("dt=1") == [(1, None)], "a key left out is the default partition"
    assert chosen("dt=1,region=__DEFAULT_PARTITION__") == [(1, None)]
    assert chosen("dt=3,region=eu") == []
    for text, message in [
        ("country=fr", "not a partition key of this table"),
        ("dt", "Please use format 'key=value'"),
        ("dt=x,region=eu", "dt='x' is not a INT value"),
        ("max_pt()", "max_pt.. and max_two_pt.. are not supported"),
        (";", "names no partition"),
    ]:
        with pytest.raises(ValueError, match=message):
            ReadOptions(table, {"scan.partitions": text})
    catalog.create_table("db.plain", Schema.from_pyarrow_schema(arrow), False)
    with pytest.raises(ValueError, match="not supported for non-partitioned table"):
        ReadOptions(catalog.get_table("db.plain"), {"scan.partitions": "dt=1"})


class SizedSplit:
    """A planned split of `size` bytes in bucket `bucket`, named for the
    assertions."""

    def __init__(self, name: str, size: int, bucket: int = 0):
        self.name, self.size, self.bucket = name, size, bucket

    def stats(self):
        return (1, self.size)

    def lane(self):
        return ("p0",), self.bucket


def grouped(sizes_mb, target_mb: int, min_partitions: int, buckets=None):
    from tidemark.paimon.partitions import group_splits

    splits = [
        SizedSplit(f"s{i}", size << 20, buckets[i] if buckets else 0) for i, size in enumerate(sizes_mb)
    ]
    groups = group_splits(splits, target_mb << 20, min_partitions, keep_buckets_together=buckets is not None)
    return [[split.name for split in group] for group in groups]


def test_a_batch_is_spread_over_the_cores_in_runs_of_consecutive_splits():
    # 40 small files (a 22 MB table): one task per core, not one for all
    # (Java BinPackingSplits: the total over Spark's default parallelism).
    runs = grouped([1] * 40, 128, 2)
    assert [len(run) for run in runs] == [20, 20]
    assert sum(runs, []) == [f"s{i}" for i in range(40)]
    # Fewer splits than cores: one split per task, never an empty task.
    assert grouped([1, 1], 128, 8) == [["s0"], ["s1"]]
    # Uneven splits: the runs stay in order, each within half a split of an
    # equal share (weights 5+4 = 9, 10+4 = 14, 3+4 = 7, 30+4 = 34).
    assert grouped([5, 10, 3, 30], 128, 2) == [["s0", "s1", "s2"], ["s3"]]
    # A large batch is still read at most `target` per task: 10 x (60 + 4)
    # MB is 5 tasks of 128 MB; 10 x (70 + 4) MB needs 6.
    assert grouped([60] * 10, 128, 2) == [[f"s{i}", f"s{i + 1}"] for i in range(0, 10, 2)]
    runs = grouped([70] * 10, 128, 2)
    assert len(runs) == 6 and sum(runs, []) == [f"s{i}" for i in range(10)]
    # 0: one split per task, as Paimon's Spark streaming source does.
    assert grouped([1, 1, 1], 0, 2) == [["s0"], ["s1"], ["s2"]]
    assert grouped([], 128, 2) == []


def test_min_partitions_is_checked_by_name(tmp_path):
    from tidemark.paimon.options import SourceOptions, default_min_partitions

    options = {"path": str(tmp_path / "t"), "consumer-id": "c"}
    assert SourceOptions(options).min_partitions == default_min_partitions() >= 1
    assert SourceOptions({**options, "tidemark.min-partitions": "16"}).min_partitions == 16
    for bad in ("0", "-2", "many"):
        with pytest.raises(ValueError, match='"tidemark.min-partitions" must be a whole number of at least 1'):
            SourceOptions({**options, "tidemark.min-partitions": bad})


def test_the_splits_of_one_bucket_share_a_task_when_its_rows_have_an_order():
    # Three snapshots' deltas of a 2-bucket table in one batch, in the
    # batch's order: s0 (b0), s1 (b1), s2 (b0), s3 (b1), s4 (b0), s5 (b1).
    # A key's three changes are in one task, in commit order, so a sink
    # writing task by task applies them in order.
    assert grouped([1] * 6, 128, 2, buckets=[0, 1] * 3) == [["s0", "s2", "s4"], ["s1", "s3", "s5"]]
    # More cores than buckets: one task per bucket, however many splits.
    assert grouped([1] * 6, 128, 8, buckets=[0, 1] * 3) == [["s0", "s2", "s4"], ["s1", "s3", "s5"]]
    # A bucket is never cut, even past the target size (418 MB want 4
    # tasks: 3 buckets make 3); buckets are spread by weight, the heaviest
    # first, each to the least loaded task.
    assert grouped([200, 200, 1, 1], 128, 2, buckets=[0, 0, 1, 2]) == [["s0", "s1"], ["s2"], ["s3"]]
    assert grouped([200, 200, 1, 1], 1024, 2, buckets=[0, 0, 1, 2]) == [["s0", "s1"], ["s2", "s3"]]
    assert grouped([], 128, 2, buckets=[]) == []


def test_buckets_have_an_order_for_primary_keys_and_fixed_bucket_append_tables(tmp_path):
    from harness import PaimonTable, PrimaryKeyTable

    from tidemark.paimon_plan import ReadOptions

    keyed = PrimaryKeyTable(tmp_path / "warehouse", "keyed", options={"bucket": "2"})
    fixed = PaimonTable(tmp_path / "warehouse", "fixed", options={"bucket": "2", "bucket-key": "id"})
    unaware = PaimonTable(tmp_path / "warehouse", "unaware")
    assert ReadOptions(keyed.table, {}).ordered_buckets
    assert ReadOptions(fixed.table, {}).ordered_buckets
    assert not ReadOptions(unaware.table, {}).ordered_buckets
