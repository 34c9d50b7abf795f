"""The stream without Spark: the one walk from an offset to a batch's end,
the plan cache, the replay check, where a query starts, and what the
partitions and the reader carry to executors (never tidemark's token)."""

from __future__ import annotations

import pickle

import pytest
from harness import PaimonTable

from tidemark.paimon.errors import QueryFailed
from tidemark.paimon.offsets import Offset
from tidemark.paimon.options import SourceOptions
from tidemark.paimon.plan import Planner
from tidemark.paimon.runner import open_source
from tidemark.paimon.stream import PLANS_KEPT, Stream
from tidemark.paimon.table import TableSnapshots


def stream_of(table: PaimonTable, **options) -> Stream:
    opts = SourceOptions({"path": table.path, "consumer-id": "c", **options})
    opened, read_options = open_source(opts)
    return Stream(TableSnapshots(opened, opts.effective), Planner(opened, read_options), table.id)


def test_a_replayed_batch_whose_splits_differ_is_refused(tmp_path):
    table = PaimonTable(tmp_path / "warehouse", "replay")
    table.commit()
    table.commit()
    stream = stream_of(table)
    start = Offset(1, 1, False, 3, "h")
    end = Offset(2, 1, False, 3, "h")
    batch = stream.batch(start, end)
    assert batch.positions == [(1, 2, False), (2, 0, False), (2, 1, False)]
    logged = Offset(2, 1, False, 3, "h", batch.end.fingerprint)
    assert stream_of(table).replay(start, logged).positions == batch.positions, "the same plan replays"
    with pytest.raises(QueryFailed, match="^REPLAY_PLAN_MISMATCH"):
        stream_of(table).replay(start, Offset(2, 1, False, 3, "h", "0" * 16))
    with pytest.raises(QueryFailed, match="^REPLAY_PLAN_MISMATCH"):
        stream_of(table).replay(start, Offset(2, 1, False, 5, "h"))


def test_a_finished_start_snapshot_is_never_planned_again(tmp_path):
    # Batch N ended on the last split of snapshot 1, the consumer moved to 2
    # and snapshot 1 expired: the walk from that end (a replay of batch N+1,
    # or the next batch) starts at snapshot 2 without planning 1 again
    # (Paimon's Spark source restores from the next snapshot too).
    table = PaimonTable(tmp_path / "warehouse", "finished")
    for _ in range(3):
        table.commit()
    assert table.expire_below(2) == [1]
    stream = stream_of(table)
    finished = Offset(1, 2, False, 3, "h")
    batch = stream.batch(finished, None, latest=3)
    assert batch.positions[0] == (2, 0, False) and batch.end.position == (3, 2)
    logged = batch.end
    assert stream_of(table).replay(finished, logged).positions == batch.positions
    # A partly read snapshot that expired is another matter: its rest is
    # gone, and the query fails rather than skip it.
    with pytest.raises(QueryFailed, match="snapshot 1 of .* no longer exists"):
        stream_of(table).batch(Offset(1, 1, False, 3, "h"), None, latest=3)
    # So is an offset that does not know its snapshot's size.
    with pytest.raises(QueryFailed, match="snapshot 1 of .* no longer exists"):
        stream_of(table).batch(Offset(1, -1, False, None, "h"), None, latest=3)


def test_a_batch_over_a_long_backlog_is_planned_once(tmp_path):
    # latestOffset walks the backlog; partitions asks for the same batch and
    # gets it without planning again, however many snapshots it spans.
    table = PaimonTable(tmp_path / "warehouse", "backlog")
    snapshots = PLANS_KEPT + 16
    for _ in range(snapshots):
        table.commit(rows=3)
    stream = stream_of(table)
    start = Offset(1, -1, False, None, "h")
    batch = stream.batch(start, None, latest=snapshots)
    assert stream.plans_made == snapshots
    again = stream.batch(start, Offset.from_json(batch.end.to_json()))
    assert again is batch and stream.plans_made == snapshots


def test_an_empty_batch_plans_nothing(tmp_path):
    # Spark's first batch when nothing is new starts and ends at the same
    # offset, possibly one past the latest snapshot.
    table = PaimonTable(tmp_path / "warehouse", "empty")
    table.commit()
    stream = stream_of(table)
    assert stream.batch(Offset(2, -1, False, None, "h"), None, latest=1) is None
    assert stream.plans_made == 0


