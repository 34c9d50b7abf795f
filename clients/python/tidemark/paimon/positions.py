"""Table positions on rows (SPEC §12 X1, `tidemark.sink-columns=true`): each
row carries the lease epoch it was read under, the snapshot, whether it was
read as an initial full scan or a delta (the two have different plans), the
split's index in that snapshot's plan, the row's ordinal in its split, and
the plan's fingerprint with the split sizing it was planned with. Positions
are the table's, not Spark's: they survive a lost checkpoint, so a sink that
records the highest one it wrote (tidemark.sinks) drops a replay exactly.

The consumer the rows were read for rides in the epoch column's metadata
(`tidemark.consumer`), so a sink keys its progress without being told."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

EPOCH = "_tidemark_epoch"
SNAPSHOT = "_tidemark_snapshot"
FULL = "_tidemark_full"
SPLIT = "_tidemark_split"
ROW = "_tidemark_row"
PLAN = "_tidemark_plan"
COLUMNS = (EPOCH, SNAPSHOT, FULL, SPLIT, ROW, PLAN)
PREFIX = "_tidemark_"

# The consumer key, in the epoch column's metadata: "table@branch/consumer".
CONSUMER_METADATA = "tidemark.consumer"

# What decides how a snapshot is cut into splits, with Paimon's defaults
# (Java CoreOptions SOURCE_SPLIT_TARGET_SIZE, SOURCE_SPLIT_OPEN_FILE_COST).
SIZING_DEFAULTS = {"source.split.target-size": "128 mb", "source.split.open-file-cost": "4 mb"}


def consumer_key(table: str, branch: str, consumer_id: str) -> str:
    return f"{table}@{branch}/{consumer_id}"


def spark_fields(consumer: str) -> list:
    """The columns the source adds, in order."""
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField

    return [
        StructField(EPOCH, LongType(), False, metadata={CONSUMER_METADATA: consumer}),
        StructField(SNAPSHOT, LongType(), False),
        StructField(FULL, BooleanType(), False),
        StructField(SPLIT, IntegerType(), False),
        StructField(ROW, LongType(), False),
        StructField(PLAN, StringType(), False),
    ]


def check_table_columns(names: Iterable[str]) -> None:
    """A table whose own columns start with `_tidemark_` cannot carry
    positions: a sink could not tell the two apart."""
    clashing = sorted(n for n in names if n.lower().startswith(PREFIX))
    if clashing:
        raise ValueError(
            f"tidemark.sink-columns=true adds columns named {PREFIX}*, and the table already has "
            f"{', '.join(clashing)}: rename them, or read without sink columns"
        )


def sizing(effective: Dict[str, str]) -> Dict[str, str]:
    """The split sizing a snapshot is planned with (the table's options with
    the query's over them; Paimon's defaults where neither sets one)."""
    return {key: effective.get(key, default) for key, default in SIZING_DEFAULTS.items()}


def plan_fingerprint(identities: List[str], sizing_options: Dict[str, str]) -> str:
    """`<digest>;splits=<n>;<option>=<value>;...`: the digest of one snapshot
    plan's splits in order (their files), how many there are, and the sizing
    it was planned with, so a sink that finds another plan for a snapshot it
    recorded can name what changed."""
    digest = hashlib.sha256()
    for identity in identities:
        digest.update(identity.encode())
        digest.update(b"\n")
    parts = [digest.hexdigest()[:16], f"splits={len(identities)}"]
    parts += [f"{key}={value}" for key, value in sorted(sizing_options.items())]
    return ";".join(parts)


@dataclass(frozen=True)
class Plan:
    """A parsed `_tidemark_plan`."""

    digest: str
    splits: int
    sizing: Dict[str, str]

    @staticmethod
    def parse(text: str) -> "Plan":
        digest, *rest = (text or "").split(";")
        fields = dict(part.split("=", 1) for part in rest if "=" in part)
        splits = int(fields.pop("splits", "0") or 0)
        return Plan(digest, splits, fields)

    def changed_options(self, other: "Plan") -> List[str]:
        """The sizing options whose values differ between two plans."""
        keys = sorted(set(self.sizing) | set(other.sizing))
        return [f"{k} ({self.sizing.get(k)} -> {other.sizing.get(k)})" for k in keys if self.sizing.get(k) != other.sizing.get(k)]


# A row's place in the stream: snapshot, then a full scan before the deltas
# of the same snapshot, then the split, then the row.
Position = Tuple[int, int, int, int]


def position(snapshot: int, full: bool, split: int, row: int) -> Position:
    return (int(snapshot), 0 if full else 1, int(split), int(row))


def describe(at: Optional[Position]) -> str:
    if at is None:
        return "nothing"
    snapshot, kind, split, row = at
    return f"snapshot {snapshot} ({'full scan' if kind == 0 else 'delta'}) split {split} row {row}"


def with_positions(batch, epoch: int, snapshot: int, full: bool, split: int, first_row: int, plan: str):
    """`batch` (an Arrow record batch) with the six position columns."""
    import pyarrow as pa

    n = batch.num_rows
    arrays = list(batch.columns) + [
        pa.repeat(pa.scalar(epoch, pa.int64()), n),
        pa.repeat(pa.scalar(snapshot, pa.int64()), n),
        pa.repeat(pa.scalar(full, pa.bool_()), n),
        pa.repeat(pa.scalar(split, pa.int32()), n),
        pa.array(range(first_row, first_row + n), pa.int64()),
        pa.repeat(pa.scalar(plan, pa.string()), n),
    ]
    types = (pa.int64(), pa.int64(), pa.bool_(), pa.int32(), pa.int64(), pa.string())
    schema = batch.schema
    for name, kind in zip(COLUMNS, types):
        schema = schema.append(pa.field(name, kind, nullable=False))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
