"""Real Spark reading real Paimon tables with `tidemark.sink-columns=true`
into PostgresSink (SPEC §12): every row carries its table position, and a
query restarted without its checkpoint — which replays the consumer's
partly read snapshot — delivers every row exactly once."""

from __future__ import annotations

import urllib.parse
import uuid

import psycopg
import pytest
from harness import PaimonTable, wait_for

from test_sink_postgres import base_dsn
from test_spark_paimon import Query, next_snapshot, revoke_lease, run_to_end, run_to_failure, wait_lease_free
from tidemark.sinks import PaimonSink, ParquetSink, PostgresSink

pytestmark = pytest.mark.spark

SINK_COLUMNS = {"tidemark.sink-columns": "true"}


@pytest.fixture
def pg():
    schema = f"spark_sink_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.events (id bigint, part text, value text)")
    sep = "&" if "?" in base_dsn() else "?"
    yield base_dsn() + sep + urllib.parse.urlencode({"options": f"-csearch_path={schema}"})
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def sink_ids(dsn: str) -> list:
    with psycopg.connect(dsn) as conn:
        return sorted(r[0] for r in conn.execute("SELECT id FROM events"))


def test_every_row_carries_its_table_position_and_the_consumer(spark, tidemark_server, tmp_path, unique):
    table = PaimonTable(tmp_path / "warehouse", unique("positions"))
    table.commit()
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    seen = []

    def keep(frame, batch_id):
        seen.append((frame.schema, [r.asDict() for r in frame.collect()]))

    run_to_end(q.start("a", keep, options={**SINK_COLUMNS, "max-splits-per-batch": 2}))
    schema = seen[0][0]
    added = [(f.name, f.dataType.simpleString(), f.nullable) for f in schema.fields[3:]]
    assert added == [
        ("_tidemark_epoch", "bigint", False),
        ("_tidemark_snapshot", "bigint", False),
        ("_tidemark_full", "boolean", False),
        ("_tidemark_split", "int", False),
        ("_tidemark_row", "bigint", False),
        ("_tidemark_plan", "string", False),
    ]
    assert schema["_tidemark_epoch"].metadata == {"tidemark.consumer": f"{table.id}@main/{q.consumer}"}
    rows = [row for _, batch in seen for row in batch]
    assert sorted(r["id"] for r in rows) == table.ids()
    # The initial full scan of snapshot 2: six one-file splits, each row's
    # ordinal counting from 0 in its split, one plan for all.
    assert {(r["_tidemark_snapshot"], r["_tidemark_full"], r["_tidemark_epoch"]) for r in rows} == {(2, True, 1)}
    by_split = {}
    for r in rows:
        by_split.setdefault(r["_tidemark_split"], []).append(r["_tidemark_row"])
    assert sorted(by_split) == list(range(6)) and all(sorted(o) == list(range(len(o))) for o in by_split.values())
    plans = {r["_tidemark_plan"] for r in rows}
    assert len(plans) == 1 and ";splits=6;source.split.open-file-cost=4 mb;source.split.target-size=1 b" in plans.pop()


def test_sink_columns_and_an_epoch_column_are_refused_together(spark, tidemark_server, tmp_path, unique):
    table = PaimonTable(tmp_path / "warehouse", unique("both"))
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    with pytest.raises(Exception) as refused:
        q.start("a", lambda f, b: None, options={**SINK_COLUMNS, "tidemark.epoch-column": "_e"})
    assert "tidemark.sink-columns" in str(refused.value) and "tidemark.epoch-column" in str(refused.value)


@pytest.mark.parametrize("kind", ["postgres", "paimon"])
def test_a_restart_without_its_checkpoint_delivers_every_row_exactly_once(
    spark, tidemark_server, client_for, tmp_path, unique, pg, kind
):
    """The first run stops partway through snapshot 3; the second starts with
    a new checkpoint, so tidemark resumes it at snapshot 3 from its first
    split (a plain sink gets those rows twice: test_spark_paimon's
    `..._resumes_inside_a_partly_read_delta_snapshot`). The sink drops them."""
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("exactly"))
    for _ in range(3):
        table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    if kind == "postgres":
        sink, written = PostgresSink(pg, "events"), lambda: sink_ids(pg)
    else:
        copy = PaimonTable(tmp_path / "sinks", unique("sinkdb"))
        sink, written = PaimonSink({"warehouse": str(tmp_path / "sinks")}, copy.id), copy.live_ids
    start = {**SINK_COLUMNS, "scan.mode": "from-snapshot", "scan.snapshot-id": 1}
    run_to_end(q.start("first", sink, options={**start, "max-splits-per-batch": 2}))
    assert next_snapshot(client, table, q.consumer) == 3
    assert written() == table.ids()

    wait_lease_free(client, table, q.consumer)
    table.commit()
    run_to_end(q.start("second", sink, options=start))
    assert sink.last_batch["dropped"] > 0, "the replayed rows of snapshot 3 were dropped"
    assert written() == table.ids(), "every row exactly once"


