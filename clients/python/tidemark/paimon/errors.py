"""The one exception the Spark source raises to fail a query with tidemark's
explanation (Spark shows its message as the query's failure)."""


class QueryFailed(RuntimeError):
    """Raised to fail the query with tidemark's explanation."""
