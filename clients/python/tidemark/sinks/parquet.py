"""`ParquetSink`: a tidemark source's rows into Parquet files, exactly once,
on local disk or an S3-compatible object store. It replaces the old
host-local `fenced_sink` example with the sinks' protocol.

Layout under the directory:

- `data/part-<consumer digest>-<seq>-<uuid>.parquet`: a batch's new rows;
- `_tidemark/<consumer digest>/<seq>.json`: the commit marker of batch
  `seq` — the consumer, the epoch accepted, the position and plan of its
  last row, the epoch its rows were read under, and its data file.

A batch reads the consumer's newest marker N, drops the rows at or below its
position, refuses a lower epoch (`ZOMBIE_BATCH`), writes its data file under
a name of its own, and commits by creating marker N+1 only if it does not
exist: an exclusive link on disk, `PUT` with `If-None-Match: *` on an object
store. A zombie racing a newer query loses that race, reads the newer
marker, and is refused. Only files a marker names are the sink's rows
(`ParquetSink.read()`); a data file whose batch lost or failed its commit is
an orphan, removed by `remove_orphans()`."""

from __future__ import annotations

import io
import json
import os
import pathlib
import uuid
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

from tidemark.paimon import positions as pos
from tidemark.sinks.errors import SinkRefused
from tidemark.sinks.frames import data_columns, frame_consumer, frame_rows
from tidemark.sinks.paimon import digest
from tidemark.sinks.progress import Gate, Progress, mutant

MARKERS = "_tidemark"
DATA = "data"


class _Local:
    def __init__(self, root: str):
        self.root = pathlib.Path(root)

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        temp.write_bytes(data)
        os.replace(temp, path)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        temp.write_bytes(data)
        try:
            os.link(temp, path)  # atomic, and fails when the name exists
            return True
        except FileExistsError:
            return False
        finally:
            temp.unlink()

    def get(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def list(self, prefix: str) -> List[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(f"{prefix}/{p.name}" for p in base.iterdir() if not p.name.startswith("."))

    def delete(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)


class _S3:
    def __init__(self, url: str, options: Mapping[str, str]):
        import boto3

        bucket, _, prefix = url[len("s3://") :].partition("/")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.client = boto3.client("s3", **dict(options))

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
            return True
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()

    def list(self, prefix: str) -> List[str]:
        keys, token = [], None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._key(prefix) + "/", **extra)
            strip = len(self.prefix) + 1 if self.prefix else 0
            keys += [item["Key"][strip:] for item in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(keys)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))


