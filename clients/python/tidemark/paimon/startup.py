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
      for a table without a snapshot, which starts at (1, -1, delta);
    - a tag (`scan.tag-name`, or `scan.version` naming one) is a full scan
      of the tag's snapshot while that snapshot is live (see `tag_start`)."""
    mode = opts.scan_mode
    if opts.scan_tag is not None:
        return "from-snapshot-full", tag_start(opts.scan_tag, snapshots, opts.table_id)
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


def tag_start(name: str, snapshots: TableSnapshots, table_id: str) -> int:
    """The snapshot a tag start scans in full: the tag's, read from its tag
    file before tidemark is asked. Paimon's streaming read refuses a tag
    ("Cannot scan from tag in streaming mode"); tidemark starts from it
    while its snapshot is live, and refuses once it expired rather than let
    the server's `FROM_SNAPSHOT_FULL` (max(id, earliest), SPEC R3) move the
    start to another snapshot without a word. A tag keeps its data files,
    not snapshot-N and the snapshots after it, so the deltas that follow
    could not be read anyway."""
    snapshot = snapshots.tag_snapshot(name)
    if snapshot is None:
        raise ValueError(f'option "scan.tag-name": {table_id} has no tag {name!r}')
    earliest, latest = snapshots.range()
    if not earliest <= snapshot <= latest or snapshots.get(snapshot) is None:
        raise ValueError(
            f'option "scan.tag-name": tag {name!r} of {table_id} is of snapshot {snapshot}, which has expired '
            f"(the earliest is {earliest}); a streaming read starts from a live snapshot, and the changes between "
            "the tag and the earliest are gone. Read the tag in a batch query, then stream from "
            f"scan.snapshot-id={earliest} with scan.mode=from-snapshot-full"
        )
    return snapshot
