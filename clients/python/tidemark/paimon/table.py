"""A Paimon table as the stream sees it: its snapshots (earliest, latest, one
by id, or its changelog once the snapshot expired), the latest compaction,
the first snapshot at or after a time, and whether its changelog outlives its
snapshots. No planning (plan.py) and no tidemark client."""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

from tidemark.paimon.options import parse_duration_ms, table_id_from_path


def open_table(path: str, branch: str, storage: Optional[dict] = None, split_overrides: Optional[dict] = None):
    """The pypaimon table at `path` (on `branch`), opened with the storage
    options, with the query's split sizing."""
    from pypaimon.table.file_store_table import FileStoreTable

    if branch == "main":
        table = FileStoreTable.from_path(path, dict(storage or {}))
    else:
        from pypaimon import CatalogFactory

        database_dir = os.path.dirname(path)
        catalog = CatalogFactory.create({"warehouse": os.path.dirname(database_dir), **(storage or {})})
        table = catalog.get_table(f"{table_id_from_path(path)}$branch_{branch}")
    if split_overrides:
        table = table.copy_without_time_travel(dict(split_overrides))
    return table


# The options that pick a time-travel snapshot (Java TimeTravelUtil.SCAN_KEYS
# and scan.version).
TIME_TRAVEL_KEYS = (
    "scan.version", "scan.snapshot-id", "scan.tag-name", "scan.watermark", "scan.timestamp", "scan.timestamp-millis",
)


def as_of_start(table, options: Dict[str, str]):
    """The table with the schema a query starting as `options` say reads
    with: Paimon fixes a time-travel start's schema at that snapshot's (Java
    `AbstractFileStoreTable.tryTimeTravel`, through pypaimon's own `copy`),
    and keeps the latest when no option picks a snapshot or the one picked
    cannot be found. Only for the query's columns: rows are still read with
    the table's schema now and mapped by field id (read.query_fields)."""
    chosen = {key: options[key] for key in TIME_TRAVEL_KEYS if key in options}
    if not chosen:
        return table
    try:
        return table.copy(chosen)
    except Exception:  # noqa: BLE001 - Paimon falls back to the latest schema too
        return table


def changelog_decoupled(options: Dict[str, str]) -> bool:
    """Whether the table's changelog outlives its snapshots (Java
    `CoreOptions.changelogLifecycleDecoupled`): a `changelog.*` retention
    above the snapshots' (each defaults to the snapshots')."""

    def number(key: str, default: int) -> int:
        return int(options.get(key, default))

    snapshot_min = number("snapshot.num-retained.min", 10)
    snapshot_max = number("snapshot.num-retained.max", 2**31 - 1)
    snapshot_time = parse_duration_ms("snapshot.time-retained", options.get("snapshot.time-retained", "1 h"))
    changelog_min = number("changelog.num-retained.min", snapshot_min)
    changelog_max = number("changelog.num-retained.max", snapshot_max)
    changelog_time = (
        parse_duration_ms("changelog.time-retained", options["changelog.time-retained"])
        if "changelog.time-retained" in options
        else snapshot_time
    )
    return changelog_max > snapshot_max or changelog_time > snapshot_time or changelog_min > snapshot_min



def first_snapshot_at_or_after(snapshots: List[Tuple[int, int]], at_millis: int) -> Optional[int]:
    """SPEC §11's one rule for "the first snapshot at or after a time", as
    Paimon's from-timestamp start resolves it (the snapshot after the last
    one committed before the time): `snapshots` are the live `(id, commit
    time in ms)` pairs; the answer is the earliest id when none was committed
    before the time, and `None` when all were (start after the latest).
    Shared test vectors: testdata/first_snapshot_at_or_after.json."""
    if not snapshots:
        return None
    ordered = sorted(snapshots)
    before = [sid for sid, millis in ordered if millis < at_millis]
    if not before:
        return ordered[0][0]
    start = max(before) + 1
    return start if start <= ordered[-1][0] else None


