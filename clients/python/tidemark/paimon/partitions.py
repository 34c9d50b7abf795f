"""What a Spark task receives: a batch's splits grouped into partitions, and
what an executor needs to read them — the table's location and storage
options, the query's read options and columns, the lease epoch. Never the
tidemark endpoint, token or TLS files: executors do not call tidemark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from pyspark.sql.datasource import InputPartition

from tidemark.paimon.plan import Planned

# Spark's open cost per file (`spark.sql.files.openCostInBytes`).
OPEN_COST_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ReadSpec:
    """How an executor opens and reads the table."""

    path: str
    branch: str
    storage: Dict[str, str]
    split_overrides: Dict[str, str]
    read_overrides: Dict[str, str]
    schema: object  # the query's Spark StructType
    fields: Optional[List[Tuple[int, str]]] = None  # read.query_fields
    epoch_column: Optional[str] = None
    # tidemark.sink-columns: each row's table position (positions.py).
    sink_columns: bool = False


class SplitsPartition(InputPartition):
    """Consecutive planned splits of a batch, read one after the other by
    one Spark task."""

    def __init__(
        self,
        spec: ReadSpec,
        planned: List[Planned],
        epoch: int,
        positions: Optional[List[Tuple[int, int, bool]]] = None,
        plans: Optional[Dict[Tuple[int, bool], str]] = None,
    ):
        super().__init__(1)
        self.spec = spec
        self.planned = planned
        # The lease epoch the batch was planned under.
        self.epoch = epoch
        # With sink columns: each split's (snapshot, index, full) and the
        # fingerprint of each snapshot plan they come from.
        self.positions = positions
        self.plans = plans


def group_splits(
    planned: List[Planned], target_bytes: int, min_partitions: int = 1, keep_buckets_together: bool = False
) -> List[List[Planned]]:
    """A batch's splits as Spark partitions, each reading its splits in the
    batch's order. Each split weighs its data files' bytes plus Spark's 4 MB
    open cost.

    As Paimon's Spark batch scan packs (Java `BinPackingSplits`
    `computeMaxSplitBytes`: at most `spark.sql.files.maxPartitionBytes`, and
    the total over Spark's default parallelism when that is less), there are
    `max(min_partitions, total / target_bytes)` partitions of about equal
    weight, never more than there are splits: a small batch still keeps every
    core busy, and a large one is read about `target_bytes` per task.

    With `keep_buckets_together` (tables whose buckets have an order: see
    `ReadOptions.ordered_buckets`) every split of one (partition, bucket) is
    read by one task, in order, so a key's changes from several snapshots of
    one batch reach a sink in commit order even when it writes task by task;
    a bucket is then never cut, whatever its size. Otherwise partitions are
    runs of consecutive splits.

    Paimon's Spark streaming source makes one partition per split; a task of
    a Python source costs about 0.2 s of Spark's and PySpark's own work
    before its first row, which one partition per small split pays again
    and again (docs/spark.md, "Throughput"). `target_bytes` 0: one split per
    partition."""
    if target_bytes <= 0:
        return [[split] for split in planned]
    weights = [split.stats()[1] + OPEN_COST_BYTES for split in planned]
    total = sum(weights)
    wanted = max(min_partitions, -(-total // target_bytes))
    if keep_buckets_together:
        lanes: Dict[tuple, List[int]] = {}
        for index, split in enumerate(planned):
            lanes.setdefault(split.lane(), []).append(index)
        count = min(len(lanes), wanted)
        # The heaviest bucket first, each to the least loaded task (ties to
        # the first), then each task's splits in the batch's order.
        loads = [0] * count
        tasks: List[List[int]] = [[] for _ in range(count)]
        by_weight = sorted(lanes.values(), key=lambda lane: (-sum(weights[i] for i in lane), lane[0]))
        for lane in by_weight:
            task = loads.index(min(loads))
            tasks[task] += lane
            loads[task] += sum(weights[i] for i in lane)
        ordered = sorted((sorted(task) for task in tasks if task), key=lambda task: task[0])
        return [[planned[i] for i in task] for task in ordered]
    count = min(len(planned), wanted)
    if count == 0:
        return []
    share = total / count
    runs: List[List[Planned]] = [[] for _ in range(count)]
    before = 0
    for split, weight in zip(planned, weights):
        # By where the split's middle falls: runs stay consecutive, and each
        # is within half a split of an equal share.
        runs[min(count - 1, int((before + weight / 2) // share))].append(split)
        before += weight
    return [run for run in runs if run]
