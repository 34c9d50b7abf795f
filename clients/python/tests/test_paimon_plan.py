"""The planner's rules that need no Spark: SPEC §11's "first snapshot at or
after a time" against the shared test vectors, the pinned pypaimon version,
and which snapshot kinds deliver rows, checked against pypaimon's own
streaming read of tables written by pypaimon."""

from __future__ import annotations

import json
import pathlib

import pytest
from harness import (
    REPO,
    PaimonTable,
    PrimaryKeyTable,
    paimon_stream,
    partition_fragment_cases,
    raw_key_value_records,
    write_table,
)

from tidemark.paimon import plan as paimon_plan
from tidemark.paimon import read as paimon_read
from tidemark.paimon.partition_order import paimon_value_string, partition_fragment
from tidemark.paimon.plan import Planner, ReadOptions, filter_levels
from tidemark.paimon.read import read_with_row_kind
from tidemark.paimon.table import first_snapshot_at_or_after

VECTORS = json.loads((REPO / "testdata" / "first_snapshot_at_or_after.json").read_text())


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_first_snapshot_at_or_after_follows_the_shared_vectors(case):
    snapshots = [tuple(pair) for pair in case["snapshots"]]
    assert first_snapshot_at_or_after(snapshots, case["at"]) == case["expect"]


def test_another_pypaimon_version_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(paimon_plan.importlib.metadata, "version", lambda name: "9.9.9")
    with pytest.raises(RuntimeError, match="pypaimon 2.1.0.*found pypaimon 9.9.9"):
        paimon_plan.check_pypaimon()


def planned_ids(table, options, snapshot_id: int, full: bool = False):
    planner = Planner(table, ReadOptions(table, options))
    snapshot = table.snapshot_manager().get_snapshot_by_id(snapshot_id)
    return planner.plan(snapshot, full)


def test_compact_and_overwrite_snapshots_are_planned_as_paimon_streams_them(tmp_path):
    table = PaimonTable(tmp_path / "warehouse", "plan")
    table.commit()
    table.commit()
    compacted = table.compact()
    overwritten = table.overwrite(rows=2, part="p1")
    table.commit()
    # Nothing from the compaction; the overwrite only when asked.
    assert planned_ids(table.table, {}, compacted) == []
    assert planned_ids(table.table, {}, overwritten) == []
    asked = planned_ids(table.table, {"streaming-read-append-overwrite": "true"}, overwritten)
    # Paimon's schema validation refuses the primary-key option here.
    with pytest.raises(ValueError, match="Please use streaming-read-append-overwrite"):
        ReadOptions(table.table, {"streaming-read-overwrite": "true"})
    assert len(asked) == 1, "the overwrite added one file"
    # Paimon's own streaming read delivers the same rows.
    streamed = sorted(row["id"] for row in paimon_stream(table.table, 1))
    assert streamed == table.ids([1, 2, 5])


def overwrite_rows(table, snapshot_id: int) -> list:
    options = {"streaming-read-overwrite": "true", "read.changelog": "true"}
    planned = planned_ids(table, options, snapshot_id)
    return [(r["rowkind"], r["id"], r["balance"]) for r in rows_of(table, options, planned)]


