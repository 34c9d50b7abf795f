"""Removed: `EpochFencedSink` was a host-local example (a directory of files
under an `fcntl` lock). The exactly-once sinks replace it, with the epoch
check and, beyond it, the position check that makes a replay harmless:
`tidemark.sinks.ParquetSink` (files, on disk or an object store),
`PostgresSink` and `PaimonSink`; read with `tidemark.sink-columns=true`
(docs/spark.md, "Exactly once")."""

raise ImportError(
    "tidemark.fenced_sink was an example and is removed: use tidemark.sinks.ParquetSink (files on disk or an "
    "object store), PostgresSink or PaimonSink, reading with .option('tidemark.sink-columns', 'true') "
    "(docs/spark.md, 'Exactly once')"
)
