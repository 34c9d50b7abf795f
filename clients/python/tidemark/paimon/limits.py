"""How much one micro-batch reads: Paimon's Spark read limits
(`read.stream.maxFilesPerTrigger`, `read.stream.maxBytesPerTrigger`,
`read.stream.maxRowsPerTrigger`, `read.stream.minRowsPerTrigger` with
`read.stream.maxTriggerDelayMs`), applied split by split as Paimon's
`PaimonReadLimits` / `PaimonReadLimitGuard` apply them:

- a split is admitted while every maximum is still above what the batch
  admitted before it (so the first split of a batch is always admitted, and
  a batch may pass a row or byte maximum by its last split); a split counts
  as one file (Paimon counts splits), with the row counts and sizes of its
  data files;
- with a minimum, a batch of fewer rows is not made (the query waits for
  more) unless more than `maxTriggerDelayMs` passed since the last batch.

Keys are matched case-insensitively, as Spark passes options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

MAX_FILES = "read.stream.maxFilesPerTrigger"
MAX_BYTES = "read.stream.maxBytesPerTrigger"
MAX_ROWS = "read.stream.maxRowsPerTrigger"
MIN_ROWS = "read.stream.minRowsPerTrigger"
MAX_DELAY_MS = "read.stream.maxTriggerDelayMs"
# tidemark's own name for the file limit (before Paimon's was supported).
MAX_SPLITS = "max-splits-per-batch"

KEYS = (MAX_FILES, MAX_BYTES, MAX_ROWS, MIN_ROWS, MAX_DELAY_MS)


@dataclass(frozen=True)
class TriggerLimits:
    max_files: Optional[int] = None
    max_bytes: Optional[int] = None
    max_rows: Optional[int] = None
    min_rows: Optional[int] = None
    max_delay_ms: Optional[int] = None

    @staticmethod
    def from_options(get: Callable[[str], Optional[str]]) -> "TriggerLimits":
        """Reads the limits with `get(lower-case key)`; a bad value raises
        ValueError naming the option."""

        def number(key: str, minimum: int) -> Optional[int]:
            raw = get(key.lower())
            if raw is None:
                return None
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ValueError(f'option "{key}" must be a whole number, not {raw!r}') from None
            if value < minimum:
                raise ValueError(f'option "{key}" must be at least {minimum}, not {value}')
            return value

        max_files = number(MAX_FILES, 1)
        max_splits = number(MAX_SPLITS, 0) or None  # 0: no limit, as before
        if max_files is None or (max_splits is not None and max_splits < max_files):
            max_files = max_splits
        min_rows, max_delay = number(MIN_ROWS, 0), number(MAX_DELAY_MS, 0)
        if (min_rows is None) != (max_delay is None):
            # Paimon's PaimonMicroBatchStream refuses this too.
            raise ValueError(f'options "{MIN_ROWS}" and "{MAX_DELAY_MS}" go together: set both or neither')
        return TriggerLimits(max_files, number(MAX_BYTES, 1), number(MAX_ROWS, 1), min_rows, max_delay)

    def any(self) -> bool:
        return any(v is not None for v in (self.max_files, self.max_bytes, self.max_rows, self.min_rows))

    def describe(self) -> Dict[str, int]:
        return {
            key: value
            for key, value in (
                (MAX_FILES, self.max_files),
                (MAX_BYTES, self.max_bytes),
                (MAX_ROWS, self.max_rows),
                (MIN_ROWS, self.min_rows),
                (MAX_DELAY_MS, self.max_delay_ms),
            )
            if value is not None
        }

    def guard(self, last_batch_ms: int, now_ms: int) -> "BatchGuard":
        return BatchGuard(self, last_batch_ms, now_ms)


class BatchGuard:
    """One batch's admission of splits (Java `PaimonReadLimitGuard`)."""

    def __init__(self, limits: TriggerLimits, last_batch_ms: int, now_ms: int):
        self.limits = limits
        self.files = 0
        self.bytes = 0
        self.rows = 0
        self._has_capacity = True
        # Only a batch within the delay may be held back for too few rows.
        self._may_skip = limits.min_rows is not None and now_ms - last_batch_ms <= limits.max_delay_ms

    def admit(self, rows: int, size: int) -> bool:
        """Whether a split of `rows` rows and `size` bytes joins the batch;
        once one is refused, every later one is."""
        if not self._has_capacity:
            return False
        limits = self.limits
        self._has_capacity = (
            (limits.max_files is None or self.files < limits.max_files)
            and (limits.max_rows is None or self.rows < limits.max_rows)
            and (limits.max_bytes is None or self.bytes < limits.max_bytes)
        )
        self.files += 1
        self.rows += rows
        self.bytes += size
        if self._may_skip:
            self._may_skip = self.rows < limits.min_rows
        return self._has_capacity

    @property
    def skip_batch(self) -> bool:
        """True when the batch has fewer rows than the minimum and the delay
        has not passed: no batch now."""
        return self._may_skip
