//! What the workers saw while the database's primary changed (a failover
//! or a switchover of the Patroni cluster): the longest time no commit was
//! acknowledged, which answers they got meanwhile, and whether the
//! replicas' readiness said so.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cluster::PrimaryChange;
use crate::record::Record;

/// One change of primary, as the workers saw it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Outage {
    /// failover or switchover.
    pub kind: String,
    /// `pg0 -> pg2`.
    pub members: String,
    /// Until the balancer routed to the new primary (the control script's
    /// figure).
    pub routed_ms: i64,
    /// The worker-visible unavailability: the longest time, from the
    /// fault's start until a while after the new primary was routed to, in
    /// which no worker had a commit acknowledged. `None` when none was
    /// acknowledged after the change at all.
    pub unavailable_ms: Option<f64>,
    /// Calls answered with an error in that time, by code.
    pub failed_calls: BTreeMap<String, u64>,
    /// Whether any replica reported NOT_SERVING in that time.
    pub not_ready_seen: bool,
}

/// One readiness probe of one replica: `None` when it did not answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadinessSample {
    pub t: i64,
    pub serving: Option<bool>,
}

/// How long after the new primary was routed to the workers are watched.
const WATCH_AFTER_ROUTED_US: i64 = 30_000_000;

/// The outages behind `changes`.
pub(crate) fn outages(
    changes: &[(String, PrimaryChange)],
    records: &[Record],
    readiness: &[ReadinessSample],
) -> Vec<Outage> {
    let mut acknowledged: Vec<i64> = records
        .iter()
        .filter(|r| r.op == "commit" && r.ok())
        .map(|r| r.t1)
        .collect();
    acknowledged.sort_unstable();
    changes
        .iter()
        .enumerate()
        .map(|(i, (kind, change))| {
            let routed = change.t0 + change.routed_ms * 1000;
            // Not into the next change's outage.
            let next = changes.get(i + 1).map_or(i64::MAX, |(_, c)| c.t0);
            let end = (routed + WATCH_AFTER_ROUTED_US).min(next);
            let recovered = acknowledged.iter().any(|&t| t > routed && t <= end);
            // The longest silence among the answers from the fault on.
            let mut points = vec![change.t0];
            points.extend(acknowledged.iter().copied().filter(|&t| t > change.t0 && t <= end));
            let silence = points
                .windows(2)
                .map(|w| (w[0], w[1]))
                .max_by_key(|(a, b)| b - a)
                .filter(|_| recovered);
            let (from, to) = silence.unwrap_or((change.t0, end));
            let mut failed_calls = BTreeMap::new();
            for r in records.iter().filter(|r| !r.ok() && r.t1 >= from && r.t1 <= to) {
                *failed_calls.entry(r.code.clone()).or_default() += 1;
            }
            let not_ready_seen = readiness
                .iter()
                .any(|s| s.t >= from && s.t <= to && s.serving == Some(false));
            Outage {
                kind: kind.clone(),
                members: change.members.clone(),
                routed_ms: change.routed_ms,
                unavailable_ms: silence.map(|(a, b)| (b - a) as f64 / 1000.0),
                failed_calls,
                not_ready_seen,
            }
        })
        .collect()
}

/// Violations: a change after which no commit was ever acknowledged, and
/// an outage long enough for readiness probes (`probe_every_ms`) to see
/// that none did.
pub(crate) fn violations(outages: &[Outage], probe_every_ms: f64) -> Vec<String> {
    let mut found = Vec::new();
    for o in outages {
        match o.unavailable_ms {
            None => found.push(format!(
                "{} {}: no commit was acknowledged afterwards",
                o.kind, o.members
            )),
            Some(ms) if ms > 6.0 * probe_every_ms && o.routed_ms as f64 > 6.0 * probe_every_ms && !o.not_ready_seen => {
                found.push(format!(
                    "{} {}: no primary for {} ms, yet no replica reported NOT_SERVING",
                    o.kind, o.members, o.routed_ms
                ));
            }
            Some(_) => {}
        }
    }
    found
}

/// Median and max of the outages' unavailability of `kind`.
pub(crate) fn spread(outages: &[Outage], kind: &str) -> Option<(f64, f64, usize)> {
    let mut times: Vec<f64> = outages
        .iter()
        .filter(|o| o.kind == kind)
        .filter_map(|o| o.unavailable_ms)
        .collect();
    if times.is_empty() {
        return None;
    }
    times.sort_by(f64::total_cmp);
    Some((times[times.len() / 2], times[times.len() - 1], times.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(t0_ms: i64, t1_ms: i64, code: &str) -> Record {
        Record {
            op: "commit".into(),
            t0: t0_ms * 1000,
            t1: t1_ms * 1000,
            code: code.into(),
            ..Record::default()
        }
    }

    #[test]
    fn an_outage_is_the_longest_time_without_an_acknowledged_commit() {
        let change = PrimaryChange {
            members: "pg0 -> pg1".into(),
            routed_ms: 20_000,
            t0: 1_000_000,
        };
        let records = vec![
            // Sent before the fault, acknowledged just after it (the
            // primary had not died yet).
            commit(999, 1_004, "Ok"),
            commit(1_100, 1_200, "Unavailable"),
            commit(5_000, 5_010, "Unavailable"),
            commit(21_000, 21_500, "Ok"),
            commit(22_000, 22_010, "Ok"),
        ];
        let readiness = [ReadinessSample {
            t: 3_000_000,
            serving: Some(false),
        }];
        let outages = outages(&[("failover".into(), change)], &records, &readiness);
        assert_eq!(outages[0].unavailable_ms, Some(20_496.0));
        assert_eq!(outages[0].failed_calls.get("Unavailable"), Some(&2));
        assert!(outages[0].not_ready_seen);
        assert!(violations(&outages, 500.0).is_empty());
        assert_eq!(spread(&outages, "failover"), Some((20_496.0, 20_496.0, 1)));
    }

    #[test]
    fn a_long_outage_readiness_missed_or_no_recovery_is_a_violation() {
        let change = PrimaryChange {
            members: "pg0 -> pg1".into(),
            routed_ms: 20_000,
            t0: 1_000_000,
        };
        let records = vec![commit(21_000, 21_500, "Ok")];
        let blind = outages(&[("failover".into(), change.clone())], &records, &[]);
        assert!(violations(&blind, 500.0)[0].contains("NOT_SERVING"));
        // Acknowledged before the new primary was routed to, never after.
        let stuck = outages(&[("failover".into(), change)], &[commit(1_001, 1_002, "Ok")], &[]);
        assert!(violations(&stuck, 500.0)[0].contains("no commit"));
    }
}
