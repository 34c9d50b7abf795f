"""Why a sink refused a batch."""

from __future__ import annotations


class SinkRefused(RuntimeError):
    """A batch the sink did not write, and why: `reason` is one of
    `ZOMBIE_BATCH` (a lower lease epoch than the sink already accepted),
    `REPLAY_PLAN_MISMATCH` (a snapshot it recorded, planned differently now),
    `FULL_SCAN_RESTARTED` (a new initial full scan over rows already
    written), `SINK_COLUMNS_MISSING` (the source runs without
    `tidemark.sink-columns=true`) or `SINK_PROGRESS_TABLE` (its progress
    table cannot be created). Nothing of the batch was written; the
    message starts with the reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
