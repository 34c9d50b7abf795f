"""Real Spark Structured Streaming (pyspark 4.3.0, local[2]) reading real
Paimon tables (written with pypaimon during the test) through the
tidemark_paimon source, against a real tidemark server. Each test asserts on
the rows that reached the sink and on tidemark's consumer record."""

from __future__ import annotations

import threading
import time

import pytest
from harness import COMMIT_LOGS, PaimonTable, Sink, read_commit_log, wait_for
from pyspark.errors import StreamingQueryException

from tidemark import Client, TidemarkError

pytestmark = pytest.mark.spark

INCOMPLETE_FULL_SCAN = "COMMIT_OUTCOME_UNCHANGED_INCOMPLETE_FULL_SCAN"


class Query:
    """Starts tidemark_paimon queries for one test: a table, a consumer, a
    server; each run names its checkpoint and sink."""

    def __init__(self, spark, tmp_path, table: PaimonTable, consumer: str, server):
        self.spark = spark
        self.tmp_path = tmp_path
        self.table = table
        self.consumer = consumer
        self.server = server

    def start(self, checkpoint: str, sink: Sink, trigger: str = "availableNow", options=None):
        commit_log = self.tmp_path / f"commits-{checkpoint}.jsonl"
        if commit_log not in COMMIT_LOGS:
            COMMIT_LOGS.append(commit_log)
        reader = (
            self.spark.readStream.format("tidemark_paimon")
            .option("path", self.table.path)
            .option("tidemark.endpoint", self.server.endpoint)
            .option("tidemark.lease-ttl", "5")
            .option("tidemark.commit-log", str(commit_log))
        )
        if self.consumer is not None:  # otherwise the table's property names it
            reader = reader.option("consumer-id", self.consumer)
        for key, value in (options or {}).items():
            reader = reader.option(key, str(value))
        writer = (
            reader.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(self.tmp_path / f"checkpoint-{checkpoint}"))
        )
        if trigger == "availableNow":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=trigger)
        return writer.start()

    def commits(self, checkpoint: str) -> list:
        return read_commit_log(self.tmp_path / f"commits-{checkpoint}.jsonl")


def consumer_info(client: Client, table: PaimonTable, consumer: str):
    """The key as operators see it; None before it was ever leased."""
    try:
        return client.describe_consumer(table.id, consumer).info
    except TidemarkError as error:
        if error.reason == "CONSUMER_NOT_FOUND":
            return None
        raise


def lease_state(client: Client, table: PaimonTable, consumer: str):
    info = consumer_info(client, table, consumer)
    return info.lease.state if info is not None and info.HasField("lease") else None


def next_snapshot(client: Client, table: PaimonTable, consumer: str):
    info = consumer_info(client, table, consumer)
    return info.consumer.next_snapshot if info is not None and info.HasField("consumer") else None


def wait_lease_free(client: Client, table: PaimonTable, consumer: str, timeout: float = 15.0) -> None:
    """The stopped query releases its lease on SIGTERM; if that was missed the
    lease (ttl 5 s) expires on its own."""
    wait_for(
        lambda: lease_state(client, table, consumer) != "active",
        timeout,
        "the stopped query's lease to end",
    )


def revoke_lease(client: Client, table_id: str, consumer: str, reason: str) -> None:
    """An operator hands the consumer to another query (RevokeLease)."""
    from tidemark.v1 import admin_pb2, types_pb2

    client.admin.RevokeLease(
        admin_pb2.RevokeLeaseRequest(
            consumer=types_pb2.ConsumerKey(table=table_id, branch="main", consumer_id=consumer),
            reason=reason,
            execute=True,
        ),
        timeout=10,
    )


def run_to_end(query, timeout: float = 180.0) -> None:
    assert query.awaitTermination(timeout), "the availableNow query finished"
    assert query.exception() is None


def run_to_failure(query, timeout: float = 180.0) -> str:
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination(timeout)
    return str(raised.value)