def test_executors_never_receive_the_tidemark_token(tmp_path, tidemark_server):
    from pyspark.sql.datasource import CaseInsensitiveDict

    from tidemark.paimon_source import TidemarkPaimonDataSource

    table = PaimonTable(tmp_path / "warehouse", "pickled")
    table.commit()
    token = "tok-3c0a7e5d-never-on-executors"
    source = TidemarkPaimonDataSource(
        CaseInsensitiveDict(
            {
                "path": table.path,
                "consumer-id": "pickled",
                "tidemark.endpoint": tidemark_server.endpoint,
                "tidemark.token": token,
                "tidemark.lease-ttl": "5",
                "s3.endpoint": "http://127.0.0.1:1",
            }
        )
    )
    reader = source.streamReader(source.schema())
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, None)
        partitions = reader.partitions(start, end)
        assert partitions, "the batch has splits"
        shipped = [pickle.dumps(reader), pickle.dumps(partitions), pickle.dumps(source)]
        for payload in shipped:
            assert token.encode() not in payload
            assert tidemark_server.endpoint.encode() not in payload
            assert b"tidemark.token" not in payload
        # Storage options do travel: executors open the table with them.
        assert all(p.spec.storage == {"s3.endpoint": "http://127.0.0.1:1"} for p in partitions)
        # What executors get still reads the batch.
        copy = pickle.loads(shipped[0])
        rows = sum(batch.num_rows for part in pickle.loads(shipped[1]) for batch in copy.read(part))
        assert rows == 6
    finally:
        reader.stop()


def test_the_snapshot_delay_holds_back_deltas_but_not_the_initial_full_scan(tmp_path):
    # Java DataTableStreamScan: `streaming.read.snapshot.delay` applies to
    # the follow-up snapshots (NextSnapshotFetcher), not to tryFirstPlan.
    table = PaimonTable(tmp_path / "warehouse", "delay")
    table.commit()
    table.commit()
    stream = stream_of(table, **{"streaming.read.snapshot.delay": "1 h"})
    latest = stream.snapshots.readable_latest(delay_ms=3_600_000)
    assert latest == 0, "both snapshots are younger than the delay"
    batch = stream.batch(Offset(2, -1, True, None, "h"), None, latest=latest)
    assert batch is not None and {s for s, _, full in batch.positions} == {2}
    assert all(full for _, _, full in batch.positions)
    # The deltas after it wait for the delay.
    assert stream.batch(batch.end, None, latest=latest) is None


def runner_of(table: PaimonTable, server, consumer: str, **options):
    from tidemark.paimon.runner import Runner

    return Runner(
        SourceOptions(
            {"path": table.path, "consumer-id": consumer, "tidemark.endpoint": server.endpoint,
             "tidemark.lease-ttl": "5", **options}
        )
    )


class Counted:
    """Wraps one method of an object and counts its calls (and arguments)."""

    def __init__(self, target, name: str):
        self.calls = []
        original = getattr(target, name)

        def counted(*args, **kwargs):
            self.calls.append(args)
            return original(*args, **kwargs)

        setattr(target, name, counted)


def test_a_restart_replays_a_compacted_full_batch_without_walking_back_to_the_compaction(tmp_path, tidemark_server):
    # The walk back to the latest COMPACT is the startup options' (Java
    # CompactedStartingScanner); a replay of a logged batch whose start is
    # readable never falls back to them, so it reads no snapshot for it.
    table = PaimonTable(tmp_path / "warehouse", "compacted")
    table.commit()
    compacted = table.compact()
    for _ in range(40):
        table.commit(rows=3)
    first = runner_of(table, tidemark_server, "etl", **{"scan.mode": "compacted-full", "max-splits-per-batch": "2"})
    start = first.initial_offset()
    assert Offset.from_json(start).position == (compacted, -1)
    end_1 = first.latest_offset(start, False)
    first.partitions(start, end_1)
    first.commit(end_1)
    end_2 = first.latest_offset(end_1, False)
    first.stop()  # killed after logging batch 2

    restarted = runner_of(table, tidemark_server, "etl", **{"scan.mode": "compacted-full", "max-splits-per-batch": "2"})
    reads = Counted(restarted.snapshots.manager, "get_snapshot_by_id")
    partitions = restarted.partitions(end_1, end_2)
    assert partitions, "batch 2 replayed"
    walked = [args[0] for args in reads.calls if args[0] > compacted + 2]
    assert walked == [], f"read {len(walked)} snapshots after the batch for the startup options"
    restarted.stop()


def test_a_batch_looks_for_the_latest_snapshot_once_without_a_latest_hint(tmp_path, tidemark_server):
    import os

    table = PaimonTable(tmp_path / "warehouse", "nohint")
    for _ in range(3):
        table.commit()
    os.remove(os.path.join(table.path, "snapshot", "LATEST"))
    runner = runner_of(table, tidemark_server, "etl")
    start = runner.initial_offset()
    listings = Counted(runner.snapshots.manager.file_io, "list_status")
    end = runner.latest_offset(start, False)
    runner.partitions(start, end)
    runner.commit(end)
    snapshot_dir = os.path.join(table.path, "snapshot")
    listed = [args for args in listings.calls if str(args[0]).rstrip("/").endswith(snapshot_dir.rstrip("/"))]
    assert len(listed) == 1, f"the snapshot directory was listed {len(listed)} times for one batch"
    runner.stop()