@pytest.mark.parametrize(
    "engine",
    [
        {},
        {"merge-engine": "first-row"},
        {"deletion-vectors.enabled": "true"},
    ],
    ids=["deduplicate", "first-row", "deletion-vectors"],
)
def test_an_overwrite_of_a_primary_key_table_is_read_as_paimon_streams_it(tmp_path, engine):
    """Java IncrementalChangelogReadProvider: per bucket, every row the
    removed files held as -D, then the added files' rows with their kinds;
    read from the overwrite's own files, so it works with the snapshot
    before expired and with level-0 files a batch read would hide."""
    import shutil

    table = PrimaryKeyTable(tmp_path / "warehouse", "plan", options={"bucket": "2", **engine})
    table.write([("+I", 1, 10), ("+I", 2, 20), ("+I", 3, 30)])
    import pyarrow as pa

    snapshot_id = write_table(
        table.table,
        pa.table({"id": [2, 3, 4], "balance": [20, 31, 40], "op": ["+I", "+I", "+I"]}, schema=table.arrow_schema),
        overwrite={},
    )
    assert table.table.snapshot_manager().get_snapshot_by_id(snapshot_id).commit_kind == "OVERWRITE"
    # The snapshot before is gone (expired): not needed.
    (pathlib.Path(table.path) / "snapshot" / f"snapshot-{snapshot_id - 1}").unlink()
    rows = overwrite_rows(table.table, snapshot_id)
    assert sorted(r for r in rows if r[0] == "-D") == [("-D", 1, 10), ("-D", 2, 20), ("-D", 3, 30)]
    assert sorted(r for r in rows if r[0] != "-D") == [("+I", 2, 20), ("+I", 3, 31), ("+I", 4, 40)]
    # Per key: the removal before the addition.
    for key in (2, 3):
        kinds = [kind for kind, k, _ in rows if k == key]
        assert kinds == ["-D", "+I"], (key, rows)
    shutil.rmtree(tmp_path / "warehouse")


def rows_of(table, options, planned) -> list:
    return [
        row
        for split in planned
        for batch in paimon_read.read_planned(table, ReadOptions(table, options), split, spark_schema_of(table, options))
        for row in batch.to_pylist()
    ]


def spark_schema_of(table, options):
    return paimon_read.spark_schema(table, ReadOptions(table, options))


def in_commit_order(table, snapshot_id: int) -> list:
    """The oracle for a delta (Java `MergeTreeSplitGenerator.splitForStreaming`,
    `AppendOnlySplitGenerator.splitForStreaming`): per (partition, bucket),
    every row of the snapshot's files, file after file in the order the
    commit wrote them (their sequence numbers), each file's rows as stored."""
    import pyarrow.parquet as pq

    from pypaimon.manifest.manifest_file_manager import ManifestFileManager
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    snapshot = table.snapshot_manager().get_snapshot_by_id(snapshot_id)
    entries = ManifestFileManager(table).read_entries_parallel(ManifestListManager(table).read_delta(snapshot))
    by_bucket = {}
    for entry in entries:
        by_bucket.setdefault((tuple(entry.partition.values), entry.bucket), []).append(entry)
    rows = []
    for (partition, bucket), bucket_entries in sorted(by_bucket.items(), key=lambda item: (item[0][0], item[0][1])):
        directory = "".join(f"{key}={value}/" for key, value in zip(table.partition_keys, partition))
        for entry in sorted(bucket_entries, key=lambda e: e.file.min_sequence_number):
            path = f"{table.table_path}/{directory}bucket-{bucket}/{entry.file.file_name}"
            stored = pq.ParquetFile(path).read().to_pylist()
            rows += [{k: v for k, v in row.items() if not k.startswith("_")} for row in stored]
    return rows


def test_two_files_of_one_commit_touching_one_key_are_read_in_commit_order(tmp_path):
    import pyarrow as pa

    table = PrimaryKeyTable(tmp_path / "warehouse", "order", options={"target-file-size": "1b"})
    schema = table.arrow_schema
    snapshot = write_table(
        table.table,
        [
            pa.table({"id": [1, 2], "balance": [10, 20], "op": ["+I", "+I"]}, schema=schema),
            pa.table({"id": [1], "balance": [11], "op": ["+U"]}, schema=schema),
        ],
    )
    planned = planned_ids(table.table, {"read.changelog": "true"}, snapshot)
    assert len(planned) == 1, "one split for the bucket"
    assert [len(p.split.files) for p in planned] == [2], "the commit wrote two files"
    rows = [(r["rowkind"], r["id"], r["balance"]) for r in rows_of(table.table, {"read.changelog": "true"}, planned)]
    # Key 1's changes in the order they were made: 10, then 11.
    assert rows == [("+I", 1, 10), ("+I", 2, 20), ("+U", 1, 11)]
    assert [(r["id"], r["balance"]) for r in in_commit_order(table.table, snapshot)] == [(1, 10), (2, 20), (1, 11)]