def test_latest_full_creates_the_consumer_only_when_the_full_scan_is_committed(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("full"))
    table.commit()
    latest = table.commit()  # the full scan of snapshot 2 has 6 splits
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = Sink(tmp_path / "sink")

    run_to_end(q.start("a", sink, options={"max-splits-per-batch": 2}))

    # Three batches of two splits; Spark commits all but the last one.
    assert [len(rows) for rows in sink.batches().values()] == [4, 4, 4]
    assert sink.ids() == table.ids()
    commits = q.commits("a")
    assert [c["outcome"] for c in commits] == [INCOMPLETE_FULL_SCAN, INCOMPLETE_FULL_SCAN]
    assert [c["end"]["index"] for c in commits] == [1, 3]
    assert next_snapshot(client, table, q.consumer) is None, "no consumer while the full scan is partial"

    # The next run commits the last split of the full scan before its first
    # batch: the consumer appears at latest + 1.
    table.commit()
    run_to_end(q.start("a", sink, options={"max-splits-per-batch": 2}))
    commits = q.commits("a")
    created = [c for c in commits if c["outcome"] == "COMMIT_OUTCOME_CREATED"]
    assert len(created) == 1
    assert created[0]["end"] == {"snapshotId": latest, "index": 5, "scanSnapshot": True, "totalSplits": 6}
    assert created[0]["next_snapshot"] == latest + 1
    assert next_snapshot(client, table, q.consumer) >= latest + 1
    assert sink.ids() == table.ids(), "every row exactly once"


def test_a_new_query_without_checkpoint_resumes_inside_a_partly_read_delta_snapshot(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("partial"))
    for _ in range(3):
        table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    first = Sink(tmp_path / "sink-first")

    # Deltas from snapshot 1, two splits a batch: the ends are (1,1) (2,0)
    # (2,2) (3,1) (3,2); the last committed one, (3,1), is partway through 3.
    run_to_end(q.start("first", first, options={"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "max-splits-per-batch": 2}))
    assert q.commits("first")[-1]["end"] == {"snapshotId": 3, "index": 1, "scanSnapshot": False, "totalSplits": 3}
    assert next_snapshot(client, table, q.consumer) == 3
    assert first.ids() == table.ids()

    wait_lease_free(client, table, q.consumer)
    table.commit()
    second = Sink(tmp_path / "sink-second")
    run_to_end(q.start("second", second, options={"scan.mode": "from-snapshot", "scan.snapshot-id": 1}))

    # Resumed at snapshot 3 incrementally: its rows again (a replay), then 4;
    # nothing older and no full scan.
    assert second.ids() == table.ids([3, 4])
    assert sorted(set(first.ids()) | set(second.ids())) == table.ids(), "no row lost"


def test_restart_from_the_same_checkpoint_delivers_every_row_exactly_once(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("restart"))
    table.commit()
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = Sink(tmp_path / "sink")
    sink.fail_once = {1}

    message = run_to_failure(q.start("a", sink, options={"max-splits-per-batch": 2}))
    assert "injected sink failure in batch 1" in message
    assert list(sink.batches()) == [0]

    table.commit()
    run_to_end(q.start("a", sink, options={"max-splits-per-batch": 2}))
    # Batch 1 was replayed from the offset log with the same splits.
    assert sink.calls.count(1) == 2
    assert sink.ids() == table.ids(), "every row exactly once"
    assert len(sink.ids()) == len(set(sink.ids()))
    assert next_snapshot(client, table, q.consumer) == 3  # partway through snapshot 3

    table.commit()
    run_to_end(q.start("a", sink, options={"max-splits-per-batch": 2}))
    assert sink.ids() == table.ids(), "every row exactly once after another restart"


def test_a_restart_replays_from_the_next_snapshot_once_its_finished_start_snapshot_expired(
    spark, tidemark_server, client_for, tmp_path, unique
):
    # Batch 0 ends on the last split of snapshot 1; batch 1 is logged, Spark
    # commits batch 0 (the consumer moves to 2, so tidemark's fence lets 1
    # expire), and the query dies in batch 1's sink. Snapshot 1 expires. The
    # restart on the same checkpoint replays batch 1 from snapshot 2 without
    # planning the finished snapshot 1 again (it once failed
    # REPLAY_PLAN_MISMATCH "snapshot 1 ... no longer exists").
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("finished"))
    for _ in range(3):
        table.commit()  # 3 splits each
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = Sink(tmp_path / "sink")
    sink.fail_once = {1}
    options = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "max-splits-per-batch": 3}

    message = run_to_failure(q.start("a", sink, options=options))
    assert "injected sink failure in batch 1" in message
    assert next_snapshot(client, table, q.consumer) == 2, "batch 0 (all of snapshot 1) was committed"
    assert table.expire_below(2) == [1]

    run_to_end(q.start("a", sink, options=options))
    assert sink.calls.count(1) == 2, "batch 1 was replayed from the offset log"
    assert sink.ids() == table.ids(), "every row exactly once"
    assert len(sink.ids()) == len(set(sink.ids()))


def test_a_second_query_on_the_same_consumer_fails_fast_until_the_first_stops(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("lease"))
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    running_sink = Sink(tmp_path / "sink-running")
    running = q.start("running", running_sink, trigger="300 milliseconds")
    try:
        wait_for(lambda: running_sink.ids() == table.ids(), 120, "the first query's first batch")
        holder = consumer_info(client, table, q.consumer).lease.holder

        started = time.monotonic()
        message = run_to_failure(q.start("second", Sink(tmp_path / "sink-second")))
        assert time.monotonic() - started < 20, "fails at start, without waiting for the lease"
        assert "LEASE_HELD" in message
        assert holder in message, "the message names the holder"
        assert running.isActive
    finally:
        running.stop()

    wait_lease_free(client, table, q.consumer)
    after = Sink(tmp_path / "sink-after")
    run_to_end(q.start("after", after))
    assert after.ids() == table.ids()


def test_commit_while_tidemark_is_down_fails_the_query_and_a_restart_loses_nothing(
    spark, own_server, client_for, tmp_path, unique
):
    client = client_for(own_server)
    table = PaimonTable(tmp_path / "warehouse", unique("outage"))
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), own_server)
    sink = Sink(tmp_path / "sink")
    # A short retry budget: the query gives up on the dead server sooner
    # than the default 30 s would (what it does then is the same).
    query = q.start("a", sink, trigger="300 milliseconds", options={"tidemark.retry-budget": "6"})
    try:
        wait_for(lambda: sink.ids() == table.ids(), 120, "the first batch")
        table.commit()
        # Batch 1 runs after batch 0's end (the complete full scan of 1) was committed.
        wait_for(lambda: sink.ids() == table.ids(), 60, "the second batch")
        wait_for(lambda: next_snapshot(client, table, q.consumer) == 2, 30, "the consumer at 2")

        own_server.kill()
        table.commit()  # batch 2 is planned; committing batch 1's end fails
        message = run_to_failure(query, timeout=120)
        assert "UNAVAILABLE" in message
    finally:
        if query.isActive:
            query.stop()

    own_server.start()
    assert next_snapshot(client, table, q.consumer) == 2, "the consumer kept its previous position"
    run_to_end(q.start("a", sink))
    assert sink.ids() == table.ids(), "no row lost (and none twice)"
    assert next_snapshot(client, table, q.consumer) >= 2


