"""What every sink reads off a Spark frame: the consumer its rows were read
for (the epoch column's metadata, see tidemark.paimon.positions) and the
rows, streamed partition by partition."""

from __future__ import annotations

from typing import Iterator, List, Optional

from tidemark.paimon import positions as pos
from tidemark.sinks.errors import SinkRefused


def frame_consumer(frame, override: Optional[str] = None) -> str:
    names = frame.schema.names
    if not all(c in names for c in pos.COLUMNS):
        raise SinkRefused(
            "SINK_COLUMNS_MISSING",
            'the frame has no _tidemark_* position columns: read with .option("tidemark.sink-columns", "true")',
        )
    consumer = override or frame.schema[pos.EPOCH].metadata.get(pos.CONSUMER_METADATA)
    if not consumer:
        raise SinkRefused(
            "SINK_COLUMNS_MISSING",
            "the _tidemark_epoch column lost the consumer it was read for (a transformation dropped its "
            'metadata): pass the sink consumer="table@branch/consumer-id"',
        )
    return consumer


def data_columns(frame) -> List[str]:
    return [n for n in frame.schema.names if n not in pos.COLUMNS]


def frame_rows(frame) -> Iterator[dict]:
    """The frame's rows as dicts, one partition in memory at a time."""
    return (row.asDict() for row in frame.toLocalIterator())
