"""An example foreachBatch sink fenced by the lease epoch: it refuses a
micro-batch read under an older lease than one it has already accepted, so a
"zombie" batch — whose query lost its lease to another query while the batch
ran — never reaches the output after the new owner's batches did.

Use it with the source option `tidemark.epoch-column`:

    from tidemark.fenced_sink import EpochFencedSink

    sink = EpochFencedSink("/data/orders-out", epoch_column="_tidemark_epoch")
    (spark.readStream.format("tidemark_paimon")
        .option("path", ...).option("consumer-id", "orders-etl")
        .option("tidemark.epoch-column", "_tidemark_epoch")
        .load()
        .writeStream.foreachBatch(sink).start())

It keeps its output as one JSON file per batch and the highest epoch it
accepted in `epoch`, and checks and writes under one file lock, so two
queries in any processes on one machine cannot interleave a check and a
write. A production sink does the same with its own transaction: store the
epoch with the data and write only while the stored epoch is not higher.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
from typing import Dict, List


class ZombieBatch(RuntimeError):
    """A batch read under a lease older than one the sink already accepted."""


class EpochFencedSink:
    """A foreachBatch sink that refuses batches from an older lease epoch."""

    def __init__(self, directory, epoch_column: str = "_tidemark_epoch"):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.epoch_column = epoch_column

    def __call__(self, frame, batch_id: int) -> None:
        rows = [row.asDict(recursive=True) for row in frame.collect()]
        if not rows:
            return
        epochs = {row[self.epoch_column] for row in rows}
        epoch = max(epochs)
        with open(self.directory / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            accepted = self.epoch()
            if epoch < accepted:
                raise ZombieBatch(
                    f"ZOMBIE_BATCH: batch {batch_id} was read under lease epoch {epoch}, and this sink already "
                    f"accepted epoch {accepted}: its query lost the consumer to another one; nothing was written"
                )
            out = self.directory / f"epoch-{epoch:06d}-batch-{batch_id:06d}.json"
            self._replace(out, json.dumps(rows, default=str))
            self._replace(self.directory / "epoch", str(epoch))

    def epoch(self) -> int:
        """The highest epoch accepted so far (0 before any)."""
        try:
            return int((self.directory / "epoch").read_text())
        except FileNotFoundError:
            return 0

    def batches(self) -> Dict[str, List[dict]]:
        """Every accepted batch, by file name."""
        return {p.name: json.loads(p.read_text()) for p in sorted(self.directory.glob("epoch-*.json"))}

    @staticmethod
    def _replace(path: pathlib.Path, text: str) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