FRAGMENT_CASES = partition_fragment_cases()


@pytest.mark.parametrize("case", FRAGMENT_CASES, ids=[c["name"] for c in FRAGMENT_CASES])
def test_a_partition_is_spelled_as_paimons_spark_source_orders_it(case):
    """testdata/spark_partition_fragments.json (its fragments checked
    against Spark's own getPathFragment by test_spark_partition_order.py)."""
    types, legacy = case["paimon_types"], case["legacy"]
    strings = [paimon_value_string(v, t, legacy) for v, t in zip(case["decoded"], types)]
    assert strings == case["paimon_strings"]
    assert partition_fragment(case["columns"], types, case["decoded"], case["default_name"], legacy) == case["fragment"]


def test_a_plans_splits_are_ordered_as_sparks_partition_paths_compare(tmp_path):
    """Java compares `dt=a` with `dt=a-1` (a prefix first; a trailing `/`
    put `a-1` first), and `dt=x%2F` with `dt=x.` (Spark escapes `/`, and
    `%` sorts before `.`; unescaped, `x.` came first)."""
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([("dt", pa.string()), ("v", pa.int64())])
    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("order", True)
    catalog.create_table("order.t", Schema.from_pyarrow_schema(schema, partition_keys=["dt"]), False)
    table = catalog.get_table("order.t")
    values = ["a-1", "x.", "a", "x/", "Z"]
    snapshot = write_table(table, pa.table({"dt": values, "v": list(range(len(values)))}, schema=schema))
    planned = planned_ids(table, {}, snapshot, full=True)
    assert [p.split.partition.values[0] for p in planned] == ["Z", "a", "a-1", "x/", "x."]


def test_a_bucketed_append_table_keeps_each_buckets_order(tmp_path):
    import pyarrow as pa

    # Tiny files and tiny splits: a batch split generator would make one
    # split per file and order them by name (random); a streaming read keeps
    # one split per bucket, its files in the order they were written.
    table = PaimonTable(
        tmp_path / "warehouse",
        "buckets",
        options={"bucket": "2", "bucket-key": "id", "target-file-size": "1b"},
    )
    pieces = [
        pa.table({"id": [i, i + 1], "part": ["p1", "p1"], "value": [f"w{n}", f"w{n}"]}, schema=table.arrow_schema)
        for n, i in enumerate(range(0, 40, 2))
    ]
    snapshot = write_table(table.table, pieces)
    planned = planned_ids(table.table, {}, snapshot)
    assert sorted(p.split.bucket for p in planned) == [0, 1], "one split per bucket"
    assert sum(len(p.split.files) for p in planned) >= 20
    rows = [(r["id"], r["value"]) for r in rows_of(table.table, {}, planned)]
    assert rows == [(r["id"], r["value"]) for r in in_commit_order(table.table, snapshot)]


def test_a_postpone_bucket_tables_full_scan_includes_rows_not_compacted_yet(tmp_path):
    # bucket = -2 without a changelog producer: Java DataTableStreamScan
    # reads the postpone bucket too (only real buckets with a producer), each
    # record as written (MergeFileSplitRead.createNoMergeReader).
    table = PrimaryKeyTable(tmp_path / "warehouse", "postpone", options={"bucket": "-2"})
    table.write([("+I", 1, 10), ("+I", 2, 20)])
    latest = table.write([("+U", 1, 11), ("-D", 2, 20), ("+I", 3, 30)])
    options = {"read.changelog": "true"}
    full = planned_ids(table.table, options, latest, full=True)
    assert [p.split.bucket for p in full] == [-2], "the postpone bucket's files are in the full scan"
    rows = [(r["rowkind"], r["id"], r["balance"]) for r in rows_of(table.table, options, full)]
    assert rows == [("+I", 1, 10), ("+I", 2, 20), ("+U", 1, 11), ("-D", 2, 20), ("+I", 3, 30)]
    # Without read.changelog a reader gets what it can apply as upserts.
    upserts = [(r["id"], r["balance"]) for r in rows_of(table.table, {}, planned_ids(table.table, {}, latest, full=True))]
    assert upserts == [(1, 10), (2, 20), (1, 11), (3, 30)]
    # With a changelog producer only real buckets are read (none yet).
    assert planned_ids(table.table, {"changelog-producer": "input"}, latest, full=True) == []


