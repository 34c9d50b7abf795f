"""`PaimonSink`: a tidemark source's rows into a Paimon table, exactly once.

Per batch: read back the consumer's progress (below), drop the rows at or
below it, refuse a lower epoch (`ZOMBIE_BATCH`), write the rest with
pypaimon's stream write under a commit user stable per (consumer, sink
table) and a commit identifier that grows with the position, and commit
with the new progress (consumer, epoch, position, plan) in the snapshot's
properties — the rows and the progress land in one atomic snapshot.

**Zombies racing a newer query.** Paimon commits a snapshot by creating
snapshot N+1 only if N is still the latest (a conditional commit on the
snapshot it read); pypaimon retries on a newer N. The sink wraps that
conditional step: before each attempt it reads every snapshot committed
since the one its batch read, and a newer epoch's progress there refuses
the commit (`ZOMBIE_BATCH`). A newer query that commits in between makes
the attempt fail and be checked again, so the check and the commit are one
step. A batch whose rows were all dropped still commits an empty snapshot
when it raises the epoch, so the fence is always a snapshot.

**Progress across the sink's own snapshot expiration.** The progress rides
in this sink's last snapshot; a busy table expires it. After every commit
the sink also writes it to `<table>/tidemark-sink/<consumer digest>.json`
(the table's file IO: local disk or an object store), so reading it back
is: the newest snapshot carrying it, else that file. The file lags the
snapshot by one commit at most, and is only needed once the snapshot is
gone, which takes `snapshot.num-retained.min` (10) newer snapshots."""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Mapping, Optional, Sequence, Tuple

from tidemark.paimon import positions as pos
from tidemark.sinks.errors import SinkRefused
from tidemark.sinks.frames import data_columns, frame_consumer, frame_rows
from tidemark.sinks.progress import Gate, Progress, mutant

PROPERTY_PREFIX = "tidemark.sink.progress."
ROWKIND = "rowkind"
# Rows written per Arrow table handed to pypaimon.
CHUNK_ROWS = 10_000


class _Fenced(BaseException):
    """Raised inside pypaimon's commit step, which retries on any Exception:
    a BaseException leaves it at once."""

    def __init__(self, refusal: SinkRefused):
        super().__init__(str(refusal))
        self.refusal = refusal


def digest(consumer: str) -> str:
    return hashlib.sha256(consumer.encode()).hexdigest()[:16]


def commit_identifier(at: pos.Position) -> int:
    """Grows with the position of a batch's last row (batches end on split
    boundaries, so the row is left out)."""
    snapshot, kind, split, _ = at
    return (snapshot * 2 + kind) * 2**24 + split


def _encode(consumer: str, progress: Progress, batch_epoch: Optional[int] = None) -> str:
    data = {"consumer": consumer, "epoch": progress.epoch, "at": list(progress.at or []) or None, "plan": progress.plan}
    if batch_epoch is not None:
        data["batch_epoch"] = batch_epoch  # the epoch the snapshot's rows were read under
    return json.dumps(data, sort_keys=True)


def _decode(text: str) -> Progress:
    data = json.loads(text)
    at = tuple(data["at"]) if data.get("at") else None
    return Progress(int(data["epoch"]), at, data.get("plan"))


