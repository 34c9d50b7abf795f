"""Real Spark (pyspark 4.3.0, the session shared with test_spark_paimon.py)
reading Paimon tables as other engines leave them: overwritten, compacted,
primary-key tables with updates and deletes (with and without a changelog
producer), NOT NULL and nested columns, and a replay whose plan changed.

Every scenario has an oracle: Paimon's own streaming read of the same table
(pypaimon's StreamReadBuilder, with row kinds) where pypaimon implements the
case; otherwise the rows derived from what the test wrote or from the
table's files, with the Java class that defines them named in the test
(pypaimon's stream differs from Java for commit order within a bucket,
postpone buckets and primary-key overwrites, the cases issue 30 fixed)."""

from __future__ import annotations

import pathlib
import time

import pytest
from harness import PaimonTable, PrimaryKeyTable, RowSink, paimon_stream, raw_key_value_records, write_table
from test_spark_paimon import Query, next_snapshot, run_to_end, run_to_failure, wait_lease_free

pytestmark = pytest.mark.spark


def test_overwrites_are_skipped_by_default_and_read_when_asked(spark, tidemark_server, client_for, tmp_path, unique):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("overwrite"))
    table.commit()
    table.commit()
    overwritten = table.overwrite(rows=2, part="p1")
    table.commit()
    assert table.table.snapshot_manager().get_snapshot_by_id(overwritten).commit_kind == "OVERWRITE"
    from_first = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "max-splits-per-batch": 2}

    # Default: the overwrite delivers nothing, exactly as Paimon's own
    # streaming read; the consumer moves past it.
    skipping = Query(spark, tmp_path, table, unique("skip"), tidemark_server)
    sink = RowSink(tmp_path / "sink-skip")
    run_to_end(skipping.start("skip", sink, options=from_first))
    assert sink.ids() == sorted(row["id"] for row in paimon_stream(table.table, 1))
    assert sink.ids() == table.ids([1, 2, 4])
    # Spark never commits a run's last batch (it ends partway through 4):
    # the consumer is past the overwrite.
    assert next_snapshot(client, table, skipping.consumer) == overwritten + 1

    # streaming-read-append-overwrite: the rows it wrote are read too,
    # exactly once across a failed batch replayed from the checkpoint...
    reading = Query(spark, tmp_path, table, unique("read"), tidemark_server)
    sink = RowSink(tmp_path / "sink-read")
    sink.fail_once = {1}
    options = {**from_first, "streaming-read-append-overwrite": "true"}
    run_to_failure(reading.start("read", sink, options=options))
    run_to_end(reading.start("read", sink, options=options))
    assert sink.ids() == table.ids([1, 2, overwritten, 4])
    assert len(sink.ids()) == len(set(sink.ids()))

    # ... and across a restart from the consumer alone (no checkpoint).
    wait_lease_free(client, table, reading.consumer)
    second_overwrite = table.overwrite(rows=3, part="p0")
    table.commit()
    later = RowSink(tmp_path / "sink-later")
    run_to_end(reading.start("later", later, options=options))
    # It resumes at 4, which the last committed batch ended partway through
    # (those rows again, none lost), then reads the second overwrite.
    assert later.ids() == table.ids([overwritten + 1, second_overwrite, second_overwrite + 1])


