"""Where a query without a checkpoint asks tidemark to start: Paimon's
starting scanners as tidemark startup options (SPEC R3)."""

from __future__ import annotations

from typing import Tuple

from tidemark.paimon.options import SourceOptions
from tidemark.paimon.table import TableSnapshots


def startup(opts: SourceOptions, snapshots: TableSnapshots, latest: int) -> Tuple[str, int]:
    """(startup mode, snapshot): the mode one of `latest-full`, `latest`,
    `from-snapshot`, `from-snapshot-full`.

    - `from-timestamp` is `from-snapshot` at the first snapshot at or after
      the time (SPEC §11's rule), or `latest` when every snapshot is older;
    - `compacted-full` is a full scan of the latest compaction;
    - `latest` is the latest snapshot *as a delta*, as Paimon's Spark source
      starts (Java `ContinuousLatestStartingScanner`: `initOffset` is
      (latest, -1, delta), so the latest commit's changes are delivered).
      The server's own `LATEST` means latest + 1 (SPEC R3) and stays so:
      the source asks for `from-snapshot(latest)` instead, and `latest` only
      for a table without a snapshot, which starts at (1, -1, delta)."""
    mode = opts.scan_mode
    if mode == "from-timestamp":
        start = snapshots.first_at_or_after(opts.scan_timestamp_millis, latest)
        return ("latest", 0) if start is None else ("from-snapshot", start)
    if mode == "compacted-full":
        return "from-snapshot-full", snapshots.latest_compaction(latest)
    if mode == "latest":
        return ("from-snapshot", latest) if latest >= 1 else ("latest", 0)
    if mode.startswith("from-snapshot"):
        return mode, opts.scan_snapshot_id
    return "latest-full", 0