def test_ignore_progress_starts_from_the_startup_options_and_rewinds_the_consumer(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("ignore"))
    for _ in range(4):
        table.commit()
    consumer = unique("etl")
    # An earlier query consumed everything: the consumer is at 5.
    lease = client.acquire_lease(table.id, consumer, holder="earlier-query").lease
    from tidemark import offset

    client.commit_batch(lease, 0, offset(4, 2, False, 3))
    client.release_lease(lease)
    assert next_snapshot(client, table, consumer) == 5

    q = Query(spark, tmp_path, table, consumer, tidemark_server)
    sink = Sink(tmp_path / "sink")
    run_to_end(
        q.start(
            "a",
            sink,
            options={
                "consumer.ignore-progress": "true",
                "scan.mode": "from-snapshot",
                "scan.snapshot-id": 2,
                "max-splits-per-batch": 2,
            },
        )
    )
    assert sink.ids() == table.ids([2, 3, 4])
    first = q.commits("a")[0]
    assert first["outcome"] == "COMMIT_OUTCOME_REWOUND"
    assert first["next_snapshot"] == 2
    rewinds = [e for e in client.list_history(table.id, consumer) if e.event == "REWIND"]
    assert len(rewinds) == 1
    assert (rewinds[0].old_next_snapshot, rewinds[0].new_next_snapshot) == (5, 2)
    assert rewinds[0].detail.startswith("REWOUND")