def test_the_level_filtered_full_scan_keeps_each_files_deletion_vector(tmp_path):
    """lookup / full-compaction tables start from compacted files only
    (Java DataTableStreamScan.tryFirstPlan's level filter), each with its
    deletion vector. Java-written compacted files and deletion vectors are
    forged here: the planner is given a split (as pypaimon's scan makes it)
    of a level-5 file whose key 3 a deletion vector deletes, and a level-0
    file the filter drops."""
    import dataclasses

    from pypaimon.deletionvectors.bitmap_deletion_vector import BitmapDeletionVector
    from pypaimon.read.split import DataSplit
    from pypaimon.table.source.deletion_file import DeletionFile

    table = PrimaryKeyTable(tmp_path / "warehouse", "dv", options={"deletion-vectors.enabled": "true"})
    one = table.write([("+I", 1, 10), ("+I", 2, 20), ("+I", 3, 30)])
    two = table.write([("+I", 4, 40)])
    # The files as written (level 0), with their paths, from the deltas.
    [scanned] = [p.split for p in planned_ids(table.table, {}, one)]
    [first] = scanned.files
    [second] = [p.split for p in planned_ids(table.table, {}, two)][0].files
    compacted = dataclasses.replace(first, level=5)
    compacted.file_path = first.file_path
    vector = BitmapDeletionVector()
    vector.delete(2)  # the third row of the compacted file: key 3
    index = tmp_path / "dv-index"
    serialized = vector.serialize()
    index.write_bytes(serialized)
    deletion = DeletionFile(str(index), 0, len(serialized) - 8, 1)
    split = DataSplit([compacted, second], scanned.partition, scanned.bucket, data_deletion_files=[deletion, None])

    kept = filter_levels([split], lambda level: level > 0)
    assert [f.level for f in kept[0].files] == [5]
    rows = read_with_row_kind(table.table).to_arrow(kept).to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 2], "key 3 stays deleted; key 4 (level 0) is not read"


def test_rows_of_newer_schemas_are_read_with_the_querys_schema_by_field_id(tmp_path):
    """Java SchemaEvolutionUtil: a query reads files of later schemas with
    the schema it started with: an added column is left out, a renamed one
    keeps the query's name, a dropped one reads as null; a query that
    declared fewer columns reads only those."""
    import pyarrow as pa
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    table = PaimonTable(tmp_path / "warehouse", "evolve")
    table.commit()
    catalog = table.catalog
    catalog.alter_table(table.id, [SchemaChange.add_column("extra", AtomicType("STRING"))])
    at_start = catalog.get_table(table.id)
    started = spark_schema_of(at_start, {})
    fields = paimon_read.query_fields(at_start, started)
    catalog.alter_table(table.id, [SchemaChange.add_column("note", AtomicType("STRING"))])
    catalog.alter_table(table.id, [SchemaChange.rename_column("value", "val")])
    catalog.alter_table(table.id, [SchemaChange.drop_column("extra")])
    evolved = catalog.get_table(table.id)
    columns = [("id", pa.int64()), ("part", pa.string()), ("val", pa.string()), ("note", pa.string())]
    snapshot = write_table(
        evolved, pa.table({"id": [7], "part": ["p1"], "val": ["v7"], "note": ["n"]}, schema=pa.schema(columns))
    )
    [planned] = planned_ids(evolved, {}, snapshot)
    read = lambda schema, fields: [  # noqa: E731
        row
        for batch in paimon_read.read_planned(evolved, ReadOptions(evolved, {}), planned, schema, fields)
        for row in batch.to_pylist()
    ]
    assert read(started, fields) == [{"id": 7, "part": "p1", "value": "v7", "extra": None}]
    from pyspark.sql.types import StructType

    only_id = StructType([started["id"]])
    assert read(only_id, paimon_read.query_fields(table.table, only_id)) == [{"id": 7}]
    with pytest.raises(ValueError, match="has a column 'nope'"):
        from pyspark.sql.types import StringType, StructField

        paimon_read.query_fields(table.table, StructType([StructField("nope", StringType())]))


