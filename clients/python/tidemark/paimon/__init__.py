"""The tidemark_paimon Spark source, by concern:

- `options`: the source's options, refusals, and the one merge of the
  query's options over the table's; `limits`: read limits per trigger;
- `table`: snapshots, the latest compaction, the first snapshot at a time;
- `plan`: each snapshot planned as Paimon's streaming read plans it (the
  only user of pypaimon's private API); `read`: reading a planned split;
- `offsets`: the `Offset` type; `stream`: the one walk from an offset to a
  batch's end, the plan cache and the replay check; `startup`: where a
  query without a checkpoint starts;
- `coordination`: everything asked of tidemark (the only importer of the
  client and the protos); `runner`: the query on Spark's source runner;
- `partitions`: what a Spark task receives (no tidemark credentials);
- `source`: Spark's callbacks.

`tidemark.paimon_source` is the documented import path. Nothing is imported
here, so the planning modules import without pyspark.
"""