class PaimonSink:
    """`foreachBatch(PaimonSink({"warehouse": "s3://lake"}, "mart.orders_copy"))`.

    An append table gets every new row; a primary-key table gets the
    changelog applied in position order (`+I`/`+U` upsert, `-D` delete,
    `-U` skipped), which needs the table's `rowkind.field` option naming a
    string column (pypaimon writes deletes only through it)."""

    def __init__(self, catalog_options: dict, identifier: str, *, consumer: Optional[str] = None):
        self.catalog_options = dict(catalog_options)
        self.identifier = identifier
        self.consumer = consumer
        self.last_batch: dict = {}

    def __repr__(self) -> str:
        return f"PaimonSink(identifier={self.identifier!r})"

    def __call__(self, frame, batch_id: int) -> None:
        consumer = frame_consumer(frame, self.consumer)
        self.write(consumer, data_columns(frame), frame_rows(frame))

    def _table(self):
        from pypaimon import CatalogFactory

        table = CatalogFactory.create(self.catalog_options).get_table(self.identifier)
        # A batch whose rows were all replays still commits when it raises
        # the epoch: the fence must be a snapshot.
        return table.copy({"snapshot.ignore-empty-commit": "false"})

    def progress(self, consumer: str) -> Tuple[Progress, Optional[int]]:
        """The consumer's progress and the latest snapshot id it was read at."""
        return self._read_progress(self._table(), consumer)

    def reset_progress(self, consumer: str) -> bool:
        """Forgets the position recorded for `consumer` (its epoch stays, so
        a zombie is still refused), in a snapshot of its own: after an
        operator's rewind, the rows it delivers again are written again.
        Delete the sink's rows past the rewind first, or they are
        duplicated. True when there was one."""
        table = self._table()
        recorded, _ = self._read_progress(table, consumer)
        if recorded.at is None:
            return False
        cleared = Progress(recorded.epoch, None, None)
        user = f"tidemark-{digest(consumer + '|' + self.identifier)}"
        commit = table.new_stream_write_builder()._with_commit_user(user).new_commit()
        try:
            commit.commit([], commit_identifier(recorded.at) + 1, snapshot_properties=self._properties(consumer, cleared))
        finally:
            commit.close()
        table.file_io.overwrite_file_utf8(self._side_file(table, consumer), _encode(consumer, cleared))
        return True

    @staticmethod
    def _properties(consumer: str, progress: Progress, batch_epoch: Optional[int] = None) -> dict:
        return {PROPERTY_PREFIX + digest(consumer): _encode(consumer, progress, batch_epoch)}

    def _side_file(self, table, consumer: str) -> str:
        return f"{table.table_path.rstrip('/')}/tidemark-sink/{digest(consumer)}.json"

    def _read_progress(self, table, consumer: str, stop_at: int = 0) -> Tuple[Progress, Optional[int]]:
        manager = table.snapshot_manager()
        latest = manager.get_latest_snapshot()
        if latest is None:
            return Progress(), None
        key = PROPERTY_PREFIX + digest(consumer)
        snapshot_id = latest.id
        while snapshot_id > stop_at:
            snapshot = latest if snapshot_id == latest.id else manager.get_snapshot_by_id(snapshot_id)
            if snapshot is None:
                break  # expired: the side file holds what it carried
            if snapshot.properties and key in snapshot.properties:
                return _decode(snapshot.properties[key]), latest.id
            snapshot_id -= 1
        path = self._side_file(table, consumer)
        if table.file_io.exists(path):
            return _decode(table.file_io.read_file_utf8(path)), latest.id
        return Progress(), latest.id

    def write(self, consumer: str, columns: Sequence[str], rows: Iterable[Mapping]) -> dict:
        import pyarrow as pa

        table = self._table()
        recorded, read_at = self._read_progress(table, consumer)
        gate = Gate(recorded, consumer, self.identifier)
        keyed = table.is_primary_key_table
        kind_field = table.options.options.to_map().get("rowkind.field")
        admitted = []
        for row in rows:
            full = bool(row[pos.FULL])
            if gate.admit(row[pos.EPOCH], row[pos.SNAPSHOT], full, row[pos.SPLIT], row[pos.ROW], row[pos.PLAN]):
                kind = row.get(ROWKIND) or "+I"
                if kind == "-U":
                    continue
                if kind == "-D" and not (keyed and kind_field):
                    raise ValueError(
                        f"{self.identifier} cannot take deletes: a primary-key table with the rowkind.field option "
                        "(a string column) is needed, as pypaimon writes deletes only through it"
                    )
                admitted.append((pos.position(row[pos.SNAPSHOT], full, row[pos.SPLIT], row[pos.ROW]), kind, row))
        progress = gate.progress()
        if not admitted and progress.epoch <= recorded.epoch:
            self.last_batch = {"written": 0, "dropped": gate.dropped, "epoch": progress.epoch}
            return self.last_batch
        # A key's changes reach pypaimon in position order: within one
        # commit, the later write of a key wins.
        admitted.sort(key=lambda item: item[0])
        user = f"tidemark-{digest(consumer + '|' + self.identifier)}"
        builder = table.new_stream_write_builder()._with_commit_user(user)
        writer = builder.new_write()
        names = [f.name for f in table.table_schema.fields]
        schema = pa.schema([f for f in _arrow_schema(table)])
        for start in range(0, len(admitted), CHUNK_ROWS):
            chunk = admitted[start : start + CHUNK_ROWS]
            data = {}
            for name in names:
                if kind_field and name == kind_field:
                    data[name] = [kind for _, kind, _ in chunk]
                else:
                    data[name] = [row.get(name) for _, _, row in chunk]
            writer.write_arrow(pa.Table.from_pydict(data, schema=schema))
        at = progress.at if progress.at is not None else (0, 0, 0, 0)
        ident = commit_identifier(at) if admitted else commit_identifier(at) + 1
        messages = writer.prepare_commit(ident)
        commit = builder.new_commit()
        inner = commit.file_store_commit.snapshot_commit
        commit.file_store_commit.snapshot_commit = _FencedCommit(inner, self, table, consumer, progress.epoch, read_at)
        try:
            commit.commit(messages, ident, snapshot_properties=self._properties(consumer, progress, gate.epoch))
        except _Fenced as fenced:
            raise fenced.refusal from None
        finally:
            writer.close()
            commit.close()
        table.file_io.overwrite_file_utf8(self._side_file(table, consumer), _encode(consumer, progress))
        self.last_batch = {"written": len(admitted), "dropped": gate.dropped, "epoch": progress.epoch}
        return self.last_batch


def _arrow_schema(table):
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)


class _FencedCommit:
    """pypaimon's SnapshotCommit, checked before each conditional attempt:
    a newer epoch's progress committed since the batch read refuses it."""

    def __init__(self, inner, sink: PaimonSink, table, consumer: str, epoch: int, read_at: Optional[int]):
        self.inner, self.sink, self.table, self.consumer = inner, sink, table, consumer
        self.epoch, self.read_at = epoch, read_at or 0

    def commit(self, base_snapshot_uuid, snapshot, statistics):
        newer, _ = self.sink._read_progress(self.table, self.consumer, stop_at=self.read_at)
        if newer.epoch > self.epoch and not mutant("skip_epoch_check"):
            raise _Fenced(
                SinkRefused(
                    "ZOMBIE_BATCH",
                    f"{self.sink.identifier} took epoch {newer.epoch} for consumer {self.consumer} while this batch "
                    f"(epoch {self.epoch}) was being written: a newer query owns the consumer; nothing was committed",
                )
            )
        return self.inner.commit(base_snapshot_uuid, snapshot, statistics)

    def close(self):
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
