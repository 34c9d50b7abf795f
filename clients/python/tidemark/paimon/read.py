"""Reading one planned split as Arrow batches of the query's columns, and
the Spark schema of those rows (runs on executors: no tidemark client)."""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

from tidemark.paimon.plan import (
    DELETE,
    INSERT,
    KEEP_DELETES,
    ROWKIND_COLUMN,
    SEQUENCE_COLUMN,
    SEQUENCE_SINK,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    OverwriteBucket,
    Planned,
    ReadOptions,
    install_audit_read,
)


def spark_schema(table, options: ReadOptions):
    """The rows' Spark schema, as Paimon declares the table (nullability and
    nested types included), with a leading `rowkind` column when
    `read.changelog` is set, followed by `_SEQUENCE_NUMBER` when the table
    reads sequence numbers (Java `AuditLogTable`)."""
    from pypaimon.schema.data_types import PyarrowFieldParser
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    import pyarrow as pa

    arrow = pa.schema(PyarrowFieldParser.from_paimon_schema(table.table_schema.fields))
    schema = from_arrow_schema(arrow)
    if options.read_changelog:
        if ROWKIND_COLUMN in schema.names:
            raise ValueError(f"the table has a column named {ROWKIND_COLUMN!r}, which read.changelog would add")
        added = [StructField(ROWKIND_COLUMN, StringType(), False)]
        if options.sequence_numbers:
            if SEQUENCE_COLUMN in schema.names:
                raise ValueError(f"the table has a column named {SEQUENCE_COLUMN!r}, which read.changelog would add")
            added.append(StructField(SEQUENCE_COLUMN, LongType(), False))
        schema = StructType(added + list(schema.fields))
    return schema


def query_fields(table, schema, leave_out=()) -> List[Tuple[int, str]]:
    """The query's columns as (Paimon field id, name), in the order of the
    Spark `schema` the query runs with (the table's whole schema, or the
    columns the query declared with `readStream.schema(...)`), taken from the
    table's schema when the query starts. Columns in `leave_out` (the
    `rowkind` and epoch columns the source adds) are not the table's."""
    by_name = {f.name: f for f in table.table_schema.fields}
    fields = []
    for name in schema.names:
        if name in leave_out:
            continue
        field = by_name.get(name)
        if field is None:
            raise ValueError(
                f"the query's schema has a column {name!r} that the table (schema {table.table_schema.id}) does "
                f"not have; its columns: {sorted(by_name)}"
            )
        fields.append((field.id, name))
    return fields


