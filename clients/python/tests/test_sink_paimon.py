"""PaimonSink's protocol against real pypaimon tables (SPEC §12 X2): a replay
writes nothing, a partial overlap writes only the new rows, a lower epoch is
refused, a zombie that read the progress before a newer query committed is
refused at its commit, a changelog is applied in position order, and the
progress survives the expiration of the snapshot that carried it. Each
check switched off (`TIDEMARK_SINK_MUTANT`) must break these."""

from __future__ import annotations


import pyarrow as pa
import pytest
from harness import PaimonTable, write_table

from test_sink_postgres import PLAN, rows
from tidemark.sinks import PaimonSink, SinkRefused

CONSUMER = "db.orders@main/etl"


@pytest.fixture
def lake(tmp_path, unique):
    """An append sink table (the harness's `events`, every file its own
    split) and a primary-key one with `rowkind.field`."""
    from pypaimon import Schema

    table = PaimonTable(tmp_path / "warehouse", unique("sinkdb"), "out")
    schema = Schema.from_pyarrow_schema(
        pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string()), ("rowkind", pa.string())]),
        primary_keys=["k"],
        options={"bucket": "2", "rowkind.field": "rowkind"},
    )
    database = table.id.split(".")[0]
    table.catalog.create_table(f"{database}.kv", schema, False)
    return {"append": table, "options": {"warehouse": str(tmp_path / "warehouse")}, "kv": f"{database}.kv"}


def events(ids, part="p0"):
    out = []
    for row in ids:
        row["part"], row["value"] = part, row.pop("v")
        out.append(row)
    return out


def sink_ids(table: PaimonTable) -> list:
    return table.live_ids()


def batch(epoch, snapshot, split, ids, full=False, first_row=0, plan=PLAN):
    return events(rows(epoch, snapshot, split, ids, full=full, first_row=first_row, plan=plan))


def test_a_replay_writes_nothing_and_an_overlap_only_the_new_rows(lake):
    sink = PaimonSink(lake["options"], lake["append"].id)
    columns = ["id", "part", "value"]
    assert sink.write(CONSUMER, columns, batch(1, 5, 0, [1, 2, 3]))["written"] == 3
    assert sink.write(CONSUMER, columns, batch(1, 5, 0, [1, 2, 3])) == {"written": 0, "dropped": 3, "epoch": 1}
    again = batch(2, 5, 0, [1, 2, 3]) + batch(2, 5, 1, [4]) + batch(2, 6, 0, [5])
    assert sink.write(CONSUMER, columns, again) == {"written": 2, "dropped": 3, "epoch": 2}
    assert sink_ids(lake["append"]) == [1, 2, 3, 4, 5]
    progress, _ = sink.progress(CONSUMER)
    assert (progress.epoch, progress.at) == (2, (6, 1, 0, 0))


def test_a_lower_epoch_is_refused(lake):
    sink = PaimonSink(lake["options"], lake["append"].id)
    columns = ["id", "part", "value"]
    sink.write(CONSUMER, columns, batch(3, 5, 0, [1]))
    with pytest.raises(SinkRefused) as refused:
        sink.write(CONSUMER, columns, batch(2, 6, 0, [2]))
    assert refused.value.reason == "ZOMBIE_BATCH"
    assert sink_ids(lake["append"]) == [1]


def test_a_zombie_that_read_the_progress_before_a_newer_query_committed_is_refused_at_its_commit(lake):
    """The old query's batch reads the progress (epoch 1), then — while its
    rows are still being written — the new query commits its first batch
    (epoch 2). The old one's commit finds epoch 2 among the snapshots since
    its read and is refused; only the new query's rows are in the table."""
    old, new = PaimonSink(lake["options"], lake["append"].id), PaimonSink(lake["options"], lake["append"].id)
    columns = ["id", "part", "value"]
    old.write(CONSUMER, columns, batch(1, 5, 0, [1]))

    def racing_rows():
        yield from batch(1, 6, 0, [2])
        new.write(CONSUMER, columns, batch(2, 6, 0, [2]) + batch(2, 7, 0, [3]))
        yield from batch(1, 7, 0, [3])

    with pytest.raises(SinkRefused) as refused:
        old.write(CONSUMER, columns, racing_rows())
    assert refused.value.reason == "ZOMBIE_BATCH" and "epoch 2" in str(refused.value)
    assert sink_ids(lake["append"]) == [1, 2, 3]