def test_compactions_never_deliver_a_row_twice(spark, tidemark_server, client_for, tmp_path, unique):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("compact"))
    table.commit()
    table.commit()
    compacted = table.compact()
    table.commit()
    assert table.live_ids() == table.ids(), "the compaction kept every row"

    # Deltas from snapshot 1: the compaction is skipped.
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = RowSink(tmp_path / "sink")
    options = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "max-splits-per-batch": 2}
    run_to_end(q.start("a", sink, options=options))
    assert sink.ids() == table.ids(), "every row exactly once"
    assert sink.ids() == sorted(row["id"] for row in paimon_stream(table.table, 1))
    # The last (uncommitted) batch ends inside the snapshot after the
    # compaction: the consumer is past the compaction.
    assert next_snapshot(client, table, q.consumer) == compacted + 1
    assert all(c["end"]["snapshotId"] != compacted for c in q.commits("a")), "no split of the compaction"

    # A full scan of the compacted snapshot, then the deltas after it.
    full = Query(spark, tmp_path, table, unique("full"), tidemark_server)
    sink = RowSink(tmp_path / "sink-full")
    run_to_end(
        full.start("full", sink, options={"scan.mode": "from-snapshot-full", "scan.snapshot-id": compacted})
    )
    assert sink.ids() == table.ids()

    # compacted-full: the same, the compaction found by the source (Java
    # CompactedStartingScanner: the latest COMPACT snapshot).
    compacted_full = Query(spark, tmp_path, table, unique("compacted"), tidemark_server)
    sink = RowSink(tmp_path / "sink-compacted")
    run_to_end(compacted_full.start("compacted", sink, options={"scan.mode": "compacted-full", "max-splits-per-batch": 1}))
    assert sink.ids() == table.ids()
    first = compacted_full.commits("compacted")[0]["end"]
    assert (first["snapshotId"], first["scanSnapshot"]) == (compacted, True), "a full scan of the compaction first"


def apply_changelog(rows) -> dict:
    """What a sink applying row kinds keeps: id -> balance."""
    content = {}
    for row in rows:
        if row["rowkind"] in ("+I", "+U"):
            content[row["id"]] = row["balance"]
        else:
            assert content.get(row["id"]) == row["balance"], f"a retraction of what was there: {row}"
            del content[row["id"]]
    return content


def per_key(rows) -> dict:
    """id -> the (kind, balance) it received, in order: Paimon promises
    order per key (each key lives in one bucket), not across buckets."""
    out: dict = {}
    for kind, key, balance in rows:
        out.setdefault(key, []).append((kind, balance))
    return out


