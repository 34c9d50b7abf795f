"""Sinks that deliver a tidemark source's rows exactly once (SPEC §12), for
`writeStream.foreachBatch(sink)`: each records, in the same transaction as
the rows, the consumer's highest table position it wrote and the highest
lease epoch it accepted, drops rows at or below that position (a replay,
even from a lost checkpoint) and refuses batches from a lower epoch
(`ZOMBIE_BATCH`). The source must run with `tidemark.sink-columns=true`.

`PostgresSink` needs psycopg 3 (`pip install tidemark[postgres]`), `PaimonSink`
pypaimon (`pip install tidemark[spark]`), `ParquetSink` pyarrow (and boto3 for S3)."""

from tidemark.sinks.errors import SinkRefused
from tidemark.sinks.paimon import PaimonSink
from tidemark.sinks.parquet import ParquetSink
from tidemark.sinks.postgres import PostgresSink

__all__ = ["PaimonSink", "ParquetSink", "PostgresSink", "SinkRefused"]