def bytes_read_by_this_process() -> int:
    """What this process has read so far (Linux /proc/self/io `rchar`)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def test_a_query_of_two_of_fifty_columns_reads_about_a_twenty_fifth_of_the_bytes(tmp_path):
    """The columns a query declares are the only ones read from the files
    (issue 30's bound: at most 2 x 2/50 of the full read's bytes)."""
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema
    from pyspark.sql.types import StructType

    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("wide", True)
    arrow = pa.schema([pa.field(f"c{i}", pa.int64()) for i in range(50)])
    catalog.create_table("wide.t", Schema.from_pyarrow_schema(arrow), False)
    table = catalog.get_table("wide.t")
    rows = 40_000
    data = pa.table({f"c{i}": pa.array(np.random.randint(0, 1 << 40, rows)) for i in range(50)}, schema=arrow)
    snapshot = write_table(table, data)
    planned = planned_ids(table, {}, snapshot)
    everything = spark_schema_of(table, {})
    two = StructType([everything["c3"], everything["c17"]])

    def read(schema):
        fields = paimon_read.query_fields(table, schema)
        before = bytes_read_by_this_process()
        count = sum(
            batch.num_rows
            for p in planned
            for batch in paimon_read.read_planned(table, ReadOptions(table, {}), p, schema, fields)
        )
        return bytes_read_by_this_process() - before, count

    full_bytes, full_rows = read(everything)
    two_bytes, two_rows = read(two)
    print(f"bytes read: all 50 columns {full_bytes}, 2 columns {two_bytes} ({two_bytes / full_bytes:.3f})")
    assert full_rows == two_rows == rows
    assert two_bytes <= 2 * (2 / 50) * full_bytes, (two_bytes, full_bytes)


def test_batches_are_sized_by_the_bytes_of_the_querys_columns():
    """Without `read.batch-size`, rows per batch follow the query's columns
    (docs/spark.md, "Throughput"): narrow rows read in big batches, wide rows
    in fewer rows, and a merged primary-key split keeps Spark's 10,000 (one
    batch per sorted run is held at once)."""
    import pyarrow as pa

    narrow = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.string()), ("amount", pa.float64())])
    assert paimon_read.row_bytes_estimate(narrow) == 8 + 36 + 36 + 8
    assert paimon_read.batch_rows(narrow) == paimon_read.BATCH_ROWS_MAX
    wide = pa.schema([pa.field(f"s{i}", pa.string()) for i in range(200)])
    assert paimon_read.batch_rows(wide) == paimon_read.BATCH_BYTES // (200 * 36)
    assert paimon_read.batch_rows(pa.schema([pa.field(f"s{i}", pa.string()) for i in range(2000)])) == 1_024
    nested = pa.schema([("point", pa.struct([("x", pa.float64()), ("y", pa.float64())])), ("tags", pa.list_(pa.int32()))])
    assert paimon_read.row_bytes_estimate(nested) == 16 + 4 + 4 * 4
    assert paimon_read.batch_rows(narrow, merges=True) == 10_000


def test_an_append_tables_batches_are_bigger_than_sparks_ten_thousand_rows_and_long_values_are_sliced(
    tmp_path, monkeypatch
):
    """Each batch costs a round of pypaimon's Python and of Spark's hand-off,
    so narrow rows come in batches of up to BATCH_ROWS_MAX; values longer
    than the estimate are sliced so that no batch handed to Spark exceeds
    about BATCH_BYTES; a `read.batch-size` the query sets is kept as asked."""
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("sized", True)
    arrow = pa.schema([("id", pa.int64()), ("doc", pa.string())])
    catalog.create_table("sized.t", Schema.from_pyarrow_schema(arrow), False)
    table = catalog.get_table("sized.t")
    rows = 60_000
    short = pa.table({"id": np.arange(rows, dtype=np.int64), "doc": pa.array(["x"] * rows)}, schema=arrow)
    narrow_snapshot = write_table(table, short)
    long_rows = 4_000
    docs = pa.array(["y" * 1_000] * long_rows)
    long = pa.table({"id": np.arange(rows, rows + long_rows, dtype=np.int64), "doc": docs}, schema=arrow)
    long_snapshot = write_table(table, long)

    def batches(snapshot, options):
        table_now = table.copy_without_time_travel(options) if options else table
        schema = spark_schema_of(table_now, {})
        return [
            batch
            for p in planned_ids(table_now, {}, snapshot)
            for batch in paimon_read.read_planned(table_now, ReadOptions(table_now, {}), p, schema)
        ]

    narrow = batches(narrow_snapshot, {})
    assert [b.num_rows for b in narrow] == [rows], "one batch, not six of Spark's 10,000 rows"
    assert [b.num_rows for b in batches(narrow_snapshot, {"read.batch-size": "25000"})] == [25_000, 25_000, 10_000]

    # 4,000 rows of 1 KB: one batch of 4 MB as read; sliced to 1 MiB for Spark.
    monkeypatch.setattr(paimon_read, "BATCH_BYTES", 1 << 20)
    sliced = batches(long_snapshot, {})
    assert len(sliced) >= 4, [b.num_rows for b in sliced]
    assert all(b.nbytes <= (1 << 20) * 1.05 for b in sliced), [b.nbytes for b in sliced]
    ids = [i for b in sliced for i in b.column("id").to_pylist()]
    assert ids == list(range(rows, rows + long_rows)), "every row once, in the file's order"
    # An asked-for row count is kept even when its batches are big.
    assert [b.num_rows for b in batches(long_snapshot, {"read.batch-size": "4000"})] == [4_000]


def test_a_bucket_unaware_append_commit_is_packed_as_paimon_packs_a_batch(tmp_path):
    """Java `AppendOnlySplitGenerator.splitForStreaming`: by the table's
    bucket mode, an unaware table (`bucket = -1`, no primary key) packs a
    commit's files as `splitForBatch` does (by `source.split.target-size`
    and the open-file cost), although its files live in bucket 0. The
    oracle: pypaimon's batch scan of the table holding only that commit."""
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("unaware", True)
    arrow = pa.schema([("id", pa.int64()), ("doc", pa.string())])
    options = {"target-file-size": "8 kb", "source.split.target-size": "32 kb", "source.split.open-file-cost": "1 kb"}
    catalog.create_table("unaware.t", Schema.from_pyarrow_schema(arrow, options=options), False)
    table = catalog.get_table("unaware.t")
    rows = 20_000
    data = pa.table({"id": np.arange(rows, dtype=np.int64), "doc": [f"row-{i:08d}" for i in range(rows)]}, schema=arrow)
    snapshot = write_table(table, data)
    batch_splits = table.new_read_builder().new_scan().plan().splits()
    assert len(batch_splits) > 1, "the commit's files fill several batch splits"
    files = sum(len(split.files) for split in batch_splits)
    assert files > len(batch_splits)

    planned = Planner(table, ReadOptions(table, {})).plan(table.snapshot_manager().get_snapshot_by_id(snapshot), False)
    assert [len(p.split.files) for p in planned] == [len(split.files) for split in batch_splits]
    assert sum(p.stats()[0] for p in planned) == rows