@pytest.mark.parametrize("kind", ["postgres", "parquet"])
def test_a_zombie_querys_batch_is_refused_by_the_sink(spark, tidemark_server, client_for, tmp_path, unique, pg, kind):
    """A query whose lease was revoked while its batch was in the sink: the
    next query's first batch raised the sink's epoch, so the old batch is
    refused (ZOMBIE_BATCH) and none of its rows land twice. (The Parquet
    sink replaces the old host-local fenced_sink example.)"""
    import threading

    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("zombie"))
    table.commit()
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    if kind == "postgres":
        sink, written = PostgresSink(pg, "events"), lambda: sink_ids(pg)
    else:
        sink = ParquetSink(str(tmp_path / "out"))

        def written():
            rows = sink.read()
            return sorted(rows.column("id").to_pylist()) if rows is not None else []

    entered, release = threading.Event(), threading.Event()

    def stalling(frame, batch_id):
        if batch_id == 1:
            entered.set()
            release.wait(120)
        sink(frame, batch_id)

    zombie = q.start("zombie", stalling, trigger="300 milliseconds", options=SINK_COLUMNS)
    try:
        wait_for(lambda: len(written()) == 6, 120, "the first batch, under epoch 1")
        table.commit()
        assert entered.wait(120), "batch 1 reached the sink"
        revoke_lease(client, table.id, q.consumer, "moved to another query")
        run_to_end(q.start("successor", sink, options=SINK_COLUMNS))
        release.set()
        message = run_to_failure(zombie)
        assert "ZOMBIE_BATCH" in message, message
    finally:
        release.set()
        if zombie.isActive:
            zombie.stop()
    assert written() == table.ids(), "every row exactly once, none from the zombie's batch"


def test_a_full_scan_restarted_without_checkpoint_is_refused_then_resumed_at_the_recorded_snapshot(
    spark, tidemark_server, client_for, tmp_path, unique, pg
):
    """C3: the initial full scan of snapshot 2 is partly delivered, then the
    query dies before the consumer exists; a new query without the
    checkpoint would scan snapshot 3 in full — rows the sink already holds.
    The sink refuses it (FULL_SCAN_RESTARTED) naming the fix; restarted as
    the refusal says, at the recorded snapshot, every row lands once."""
    client = client_for(tidemark_server)
    table = PaimonTable(tmp_path / "warehouse", unique("c3"))
    table.commit()
    table.commit()  # snapshot 2: twelve rows, six one-file splits
    q = Query(spark, tmp_path, table, unique("etl"), tidemark_server)
    sink = PostgresSink(pg, "events")

    def dies_after_the_first_batch(frame, batch_id):
        if batch_id == 1:
            raise RuntimeError("driver lost")
        sink(frame, batch_id)

    run_to_failure(q.start("first", dies_after_the_first_batch, options={**SINK_COLUMNS, "max-splits-per-batch": 2}))
    assert len(sink_ids(pg)) == 4 and next_snapshot(client, table, q.consumer) is None
    wait_lease_free(client, table, q.consumer)
    table.commit()

    message = run_to_failure(q.start("second", sink, options=SINK_COLUMNS))
    assert "FULL_SCAN_RESTARTED" in message and "scan.snapshot-id=2" in message, message
    assert len(sink_ids(pg)) == 4, "nothing of the refused batch"

    wait_lease_free(client, table, q.consumer)
    resume = {**SINK_COLUMNS, "scan.mode": "from-snapshot-full", "scan.snapshot-id": 2}
    run_to_end(q.start("third", sink, options=resume))
    assert sink_ids(pg) == table.ids(), "every row exactly once"