class TableSnapshots:
    """The snapshots of one opened table. `options` are the read's effective
    options (options.effective)."""

    def __init__(self, table, options: Dict[str, str]):
        self.table = table
        self.options = options
        self.manager = table.snapshot_manager()
        # Whether changelogs outlive snapshots here: fixed for the table this
        # runner opened.
        self.decoupled = changelog_decoupled(options)
        self._compactions: Dict[int, int] = {}

    def range(self) -> Tuple[int, int]:
        """(earliest, latest) snapshot ids; (0, 0) for a table without one."""
        latest = self.manager.get_latest_snapshot()
        if latest is None:
            return 0, 0
        earliest = self.manager.try_get_earliest_snapshot()
        return (earliest.id if earliest is not None else 1), latest.id

    def get(self, snapshot_id: int, changelog_too: bool = False):
        """Snapshot `snapshot_id`, or None once it expired; with
        `changelog_too`, its long-lived changelog after it expired (Paimon
        reads changelog-N then: Java NextSnapshotFetcher)."""
        snapshot = self.manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None and changelog_too and self.decoupled:
            snapshot = self.table.changelog_manager().try_get_changelog(snapshot_id)
        return snapshot

    def tag_snapshot(self, name: str) -> Optional[int]:
        """The snapshot id tag `name` was taken of (its tag file), or None
        when there is no such tag."""
        tag = self.table.tag_manager().get(name)
        return None if tag is None else tag.id

    def earliest_changelog(self) -> Optional[int]:
        """The earliest long-lived changelog (changelog/changelog-N, kept
        after snapshot N expired), when changelogs outlive snapshots."""
        if not self.decoupled:
            return None
        return self.table.changelog_manager().earliest_long_lived_changelog_id()

    def readable_latest(self, delay_ms: int = 0, at_most: Optional[int] = None) -> int:
        """The latest snapshot a stream may read now: at most `at_most` (the
        end of a Trigger.AvailableNow run), and with
        `streaming.read.snapshot.delay` only one at least that old (Java
        NextSnapshotFetcher / DataTableStreamScan)."""
        earliest, latest = self.range()
        if at_most is not None:
            latest = min(latest, at_most)
        if delay_ms and latest > 0:
            now_ms = int(time.time() * 1000)
            while latest >= earliest:
                snapshot = self.manager.get_snapshot_by_id(latest)
                if snapshot is None or snapshot.time_millis <= now_ms - delay_ms:
                    break
                latest -= 1
        return latest

    def latest_compaction(self, latest: int) -> int:
        """`compacted-full`'s snapshot: the latest COMPACT snapshot (with
        `changelog-producer=full-compaction` or `full-compaction.delta-commits`,
        the latest full compaction: its commit identifier a multiple of the
        delta commits), else the latest snapshot (Java
        CompactedStartingScanner, FullCompactedStartingScanner). Walked once
        per latest snapshot."""
        if latest in self._compactions:
            return self._compactions[latest]
        delta_commits = self.options.get("full-compaction.delta-commits")
        full_only = str(self.options.get("changelog-producer", "")).lower() == "full-compaction" or delta_commits
        every = int(delta_commits or 1)
        earliest = self.range()[0]
        found = latest
        for snapshot_id in range(latest, earliest - 1, -1):
            snapshot = self.manager.get_snapshot_by_id(snapshot_id)
            if snapshot is None or snapshot.commit_kind != "COMPACT":
                continue
            identifier = snapshot.commit_identifier
            if not full_only or identifier % every == 0 or identifier == 2**63 - 1:
                found = snapshot_id
                break
        self._compactions[latest] = found
        return found

    def first_at_or_after(self, at_millis: int, latest: int) -> Optional[int]:
        """Binary search over the commit times (Paimon keeps them in commit
        order), with the rule of `first_snapshot_at_or_after`. When the
        changelog outlives snapshots the search starts at the earliest
        long-lived changelog and reads changelog-N where snapshot-N expired
        (Java `TimeTravelUtil.earlierThanTimeMills(..., changelogDecoupled)`
        as `ContinuousFromTimestampStartingScanner` calls it)."""
        if latest < 1:
            return None
        earliest = self.range()[0]
        changelog = self.earliest_changelog()
        if changelog is not None and changelog < earliest:
            earliest = changelog

        def millis(snapshot_id: int) -> int:
            return self.get(snapshot_id, changelog_too=True).time_millis

        low, high = earliest, latest
        # The last snapshot committed strictly before the time, if any.
        last_before = None
        while low <= high:
            middle = (low + high) // 2
            if millis(middle) < at_millis:
                last_before, low = middle, middle + 1
            else:
                high = middle - 1
        pairs = [(earliest, millis(earliest)), (latest, millis(latest))]
        if last_before is not None:
            pairs.append((last_before, millis(last_before)))
            if last_before + 1 <= latest:
                pairs.append((last_before + 1, millis(last_before + 1)))
        return first_snapshot_at_or_after(pairs, at_millis)
