"""`spark.readStream.format("tidemark_paimon")`: Spark's callbacks, each
forwarded to the query's runner (runner.py) or, on executors, to the reader
of a partition (read.py)."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from tidemark.paimon import positions
from tidemark.paimon.options import SourceOptions
from tidemark.paimon.read import read_partition, spark_schema
from tidemark.paimon.runner import Runner, open_source
from tidemark.paimon.table import as_of_start

FORMAT = "tidemark_paimon"


# Session settings Paimon's Spark source reads as options, lowest first:
# `spark.paimon.*` (Java `OptionUtils.copyWithSQLConf`) and
# `spark.datasource.paimon.*` (`SessionConfigSupport`, key prefix "paimon");
# the query's own options win over both.
SESSION_PREFIXES = ("spark.paimon.", "spark.datasource.paimon.")


def session_options(conf: dict) -> dict:
    """The Paimon options a session's settings give every query. tidemark's
    own options are left out: they are the query's (the token never rides
    with what executors receive)."""
    found = {}
    for prefix in SESSION_PREFIXES:
        for key, value in conf.items():
            name = key[len(prefix):] if key.startswith(prefix) else None
            if name and not name.lower().startswith("tidemark."):
                found[name] = value
    return found


def register(spark) -> None:
    """Makes `spark.readStream.format("tidemark_paimon")` available, with
    the session's `spark.paimon.*` and `spark.datasource.paimon.*` settings
    as of now (a Python data source cannot read Spark's conf later: call
    register again after changing them)."""
    settings = session_options(dict(spark.conf.getAll))
    source = type("TidemarkPaimonDataSource", (TidemarkPaimonDataSource,), {"session_options": settings})
    spark.dataSource.register(source)


class TidemarkPaimonDataSource(DataSource):
    # The session's Paimon settings (see register); the query's options win.
    session_options: dict = {}

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> SourceOptions:
        return SourceOptions({**self.session_options, **dict(self.options)})

    def schema(self):
        options = self._options()
        table, read_options = open_source(options)
        schema = spark_schema(as_of_start(table, options.effective), read_options)
        if options.sink_columns:
            from pyspark.sql.types import StructType

            positions.check_table_columns(schema.names)
            key = positions.consumer_key(options.table_id, options.branch, options.consumer_id)
            schema = StructType(list(schema.fields) + positions.spark_fields(key))
        if options.epoch_column:
            from pyspark.sql.types import LongType, StructField, StructType

            if options.epoch_column in schema.names:
                raise ValueError(f"tidemark.epoch-column {options.epoch_column!r} is already a column of the table")
            schema = StructType(list(schema.fields) + [StructField(options.epoch_column, LongType(), False)])
        return schema

    def streamReader(self, schema):
        reader = TidemarkPaimonStreamReader(self._options(), schema)
        # PySpark ships this data source to executors with the read function
        # (for its name): they get the options without tidemark's endpoint,
        # token and TLS files, which the reader made above keeps.
        self.options = type(self.options)(
            {k: v for k, v in self.options.items() if not str(k).lower().startswith("tidemark.")}
        )
        return reader


class TidemarkPaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The runner holds the query's state; a pickled copy (what `read` runs
    on) keeps only the read spec, so executors never see tidemark's token."""

    def __init__(self, options: SourceOptions, schema=None):
        self._runner = Runner(options, schema)

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._runner = None

    def initialOffset(self) -> dict:
        return self._runner.initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark's Python API has no composite limit: Spark is told one of
        # them (so it knows the batches are limited) and latestOffset
        # applies them all.
        limits = self._runner.opts.limits
        if limits.max_files is not None:
            return ReadMaxFiles(limits.max_files)
        if limits.max_rows is not None:
            return ReadMaxRows(limits.max_rows)
        if limits.max_bytes is not None:
            return ReadMaxBytes(limits.max_bytes)
        if limits.min_rows is not None:
            return ReadMinRows(limits.min_rows)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._runner.prepare_available_now()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return self._runner.latest_offset(start, isinstance(limit, ReadAllAvailable))

    def partitions(self, start: dict, end: dict):
        return self._runner.partitions(start, end)

    def read(self, partition):
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        self._runner.commit(end)

    def stop(self) -> None:
        if self._runner is not None:
            self._runner.stop()
