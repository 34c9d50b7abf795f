//! A6: where a bulk reset moves each consumer, with Kafka's vocabulary of
//! targets (SPEC §11), and the one rule for "the first snapshot at or after
//! a time".

use crate::error::CoreError;

/// Where `ResetConsumers` moves the selected consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    /// This snapshot id (>= 1).
    Snapshot(i64),
    /// The earliest live snapshot.
    Earliest,
    /// The latest snapshot + 1: skip everything there is.
    Latest,
    /// The first snapshot committed at or after this time (Unix ms).
    Time(i64),
    /// Each consumer's own position moved by n snapshots (negative: back),
    /// clamped to [earliest, latest + 1].
    ShiftBy(i64),
}

impl ResetTarget {
    /// Whether resolving it needs the table's snapshots (a registered
    /// table).
    pub fn needs_snapshots(self) -> bool {
        !matches!(self, ResetTarget::Snapshot(_))
    }
}

/// What the table's directory says, for targets that need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSnapshots {
    /// The earliest live snapshot.
    pub earliest: i64,
    /// The latest snapshot.
    pub latest: i64,
    /// For a time target: the first snapshot at or after the time (`None`:
    /// every snapshot was committed before it).
    pub first_at_time: Option<i64>,
}

/// The position a consumer now at `current` is moved to.
pub fn resolve(target: ResetTarget, current: Option<i64>, table: Option<TableSnapshots>) -> Result<i64, CoreError> {
    if let ResetTarget::Snapshot(id) = target {
        return if id >= 1 {
            Ok(id)
        } else {
            Err(CoreError::invalid("target.snapshot", "must be >= 1"))
        };
    }
    let Some(table) = table else {
        return Err(CoreError::invalid("target", "this target needs the table's snapshots"));
    };
    let after_latest = table.latest.saturating_add(1);
    Ok(match target {
        ResetTarget::Snapshot(_) => unreachable!("handled above"),
        ResetTarget::Earliest => table.earliest,
        ResetTarget::Latest => after_latest,
        ResetTarget::Time(_) => table.first_at_time.unwrap_or(after_latest),
        ResetTarget::ShiftBy(n) => {
            let from = current.unwrap_or(table.earliest);
            from.saturating_add(n).clamp(table.earliest.max(1), after_latest.max(1))
        }
    })
}

/// SPEC §11's one rule for "the first snapshot at or after a time", as
/// Paimon's from-timestamp start resolves it: the snapshot after the last
/// one committed strictly before the time; the earliest live snapshot when
/// none was; `None` (start after the latest) when all were. `snapshots` are
/// live `(id, commit time in ms)` pairs. The Spark source applies the same
/// rule (clients/python/tidemark/paimon_plan.py), checked against the same
/// vectors (testdata/first_snapshot_at_or_after.json).
pub fn first_snapshot_at_or_after(snapshots: &[(i64, i64)], at_millis: i64) -> Option<i64> {
    let earliest = snapshots.iter().map(|(id, _)| *id).min()?;
    let latest = snapshots.iter().map(|(id, _)| *id).max()?;
    match snapshots
        .iter()
        .filter(|(_, millis)| *millis < at_millis)
        .map(|(id, _)| *id)
        .max()
    {
        None => Some(earliest),
        Some(last_before) => (last_before < latest).then_some(last_before + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: TableSnapshots = TableSnapshots {
        earliest: 10,
        latest: 20,
        first_at_time: Some(15),
    };

    #[test]
    fn every_target_resolves_as_spec_11_says() {
        assert_eq!(resolve(ResetTarget::Snapshot(7), Some(12), None).unwrap(), 7);
        assert!(resolve(ResetTarget::Snapshot(0), None, None).is_err());
        assert_eq!(resolve(ResetTarget::Earliest, Some(12), Some(TABLE)).unwrap(), 10);
        assert_eq!(resolve(ResetTarget::Latest, Some(12), Some(TABLE)).unwrap(), 21);
        assert_eq!(resolve(ResetTarget::Time(0), Some(12), Some(TABLE)).unwrap(), 15);
        let all_before = TableSnapshots {
            first_at_time: None,
            ..TABLE
        };
        assert_eq!(resolve(ResetTarget::Time(0), Some(12), Some(all_before)).unwrap(), 21);
        assert_eq!(resolve(ResetTarget::ShiftBy(3), Some(12), Some(TABLE)).unwrap(), 15);
        assert_eq!(
            resolve(ResetTarget::ShiftBy(-5), Some(12), Some(TABLE)).unwrap(),
            10,
            "clamped"
        );
        assert_eq!(
            resolve(ResetTarget::ShiftBy(50), Some(12), Some(TABLE)).unwrap(),
            21,
            "clamped"
        );
        assert_eq!(
            resolve(ResetTarget::ShiftBy(i64::MIN), Some(12), Some(TABLE)).unwrap(),
            10
        );
        assert!(resolve(ResetTarget::Earliest, Some(12), None).is_err());
        assert!(ResetTarget::ShiftBy(1).needs_snapshots() && !ResetTarget::Snapshot(1).needs_snapshots());
    }

    #[test]
    fn the_time_rule_agrees_with_the_shared_vectors() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../../testdata/first_snapshot_at_or_after.json")).unwrap();
        let cases = vectors["cases"].as_array().unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            let snapshots: Vec<(i64, i64)> = case["snapshots"]
                .as_array()
                .unwrap()
                .iter()
                .map(|pair| (pair[0].as_i64().unwrap(), pair[1].as_i64().unwrap()))
                .collect();
            let got = first_snapshot_at_or_after(&snapshots, case["at"].as_i64().unwrap());
            assert_eq!(got, case["expect"].as_i64(), "{}", case["name"]);
        }
    }
}
