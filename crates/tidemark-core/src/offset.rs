//! Engine source offsets, shaped like Paimon's Spark source offset (SPEC §1).

use std::cmp::Ordering;
use std::fmt;

use crate::validate::{FieldViolation, Violations, path};

/// The split index of an offset that is before a snapshot's first split.
pub const BEFORE_FIRST_SPLIT: i64 = -1;

/// The highest snapshot id accepted anywhere, so that "the snapshot after"
/// (`id + 1`, a consumer's next snapshot) is always representable.
pub const MAX_SNAPSHOT_ID: i64 = i64::MAX - 1;

/// A source offset: a position inside one snapshot's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Offset {
    /// Snapshot the offset points into (>= 1).
    pub snapshot_id: i64,
    /// Last split read inside the snapshot's plan; -1 = before the first.
    pub index: i64,
    /// true = the snapshot is read as an initial full scan, false = as a delta.
    pub scan_snapshot: bool,
    /// Number of splits in the snapshot's plan; `None` for offsets restored
    /// from an older checkpoint (no completion metadata).
    pub total_splits: Option<i64>,
}

impl Offset {
    /// The start of `snapshot_id`, before its first split.
    pub fn start_of(snapshot_id: i64, scan_snapshot: bool) -> Self {
        Self {
            snapshot_id,
            index: BEFORE_FIRST_SPLIT,
            scan_snapshot,
            total_splits: None,
        }
    }

    /// C2: `snapshot_id >= 1`, `index >= -1`, `total_splits >= 1` when
    /// present, `index < total_splits`.
    pub fn validate(&self, prefix: &str) -> Result<(), Vec<FieldViolation>> {
        let mut v = Violations::new();
        if self.snapshot_id < 1 {
            v.add(
                path(prefix, "snapshot_id"),
                format!("must be >= 1 (got {})", self.snapshot_id),
            );
        } else if self.snapshot_id > MAX_SNAPSHOT_ID {
            v.add(
                path(prefix, "snapshot_id"),
                format!("must be <= {MAX_SNAPSHOT_ID} (got {})", self.snapshot_id),
            );
        }
        if self.index < BEFORE_FIRST_SPLIT {
            v.add(
                path(prefix, "index"),
                format!(
                    "must be >= -1, where -1 means before the first split (got {})",
                    self.index
                ),
            );
        }
        if let Some(total) = self.total_splits {
            if total < 1 {
                v.add(
                    path(prefix, "total_splits"),
                    format!("must be >= 1 when present (got {total})"),
                );
            } else if self.index >= total {
                v.add(
                    path(prefix, "index"),
                    format!("must be < total_splits ({total}) (got {})", self.index),
                );
            }
        }
        v.finish()
    }

    /// Whether the offset is at the last split of its snapshot. Offsets without
    /// completion metadata are never complete.
    pub fn is_complete(&self) -> bool {
        self.total_splits.is_some_and(|total| self.index == total - 1)
    }

    /// Orders offsets by `(snapshot_id, index)`, ignoring the scan kind, as
    /// Paimon's offset does.
    pub fn position_cmp(&self, other: &Offset) -> Ordering {
        (self.snapshot_id, self.index).cmp(&(other.snapshot_id, other.index))
    }

    fn scan_kind(&self) -> &'static str {
        if self.scan_snapshot { "full" } else { "delta" }
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(snapshot {}, index {}, {}",
            self.snapshot_id,
            self.index,
            self.scan_kind()
        )?;
        match self.total_splits {
            Some(total) => write!(f, ", {total} splits)"),
            None => write!(f, ", no total_splits)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(snapshot_id: i64, index: i64, total: Option<i64>) -> Offset {
        Offset {
            snapshot_id,
            index,
            scan_snapshot: false,
            total_splits: total,
        }
    }

    #[test]
    fn completeness() {
        assert!(off(3, 4, Some(5)).is_complete());
        assert!(!off(3, 3, Some(5)).is_complete());
        assert!(!off(3, -1, Some(5)).is_complete());
        assert!(off(3, 0, Some(1)).is_complete());
        assert!(!off(3, 4, None).is_complete());
    }

    #[test]
    fn validation_names_each_field() {
        assert!(off(1, -1, Some(1)).validate("end").is_ok());
        let fields =
            |o: Offset| -> Vec<String> { o.validate("end").unwrap_err().into_iter().map(|v| v.field).collect() };
        assert_eq!(fields(off(0, 0, Some(1))), ["end.snapshot_id"]);
        assert_eq!(fields(off(-5, 0, None)), ["end.snapshot_id"]);
        assert_eq!(fields(off(1, -2, None)), ["end.index"]);
        assert_eq!(fields(off(1, 0, Some(0))), ["end.total_splits"]);
        assert_eq!(fields(off(1, 3, Some(3))), ["end.index"]);
        assert_eq!(
            fields(off(0, -2, Some(-1))),
            ["end.snapshot_id", "end.index", "end.total_splits"]
        );
    }

    #[test]
    fn ordering_ignores_scan_kind() {
        let mut a = off(3, 1, Some(4));
        let b = off(3, 1, None);
        a.scan_snapshot = true;
        assert_eq!(a.position_cmp(&b), Ordering::Equal);
        assert_eq!(off(3, 5, None).position_cmp(&off(4, -1, None)), Ordering::Less);
    }
}