def test_a_newer_epoch_with_nothing_new_still_fences_the_old_query(lake):
    sink = PaimonSink(lake["options"], lake["append"].id)
    columns = ["id", "part", "value"]
    sink.write(CONSUMER, columns, batch(1, 5, 0, [1, 2]))
    # The new query's first batch is a replay: nothing written, yet epoch 2
    # is committed (an empty snapshot) so the old query is refused.
    assert sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]))["written"] == 0
    with pytest.raises(SinkRefused):
        sink.write(CONSUMER, columns, batch(1, 6, 0, [3]))
    assert sink_ids(lake["append"]) == [1, 2]


def test_a_changelog_is_applied_in_position_order(lake):
    sink = PaimonSink(lake["options"], lake["kv"])
    columns = ["rowkind", "k", "v"]
    sink.write(CONSUMER, columns, rows(1, 5, 0, [1, 2, 3], kinds=["+I", "+I", "+I"]))
    changes = rows(1, 6, 0, [1, 3, 2, 1, 3, 4, 4], kinds=["+U", "-U", "-D", "+U", "+U", "+I", "-D"])
    for i, row in enumerate(changes):
        row["v"] = f"w{i}"
    # Delivered out of order (two Spark partitions): position order decides.
    sink.write(CONSUMER, columns, list(reversed(changes)))
    from pypaimon import CatalogFactory

    table = CatalogFactory.create(lake["options"]).get_table(lake["kv"])
    builder = table.new_read_builder()
    state = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert sorted(zip(state.column("k").to_pylist(), state.column("v").to_pylist())) == [(1, "w3"), (3, "w4")]


def test_the_progress_survives_the_expiration_of_the_snapshot_that_carried_it(lake):
    """A busy sink table: other writers commit ten more snapshots and the
    ones carrying the sink's progress expire. The side file still has it: a
    replay is dropped, a zombie refused."""
    table = lake["append"]
    sink = PaimonSink(lake["options"], table.id)
    columns = ["id", "part", "value"]
    sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]))
    carrier = table.snapshot_ids()[-1]
    for i in range(10):
        write_table(table.table, pa.table({"id": [100 + i], "part": ["p1"], "value": ["other"]}, schema=table.arrow_schema))
    assert table.expire_below(table.snapshot_ids()[-1]) and carrier not in table.snapshot_ids()
    assert sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]))["written"] == 0
    with pytest.raises(SinkRefused):
        sink.write(CONSUMER, columns, batch(1, 6, 0, [3]))
    assert [i for i in sink_ids(table) if i < 100] == [1, 2]


def test_a_rewind_is_dropped_until_the_sinks_progress_is_reset(lake):
    table = lake["append"]
    sink = PaimonSink(lake["options"], table.id)
    columns = ["id", "part", "value"]
    sink.write(CONSUMER, columns, batch(1, 5, 0, [1, 2]) + batch(1, 6, 0, [3]))
    assert sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]))["written"] == 0
    # The operator replaces the rewound rows' partition (an INSERT
    # OVERWRITE keeping one unrelated row, id 0), then resets the sink's
    # progress; the replay is written again, once.
    table.overwrite(rows=1, part="p0")
    assert sink.reset_progress(CONSUMER) and not sink.reset_progress(CONSUMER)
    assert sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]) + batch(2, 6, 0, [3]))["written"] == 3
    assert sink_ids(table) == [0, 1, 2, 3]
    with pytest.raises(SinkRefused):
        sink.write(CONSUMER, columns, batch(1, 7, 0, [9]))  # the epoch was kept


@pytest.mark.parametrize("mutant", ["skip_position_check", "skip_epoch_check"])
def test_each_check_switched_off_breaks_exactly_once(lake, monkeypatch, mutant):
    monkeypatch.setenv("TIDEMARK_SINK_MUTANT", mutant)
    sink = PaimonSink(lake["options"], lake["append"].id)
    columns = ["id", "part", "value"]
    sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]))
    if mutant == "skip_position_check":
        sink.write(CONSUMER, columns, batch(2, 5, 0, [1, 2]))
        assert sink_ids(lake["append"]) == [1, 1, 2, 2], "a replay duplicated"
    else:
        sink.write(CONSUMER, columns, batch(1, 6, 0, [3]))
        assert sink_ids(lake["append"]) == [1, 2, 3], "a zombie's batch landed"
