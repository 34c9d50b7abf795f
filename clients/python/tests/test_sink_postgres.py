"""PostgresSink's protocol against a real Postgres (SPEC §12 X2, X3): a replay
writes nothing, a partial overlap writes only the new rows, a lower epoch is
refused, two sinks racing with different epochs leave only the higher
epoch's rows after its first write, a changelog is applied in position
order, a snapshot planned differently is refused naming what changed, and a
new full scan over written rows is refused. Each rule is also run with its
check switched off (`TIDEMARK_SINK_MUTANT`), and must then break."""

from __future__ import annotations

import os
import threading
import urllib.parse
import uuid

import psycopg
import pytest

from tidemark.paimon.positions import plan_fingerprint
from tidemark.sinks import PostgresSink, SinkRefused

CONSUMER = "db.orders@main/etl"
SIZING = {"source.split.open-file-cost": "4 mb", "source.split.target-size": "128 mb"}
PLAN = plan_fingerprint(["a", "b", "c"], SIZING)


def base_dsn() -> str:
    url = os.environ.get("TIDEMARK_TEST_DATABASE_URL")
    if not url:
        pytest.fail("TIDEMARK_TEST_DATABASE_URL is not set: scripts/test.sh starts a Postgres and sets it")
    return url


@pytest.fixture
def db():
    """A schema of the test's own (its progress table too), and a DSN whose
    search_path is that schema."""
    schema = f"sink_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.out (id bigint, v text)")
        conn.execute(f"CREATE TABLE {schema}.kv (k bigint PRIMARY KEY, v text)")
    sep = "&" if "?" in base_dsn() else "?"
    yield {"schema": schema, "dsn": base_dsn() + sep + urllib.parse.urlencode({"options": f"-csearch_path={schema}"})}
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def rows(epoch, snapshot, split, ids, full=False, plan=PLAN, first_row=0, kinds=None):
    out = []
    for i, ident in enumerate(ids):
        row = {
            "id": ident,
            "v": f"v{ident}",
            "_tidemark_epoch": epoch,
            "_tidemark_snapshot": snapshot,
            "_tidemark_full": full,
            "_tidemark_split": split,
            "_tidemark_row": first_row + i,
            "_tidemark_plan": plan,
        }
        if kinds is not None:
            row["k"], row["rowkind"] = row.pop("id"), kinds[i]
        out.append(row)
    return out


def ids(db, table="out") -> list:
    with psycopg.connect(db["dsn"]) as conn:
        return sorted(r[0] for r in conn.execute(f"SELECT {'id' if table == 'out' else 'k'} FROM {table}"))


def test_a_replay_of_a_finished_batch_writes_nothing(db):
    sink = PostgresSink(db["dsn"], "out")
    batch = rows(1, 5, 0, [1, 2, 3]) + rows(1, 5, 1, [4, 5])
    assert sink.write(CONSUMER, ["id", "v"], batch)["written"] == 5
    # The same batch again: a restart on its checkpoint, or without it.
    assert sink.write(CONSUMER, ["id", "v"], batch) == {"written": 0, "dropped": 5, "epoch": 1}
    assert ids(db) == [1, 2, 3, 4, 5]
    assert sink.progress(CONSUMER).at == (5, 1, 1, 1)


def test_a_partial_overlap_writes_only_the_new_rows(db):
    sink = PostgresSink(db["dsn"], "out")
    sink.write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1, 2, 3]))
    # A query restarted without its checkpoint re-reads snapshot 5 from its
    # first split, then goes on to split 1 and snapshot 6.
    again = rows(2, 5, 0, [1, 2, 3]) + rows(2, 5, 1, [4]) + rows(2, 6, 0, [5, 6])
    assert sink.write(CONSUMER, ["id", "v"], again) == {"written": 3, "dropped": 3, "epoch": 2}
    assert ids(db) == [1, 2, 3, 4, 5, 6]