def test_an_expired_snapshot_under_a_logged_full_scan_batch_fails_the_replay(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("mismatch"))
    for _ in range(3):
        table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = Sink(tmp_path / "sink")
    sink.fail_once = {1}
    options = {"scan.mode": "from-snapshot-full", "scan.snapshot-id": 2, "max-splits-per-batch": 4}

    # Batch 0: splits 0-3 of the full scan of 2. Batch 1 straddles the rest
    # of that full scan and the delta of 3, ending at (3, 1, delta); it fails.
    run_to_failure(q.start("a", sink, options=options))
    assert list(sink.batches()) == [0]

    assert table.expire_below(3) == [1, 2]
    message = run_to_failure(q.start("a", sink, options=options))
    assert "REPLAY_SCAN_MISMATCH" in message
    assert "new checkpoint" in message
    assert list(sink.batches()) == [0], "no batch mixing a full and an incremental plan ran"
    assert next_snapshot(client, table, q.consumer) is None


def test_expiring_below_the_fence_never_removes_a_snapshot_the_running_query_needs(
    spark, tidemark_server, client_for, tmp_path, unique
):
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("fence"))
    table.commit()
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = Sink(tmp_path / "sink")
    query = q.start("a", sink, trigger="200 milliseconds", options={"max-splits-per-batch": 2})
    expired: list = []
    fences: list = []
    stop = threading.Event()
    failures: list = []

    def maintain():
        # Paimon's expiration, as aggressive as it gets: keep only what the
        # fence protects (and the latest snapshot), every 50 ms.
        while not stop.is_set():
            try:
                fence = client.get_retention_fence(table.id)
                if fence.HasField("snapshot_fence"):
                    fences.append(fence.snapshot_fence)
                    expired.extend(table.expire_below(fence.snapshot_fence))
            except Exception as error:  # surfaced by the assertions below
                failures.append(error)
            stop.wait(0.05)

    try:
        # The query's lease pins its initial full scan before maintenance starts.
        wait_for(lambda: lease_state(client, table, q.consumer) == "active", 120, "the lease")
        maintainer = threading.Thread(target=maintain, daemon=True)
        maintainer.start()
        for _ in range(8):
            table.commit()
            time.sleep(0.4)
        wait_for(lambda: sink.ids() == table.ids() or not query.isActive, 180, "every row")
        assert query.isActive, f"the query failed: {query.exception()}"
    finally:
        stop.set()
        query.stop()
    assert not failures, failures
    assert sink.ids() == table.ids(), "every row exactly once"
    assert len(expired) >= 5, f"maintenance expired snapshots as it went ({expired})"
    assert fences == sorted(fences), "the fence only moves forward"


def test_a_running_query_survives_a_tidemark_restart_and_loses_nothing(
    spark, own_server, client_for, tmp_path, unique
):
    client = client_for(own_server)
    table = PaimonTable(tmp_path / "warehouse", unique("restart"))
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), own_server)
    sink = Sink(tmp_path / "sink")
    # The default lease ttl (30 s) outlasts the restart; the suite's usual
    # 5 s would expire under it, and then the query must stop.
    query = q.start("a", sink, trigger="300 milliseconds", options={"tidemark.lease-ttl": 30})
    try:
        wait_for(lambda: sink.ids() == table.ids(), 120, "the first batch")
        own_server.kill()
        down_at = time.monotonic()
        table.commit()  # the next batch's commit finds tidemark away
        restarter = threading.Timer(4.0, own_server.start)
        restarter.start()
        restarter.join()
        print(f"tidemark was down {time.monotonic() - down_at:.1f} s under the running query")
        table.commit()
        wait_for(lambda: sink.ids() == table.ids() or not query.isActive, 120, "every row after the restart")
        assert query.isActive, f"the query survived the restart: {query.exception()}"
        assert sink.ids() == table.ids(), "nothing lost, nothing twice"
        wait_for(lambda: next_snapshot(client, table, q.consumer) is not None
                 and next_snapshot(client, table, q.consumer) >= 2, 30, "commits after the restart")
    finally:
        query.stop()
