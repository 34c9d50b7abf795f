"""`PostgresSink`: a tidemark source's rows into a Postgres table, exactly
once. One transaction per batch:

1. lock the consumer's row of `tidemark_sink_progress` (keyed by consumer
   key and sink table; the table is created when missing);
2. stream the batch through the rule (progress.py) — a lower epoch refuses
   it (`ZOMBIE_BATCH`), rows at or below the recorded position are dropped —
   and `COPY` the rest into a temporary table, so a batch larger than memory
   never is in memory;
3. one `INSERT` (append) or, for `upsert`, the last change of each key in
   position order: `-D` deletes, `+I`/`+U` upsert, `-U` is skipped;
4. record the new position, epoch and plan, and commit.

Two sinks racing for one consumer serialize on the progress row's lock, so
a zombie that writes after a newer epoch's first write is refused, and one
that wrote before it is dropped as already written by the newer query's
replay. The DSN, and its password, never appear in a message."""

from __future__ import annotations

import re
from typing import Iterable, List, Mapping, Optional, Sequence

from tidemark.paimon import positions as pos
from tidemark.sinks.errors import SinkRefused
from tidemark.sinks.frames import data_columns, frame_consumer, frame_rows
from tidemark.sinks.progress import Gate, Progress

PROGRESS_TABLE = "tidemark_sink_progress"
PROGRESS_DDL = f"""CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} (
    consumer text NOT NULL,
    sink_table text NOT NULL,
    epoch bigint NOT NULL DEFAULT 0,
    snapshot bigint,
    full_scan boolean,
    split integer,
    row_ordinal bigint,
    plan text,
    batches bigint NOT NULL DEFAULT 0,
    rows_written bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, sink_table))"""

ROWKIND = "rowkind"
# The batch's positions in the temporary table.
ORDER = ("_tm_snapshot", "_tm_kind", "_tm_split", "_tm_row")


def _redact(text: str, dsn: str) -> str:
    """`text` without the DSN's password (or the DSN itself)."""
    secrets = [dsn] if dsn else []
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
        if password:
            secrets.append(str(password))
    except Exception:  # an unparsable DSN: hide what looks like a password
        secrets += re.findall(r"password=(\S+)", dsn) + re.findall(r"://[^:/@]*:([^@]*)@", dsn)
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