def test_a_tag_start_scans_the_tags_snapshot_and_refuses_once_it_expired(tmp_path, tidemark_server):
    table = PaimonTable(tmp_path / "warehouse", "tagged")
    table.commit()
    tagged = table.commit()
    table.table.create_tag("release", tagged)
    table.commit()
    runner = runner_of(table, tidemark_server, "from_tag", **{"scan.tag-name": "release"})
    assert Offset.from_json(runner.initial_offset()).position == (tagged, -1)
    assert Offset.from_json(runner.initial_offset()).full
    runner.stop()
    # scan.version naming the tag is the same start (Java adaptScanVersion).
    by_version = runner_of(table, tidemark_server, "by_version", **{"scan.version": "release"})
    assert Offset.from_json(by_version.initial_offset()).position == (tagged, -1)
    by_version.stop()

    # The tag keeps its data, not snapshot-2: starting there would silently
    # scan the earliest snapshot instead (R3's max(id, earliest)).
    table.expire_below(tagged + 1)
    with pytest.raises(ValueError, match=f"tag 'release' .* is of snapshot {tagged}, which has expired"):
        runner_of(table, tidemark_server, "late", **{"scan.tag-name": "release"}).initial_offset()
    with pytest.raises(ValueError, match="has no tag 'nope'"):
        runner_of(table, tidemark_server, "none", **{"scan.tag-name": "nope"}).initial_offset()
    # Should the snapshot expire between the look and tidemark's answer, the
    # start tidemark moved is refused too.
    late = runner_of(table, tidemark_server, "race")
    late.coordination.ensure_lease(None)
    with pytest.raises(QueryFailed, match=f"snapshot {tagged} of .* expired before this query started"):
        late.coordination.start(late.snapshots, ("from-snapshot-full", tagged), exact=True)
    late.stop()


def test_from_timestamp_searches_the_changelogs_that_outlive_snapshots(tmp_path):
    import time

    from tidemark.paimon.startup import startup

    table = PaimonTable(tmp_path / "warehouse", "decoupled", options={"changelog.time-retained": "2 h"})
    for _ in range(4):
        table.commit()
        time.sleep(0.01)
    times = {s: table.table.snapshot_manager().get_snapshot_by_id(s).time_millis for s in range(1, 5)}
    assert table.expire_keeping_changelog_below(3) == [1, 2]
    opts = SourceOptions({"path": table.path, "consumer-id": "c", "scan.timestamp-millis": str(times[2])})
    opened, _ = open_source(opts)
    snapshots = TableSnapshots(opened, opts.effective)
    # Snapshot 2 (now changelog-2) is the first committed at or after the
    # time; searching live snapshots only started at 3 and lost its rows.
    assert startup(opts, snapshots, 4) == ("from-snapshot", 2)
    early = SourceOptions({"path": table.path, "consumer-id": "c", "scan.timestamp-millis": str(times[1] - 1000)})
    open_source(early)
    assert startup(early, snapshots, 4) == ("from-snapshot", 1)


def test_a_time_travel_start_reads_with_the_schema_of_its_snapshot(tmp_path, tidemark_server):
    """Java `AbstractFileStoreTable.tryTimeTravel`: with scan.snapshot-id
    (or a time, or a tag) the query's schema is that snapshot's; rows
    written since under a renamed column arrive under the start's name, a
    column added since is not delivered."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange
    from pyspark.sql.datasource import CaseInsensitiveDict

    from tidemark.paimon_source import TidemarkPaimonDataSource

    table = PaimonTable(tmp_path / "warehouse", "travel")
    first = table.commit(rows=3)
    table.catalog.alter_table(table.id, [SchemaChange.rename_column("value", "label")])
    table.catalog.alter_table(table.id, [SchemaChange.add_column("note", AtomicType("STRING"))])
    table.table = table.catalog.get_table(table.id)
    import pyarrow as pa

    from harness import write_table

    evolved = pa.schema([("id", pa.int64()), ("part", pa.string()), ("label", pa.string()), ("note", pa.string())])
    write_table(table.table, pa.table({"id": [100], "part": ["p0"], "label": ["v100"], "note": ["n"]}, schema=evolved))
    options = {
        "path": table.path, "consumer-id": "travel", "tidemark.endpoint": tidemark_server.endpoint,
        "tidemark.lease-ttl": "5", "scan.snapshot-id": str(first),
    }
    source = TidemarkPaimonDataSource(CaseInsensitiveDict(options))
    schema = source.schema()
    assert schema.names == ["id", "part", "value"]
    latest = TidemarkPaimonDataSource(CaseInsensitiveDict({**options, "scan.snapshot-id": None, "scan.mode": "latest"}))
    assert latest.schema().names == ["id", "part", "label", "note"]
    reader = source.streamReader(schema)
    try:
        offset = reader.initialOffset()
        rows = []
        for _ in range(5):
            end = reader.latestOffset(offset, None)
            if end == offset:
                break
            for partition in reader.partitions(offset, end):
                rows += [row for batch in reader.read(partition) for row in batch.to_pylist()]
            reader.commit(end)
            offset = end
        assert sorted((r["id"], r["value"]) for r in rows) == [(0, "v0"), (1, "v1"), (2, "v2"), (100, "v100")]
    finally:
        reader.stop()