def test_a_lower_epoch_is_refused_and_writes_nothing(db):
    sink = PostgresSink(db["dsn"], "out")
    sink.write(CONSUMER, ["id", "v"], rows(3, 5, 0, [1]))
    with pytest.raises(SinkRefused) as refused:
        sink.write(CONSUMER, ["id", "v"], rows(2, 6, 0, [2, 3]))
    assert refused.value.reason == "ZOMBIE_BATCH" and "epoch 3" in str(refused.value)
    assert ids(db) == [1]
    assert sink.progress(CONSUMER).epoch == 3


def test_two_sinks_racing_leave_only_the_newer_epochs_rows_after_its_first_write(db):
    """The old query's sink is inside its transaction (holding the progress
    row) when the new query's first batch arrives: the new one waits, then
    drops what the old one wrote and writes the rest; the old one's next
    batch is refused."""
    old, new = PostgresSink(db["dsn"], "out"), PostgresSink(db["dsn"], "out")
    inside, go = threading.Event(), threading.Event()

    def stalled_rows():
        yield from rows(1, 5, 0, [1, 2])
        inside.set()
        assert go.wait(30)
        yield from rows(1, 5, 1, [3])

    zombie = threading.Thread(target=old.write, args=(CONSUMER, ["id", "v"], stalled_rows()))
    zombie.start()
    assert inside.wait(30)
    newer = threading.Thread(
        target=new.write, args=(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2]) + rows(2, 5, 1, [3]) + rows(2, 6, 0, [4]))
    )
    newer.start()
    newer.join(0.5)
    assert newer.is_alive(), "the newer sink waits for the progress row"
    go.set()
    zombie.join(30)
    newer.join(30)
    assert new.last_batch == {"written": 1, "dropped": 3, "epoch": 2}
    with pytest.raises(SinkRefused) as refused:
        old.write(CONSUMER, ["id", "v"], rows(1, 6, 0, [4]) + rows(1, 7, 0, [5]))
    assert refused.value.reason == "ZOMBIE_BATCH"
    assert ids(db) == [1, 2, 3, 4]


def test_an_upsert_applies_the_changelog_in_position_order(db):
    sink = PostgresSink(db["dsn"], "kv", mode="upsert", key_columns=["k"])
    sink.write(CONSUMER, ["rowkind", "k", "v"], rows(1, 5, 0, [1, 2, 3], kinds=["+I", "+I", "+I"]))
    # Key 1 updated twice (the later one wins), key 2 deleted, key 3's
    # update-before is skipped, key 4 inserted then deleted in one batch.
    changes = rows(1, 6, 0, [1, 3, 2, 1, 3, 4, 4], kinds=["+U", "-U", "-D", "+U", "+U", "+I", "-D"])
    for i, row in enumerate(changes):
        row["v"] = f"w{i}"
    sink.write(CONSUMER, ["rowkind", "k", "v"], changes)
    with psycopg.connect(db["dsn"]) as conn:
        assert conn.execute("SELECT k, v FROM kv ORDER BY k").fetchall() == [(1, "w3"), (3, "w4")]


def test_a_snapshot_planned_with_another_split_size_is_refused_naming_the_option(db):
    sink = PostgresSink(db["dsn"], "out")
    sink.write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1, 2]))
    other = plan_fingerprint(["a2", "b2"], {**SIZING, "source.split.target-size": "1 mb"})
    with pytest.raises(SinkRefused) as refused:
        sink.write(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2], plan=other) + rows(2, 5, 1, [3], plan=other))
    assert refused.value.reason == "REPLAY_PLAN_MISMATCH"
    assert "source.split.target-size (128 mb -> 1 mb)" in str(refused.value)
    assert ids(db) == [1, 2]
    # A later snapshot's plan is its own: nothing to match.
    assert sink.write(CONSUMER, ["id", "v"], rows(2, 6, 0, [3], plan=other))["written"] == 1


