"""Moved to `tidemark.paimon` (plan.py, read.py, table.py, stream.py); kept
as an import path for existing users. Imports without pyspark."""

from tidemark.paimon.plan import (  # noqa: F401
    PYPAIMON_VERSION,
    ROWKIND_COLUMN,
    OverwriteBucket,
    PartitionFilter,
    Planned,
    Planner,
    ReadOptions,
    check_pypaimon,
    order_splits,
)
from tidemark.paimon.partition_order import PartitionOrder  # noqa: F401
from tidemark.paimon.read import batch_rows, query_fields, read_planned, row_bytes_estimate, spark_schema  # noqa: F401
from tidemark.paimon.stream import fingerprint  # noqa: F401
from tidemark.paimon.table import changelog_decoupled, first_snapshot_at_or_after  # noqa: F401
from tidemark.paimon.options import parse_duration_ms  # noqa: F401


def partition_path(table, partition) -> str:
    """The partition as Paimon's Spark source orders it (now Spark's path
    fragment: escaped, no trailing `/`)."""
    return PartitionOrder(table).fragment(partition)
