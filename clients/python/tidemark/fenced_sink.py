"""Moved to `tidemark.paimon.fenced_sink`; kept as an import path for
existing users."""

from tidemark.paimon.fenced_sink import EpochFencedSink, ZombieBatch  # noqa: F401