def test_a_new_full_scan_over_written_rows_is_refused(db):
    sink = PostgresSink(db["dsn"], "out")
    sink.write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1, 2], full=True))
    # The same full scan, resumed: fine.
    sink.write(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2], full=True) + rows(2, 5, 1, [3], full=True))
    # A new full scan of a later snapshot (the first run's checkpoint and
    # consumer are gone): its rows are the table's state again.
    with pytest.raises(SinkRefused) as refused:
        sink.write(CONSUMER, ["id", "v"], rows(3, 9, 0, [1, 2, 3, 4], full=True))
    assert refused.value.reason == "FULL_SCAN_RESTARTED"
    assert ids(db) == [1, 2, 3]


def test_a_rewind_is_dropped_until_the_sinks_progress_is_reset(db):
    sink = PostgresSink(db["dsn"], "out")
    sink.write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1, 2]) + rows(1, 6, 0, [3]))
    # An operator rewinds the consumer to 5: the sink drops the replay.
    assert sink.write(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2]))["written"] == 0
    with psycopg.connect(db["dsn"], autocommit=True) as conn:
        conn.execute("DELETE FROM out WHERE id IN (1, 2, 3)")
    assert sink.reset_progress(CONSUMER)
    assert sink.write(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2]) + rows(2, 6, 0, [3]))["written"] == 3
    assert ids(db) == [1, 2, 3]
    with pytest.raises(SinkRefused):
        sink.write(CONSUMER, ["id", "v"], rows(1, 7, 0, [9]))  # the epoch was kept


def test_the_dsn_password_never_appears_in_an_error(db):
    secret = "s3cr3t-" + uuid.uuid4().hex[:6]
    sink = PostgresSink(f"postgresql://nobody:{secret}@127.0.0.1:1/postgres?connect_timeout=2", "out")
    with pytest.raises(RuntimeError) as failed:
        sink.write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1]))
    assert secret not in str(failed.value) and secret not in repr(sink)
    bad = PostgresSink(f"host=127.0.0.1 port=1 password={secret} nonsense", "out")
    with pytest.raises(RuntimeError) as failed:
        bad.write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1]))
    assert secret not in str(failed.value), str(failed.value)


def test_a_role_that_cannot_create_the_progress_table_is_told_which_privilege(db):
    role = f"sink_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        conn.execute(f"GRANT USAGE ON SCHEMA {db['schema']} TO {role}")
        conn.execute(f"GRANT INSERT, SELECT ON {db['schema']}.out TO {role}")
    try:
        parts = urllib.parse.urlsplit(db["dsn"])
        dsn = urllib.parse.urlunsplit(parts._replace(netloc=f"{role}:pw@{parts.hostname}:{parts.port}"))
        with pytest.raises(SinkRefused) as refused:
            PostgresSink(dsn, "out").write(CONSUMER, ["id", "v"], rows(1, 5, 0, [1]))
        assert refused.value.reason == "SINK_PROGRESS_TABLE"
        assert f"CREATE on schema {db['schema']}" in str(refused.value)
    finally:
        with psycopg.connect(base_dsn(), autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize("mutant", ["skip_position_check", "skip_epoch_check"])
def test_each_check_switched_off_breaks_exactly_once(db, monkeypatch, mutant):
    """Proof the tests above can fail: with the position check off a replay
    duplicates rows; with the epoch check off a zombie's batch lands."""
    monkeypatch.setenv("TIDEMARK_SINK_MUTANT", mutant)
    sink = PostgresSink(db["dsn"], "out")
    sink.write(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2]))
    if mutant == "skip_position_check":
        sink.write(CONSUMER, ["id", "v"], rows(2, 5, 0, [1, 2]))
        assert ids(db) == [1, 1, 2, 2], "a replay duplicated"
    else:
        sink.write(CONSUMER, ["id", "v"], rows(1, 6, 0, [3]))
        assert ids(db) == [1, 2, 3], "a zombie's batch landed"
