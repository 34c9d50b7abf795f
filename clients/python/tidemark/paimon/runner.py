"""The query on Spark's source runner: its table, its stream of splits and
its coordination with tidemark, and what each of Spark's callbacks does with
them (source.py only forwards). Nothing here runs on executors."""

from __future__ import annotations

import time
from typing import List, Optional

from tidemark.paimon import positions
from tidemark.paimon.coordination import Coordination
from tidemark.paimon.offsets import Offset
from tidemark.paimon.options import SourceOptions
from tidemark.paimon.partitions import ReadSpec, SplitsPartition, group_splits
from tidemark.paimon.plan import ROWKIND_COLUMN, SEQUENCE_COLUMN, Planner, ReadOptions
from tidemark.paimon.read import query_fields
from tidemark.paimon.startup import startup
from tidemark.paimon.stream import Batch, Stream
from tidemark.paimon.table import TableSnapshots, as_of_start, open_table


def open_source(options: SourceOptions):
    """The table, the query's options resolved against it, and how its
    stream is read."""
    table = open_table(options.path, options.branch, options.storage)
    options.resolve(table)
    if options.split_overrides:
        table = open_table(options.path, options.branch, options.storage, options.split_overrides)
    return table, ReadOptions(table, options.read_overrides)


class Runner:
    def __init__(self, opts: SourceOptions, schema=None):
        self.opts = opts
        # Resolves the options against the table (its properties are
        # defaults) before anything names the consumer.
        table, read_options = open_source(opts)
        self.snapshots = TableSnapshots(table, opts.effective)
        self.stream = Stream(self.snapshots, Planner(table, read_options), opts.table_id)
        self.coordination = Coordination(opts)
        self.ordered_buckets = read_options.ordered_buckets
        # The query's columns, by Paimon field id, as of its start: rows of
        # later schemas are read as these (read.read_planned).
        fields = None
        if schema is not None:
            added = {ROWKIND_COLUMN} if read_options.read_changelog else set()
            if read_options.sequence_numbers:
                added.add(SEQUENCE_COLUMN)
            if opts.epoch_column:
                added.add(opts.epoch_column)
            if opts.sink_columns:
                added.update(positions.COLUMNS)
            fields = query_fields(as_of_start(table, opts.effective), schema, leave_out=added)
        self.spec = ReadSpec(
            opts.path, opts.branch, dict(opts.storage), dict(opts.split_overrides), dict(opts.read_overrides),
            schema, fields, opts.epoch_column, opts.sink_columns,
        )
        self.sizing = positions.sizing(opts.effective)
        self._initial: Optional[dict] = None
        self._target: Optional[int] = None
        self._planned_end: Optional[Offset] = None
        self._replay_checked = False
        # When latestOffset last returned a new batch (Paimon's
        # lastTriggerMillis; 0: never, so the first batch is never held back).
        self._last_batch_ms = 0
        self._seen_latest: Optional[int] = None

    def _startup(self, latest: int):
        return startup(self.opts, self.snapshots, latest)

    def _latest(self) -> int:
        return self.snapshots.readable_latest(self.opts.snapshot_delay_ms, self._target)

    def initial_offset(self) -> dict:
        # A query without a checkpoint: a new holder (kept in our offsets),
        # the lease, and the start tidemark plans (R1-R3). Spark calls this
        # more than once and uses the answers for different steps, so the
        # first answer is kept: asking again after a new snapshot landed
        # would give a later full-scan start and silently skip splits.
        if self._initial is None:
            self.coordination.ensure_lease(self.opts.holder)
            latest = self.snapshots.range()[1]
            self._initial = self.coordination.start(
                self.snapshots, self._startup(latest), exact=self.opts.scan_tag is not None
            ).to_json()
        return dict(self._initial)

    def prepare_available_now(self) -> None:
        self._target = self.snapshots.range()[1]

    def latest_offset(self, start: dict, everything: bool) -> dict:
        """The next batch's end, or `start` itself (unchanged: Spark compares
        the text) when there is none. `everything`: Spark asks for all
        (Trigger.Once); otherwise every limit the options set applies."""
        begin = Offset.from_json(start)
        self.coordination.ensure_lease(begin.holder)
        now_ms = int(time.time() * 1000)
        guard = None
        if not everything and self.opts.limits.any():
            guard = self.opts.limits.guard(self._last_batch_ms, now_ms)
        self._seen_latest = self._latest()
        batch = self.stream.batch(begin, None, self._seen_latest, guard)
        if batch is None:
            return start
        self._last_batch_ms = now_ms
        self._planned_end = batch.end
        return batch.end.with_holder(self.coordination.holder).to_json()

    def partitions(self, start: dict, end: dict) -> List[SplitsPartition]:
        begin, finish = Offset.from_json(start), Offset.from_json(end)
        self.coordination.ensure_lease(begin.holder)
        if begin.at_same_position(finish):
            # An empty batch (Spark's first when nothing is new): nothing to
            # plan, and nothing to replay-check.
            return []
        if self._replay_checked or (self._planned_end is not None and self._planned_end.at_same_position(finish)):
            batch = self.stream.batch(begin, finish)
        else:
            # The first batch this runner builds without having planned it:
            # the logged batch Spark replays after a restart (R4).
            batch = self._replay(begin, finish)
        self._replay_checked = True
        groups = group_splits(
            batch.planned, self.opts.partition_bytes, self.opts.min_partitions, keep_buckets_together=self.ordered_buckets
        )
        epoch = self.coordination.epoch
        if not self.opts.sink_columns:
            return [SplitsPartition(self.spec, group, epoch) for group in groups]
        at = {id(split): place for split, place in zip(batch.planned, batch.positions)}
        plans = self._plan_fingerprints(batch)
        out = []
        for group in groups:
            places = [at[id(split)] for split in group]
            needed = {(snapshot, full): plans[(snapshot, full)] for snapshot, _, full in places}
            out.append(SplitsPartition(self.spec, group, epoch, places, needed))
        return out

    def _plan_fingerprints(self, batch: Batch) -> dict:
        """Each snapshot plan the batch reads from, as `_tidemark_plan`
        gives it: every split of the plan, not only the batch's."""
        plans = {}
        for snapshot, _, full in batch.positions:
            if (snapshot, full) not in plans:
                splits = self.stream.plan(snapshot, full)
                identities = [Stream.identity((snapshot, i, full), s) for i, s in enumerate(splits)]
                plans[(snapshot, full)] = positions.plan_fingerprint(identities, self.sizing)
        return plans

    def _replay(self, start: Offset, end: Offset) -> Batch:
        fallback = self.coordination.check_replay(
            self.snapshots, lambda: self._startup(self.snapshots.range()[1]), start, end
        )
        if fallback is None:
            return self.stream.replay(start, end)
        return self.stream.batch(fallback, end)

    def commit(self, end: dict) -> None:
        finish = Offset.from_json(end)
        self.coordination.ensure_lease(finish.holder)
        # The latest snapshot as the last latestOffset saw it (for the lag
        # tidemark reports): one look at the table per batch, not two (with
        # no LATEST hint, each look lists the snapshot directory).
        latest = self._seen_latest if self._seen_latest is not None else self._latest()
        self.coordination.commit(finish, max(latest, finish.snapshot))

    def stop(self) -> None:
        self.coordination.stop()