def test_read_changelog_with_table_read_sequence_numbers_adds_each_records_number_after_rowkind(tmp_path):
    """Java `AuditLogTable` with `table-read.sequence-number.enabled`:
    `_SEQUENCE_NUMBER` (BIGINT NOT NULL) after `rowkind`, each row carrying
    its record's number (`ValueContentRowDataRecordIterator`): a delta's
    records as its files hold them, a full scan's merged winners (a kept
    delete too), checked against the files read directly."""
    table = PrimaryKeyTable(tmp_path / "warehouse", "sequences", options={"table-read.sequence-number.enabled": "true"})
    bucket = pathlib.Path(table.path) / "bucket-0"

    def files():
        return set(bucket.glob("*.parquet"))

    table.write([("+I", 1, 10), ("+I", 2, 20), ("+I", 3, 30)])
    first = files()
    second = table.write([("-D", 1, 10), ("+U", 3, 31), ("+I", 4, 40)])
    added = files() - first
    options = {"read.changelog": "true"}
    schema = spark_schema_of(table.table, options)
    assert schema.names[:3] == ["rowkind", "_SEQUENCE_NUMBER", "id"]
    assert schema["_SEQUENCE_NUMBER"].dataType.typeName() == "long" and not schema["_SEQUENCE_NUMBER"].nullable

    def shown(rows):
        return [(r["rowkind"], r["_SEQUENCE_NUMBER"], r["id"], r["balance"]) for r in rows]

    delta = shown(rows_of(table.table, options, planned_ids(table.table, options, second)))
    assert delta == raw_key_value_records(added) and len(delta) == 3
    winners = {}
    for record in raw_key_value_records(files()):
        if record[2] not in winners or record[1] > winners[record[2]][1]:
            winners[record[2]] = record
    full = shown(rows_of(table.table, options, planned_ids(table.table, options, second, full=True)))
    assert sorted(full) == sorted(winners.values())
    assert ("-D", winners[1][1], 1, 10) in full
    # Without read.changelog the rows are the table's columns only.
    assert "_SEQUENCE_NUMBER" not in spark_schema_of(table.table, {}).names
    # The query's option does the same on a table that does not set it.
    plain = PrimaryKeyTable(tmp_path / "warehouse", "sequences", name="plain")
    latest = plain.write([("+I", 7, 70)])
    asked = {"read.changelog": "true", "table-read.sequence-number.enabled": "true"}
    plain_files = (pathlib.Path(plain.path) / "bucket-0").glob("*.parquet")
    assert shown(rows_of(plain.table, asked, planned_ids(plain.table, asked, latest))) == raw_key_value_records(plain_files)
    # Another read in the same process keeps pypaimon's own behaviour.
    builder = table.table.new_read_builder()
    assert "_SEQUENCE_NUMBER" not in builder.new_read().to_arrow(builder.new_scan().plan().splits()).column_names


