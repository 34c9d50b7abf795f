"""The planner's rules that need no Spark: SPEC §11's "first snapshot at or
after a time" against the shared test vectors, the pinned pypaimon version,
and which snapshot kinds deliver rows, checked against pypaimon's own
streaming read of tables written by pypaimon."""

from __future__ import annotations

import json

import pytest
from harness import REPO, PaimonTable, PrimaryKeyTable, paimon_stream, write_table

from tidemark import paimon_plan
from tidemark.paimon_plan import Planner, ReadOptions, first_snapshot_at_or_after

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
    asked = planned_ids(table.table, {"streaming-read-overwrite": "true"}, overwritten)
    assert len(asked) == 1, "the overwrite added one file"
    # Paimon's own streaming read delivers the same rows.
    streamed = sorted(row["id"] for row in paimon_stream(table.table, 1))
    assert streamed == table.ids([1, 2, 5])


def test_an_overwrite_of_a_primary_key_table_is_read_as_its_changes(tmp_path):
    table = PrimaryKeyTable(tmp_path / "warehouse", "plan", options={"streaming-read-overwrite": "true"})
    table.write([("+I", 1, 10), ("+I", 2, 20), ("+I", 3, 30)])
    import pyarrow as pa

    write_table(
        table.table,
        pa.table({"id": [2, 3, 4], "balance": [20, 31, 40], "op": ["+I", "+I", "+I"]}, schema=table.arrow_schema),
        overwrite={},
    )
    snapshot = table.table.snapshot_manager().get_latest_snapshot()
    assert snapshot.commit_kind == "OVERWRITE"
    rows = paimon_plan.overwrite_changes(table.table, snapshot.id, ()).to_pylist()
    assert [(r["_row_kind"], r["id"], r["balance"]) for r in rows] == [
        ("-D", 1, 10),
        ("-U", 3, 30),
        ("+U", 3, 31),
        ("+I", 4, 40),
    ], "key 2 is unchanged"


def test_a_replayed_batch_whose_splits_differ_is_refused(tmp_path):
    from tidemark.paimon_source import QueryFailed, SourceOptions, TidemarkPaimonStreamReader, make_offset

    table = PaimonTable(tmp_path / "warehouse", "replay")
    table.commit()
    table.commit()
    reader = TidemarkPaimonStreamReader(SourceOptions({"path": table.path, "consumer-id": "c"}))
    start = make_offset(1, 2, False, 3, "h")
    end = make_offset(2, 1, False, 3, "h")
    positions = reader._positions(start, end)
    from tidemark.paimon_plan import fingerprint

    end["batchFingerprint"] = fingerprint([reader._identity(s, i, full) for s, i, full in positions])
    assert reader._check_replayed_plan(start, end) == positions, "the same plan replays"
    end["batchFingerprint"] = "0" * 16
    with pytest.raises(QueryFailed, match="^REPLAY_PLAN_MISMATCH"):
        reader._check_replayed_plan(start, end)
    with pytest.raises(QueryFailed, match="^REPLAY_PLAN_MISMATCH"):
        reader._check_replayed_plan(start, make_offset(2, 1, False, 5, "h"))