class PostgresSink:
    """`foreachBatch(PostgresSink(dsn, "public.orders_copy"))`.

    `mode` `append` inserts every new row; `upsert` applies the changelog
    (`read.changelog=true` on a primary-key table) to the rows whose
    `key_columns` match (they need a primary key or unique index). The
    consumer is read from the source's columns; `consumer` overrides it (for
    frames whose columns lost their metadata)."""

    def __init__(
        self,
        dsn: str,
        table: str,
        mode: str = "append",
        key_columns: Optional[List[str]] = None,
        *,
        consumer: Optional[str] = None,
    ):
        if mode not in ("append", "upsert"):
            raise ValueError(f'mode must be "append" or "upsert", not {mode!r}')
        if mode == "upsert" and not key_columns:
            raise ValueError('mode "upsert" needs key_columns (the sink table\'s primary key)')
        self._dsn = dsn
        self.table = table
        self.mode = mode
        self.key_columns = list(key_columns or [])
        self.consumer = consumer
        self._ready = False
        self.last_batch: dict = {}

    def __repr__(self) -> str:
        return f"PostgresSink(table={self.table!r}, mode={self.mode!r})"

    # Spark's side.

    def __call__(self, frame, batch_id: int) -> None:
        consumer = frame_consumer(frame, self.consumer)
        self.write(consumer, data_columns(frame), frame_rows(frame))

    # The protocol, for any iterable of rows (dicts with the position columns).

    def write(self, consumer: str, columns: Sequence[str], rows: Iterable[Mapping]) -> dict:
        """Writes one batch exactly once; returns what it did."""
        from psycopg import sql

        data_columns = [c for c in columns if c != ROWKIND or self.mode == "append"]
        with self._connect() as conn:
            self._ensure_progress(conn)
            with conn.transaction():
                recorded = self._lock(conn, consumer)
                gate = Gate(recorded, consumer, self.table)
                target = _identifier(self.table)
                conn.execute(
                    sql.SQL(
                        "CREATE TEMP TABLE _tidemark_batch ON COMMIT DROP AS SELECT {cols} FROM {t} WITH NO DATA"
                    ).format(cols=sql.SQL(", ").join(map(sql.Identifier, data_columns)), t=target)
                )
                conn.execute(
                    "ALTER TABLE _tidemark_batch ADD COLUMN _tm_snapshot bigint, ADD COLUMN _tm_kind int, "
                    "ADD COLUMN _tm_split int, ADD COLUMN _tm_row bigint, ADD COLUMN _tm_rowkind text"
                )
                copy_columns = sql.SQL(", ").join(map(sql.Identifier, [*data_columns, *ORDER, "_tm_rowkind"]))
                with conn.cursor().copy(
                    sql.SQL("COPY _tidemark_batch ({}) FROM STDIN").format(copy_columns)
                ) as copy:
                    for row in rows:
                        full = bool(row[pos.FULL])
                        if not gate.admit(
                            row[pos.EPOCH], row[pos.SNAPSHOT], full, row[pos.SPLIT], row[pos.ROW], row[pos.PLAN]
                        ):
                            continue
                        at = pos.position(row[pos.SNAPSHOT], full, row[pos.SPLIT], row[pos.ROW])
                        copy.write_row([row.get(c) for c in data_columns] + list(at) + [row.get(ROWKIND)])
                if gate.admitted:
                    self._apply(conn, target, data_columns)
                if gate.admitted or gate.epoch > recorded.epoch:
                    self._record(conn, consumer, gate.progress(), gate.admitted)
        self.last_batch = {"written": gate.admitted, "dropped": gate.dropped, "epoch": gate.progress().epoch}
        return self.last_batch

    def progress(self, consumer: str) -> Progress:
        """What the sink recorded for `consumer` (no lock)."""
        with self._connect() as conn:
            self._ensure_progress(conn)
            row = conn.execute(
                f"SELECT epoch, snapshot, full_scan, split, row_ordinal, plan FROM {PROGRESS_TABLE} "
                "WHERE consumer = %s AND sink_table = %s",
                (consumer, self.table),
            ).fetchone()
        return _progress(row)

    def reset_progress(self, consumer: str) -> bool:
        """Forgets the position recorded for `consumer` (its epoch stays, so
        a zombie is still refused): after an operator's rewind, the rows it
        delivers again are written again. Delete the sink's rows past the
        rewind first, or they are duplicated. True when there was one."""
        with self._connect() as conn:
            self._ensure_progress(conn)
            done = conn.execute(
                f"UPDATE {PROGRESS_TABLE} SET snapshot = NULL, full_scan = NULL, split = NULL, row_ordinal = NULL, "
                "plan = NULL, updated_at = now() WHERE consumer = %s AND sink_table = %s",
                (consumer, self.table),
            )
            return done.rowcount > 0

    # Inside.

    def _connect(self):
        import psycopg

        try:
            return psycopg.connect(self._dsn, autocommit=True)
        except psycopg.Error as error:
            raise RuntimeError(f"{self!r} cannot connect to its database: {_redact(str(error), self._dsn)}") from None

    def _ensure_progress(self, conn) -> None:
        if self._ready:
            return
        import psycopg

        try:
            conn.execute(PROGRESS_DDL)
        except psycopg.errors.UniqueViolation:
            pass  # another sink created it at the same moment
        except psycopg.errors.InsufficientPrivilege:
            schema = conn.execute("SELECT current_schema()").fetchone()[0]
            user = conn.execute("SELECT current_user").fetchone()[0]
            raise SinkRefused(
                "SINK_PROGRESS_TABLE",
                f"role {user} may not create {PROGRESS_TABLE} (it needs CREATE on schema {schema}); have the "
                f"schema's owner create it once:\n{PROGRESS_DDL}\nand grant {user} SELECT, INSERT, UPDATE on it",
            ) from None
        self._ready = True

    def _lock(self, conn, consumer: str) -> Progress:
        conn.execute(
            f"INSERT INTO {PROGRESS_TABLE} (consumer, sink_table) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (consumer, self.table),
        )
        row = conn.execute(
            f"SELECT epoch, snapshot, full_scan, split, row_ordinal, plan FROM {PROGRESS_TABLE} "
            "WHERE consumer = %s AND sink_table = %s FOR UPDATE",
            (consumer, self.table),
        ).fetchone()
        return _progress(row)

    def _apply(self, conn, target, columns: Sequence[str]) -> None:
        from psycopg import sql

        cols = sql.SQL(", ").join(map(sql.Identifier, columns))
        order = sql.SQL(", ").join(map(sql.Identifier, ORDER))
        if self.mode == "append":
            conn.execute(
                sql.SQL("INSERT INTO {t} ({c}) SELECT {c} FROM _tidemark_batch ORDER BY {o}").format(
                    t=target, c=cols, o=order
                )
            )
            return
        keys = sql.SQL(", ").join(map(sql.Identifier, self.key_columns))
        # Each key's last change in the batch, in position order.
        last = sql.SQL(
            "CREATE TEMP TABLE _tidemark_last ON COMMIT DROP AS SELECT DISTINCT ON ({k}) {c}, "
            "coalesce(_tm_rowkind, '+I') AS _tm_rowkind FROM _tidemark_batch "
            "WHERE coalesce(_tm_rowkind, '+I') <> '-U' ORDER BY {k}, {desc}"
        ).format(k=keys, c=cols, desc=sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(o)) for o in ORDER))
        conn.execute(last)
        match = sql.SQL(" AND ").join(
            sql.SQL("t.{k} IS NOT DISTINCT FROM l.{k}").format(k=sql.Identifier(k)) for k in self.key_columns
        )
        conn.execute(
            sql.SQL("DELETE FROM {t} AS t USING _tidemark_last AS l WHERE l._tm_rowkind = '-D' AND {m}").format(
                t=target, m=match
            )
        )
        updates = [c for c in columns if c not in self.key_columns]
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in updates)
            )
            if updates
            else sql.SQL("DO NOTHING")
        )
        import psycopg

        try:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {t} ({c}) SELECT {c} FROM _tidemark_last WHERE _tm_rowkind <> '-D' "
                    "ON CONFLICT ({k}) {a}"
                ).format(t=target, c=cols, k=keys, a=action)
            )
        except psycopg.errors.InvalidColumnReference:
            raise ValueError(
                f"{self.table} has no primary key or unique index on ({', '.join(self.key_columns)}): "
                "an upsert needs one"
            ) from None

    def _record(self, conn, consumer: str, progress: Progress, written: int) -> None:
        snapshot, kind, split, row = progress.at if progress.at is not None else (None, None, None, None)
        conn.execute(
            f"UPDATE {PROGRESS_TABLE} SET epoch = %s, snapshot = %s, full_scan = %s, split = %s, row_ordinal = %s, "
            "plan = %s, batches = batches + 1, rows_written = rows_written + %s, updated_at = now() "
            "WHERE consumer = %s AND sink_table = %s",
            (
                progress.epoch,
                snapshot,
                None if kind is None else kind == 0,
                split,
                row,
                progress.plan,
                written,
                consumer,
                self.table,
            ),
        )


def _progress(row) -> Progress:
    if row is None:
        return Progress()
    epoch, snapshot, full, split, ordinal, plan = row
    at = None if snapshot is None else pos.position(snapshot, bool(full), split, ordinal)
    return Progress(int(epoch), at, plan)


def _identifier(name: str):
    from psycopg import sql

    return sql.Identifier(*name.split("."))