def read_planned(table, options: ReadOptions, planned: Planned, schema, fields=None) -> Iterator:
    """The Arrow batches of one planned split, shaped as `schema`.

    `fields` (see `query_fields`) are the columns of the schema the query
    started with: only those are read from the files, and they are found in
    the table's schema now by field id, as Paimon reads files written under
    a newer schema with the query's (Java `SchemaEvolutionUtil`): a column
    added since is not delivered, a renamed one is delivered under the name
    the query knows, one dropped since reads as null, a widened type is cast
    back to the query's type (a value that does not fit fails the read)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema)
    table, cap_bytes = _in_spark_sized_batches(table, target, merges=_merges(options, planned))
    now = {f.id: f.name for f in table.table_schema.fields}
    names = None if fields is None else [now[field_id] for field_id, _ in fields if field_id in now]
    sequences = SequenceNumbers() if options.sequence_numbers else None
    if planned.overwrite is not None:
        pieces = iter([overwrite_changes(table, planned.overwrite, names, sequences is not None)])
    else:
        # Batch by batch, so a split is never whole in memory and Spark
        # takes the first rows while the rest are read. Only primary-key
        # tables carry row kinds (an append table's rows are all +I, and
        # pypaimon adds the column row by row in Python).
        if getattr(planned.split, KEEP_DELETES, False):
            install_audit_read()
        if sequences is not None:
            sequences.collect_from(planned.split)
        reader = read_with_row_kind(table, names, with_kinds=options.primary_key)
        pieces = iter(reader.to_arrow_batch_reader([planned.split]).read_next_batch, None)
    import pyarrow as pa

    for rows in pieces:
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if sequences is not None and planned.overwrite is None:
            rows = sequences.joined(rows)
        if fields is not None:
            rows = _as_query_columns(rows, fields, now, target)
        for batch in _shape(rows, options, target):
            yield from _within_bytes(batch, cap_bytes)
    if sequences is not None and planned.overwrite is None:
        sequences.check_all_joined()


class SequenceNumbers:
    """The sequence numbers of one split's records, as pypaimon's read hands
    them over (plan.install_audit_read), joined to the rows they
    became as a `_SEQUENCE_NUMBER` column."""

    def __init__(self):
        import collections

        self._sink = collections.deque()

    def collect_from(self, split) -> None:
        install_audit_read()
        setattr(split, SEQUENCE_SINK, self._sink)

    def joined(self, rows):
        import pyarrow as pa

        if len(self._sink) < rows.num_rows:
            raise RuntimeError(
                f"pypaimon delivered {rows.num_rows} rows for {len(self._sink)} records; the sequence numbers "
                "cannot be joined to them (is pypaimon the version tidemark_paimon was written for?)"
            )
        numbers = [self._sink.popleft() for _ in range(rows.num_rows)]
        return rows.append_column(pa.field(SEQUENCE_COLUMN, pa.int64(), nullable=False), pa.array(numbers, pa.int64()))

    def check_all_joined(self) -> None:
        if self._sink:
            raise RuntimeError(
                f"pypaimon read {len(self._sink)} records more than it delivered rows; the sequence numbers "
                "cannot be joined to them"
            )


# Arrow batches handed to Spark when neither the table nor the query sets
# `read.batch-size` (docs/spark.md, "Throughput"). Each batch costs a round
# of pypaimon's Python and of Spark's hand-off whatever its size: pypaimon's
# default of 1,024 rows halved the source's throughput, and batches of about
# BATCH_BYTES read 10-16% faster than Spark's own 10,000 rows
# (`spark.sql.execution.arrow.maxRecordsPerBatch`). The rows per batch come
# from the query's columns (a string or binary value counted as
# VARIABLE_WIDTH_GUESS bytes), and a batch whose values turn out longer is
# sliced to BATCH_BYTES before Spark takes it, so one batch in the Python
# worker and in Spark's JVM stays near BATCH_BYTES whatever the row width.
BATCH_BYTES = 16 << 20
BATCH_ROWS_MIN, BATCH_ROWS_MAX = 1_024, 131_072
VARIABLE_WIDTH_GUESS = 32
# A merged split (a primary-key bucket's sorted runs) holds one batch per
# run at once, so it keeps Spark's row count rather than BATCH_BYTES each.
MERGE_BATCH_ROWS = 10_000


def _merges(options: ReadOptions, planned: Planned) -> bool:
    """Whether pypaimon merges the split's sorted runs as it reads it (a
    primary-key split read neither file by file nor raw)."""
    if not options.primary_key:
        return False
    split = planned.split
    return split is None or not (getattr(split, "is_streaming", False) or split.raw_convertible)


def row_bytes_estimate(schema) -> int:
    """About how many bytes one row of `schema` (Arrow) takes in memory."""
    import pyarrow as pa

    def width(kind) -> int:
        if pa.types.is_struct(kind):
            return sum(width(kind.field(i).type) for i in range(kind.num_fields))
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
            inner = width(kind.key_type) + width(kind.item_type) if pa.types.is_map(kind) else width(kind.value_type)
            return 4 + 4 * inner  # an offset and a few values
        try:
            return max(1, kind.bit_width // 8)
        except ValueError:  # not fixed-width: an offset and the value
            return 4 + VARIABLE_WIDTH_GUESS

    return max(1, sum(width(field.type) for field in schema))


def batch_rows(schema, merges: bool = False) -> int:
    """Rows per batch read for `schema` when no `read.batch-size` is set."""
    if merges:
        return MERGE_BATCH_ROWS
    return min(BATCH_ROWS_MAX, max(BATCH_ROWS_MIN, BATCH_BYTES // row_bytes_estimate(schema)))


def _in_spark_sized_batches(table, schema, merges: bool):
    """`table` reading in batches sized for Spark, and the bytes a batch is
    sliced to (none when the table or the query set `read.batch-size`: that
    row count is kept as asked)."""
    if "read.batch-size" in table.options.options.to_map():
        return table, None
    rows = batch_rows(schema, merges)
    return table.copy_without_time_travel({"read.batch-size": str(rows)}), BATCH_BYTES


def _within_bytes(batch, cap_bytes: Optional[int]) -> Iterator:
    """`batch`, in zero-copy slices of at most about `cap_bytes` each."""
    size = batch.nbytes
    if cap_bytes is None or size <= cap_bytes or batch.num_rows <= 1:
        yield batch
        return
    rows = max(1, batch.num_rows * cap_bytes // size)
    for offset in range(0, batch.num_rows, rows):
        yield batch.slice(offset, rows)


def _as_query_columns(rows, fields, now: Dict[int, str], target):
    """`rows` (named as the table's schema names them now) as the query's
    columns, by field id; a column the table no longer has is null."""
    import pyarrow as pa

    columns, names = [], []
    for system in ("_row_kind", SEQUENCE_COLUMN):
        if system in rows.column_names:
            columns.append(rows.column(system))
            names.append(system)
    for field_id, name in fields:
        current = now.get(field_id)
        if current is not None and current in rows.column_names:
            columns.append(rows.column(current))
        else:
            columns.append(pa.nulls(rows.num_rows, type=target.field(name).type))
        names.append(name)
    return pa.table(columns, names=names)


def read_with_row_kind(table, names: Optional[List[str]] = None, with_kinds: bool = True):
    """A reader of `table`'s rows with their kinds (`_row_kind`, unless
    `with_kinds` is false): every column, or only `names` (only those
    columns are read from the files)."""
    from pypaimon.read.table_read import TableRead

    builder = table.new_read_builder()
    if names is not None:
        builder = builder.with_projection(list(names))
    return TableRead(table=table, predicate=None, read_type=builder.read_type(), include_row_kind=with_kinds)


def _shape(data, options: ReadOptions, target) -> Iterator:
    """Row kinds as the query asked: a `rowkind` column with
    `read.changelog`; otherwise only what a reader without row kinds can
    apply as upserts (inserts and updates' new values). Paimon's Spark
    source delivers every record without its kind instead, so a delete
    would arrive as an ordinary row: a deliberate difference
    (docs/spark.md, "Primary keys and row kinds")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if data.num_rows == 0:
        return
    kinds = data.column("_row_kind") if "_row_kind" in data.column_names else None
    data = data.drop(["_row_kind"]) if kinds is not None else data
    if options.read_changelog:
        if kinds is None:
            kinds = pa.array([INSERT] * data.num_rows, pa.string())
        if SEQUENCE_COLUMN in data.column_names:
            numbers = data.column(SEQUENCE_COLUMN)
            data = data.drop([SEQUENCE_COLUMN]).add_column(0, SEQUENCE_COLUMN, numbers)
        data = data.add_column(0, ROWKIND_COLUMN, kinds)
    elif kinds is not None:
        keep = pc.is_in(kinds, value_set=pa.array([INSERT, UPDATE_AFTER]))
        data = data.filter(keep)
        if data.num_rows == 0:
            return
    try:
        data = data if data.schema.equals(target) else data.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        # A type changed since the query started in a way its type cannot
        # hold (Paimon's read fails here too).
        raise ValueError(
            f"SCHEMA_CHANGED: the rows cannot be read as the schema this query started with ({error}); "
            "stop the query and start it again from the same checkpoint to read the new schema"
        ) from error
    for batch in data.to_batches():
        yield batch


def overwrite_changes(table, change: OverwriteBucket, names: Optional[List[str]] = None, with_sequence_numbers=False):
    """The rows one bucket of a primary-key overwrite delivers, with their
    kinds, as Paimon's streaming read of an `IncrementalSplit` makes them
    (Java `IncrementalChangelogReadProvider`): the merged rows of the files
    the overwrite removed, each as `-D` (`ReverseReader`, which keeps a
    record's sequence number), then the merged rows of the files it added,
    each with its own kind; with `_SEQUENCE_NUMBER` when asked."""
    import pyarrow as pa

    def merged(files):
        if not files:
            return None
        from pypaimon.read.split import DataSplit

        split = DataSplit(files, change.partition, change.bucket, raw_convertible=False, snapshot_id=change.snapshot_id)
        if not with_sequence_numbers:
            return read_with_row_kind(table, names).to_arrow([split])
        sequences = SequenceNumbers()
        sequences.collect_from(split)
        rows = sequences.joined(read_with_row_kind(table, names).to_arrow([split]))
        sequences.check_all_joined()
        return rows

    before, after = merged(change.before), merged(change.after)
    parts = []
    if before is not None and before.num_rows:
        kinds = before.column("_row_kind")
        if any(kind in (UPDATE_BEFORE, DELETE) for kind in kinds.to_pylist()):
            # Java's ReverseReader refuses these too.
            raise ValueError("an overwrite removed files whose merged rows are retractions")
        parts.append(before.set_column(before.column_names.index("_row_kind"), "_row_kind",
                                       pa.array([DELETE] * before.num_rows, pa.string())))
    if after is not None and after.num_rows:
        parts.append(after.cast(parts[0].schema) if parts else after)
    if not parts:
        from pypaimon.schema.data_types import PyarrowFieldParser

        fields = [f for f in table.table_schema.fields if names is None or f.name in names]
        schema = pa.schema(
            [pa.field("_row_kind", pa.string(), nullable=False)] + list(PyarrowFieldParser.from_paimon_schema(fields))
        )
        return schema.empty_table()
    return pa.concat_tables(parts)


def read_partition(partition) -> Iterator:
    """The Arrow batches of one Spark partition (partitions.SplitsPartition),
    its splits one after the other, with the epoch column when the query
    asked for one. Runs on an executor, from what the partition carries."""
    from tidemark.paimon.table import open_table

    spec = partition.spec
    table = open_table(spec.path, spec.branch, spec.storage, spec.split_overrides)
    options = ReadOptions(table, spec.read_overrides)
    if getattr(spec, "sink_columns", False):
        yield from _with_positions(table, options, partition)
        return
    column = spec.epoch_column
    if not column:
        for planned in partition.planned:
            yield from read_planned(table, options, planned, spec.schema, spec.fields)
        return
    import pyarrow as pa
    from pyspark.sql.types import StructType

    rows_schema = StructType([f for f in spec.schema.fields if f.name != column])
    for planned in partition.planned:
        for batch in read_planned(table, options, planned, rows_schema, spec.fields):
            epochs = pa.repeat(pa.scalar(partition.epoch, pa.int64()), batch.num_rows)
            yield pa.RecordBatch.from_arrays(
                list(batch.columns) + [epochs],
                schema=batch.schema.append(pa.field(column, pa.int64(), nullable=False)),
            )


def _with_positions(table, options: ReadOptions, partition) -> Iterator:
    """A partition's rows, each with its table position (positions.py): the
    row ordinal counts from 0 in each split, across its Arrow batches."""
    from pyspark.sql.types import StructType

    from tidemark.paimon import positions

    spec = partition.spec
    rows_schema = StructType([f for f in spec.schema.fields if f.name not in positions.COLUMNS])
    for planned, (snapshot, index, full) in zip(partition.planned, partition.positions):
        plan = partition.plans[(snapshot, full)]
        row = 0
        for batch in read_planned(table, options, planned, rows_schema, spec.fields):
            yield positions.with_positions(batch, partition.epoch, snapshot, full, index, row, plan)
            row += batch.num_rows
