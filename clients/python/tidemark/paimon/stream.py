"""The table as a stream of splits: each snapshot planned once (a bounded
cache), one walk from an offset to the next batch's end, and the check that
a replayed batch still plans the splits it logged.

The walk is the only one: `latestOffset` asks `batch(start, None, ...)` for
the next batch and `partitions` asks `batch(start, end)` for the same batch,
which is then served from the last batch walked, so a batch over a backlog
of many snapshots is planned once."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import List, Optional, Tuple

from tidemark.paimon.errors import QueryFailed
from tidemark.paimon.limits import BatchGuard
from tidemark.paimon.offsets import SPLITS_PER_SNAPSHOT_LIMIT, Offset
from tidemark.paimon.plan import Planned, Planner
from tidemark.paimon.table import TableSnapshots

# Snapshot plans kept besides the last batch's (which keeps its own): enough
# for the snapshots a few batches share.
PLANS_KEPT = 64

Position = Tuple[int, int, bool]  # (snapshot, split index, full scan)


def fingerprint(identities: List[str]) -> str:
    """A short digest of a batch's splits, in order."""
    digest = hashlib.sha256()
    for identity in identities:
        digest.update(identity.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


@dataclass
class Batch:
    """The splits in (start, end], in stream order."""

    start: Offset
    end: Offset
    positions: List[Position]
    planned: List[Planned]


class Stream:
    def __init__(self, snapshots: TableSnapshots, planner: Planner, table_id: str):
        self.snapshots = snapshots
        self.planner = planner
        self.table_id = table_id
        self._plans: "OrderedDict[Tuple[int, bool], List[Planned]]" = OrderedDict()
        self._last: Optional[Batch] = None
        self.plans_made = 0  # how many snapshot plans were made (for tests)

    def plan(self, snapshot_id: int, full: bool) -> List[Planned]:
        """The splits of one snapshot's plan (full, or its follow-up plan as
        Paimon's streaming read makes it), in a stable order."""
        key = (snapshot_id, full)
        if key in self._plans:
            self._plans.move_to_end(key)
            return self._plans[key]
        snapshot = self.snapshots.get(snapshot_id, changelog_too=not full)
        if snapshot is None:
            raise QueryFailed(
                f"snapshot {snapshot_id} of {self.table_id} no longer exists; it was expired before this "
                "query read it. Check retention against tidemark's fence, then restart"
            )
        # A snapshot of a newer schema is read with the schema the query
        # started with, column by column by field id (read.read_planned), as
        # Paimon's streaming read does: a new schema stops nothing.
        splits = self.planner.plan(snapshot, full)
        self.plans_made += 1
        if len(splits) >= SPLITS_PER_SNAPSHOT_LIMIT:
            raise QueryFailed(f"snapshot {snapshot_id} has {len(splits)} splits; at most 999999 are supported")
        self._plans[key] = splits
        while len(self._plans) > PLANS_KEPT:
            self._plans.popitem(last=False)
        return splits

    @staticmethod
    def identity(position: Position, split: Planned) -> str:
        snapshot_id, index, full = position
        return f"{snapshot_id}:{index}:{'full' if full else 'delta'}:{split.identity()}"

    def _next(self, at: Offset, latest: int) -> Optional[Offset]:
        """The split after `at`, or None when there is none yet. A finished
        snapshot is not planned again (it may have expired since), and
        snapshots that deliver nothing are skipped. An initial full scan is
        read whatever `latest` says: `streaming.read.snapshot.delay` holds
        back the snapshots after it, not the scan (Java DataTableStreamScan's
        tryFirstPlan)."""
        if (at.snapshot <= latest or at.full) and not at.finished:
            splits = self.plan(at.snapshot, at.full)
            if at.index + 1 < len(splits):
                return Offset(at.snapshot, at.index + 1, at.full, len(splits))
        candidate = at.snapshot + 1
        while candidate <= latest:
            splits = self.plan(candidate, False)
            if splits:
                return Offset(candidate, 0, False, len(splits))
            candidate += 1
        return None

    def batch(
        self, start: Offset, end: Optional[Offset] = None, latest: int = 0, guard: Optional[BatchGuard] = None
    ) -> Optional[Batch]:
        """The batch after `start`: up to `end` when given (the batch Spark
        logged), else every split up to snapshot `latest` that `guard`
        admits (None when there is none, or the guard holds it back)."""
        if end is not None:
            last = self._last
            if last is not None and last.start.at_same_position(start) and last.end.at_same_position(end):
                return last
            if start.position > end.position:
                raise QueryFailed(f"the batch start ({start}) is after its end ({end}); refusing to skip splits")
            latest = end.snapshot
        at, positions, planned = start, [], []
        while end is None or at.position < end.position:
            step = self._next(at, latest)
            if step is None:
                if end is not None:
                    raise QueryFailed(f"cannot reach the batch end ({end}) from {start}: snapshots are missing")
                break
            split = self.plan(step.snapshot, step.full)[step.index]
            if guard is not None and not guard.admit(*split.stats()):
                break
            at = step
            positions.append((step.snapshot, step.index, step.full))
            planned.append(split)
        if not positions or (end is None and guard is not None and guard.skip_batch):
            return None
        digest = fingerprint([self.identity(p, split) for p, split in zip(positions, planned)])
        batch = Batch(start, Offset(at.snapshot, at.index, at.full, at.total, start.holder, digest), positions, planned)
        self._last = batch
        return batch

    def replay(self, start: Offset, end: Offset) -> Batch:
        """A logged batch, planned again only if its plan is still the one it
        logged: the same number of splits in its last snapshot and the same
        splits throughout (their files); else the query fails rather than
        deliver other rows than the first run did."""
        now = len(self.plan(end.snapshot, end.full))
        if end.total is not None and now != end.total:
            raise QueryFailed(
                f"REPLAY_PLAN_MISMATCH: the logged batch ends at split {end.index} of {end.total} of snapshot "
                f"{end.snapshot}, whose plan now has {now} splits (the split size or pypaimon changed); "
                "replaying it would skip or repeat rows. Restore the table's split options, or start a new "
                "checkpoint (the consumer keeps its position)"
            )
        try:
            batch = self.batch(start, end)
        except QueryFailed as error:
            raise QueryFailed(
                f"REPLAY_PLAN_MISMATCH: the logged batch from {start} to {end} cannot be planned again "
                f"({error}); start a new checkpoint (the consumer keeps its position)"
            ) from error
        if end.fingerprint is not None and batch.end.fingerprint != end.fingerprint:
            raise QueryFailed(
                f"REPLAY_PLAN_MISMATCH: the logged batch ending at {end} planned other splits than the table plans "
                "now (the split size, the files or pypaimon changed); replaying it would deliver different rows. "
                "Restore the table's split options, or start a new checkpoint (the consumer keeps its position)"
            )
        return batch
