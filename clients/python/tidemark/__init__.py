"""Python client for tidemark: recovery coordination for streaming readers of
snapshot-based tables (Apache Paimon first).

    from tidemark import Client
    client = Client("127.0.0.1:50051", token=...)
    lease = client.acquire_lease("db.orders", "orders-etl", holder="query-1").lease
    keeper = client.keep_lease(lease)
    ...
    keeper.release()

The Spark source lives in `tidemark.paimon_source` (needs pyspark, pyarrow and
pypaimon).
"""

from tidemark.client import Client, LeaseKeeper, RetryPolicy, legacy_offset, offset
from tidemark.errors import TidemarkError, is_retryable

__all__ = ["Client", "LeaseKeeper", "RetryPolicy", "TidemarkError", "is_retryable", "legacy_offset", "offset"]
