"""The source's offsets: Paimon's Spark offset (`snapshotId`, `index`,
`scanSnapshot`) with `totalSplits` (how many splits that snapshot's plan
has, so a finished snapshot is told from a partial one), the query's
`holder` (Spark's Python API does not expose the query id, so a restarted
query finds its identity in its own checkpoint) and, on a batch's end, the
`batchFingerprint` of the splits it planned (so a replay can prove it reads
the same ones)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Tuple

# A CommitBatch needs a batch id that grows with the batch's end, but Spark
# does not pass its batch id to commit(end). The id is derived from the end
# offset instead: a repeated end gives the same id (DUPLICATE) and an older,
# late end a lower one (a no-op), exactly as tidemark's rule C5 expects.
SPLITS_PER_SNAPSHOT_LIMIT = 1_000_000

# Paimon's PaimonSourceOffset.INIT_OFFSET_INDEX: before the first split.
BEFORE_FIRST_SPLIT = -1


@dataclass(frozen=True)
class Offset:
    snapshot: int
    index: int
    full: bool
    total: Optional[int] = None
    holder: Optional[str] = None
    fingerprint: Optional[str] = None

    @staticmethod
    def from_json(data: dict) -> "Offset":
        return Offset(
            int(data["snapshotId"]),
            int(data["index"]),
            bool(data["scanSnapshot"]),
            data.get("totalSplits"),
            data.get("holder"),
            data.get("batchFingerprint"),
        )

    def to_json(self) -> dict:
        """The JSON Spark logs; its keys in one fixed order (Spark compares
        offsets as serialized text)."""
        out = {"snapshotId": self.snapshot, "index": self.index, "scanSnapshot": self.full}
        if self.total is not None:
            out["totalSplits"] = self.total
        out["holder"] = self.holder
        if self.fingerprint is not None:
            out["batchFingerprint"] = self.fingerprint
        return out

    @property
    def position(self) -> Tuple[int, int]:
        """Where in the stream the offset is: offsets order by it."""
        return self.snapshot, self.index

    def at_same_position(self, other: "Offset") -> bool:
        return (self.snapshot, self.index, self.full) == (other.snapshot, other.index, other.full)

    @property
    def finished(self) -> bool:
        """Whether every split of the offset's snapshot was read: its
        snapshot need not (and, once expired, cannot) be planned again
        (Paimon's Spark source restores from the next snapshot then)."""
        return self.total is not None and self.index + 1 >= self.total

    @property
    def batch_id(self) -> int:
        """The CommitBatch id of a batch ending here."""
        return self.snapshot * SPLITS_PER_SNAPSHOT_LIMIT + (self.index + 1)

    def with_holder(self, holder: Optional[str]) -> "Offset":
        return replace(self, holder=holder)

    def __str__(self) -> str:
        kind = "full" if self.full else "delta"
        total = "?" if self.total is None else self.total
        return f"snapshot {self.snapshot} split {self.index} of {total} ({kind})"
