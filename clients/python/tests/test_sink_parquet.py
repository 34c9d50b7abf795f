"""ParquetSink's protocol on local disk and on an S3-compatible store (moto):
a replay writes nothing, a partial overlap only the new rows, a lower epoch
is refused, a zombie that read the progress before a newer query committed
loses the exclusive create of the next marker and is refused, a rewind is
dropped until the progress is reset, and only files a marker names are the
sink's rows. Each check switched off (`TIDEMARK_SINK_MUTANT`) breaks them."""

from __future__ import annotations

import uuid

import pytest
from harness import moto_s3

from test_sink_postgres import rows
from tidemark.sinks import ParquetSink, SinkRefused

CONSUMER = "db.orders@main/etl"
COLUMNS = ["id", "v"]


@pytest.fixture(params=["local", "s3"])
def place(request, tmp_path, monkeypatch):
    if request.param == "local":
        yield {"directory": str(tmp_path / "out")}
        return
    with moto_s3(monkeypatch) as (endpoint, _):
        # moto keeps its objects per process: each test a prefix of its own.
        yield {"directory": f"s3://lake/copy-{uuid.uuid4().hex[:8]}", "storage_options": {"endpoint_url": endpoint, "region_name": "us-east-1"}}


def sink_for(place) -> ParquetSink:
    return ParquetSink(place["directory"], storage_options=place.get("storage_options"))


def ids(sink: ParquetSink) -> list:
    table = sink.read()
    return sorted(table.column("id").to_pylist()) if table is not None else []


def test_a_replay_writes_nothing_and_an_overlap_only_the_new_rows(place):
    sink = sink_for(place)
    assert sink.write(CONSUMER, COLUMNS, rows(1, 5, 0, [1, 2, 3]))["written"] == 3
    assert sink.write(CONSUMER, COLUMNS, rows(1, 5, 0, [1, 2, 3])) == {"written": 0, "dropped": 3, "epoch": 1}
    again = rows(2, 5, 0, [1, 2, 3]) + rows(2, 5, 1, [4]) + rows(2, 6, 0, [5])
    assert sink.write(CONSUMER, COLUMNS, again) == {"written": 2, "dropped": 3, "epoch": 2}
    assert ids(sink) == [1, 2, 3, 4, 5]
    assert sink.read().column_names == ["id", "v"]


def test_a_lower_epoch_is_refused(place):
    sink = sink_for(place)
    sink.write(CONSUMER, COLUMNS, rows(3, 5, 0, [1]))
    with pytest.raises(SinkRefused) as refused:
        sink.write(CONSUMER, COLUMNS, rows(2, 6, 0, [2]))
    assert refused.value.reason == "ZOMBIE_BATCH"
    assert ids(sink) == [1]


def test_a_zombie_racing_a_newer_query_loses_the_marker_and_is_refused(place):
    old, new = sink_for(place), sink_for(place)
    old.write(CONSUMER, COLUMNS, rows(1, 5, 0, [1]))

    def racing_rows():
        yield from rows(1, 6, 0, [2])
        new.write(CONSUMER, COLUMNS, rows(2, 6, 0, [2]) + rows(2, 7, 0, [3]))
        yield from rows(1, 7, 0, [3])

    with pytest.raises(SinkRefused) as refused:
        old.write(CONSUMER, COLUMNS, racing_rows())
    assert refused.value.reason == "ZOMBIE_BATCH" and "epoch 2" in str(refused.value)
    assert ids(new) == [1, 2, 3]
    assert new.remove_orphans() == [], "the loser removed its own data file"


def test_a_rewind_is_dropped_until_the_progress_is_reset(place):
    sink = sink_for(place)
    sink.write(CONSUMER, COLUMNS, rows(1, 5, 0, [1, 2]))
    assert sink.write(CONSUMER, COLUMNS, rows(2, 5, 0, [1, 2]))["written"] == 0
    assert sink.reset_progress(CONSUMER) and not sink.reset_progress(CONSUMER)
    assert sink.write(CONSUMER, COLUMNS, rows(2, 5, 0, [1, 2]))["written"] == 2
    assert ids(sink) == [1, 1, 2, 2], "the operator empties the rewound rows first (docs/spark.md)"
    with pytest.raises(SinkRefused):
        sink.write(CONSUMER, COLUMNS, rows(1, 7, 0, [9]))


@pytest.mark.parametrize("mutant", ["skip_position_check", "skip_epoch_check"])
def test_each_check_switched_off_breaks_exactly_once(tmp_path, monkeypatch, mutant):
    monkeypatch.setenv("TIDEMARK_SINK_MUTANT", mutant)
    sink = ParquetSink(str(tmp_path / "out"))
    sink.write(CONSUMER, COLUMNS, rows(2, 5, 0, [1, 2]))
    if mutant == "skip_position_check":
        sink.write(CONSUMER, COLUMNS, rows(2, 5, 0, [1, 2]))
        assert ids(sink) == [1, 1, 2, 2], "a replay duplicated"
    else:
        sink.write(CONSUMER, COLUMNS, rows(1, 6, 0, [3]))
        assert ids(sink) == [1, 2, 3], "a zombie's batch landed"
