"""A Spark Structured Streaming source for Apache Paimon tables, coordinated
by tidemark (the documented import path; the source lives in
`tidemark.paimon`).

    from tidemark.paimon_source import register
    register(spark)
    df = (spark.readStream.format("tidemark_paimon")
          .option("path", "/warehouse/db.db/orders")
          .option("consumer-id", "orders-etl")
          .option("tidemark.endpoint", "tidemark:50051")
          .load())

See docs/spark.md.
"""

from tidemark.paimon.errors import QueryFailed  # noqa: F401
from tidemark.paimon.options import SourceOptions  # noqa: F401
from tidemark.paimon.runner import open_source  # noqa: F401
from tidemark.paimon.source import FORMAT, TidemarkPaimonDataSource, TidemarkPaimonStreamReader, register  # noqa: F401