def test_an_initial_full_scan_with_read_changelog_keeps_the_deletes_not_compacted_yet(tmp_path):
    """Java reads `read.changelog` through `AuditLogTable`, whose read calls
    `forceKeepDelete()`: a key whose latest record is a delete that no
    compaction dropped yet arrives as -D in the initial full scan (pypaimon's
    merge drops it). Without read.changelog the full scan has no -D."""
    table = PrimaryKeyTable(tmp_path / "warehouse", "deletes")
    table.write([("+I", 1, 10), ("+I", 2, 20), ("+I", 3, 30)])
    latest = table.write([("-D", 1, 10), ("+U", 3, 31)])
    options = {"read.changelog": "true"}
    planned = planned_ids(table.table, options, latest, full=True)
    rows = sorted((r["rowkind"], r["id"], r["balance"]) for r in rows_of(table.table, options, planned))
    assert rows == [("+I", 2, 20), ("+U", 3, 31), ("-D", 1, 10)]
    plain = sorted((r["id"], r["balance"]) for r in rows_of(table.table, {}, planned_ids(table.table, {}, latest, full=True)))
    assert plain == [(2, 20), (3, 31)]
    # Other reads of the table in the same process still drop deletes.
    builder = table.table.new_read_builder()
    batch_read = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert sorted(batch_read.column("id").to_pylist()) == [2, 3]
