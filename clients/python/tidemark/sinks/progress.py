"""The exactly-once rule every sink applies, row by row, against the progress
it recorded (SPEC §12 X2, X3): a row from a lower epoch than the sink
accepted refuses the batch (`ZOMBIE_BATCH`); a row at or below the recorded
position is dropped (already written, in this or an earlier run, with or
without the checkpoint); a row of the recorded snapshot whose plan differs
from the recorded plan refuses the batch (`REPLAY_PLAN_MISMATCH`, naming the
sizing option that changed), since its split indexes no longer mean the
same rows; a new initial full scan past the recorded position refuses it
(`FULL_SCAN_RESTARTED`): its rows are the table's state, much of which the
sink already holds.

Test-only mutants (`TIDEMARK_SINK_MUTANT`): `skip_position_check` writes
every row, `skip_epoch_check` accepts any epoch. The exactly-once tests and
checker must fail under each."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from tidemark.paimon.positions import Plan, Position, describe, position
from tidemark.sinks.errors import SinkRefused


def mutant(name: str) -> bool:
    return os.environ.get("TIDEMARK_SINK_MUTANT") == name


@dataclass
class Progress:
    """What a sink recorded for one consumer: the highest epoch it accepted
    and the position and plan of the last row it wrote."""

    epoch: int = 0
    at: Optional[Position] = None
    plan: Optional[str] = None


@dataclass
class Gate:
    """One batch through the rule: `admit` each row in any order; then
    `epoch`, `last` and `last_plan` are what to record."""

    recorded: Progress
    consumer: str
    sink: str
    epoch: int = 0
    last: Optional[Position] = None
    last_plan: Optional[str] = None
    dropped: int = 0
    admitted: int = 0
    plans_seen: dict = field(default_factory=dict)

    def admit(self, epoch: int, snapshot: int, full: bool, split: int, row: int, plan: str) -> bool:
        """Whether the row is to be written (raises SinkRefused when the
        batch must not be)."""
        if epoch < self.recorded.epoch and not mutant("skip_epoch_check"):
            raise SinkRefused(
                "ZOMBIE_BATCH",
                f"{self.sink} has accepted epoch {self.recorded.epoch} for consumer {self.consumer}; this batch "
                f"was read under epoch {epoch}, a lease since taken over (a zombie query): nothing was written",
            )
        self.epoch = max(self.epoch, epoch)
        at = position(snapshot, full, split, row)
        recorded = self.recorded.at
        if recorded is not None and at[0] == recorded[0] and at[1] == recorded[1]:
            self._same_plan(at, plan)
        if recorded is not None and full and at[0] > recorded[0]:
            if recorded[1] == 0:
                resume = (
                    f"restart the query with scan.mode=from-snapshot-full and scan.snapshot-id={recorded[0]} (while "
                    f"snapshot {recorded[0]} is readable): the sink resumes inside that full scan"
                )
            else:
                resume = (
                    f"put the consumer back where the sink is (tidemark consumers reset <table> <consumer-id> "
                    f"{recorded[0]} --create --execute): the sink drops what it already has"
                )
            raise SinkRefused(
                "FULL_SCAN_RESTARTED",
                f"{self.sink} holds consumer {self.consumer}'s rows up to {describe(recorded)}, and this batch is an "
                f"initial full scan of snapshot {at[0]}: its rows are the table's state then, much of which is "
                "already written (a query started over without its checkpoint before the consumer existed, or the "
                f"consumer was deleted). Nothing was written; {resume}. To start over instead, empty the sink and "
                "reset its progress",
            )
        if recorded is not None and at <= recorded and not mutant("skip_position_check"):
            self.dropped += 1
            return False
        if self.last is None or at > self.last:
            self.last, self.last_plan = at, plan
        self.admitted += 1
        return True

    def _same_plan(self, at: Position, plan: str) -> None:
        if not self.recorded.plan or plan == self.recorded.plan:
            return
        was, now = Plan.parse(self.recorded.plan), Plan.parse(plan)
        if was.digest == now.digest:
            return
        changed = was.changed_options(now)
        why = (
            f"the split sizing changed: {', '.join(changed)}"
            if changed
            else f"its files changed ({was.splits} splits then, {now.splits} now; a compaction rewrote them, or pypaimon "
            "plans differently)"
        )
        raise SinkRefused(
            "REPLAY_PLAN_MISMATCH",
            f"{self.sink} recorded snapshot {at[0]} of consumer {self.consumer} as planned {was.digest}, and this batch "
            f"reads it as planned {now.digest}: {why}. Its split and row numbers no longer name the same rows, so it "
            "cannot be matched; restore the recorded sizing and restart the query",
        )

    def progress(self) -> Progress:
        """What to record after the batch: the epoch raised even when every
        row was dropped (a newer query's first batch fences the old one)."""
        epoch = max(self.recorded.epoch, self.epoch)
        if self.last is None:
            return Progress(epoch, self.recorded.at, self.recorded.plan)
        return Progress(epoch, self.last, self.last_plan)