@pytest.mark.parametrize("producer", ["input", "none"])
def test_primary_key_tables_stream_their_changes_and_rebuild_the_table(
    spark, tidemark_server, client_for, tmp_path, unique, producer
):
    # Two buckets: keys spread over two splits per snapshot.
    table = PrimaryKeyTable(
        tmp_path / "warehouse", unique("pk"), options={"changelog-producer": producer, "bucket": "2"}
    )
    table.write([("+I", 1, 100), ("+I", 2, 200), ("+I", 3, 300)])
    table.write([("-U", 2, 200), ("+U", 2, 250), ("-D", 3, 300), ("+I", 4, 400)])
    table.write([("+I", 5, 500), ("-U", 1, 100), ("+U", 1, 150)])
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)

    changelog = RowSink(tmp_path / "sink-changelog")
    run_to_end(
        q.start(
            "changelog",
            changelog,
            options={"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "read.changelog": "true"},
        )
    )
    rows = changelog.rows()
    assert changelog.schemas[0].names == ["rowkind", "id", "balance", "op"]
    # What Paimon's own streaming read delivers, row kinds included, in
    # order for each key.
    oracle = [
        (row["_row_kind"], row["id"], row["balance"]) for row in paimon_stream(table.table, 1, with_row_kind=True)
    ]
    assert len({(b.bucket) for b in table.table.new_read_builder().new_scan().plan().splits()}) == 2, "two buckets"
    assert per_key((r["rowkind"], r["id"], r["balance"]) for r in rows) == per_key(oracle)
    assert len(rows) == len(oracle)
    assert {kind for kind, _, _ in oracle} >= {"+I", "-D"}
    assert apply_changelog(rows) == table.content() == {1: 150, 2: 250, 4: 400, 5: 500}

    # Without read.changelog (a deliberate difference from Paimon's Spark
    # source, which delivers every record without its kind, so a -D would
    # arrive as an ordinary row): +I and +U rows only, each as a row; -U and
    # -D are not delivered (docs/spark.md).
    upserts = RowSink(tmp_path / "sink-upserts")
    wait_lease_free(client_for(tidemark_server), table, q.consumer)
    run_to_end(
        q.start("upserts", upserts, options={"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "consumer.ignore-progress": "true"})
    )
    assert "rowkind" not in upserts.schemas[0].names
    assert per_key(("row", r["id"], r["balance"]) for r in upserts.rows()) == per_key(
        ("row", i, b) for kind, i, b in oracle if kind in ("+I", "+U")
    )


def test_not_null_and_nested_columns_are_read_as_paimon_declares_them(spark, tidemark_server, tmp_path, unique):
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    warehouse = tmp_path / "warehouse"
    database = unique("nested")
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database(database, True)
    arrow = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("attrs", pa.map_(pa.string(), pa.int32())),
            pa.field("point", pa.struct([pa.field("x", pa.int32(), nullable=False), pa.field("y", pa.float64())])),
        ]
    )
    catalog.create_table(f"{database}.shapes", Schema.from_pyarrow_schema(arrow), False)
    table = catalog.get_table(f"{database}.shapes")
    data = pa.table(
        {
            "id": [1, 2],
            "tags": [["a", "b"], None],
            "attrs": [[("k", 1)], []],
            "point": [{"x": 1, "y": 2.5}, {"x": -3, "y": None}],
        },
        schema=arrow,
    )
    write_table(table, data)

    class Table:
        id = f"{database}.shapes"
        path = str(warehouse / f"{database}.db" / "shapes")

    q = Query(spark, tmp_path, Table, unique("etl"), tidemark_server)
    sink = RowSink(tmp_path / "sink")
    run_to_end(q.start("a", sink))
    schema = sink.schemas[0]
    assert not schema["id"].nullable and schema["point"].nullable
    assert not schema["point"].dataType["x"].nullable
    assert schema.simpleString() == "struct<id:bigint,tags:array<string>,attrs:map<string,int>,point:struct<x:int,y:double>>"
    rows = sorted(sink.rows(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "tags": ["a", "b"], "attrs": {"k": 1}, "point": {"x": 1, "y": 2.5}},
        {"id": 2, "tags": None, "attrs": {}, "point": {"x": -3, "y": None}},
    ]


def test_a_replay_whose_plan_changed_fails_with_replay_plan_mismatch(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("replay"))
    for _ in range(3):
        table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = RowSink(tmp_path / "sink")
    sink.fail_once = {1}
    # The initial full scan of snapshot 3: nine files, one split each (the
    # table's 1-byte split size), two splits a batch. Batch 1 fails.
    options = {"max-splits-per-batch": 2}
    run_to_failure(q.start("a", sink, options=options))
    assert list(sink.batches()) == [0]
    delivered = sink.ids()

    # The same checkpoint with a split size that packs each partition's
    # files into one split: the logged batch 1 would now cover other rows.
    message = run_to_failure(q.start("a", sink, options={**options, "source.split.target-size": "64 mb"}))
    assert "REPLAY_PLAN_MISMATCH" in message
    assert list(sink.batches()) == [0], "nothing delivered twice"
    assert sink.ids() == delivered
    # Back to the split size the batch was planned with: it replays, and the
    # run goes on.
    table.commit()
    run_to_end(q.start("a", sink, options=options))
    assert sink.ids() == table.ids()
    assert next_snapshot(client, table, q.consumer) == 4, "the last committed batch ends partway through 4"


def test_startup_from_a_timestamp_and_defaults_from_table_properties(
    spark, tidemark_server, client_for, tmp_path, unique
):
    """The oracle: the rows written from the first snapshot committed at or
    after the time (Java `TimestampStartingScanner`:
    `SnapshotManager.earlierThanTimeMills` + 1), options read over table
    properties (`CoreOptions` dynamic options)."""
    client = client_for(tidemark_server)
    consumer = unique("from_table")
    table = PaimonTable(tmp_path / "warehouse", unique("timestamp"), options={"consumer-id": consumer})
    table.commit()
    time.sleep(0.05)
    second = table.commit()
    table.commit()
    at = table.table.snapshot_manager().get_snapshot_by_id(second).time_millis

    # No consumer-id option: the table's property names the consumer.
    q = Query(spark, tmp_path, table, None, tidemark_server)
    sink = RowSink(tmp_path / "sink")
    run_to_end(
        q.start(
            "a", sink, options={"scan.mode": "from-timestamp", "scan.timestamp-millis": at, "max-splits-per-batch": 2}
        )
    )
    assert sink.ids() == table.ids([second, second + 1])
    assert next_snapshot(client, table, consumer) == second + 1

    # scan.mode default with scan.snapshot-id set means from-snapshot.
    other = Query(spark, tmp_path, table, unique("default"), tidemark_server)
    sink = RowSink(tmp_path / "sink-default")
    run_to_end(other.start("b", sink, options={"scan.snapshot-id": second}))
    assert sink.ids() == table.ids([second, second + 1])

    # scan.timestamp, Paimon's local-time spelling (default mode: from-timestamp).
    import datetime

    local = datetime.datetime.fromtimestamp(at / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    spelled = Query(spark, tmp_path, table, unique("spelled"), tidemark_server)
    sink = RowSink(tmp_path / "sink-spelled")
    run_to_end(spelled.start("c", sink, options={"scan.timestamp": local}))
    assert sink.ids() == table.ids([second, second + 1])


def test_schema_changes_under_a_running_query_are_read_with_the_schema_it_started_with(
    spark, tidemark_server, tmp_path, unique
):
    """Paimon keeps the schema a streaming query started with and reads
    files of newer schemas by field id (Java SchemaEvolutionUtil): a schema
    made only of new options, an added column and a renamed one stop
    nothing; a restart from the same checkpoint reads the new schema."""
    import pyarrow as pa
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    from harness import wait_for

    table = PaimonTable(tmp_path / "warehouse", unique("schema"))
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = RowSink(tmp_path / "sink")
    query = q.start("a", sink, trigger="300 milliseconds")

    def write(columns, row):
        evolved = table.catalog.get_table(table.id)
        write_table(evolved, pa.table({k: [v] for k, v in row.items()}, schema=pa.schema(columns)))

    try:
        wait_for(lambda: sink.ids() == table.ids(), 120, "the first batch")
        # ALTER TABLE ... SET TBLPROPERTIES: a new schema, the same columns.
        table.catalog.alter_table(table.id, [SchemaChange.set_option("snapshot.time-retained", "2 h")])
        write([("id", pa.int64()), ("part", pa.string()), ("value", pa.string())], {"id": 1000, "part": "p0", "value": "v1000"})
        # A column added, then one renamed.
        table.catalog.alter_table(table.id, [SchemaChange.add_column("note", AtomicType("STRING"))])
        write(
            [("id", pa.int64()), ("part", pa.string()), ("value", pa.string()), ("note", pa.string())],
            {"id": 1001, "part": "p1", "value": "v1001", "note": "new"},
        )
        table.catalog.alter_table(table.id, [SchemaChange.rename_column("value", "val")])
        write(
            [("id", pa.int64()), ("part", pa.string()), ("val", pa.string()), ("note", pa.string())],
            {"id": 1002, "part": "p2", "val": "v1002", "note": "renamed"},
        )
        wait_for(lambda: {1000, 1001, 1002} <= set(sink.ids()), 120, "the rows of the newer schemas")
        assert query.isActive, "no schema change stopped the query"
        rows = {r["id"]: r for r in sink.rows() if r["id"] >= 1000}
        # As the query's schema has them: no `note`, `val` read as `value`.
        assert {i: sorted(r) for i, r in rows.items()} == {i: ["id", "part", "value"] for i in (1000, 1001, 1002)}
        assert [rows[i]["value"] for i in (1000, 1001, 1002)] == ["v1000", "v1001", "v1002"]
    finally:
        if query.isActive:
            query.stop()
    wait_lease_free_for(q)
    write(
        [("id", pa.int64()), ("part", pa.string()), ("val", pa.string()), ("note", pa.string())],
        {"id": 1003, "part": "p0", "val": "v1003", "note": "after"},
    )
    run_to_end(q.start("a", sink))
    assert sink.ids() == sorted(table.ids() + [1000, 1001, 1002, 1003]), "every row once"
    [after] = [r for r in sink.rows() if r["id"] == 1003]
    assert (after["val"], after["note"]) == ("v1003", "after"), "the restart reads the new schema"


def wait_lease_free_for(q) -> None:
    from tidemark import Client

    with Client(q.server.endpoint, timeout=10.0) as client:
        wait_lease_free(client, q.table, q.consumer)


def test_a_registered_branch_on_an_s3_compatible_store_in_a_spark_flow(spark, tmp_path, unique, monkeypatch):
    """A table on moto's local S3 server, registered with tidemark, read on
    a branch by a Spark query given only storage options: the branch's rows
    arrive, and the consumer's position is mirrored into the branch's
    consumer directory on S3, where Paimon's own expiration looks."""
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    from conftest import database_url
    from harness import TidemarkServer, moto_s3, wait_for
    from tidemark import Client
    from tidemark.v1 import admin_pb2

    with moto_s3(monkeypatch) as (endpoint, s3):
        storage = {
            "s3.endpoint": endpoint,
            "s3.access-key": "testing",
            "s3.secret-key": "testing",
            "s3.region": "us-east-1",
            "s3.path-style-access": "true",
        }
        database = unique("s3")
        catalog = CatalogFactory.create({"warehouse": "s3://lake/warehouse", **storage})
        catalog.create_database(database, True)
        arrow = pa.schema([("id", pa.int64()), ("value", pa.string())])
        table_id = f"{database}.events"
        catalog.create_table(table_id, Schema.from_pyarrow_schema(arrow), False)

        def write(table, ids):
            write_table(table, pa.table({"id": ids, "value": [f"v{i}" for i in ids]}, schema=arrow))

        main = catalog.get_table(table_id)
        write(main, [1, 2])
        catalog.create_branch(table_id, "dev")
        dev = catalog.get_table(f"{table_id}$branch_dev")
        write(dev, [10, 11])
        write(dev, [12])
        write(main, [3])

        server = TidemarkServer(
            database_url(tmp_path), tmp_path / "server.log", extra_args=["--mirror-interval", "20ms"]
        ).start()
        try:
            with Client(server.endpoint) as client:
                location = f"s3://lake/warehouse/{database}.db/events"
                client.admin.RegisterTable(
                    admin_pb2.RegisterTableRequest(table=table_id, location=location, execute=True),
                    metadata=client.metadata,
                    timeout=10,
                )

                class Table:
                    id = table_id
                    path = location

                q = Query(spark, tmp_path, Table, "etl", server)
                sink = RowSink(tmp_path / "sink")
                run_to_end(
                    q.start(
                        "a",
                        sink,
                        options={"branch": "dev", "scan.mode": "from-snapshot", "scan.snapshot-id": 1,
                                 "max-splits-per-batch": 1, **storage},
                    )
                )
                expected = sorted(r["id"] for r in paimon_stream(dev, 1, with_row_kind=False))
                assert sink.ids() == expected
                assert set(sink.ids()) >= {10, 11, 12} and 3 not in sink.ids(), "the branch's rows only"

                key = f"warehouse/{database}.db/events/branch/branch-dev/consumer/consumer-etl"

                def mirrored():
                    try:
                        return s3.get_object(Bucket="lake", Key=key)["Body"].read()
                    except s3.exceptions.NoSuchKey:
                        return None

                position = client.describe_consumer(table_id, "etl", branch="dev").info.consumer.next_snapshot
                wait_for(lambda: mirrored() == f'{{"nextSnapshot":{position}}}'.encode(), 20, "the branch's consumer object on S3")
        finally:
            server.stop()


def test_paimons_read_limits_shape_the_batches(spark, tidemark_server, tmp_path, unique):
    # Each snapshot: 6 rows in 3 files, each file its own split of 2 rows.
    table = PaimonTable(tmp_path / "warehouse", unique("limits"))
    table.commit()
    table.commit()
    from_first = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1}

    # maxFilesPerTrigger=1: one split (here one file) per batch, as in
    # Paimon's source (PaimonReadLimitGuard counts splits).
    one_file = RowSink(tmp_path / "sink-files")
    q = Query(spark, tmp_path, table, unique("files"), tidemark_server)
    run_to_end(q.start("files", one_file, options={**from_first, "read.stream.maxFilesPerTrigger": 1}))
    assert [len(rows) for rows in one_file.batches().values()] == [2] * 6
    assert one_file.ids() == table.ids()

    # A row maximum (the key spelled in another case, as Spark allows):
    # splits are admitted while the batch is below 3 rows, so 4 rows each.
    rows = RowSink(tmp_path / "sink-rows")
    q = Query(spark, tmp_path, table, unique("rows"), tidemark_server)
    run_to_end(q.start("rows", rows, options={**from_first, "READ.STREAM.MAXROWSPERTRIGGER": 3}))
    assert [len(batch) for batch in rows.batches().values()] == [4, 4, 4]
    assert rows.ids() == table.ids()


def test_snapshots_expired_while_their_changelog_is_kept_are_read_from_the_changelog(
    spark, tidemark_server, client_for, tmp_path, unique
):
    """changelog.time-retained above the snapshots' (1 h): Paimon keeps
    changelog/changelog-N after snapshot N expires and its streaming read
    reads it (Java NextSnapshotFetcher); the server is told the earliest
    changelog, so a consumer behind the earliest snapshot can still start."""
    client = client_for(tidemark_server)
    table = PaimonTable(
        tmp_path / "warehouse",
        unique("decoupled"),
        options={"changelog.time-retained": "2 h"},
    )
    for _ in range(4):
        table.commit()
    assert table.expire_keeping_changelog_below(3) == [1, 2]
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = RowSink(tmp_path / "sink")
    run_to_end(q.start("a", sink, options={"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "max-splits-per-batch": 2}))
    assert sink.ids() == table.ids(), "snapshots 1 and 2 read from their changelogs"
    assert next_snapshot(client, table, q.consumer) >= 4


def kinds_ids_balances(rows) -> list:
    return [(r["rowkind"], r["id"], r["balance"]) for r in rows]


def test_two_changes_to_one_key_in_one_commit_reach_the_sink_in_commit_order(spark, tidemark_server, tmp_path, unique):
    """One commit writing two files that touch key 1 (a tiny
    target-file-size). The oracle is the table's files in the order the
    commit wrote them (Java `MergeTreeSplitGenerator.splitForStreaming`: one
    split per bucket, its files in commit order, read without merging);
    pypaimon's own stream orders a bucket's files by key range instead, so
    it is not the oracle here."""
    import pyarrow as pa
    from test_paimon_plan import in_commit_order

    table = PrimaryKeyTable(tmp_path / "warehouse", unique("order"), options={"target-file-size": "1b"})
    table.write([("+I", 0, 0)])
    schema = table.arrow_schema
    snapshot = write_table(
        table.table,
        [
            pa.table({"id": [1, 2], "balance": [10, 20], "op": ["+I", "+I"]}, schema=schema),
            pa.table({"id": [1], "balance": [11], "op": ["+U"]}, schema=schema),
        ],
    )
    sink = RowSink(tmp_path / "sink")
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    run_to_end(q.start("a", sink, options={"scan.mode": "from-snapshot", "scan.snapshot-id": snapshot, "read.changelog": "true"}))
    rows = kinds_ids_balances(sink.rows())
    assert [(i, b) for _, i, b in rows] == [(r["id"], r["balance"]) for r in in_commit_order(table.table, snapshot)]
    assert rows == [("+I", 1, 10), ("+I", 2, 20), ("+U", 1, 11)], "key 1: 10, then 11"
    assert apply_changelog(sink.rows()) == {1: 11, 2: 20}


def test_an_overwritten_first_row_table_streams_the_overwrites_own_changes(spark, tidemark_server, tmp_path, unique):
    """streaming-read-overwrite on a first-row table (whose new files stay
    at level 0, hidden from a batch read): per bucket, -D for every row the
    removed files held, then the added files' rows with their own kinds
    (Java `IncrementalChangelogReadProvider` over
    `SnapshotReaderImpl.readChanges`); the snapshot before the overwrite is
    expired and not needed."""
    import pyarrow as pa

    table = PrimaryKeyTable(tmp_path / "warehouse", unique("firstrow"), options={"bucket": "2", "merge-engine": "first-row"})
    first = table.write([("+I", 1, 10), ("+I", 2, 20), ("+I", 3, 30)])
    overwritten = write_table(
        table.table,
        pa.table({"id": [2, 3, 4], "balance": [21, 31, 40], "op": ["+I", "+I", "+I"]}, schema=table.arrow_schema),
        overwrite={},
    )
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    options = {"scan.mode": "from-snapshot", "read.changelog": "true", "streaming-read-overwrite": "true"}
    whole = RowSink(tmp_path / "sink-whole")
    run_to_end(q.start("whole", whole, options={**options, "scan.snapshot-id": first}))
    # Per key (the order Paimon promises; the two buckets are read by two
    # tasks): snapshot 1's insert, then the overwrite's removal and addition.
    assert per_key(kinds_ids_balances(whole.rows())) == {
        1: [("+I", 10), ("-D", 10)],
        2: [("+I", 20), ("-D", 20), ("+I", 21)],
        3: [("+I", 30), ("-D", 30), ("+I", 31)],
        4: [("+I", 40)],
    }
    assert apply_changelog(whole.rows()) == {2: 21, 3: 31, 4: 40}, "a sink applying the kinds ends right"
    # Again from the overwrite alone, with the snapshot before it gone.
    (pathlib.Path(table.path) / "snapshot" / f"snapshot-{first}").unlink()
    sink = RowSink(tmp_path / "sink")
    q2 = Query(spark, tmp_path, table, unique("etl2"), tidemark_server)
    run_to_end(q2.start("overwrite", sink, options={**options, "scan.snapshot-id": overwritten}))
    rows = kinds_ids_balances(sink.rows())
    after_first = {key: changes[1:] if key < 4 else changes for key, changes in per_key(kinds_ids_balances(whole.rows())).items()}
    assert per_key(rows) == after_first, "the same changes as read after snapshot 1"
    assert sorted(r for r in rows if r[0] == "-D") == [("-D", 1, 10), ("-D", 2, 20), ("-D", 3, 30)]
    assert sorted(r for r in rows if r[0] != "-D") == [("+I", 2, 21), ("+I", 3, 31), ("+I", 4, 40)]
    assert per_key(rows)[2] == [("-D", 20), ("+I", 21)], "per key, the removal before the addition"


def test_a_postpone_bucket_tables_rows_not_compacted_yet_are_read(spark, tidemark_server, tmp_path, unique):
    """bucket = -2 without a changelog producer: Paimon's initial scan
    includes the postpone bucket (Java `DataTableStreamScan`), each record as
    written (`MergeFileSplitRead.createNoMergeReader`); pypaimon's scan
    leaves it out, so the oracle is the rows as the test wrote them."""
    table = PrimaryKeyTable(tmp_path / "warehouse", unique("postpone"), options={"bucket": "-2"})
    table.write([("+I", 1, 10), ("+I", 2, 20)])
    table.write([("+U", 1, 11), ("-D", 2, 20), ("+I", 3, 30)])
    sink = RowSink(tmp_path / "sink")
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    run_to_end(q.start("a", sink, options={"read.changelog": "true"}))  # latest-full
    assert kinds_ids_balances(sink.rows()) == [("+I", 1, 10), ("+I", 2, 20), ("+U", 1, 11), ("-D", 2, 20), ("+I", 3, 30)]
    assert apply_changelog(sink.rows()) == {1: 11, 3: 30}
    # With table-read.sequence-number.enabled (Java AuditLogTable), each row
    # carries its record's number after rowkind, as the files hold it.
    numbered = RowSink(tmp_path / "sink-numbered")
    q2 = Query(spark, tmp_path, table, unique("etl2"), tidemark_server)
    run_to_end(q2.start("numbered", numbered, options={"read.changelog": "true", "table-read.sequence-number.enabled": "true"}))
    rows = numbered.rows()
    assert list(rows[0].keys())[:3] == ["rowkind", "_SEQUENCE_NUMBER", "id"]
    shown = [(r["rowkind"], r["_SEQUENCE_NUMBER"], r["id"], r["balance"]) for r in rows]
    assert [(kind, key, balance) for kind, _, key, balance in shown] == kinds_ids_balances(sink.rows())
    assert sorted(shown) == sorted(raw_key_value_records(pathlib.Path(table.path).glob("bucket-postpone/*.avro")))


def test_scan_partitions_reads_only_the_named_partitions_files(spark, tidemark_server, tmp_path, unique):
    """Paimon's `scan.partitions`: the other partitions' data files are
    deleted before each run, so reading any of them would fail the query."""
    from tidemark.paimon_plan import Planner, ReadOptions

    table = PaimonTable(tmp_path / "warehouse", unique("partitions"))
    table.commit()
    table.commit()

    def delete_other_partitions() -> int:
        doomed = [p for part in ("p0", "p2") for p in (pathlib.Path(table.path) / f"part={part}").glob("bucket-*/*")]
        for path in doomed:
            path.unlink()
        return len(doomed)

    assert delete_other_partitions() > 0
    # Unfiltered, the plan would open them.
    latest = table.table.snapshot_manager().get_latest_snapshot()
    unfiltered = Planner(table.table, ReadOptions(table.table, {})).plan(latest, True)
    assert {p.split.partition.values[0] for p in unfiltered} == {"p0", "p1", "p2"}

    def p1(snapshots) -> list:
        return [i for i in table.ids(snapshots) if i % 3 == 1]

    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = RowSink(tmp_path / "sink")
    options = {"scan.partitions": "part=p1"}
    run_to_end(q.start("a", sink, options=options))  # latest-full: a full scan of snapshot 2
    assert sink.ids() == p1([1, 2])
    third = table.commit()
    assert delete_other_partitions() > 0
    run_to_end(q.start("a", sink, options=options))  # the delta of snapshot 3
    assert sink.ids() == p1([1, 2, third])
    assert {row["part"] for row in sink.rows()} == {"p1"}


def test_a_batch_is_read_by_every_core_and_a_keys_changes_stay_in_one_task_in_order(
    spark, tidemark_server, tmp_path, unique
):
    """Four snapshots updating the keys of a two-bucket primary-key table,
    read in one batch on two cores. The batch is spread over both tasks
    (Java `BinPackingSplits`: the total over the default parallelism), and
    every key's changes are read by one task in commit order (a key never
    leaves its bucket, and a bucket's splits share a task), so a sink
    writing task by task applies them in order. The oracle is what the test
    wrote: key k's balances 100 + k, 200 + k, ... in snapshot order."""
    table = PrimaryKeyTable(tmp_path / "warehouse", unique("spread"), options={"bucket": "2"})
    first = table.write([("+I", k, 100 + k) for k in range(1, 9)])
    for n in (2, 3, 4):
        table.write([("+U", k, n * 100 + k) for k in range(1, 9)])
    tasks = []

    def per_task(frame, batch_id):
        read = frame.rdd.mapPartitionsWithIndex(
            lambda index, rows: [(index, [(row["id"], row["balance"]) for row in rows])]
        ).collect()
        tasks.extend(changes for _, changes in read if changes)

    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    query = (
        q.spark.readStream.format("tidemark_paimon")
        .option("path", table.path)
        .option("consumer-id", q.consumer)
        .option("tidemark.endpoint", tidemark_server.endpoint)
        .option("tidemark.min-partitions", "2")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", str(first))
        .option("read.changelog", "true")
        .load()
        .writeStream.foreachBatch(per_task)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_to_end(query)
    assert len(tasks) == 2, f"one batch on two cores is read by two tasks, not {len(tasks)}"
    for key in range(1, 9):
        holding = [changes for changes in tasks if any(k == key for k, _ in changes)]
        assert len(holding) == 1, f"key {key}'s changes were read by {len(holding)} tasks"
        assert [b for k, b in holding[0] if k == key] == [n * 100 + key for n in (1, 2, 3, 4)], f"key {key}"