class ParquetSink:
    """`foreachBatch(ParquetSink("/data/orders-copy"))`, or
    `ParquetSink("s3://lake/orders-copy", storage_options={"endpoint_url": ...})`
    (boto3 client options). Appends each new row; the position columns are
    not written."""

    def __init__(self, directory: str, *, storage_options: Optional[Mapping[str, str]] = None, consumer: Optional[str] = None):
        self.directory = str(directory)
        self.consumer = consumer
        self._store = _S3(self.directory, storage_options or {}) if self.directory.startswith("s3://") else _Local(self.directory)
        self.last_batch: dict = {}

    def __repr__(self) -> str:
        return f"ParquetSink(directory={self.directory!r})"

    def __call__(self, frame, batch_id: int) -> None:
        consumer = frame_consumer(frame, self.consumer)
        self.write(consumer, data_columns(frame), frame_rows(frame))

    def progress(self, consumer: str) -> Tuple[Progress, int]:
        """The consumer's progress and the sequence number of its marker."""
        markers = self._store.list(f"{MARKERS}/{digest(consumer)}")
        if not markers:
            return Progress(), 0
        newest = markers[-1]
        data = json.loads(self._store.get(newest))
        at = tuple(data["at"]) if data.get("at") else None
        return Progress(int(data["epoch"]), at, data.get("plan")), int(pathlib.PurePosixPath(newest).stem)

    def write(self, consumer: str, columns: Sequence[str], rows: Iterable[Mapping]) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        recorded, seq = self.progress(consumer)
        gate = Gate(recorded, consumer, self.directory)
        kept = []
        for row in rows:
            full = bool(row[pos.FULL])
            if gate.admit(row[pos.EPOCH], row[pos.SNAPSHOT], full, row[pos.SPLIT], row[pos.ROW], row[pos.PLAN]):
                kept.append((pos.position(row[pos.SNAPSHOT], full, row[pos.SPLIT], row[pos.ROW]), row))
        progress = gate.progress()
        if not kept and progress.epoch <= recorded.epoch:
            self.last_batch = {"written": 0, "dropped": gate.dropped, "epoch": progress.epoch}
            return self.last_batch
        kept.sort(key=lambda item: item[0])
        name = None
        if kept:
            name = f"{DATA}/part-{digest(consumer)}-{seq + 1:012d}-{uuid.uuid4().hex[:8]}.parquet"
            table = pa.Table.from_pylist([{c: row.get(c) for c in columns} for _, row in kept])
            buffer = io.BytesIO()
            pq.write_table(table, buffer)
            self._store.put(name, buffer.getvalue())
        marker = {
            "consumer": consumer,
            "epoch": progress.epoch,
            "batch_epoch": gate.epoch,
            "at": list(progress.at) if progress.at else None,
            "plan": progress.plan,
            "files": [name] if name else [],
            "rows": len(kept),
        }
        key = f"{MARKERS}/{digest(consumer)}/{seq + 1:012d}.json"
        if not self._store.put_if_absent(key, json.dumps(marker, sort_keys=True).encode()):
            if name:
                self._store.delete(name)
            newer, _ = self.progress(consumer)
            if newer.epoch > progress.epoch and not mutant("skip_epoch_check"):
                raise SinkRefused(
                    "ZOMBIE_BATCH",
                    f"{self.directory} took epoch {newer.epoch} for consumer {consumer} while this batch (epoch "
                    f"{progress.epoch}) was being written: a newer query owns the consumer; nothing was committed",
                )
            raise RuntimeError(
                f"{self!r}: another writer committed batch {seq + 1} of consumer {consumer} first, under the same "
                "epoch; nothing was committed (the batch is retried by its query)"
            )
        self.last_batch = {"written": len(kept), "dropped": gate.dropped, "epoch": progress.epoch}
        return self.last_batch

    def reset_progress(self, consumer: str) -> bool:
        """Forgets the position recorded for `consumer` (its epoch stays), in
        a marker of its own: after an operator's rewind, the rows it
        delivers again are written again. True when there was one."""
        recorded, seq = self.progress(consumer)
        if recorded.at is None:
            return False
        marker = {"consumer": consumer, "epoch": recorded.epoch, "at": None, "plan": None, "files": [], "rows": 0}
        key = f"{MARKERS}/{digest(consumer)}/{seq + 1:012d}.json"
        if not self._store.put_if_absent(key, json.dumps(marker, sort_keys=True).encode()):
            raise RuntimeError(f"{self!r}: a batch of consumer {consumer} committed meanwhile; reset again")
        return True

    def committed_files(self) -> List[str]:
        """The data files some consumer's marker names: the sink's rows."""
        files = []
        for consumer_dir in self._consumer_dirs():
            for marker in self._store.list(consumer_dir):
                files += json.loads(self._store.get(marker)).get("files", [])
        return sorted(files)

    def _consumer_dirs(self) -> List[str]:
        # On disk the listing gives the consumers' folders; an object store
        # lists every marker under them.
        return sorted({key if isinstance(self._store, _Local) else key.rsplit("/", 1)[0] for key in self._store.list(MARKERS)})

    def read(self):
        """Every committed row, as one Arrow table (None when there is none)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = [pq.read_table(io.BytesIO(self._store.get(name))) for name in self.committed_files()]
        return pa.concat_tables(tables) if tables else None

    def remove_orphans(self) -> List[str]:
        """Deletes data files no marker names (batches that lost or failed
        their commit). Run it when no query writes to the sink."""
        committed = set(self.committed_files())
        orphans = [name for name in self._store.list(DATA) if name not in committed]
        for name in orphans:
            self._store.delete(name)
        return orphans
