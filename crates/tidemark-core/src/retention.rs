//! Retention fences (SPEC E4, E5).
//!
//! Snapshot ids strictly below a fence may be expired; the fence itself is
//! protected. Storage finds the lowest unexpired consumer and the lowest
//! live full-scan pin of a branch (indexed queries, so this stays fast with
//! many consumers); these rules combine them.

use crate::options::TableOptions;

/// The lowest positions holding a branch's retention back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FenceInputs {
    /// Lowest `next_snapshot` among unexpired consumers.
    pub consumer_min: Option<i64>,
    /// Lowest snapshot pinned by a live lease's in-progress initial full scan.
    pub pin_min: Option<i64>,
}

/// A branch's fences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fences {
    /// Snapshots below it may be expired; `None`: nothing fences snapshots.
    pub snapshot: Option<i64>,
    /// Changelogs below it may be expired; `None`: nothing fences changelogs.
    pub changelog: Option<i64>,
    /// Whether `consumer.changelog-only` took effect (consumers then do not
    /// fence snapshots).
    pub changelog_only: bool,
}

impl Fences {
    /// Whether the consumers at `consumer_min` set the snapshot fence.
    pub fn snapshot_set_by_consumers(&self, inputs: &FenceInputs) -> bool {
        !self.changelog_only && self.snapshot.is_some() && self.snapshot == inputs.consumer_min
    }

    /// Whether the pins at `pin_min` set the snapshot fence.
    pub fn snapshot_set_by_pins(&self, inputs: &FenceInputs) -> bool {
        self.snapshot.is_some() && self.snapshot == inputs.pin_min
    }

    /// Whether the consumers at `consumer_min` set the changelog fence.
    pub fn changelog_set_by_consumers(&self, inputs: &FenceInputs) -> bool {
        self.changelog.is_some() && self.changelog == inputs.consumer_min
    }

    /// Whether the pins at `pin_min` set the changelog fence.
    pub fn changelog_set_by_pins(&self, inputs: &FenceInputs) -> bool {
        self.changelog.is_some() && self.changelog == inputs.pin_min
    }
}

fn min(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// E4 + E5: the snapshot fence is the lowest unexpired consumer — ignored
/// when `consumer.changelog-only` is set and the changelog lifecycle is
/// decoupled — and the lowest full-scan pin; the changelog fence is the
/// lowest of all unexpired consumers and pins. A pin always protects its
/// snapshot: an initial full scan reads the snapshot itself.
pub fn fences(options: &TableOptions, changelog_decoupled: bool, inputs: &FenceInputs) -> Fences {
    let pin_min = if crate::mutant!("fence_ignores_pins") {
        None
    } else {
        inputs.pin_min
    };
    let changelog_only = options.changelog_only_effective(changelog_decoupled);
    let consumers_for_snapshots = if changelog_only { None } else { inputs.consumer_min };
    Fences {
        snapshot: min(consumers_for_snapshots, pin_min),
        changelog: min(inputs.consumer_min, pin_min),
        changelog_only,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(consumer_min: Option<i64>, pin_min: Option<i64>) -> FenceInputs {
        FenceInputs { consumer_min, pin_min }
    }

    #[test]
    fn e4_fences_are_the_lowest_unexpired_consumer() {
        let f = fences(&TableOptions::default(), false, &inputs(Some(7), None));
        assert_eq!((f.snapshot, f.changelog, f.changelog_only), (Some(7), Some(7), false));
        let none = fences(&TableOptions::default(), false, &inputs(None, None));
        assert_eq!((none.snapshot, none.changelog), (None, None));
    }

    #[test]
    fn e4_changelog_only_frees_snapshots_only_when_decoupled() {
        let opts = TableOptions {
            changelog_only: true,
            ..TableOptions::default()
        };
        let decoupled = fences(&opts, true, &inputs(Some(7), None));
        assert_eq!(
            (decoupled.snapshot, decoupled.changelog, decoupled.changelog_only),
            (None, Some(7), true)
        );
        let coupled = fences(&opts, false, &inputs(Some(7), None));
        assert_eq!(
            (coupled.snapshot, coupled.changelog, coupled.changelog_only),
            (Some(7), Some(7), false)
        );
    }

    #[test]
    fn e5_pins_hold_both_fences_even_when_changelog_only() {
        let opts = TableOptions {
            changelog_only: true,
            ..TableOptions::default()
        };
        let i = inputs(Some(9), Some(4));
        let f = fences(&opts, true, &i);
        assert_eq!((f.snapshot, f.changelog), (Some(4), Some(4)));
        assert!(f.snapshot_set_by_pins(&i) && !f.snapshot_set_by_consumers(&i));
        let i = inputs(Some(3), Some(4));
        let f = fences(&TableOptions::default(), false, &i);
        assert_eq!(f.snapshot, Some(3));
        assert!(f.snapshot_set_by_consumers(&i) && !f.snapshot_set_by_pins(&i));
    }
}
