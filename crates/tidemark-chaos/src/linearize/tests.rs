//! Histories with a known answer: each valid one must pass and each
//! invalid one must fail, so the search is shown able to fail.

use super::{SLACK_US, Verdict, check_key};
use crate::record::Record;

const MS: i64 = 1_000;
const TTL: i64 = 1_500 * MS;

/// A history under construction: one call per line.
#[derive(Default)]
struct H(Vec<Record>);

impl H {
    fn call(mut self, worker: u32, op: &str, t0_ms: i64, t1_ms: i64, tweak: impl FnOnce(&mut Record)) -> Self {
        let mut r = Record {
            worker,
            op: op.into(),
            key: "k".into(),
            t0: t0_ms * MS,
            t1: t1_ms * MS,
            code: "Ok".into(),
            ..Record::default()
        };
        tweak(&mut r);
        self.0.push(r);
        self
    }

    fn acquire(self, worker: u32, lease: &str, epoch: i64, t0: i64, t1: i64) -> Self {
        self.call(worker, "acquire", t0, t1, |r| {
            (r.lease, r.epoch, r.ttl_us) = (lease.into(), epoch, TTL);
        })
    }

    fn held(self, worker: u32, t0: i64, t1: i64) -> Self {
        self.call(worker, "acquire", t0, t1, |r| {
            (r.code, r.reason) = ("FailedPrecondition".into(), "LEASE_HELD".into());
        })
    }

    fn lost_acquire(self, worker: u32, t0: i64) -> Self {
        self.call(worker, "acquire", t0, t0 + 3_000, |r| r.code = "Unavailable".into())
    }

    /// A commit of a complete snapshot `snapshot` (position snapshot + 1).
    /// Calls closer than twice the slack (10 ms) count as concurrent.
    fn commit(
        self,
        worker: u32,
        (lease, epoch): (&str, i64),
        batch: i64,
        snapshot: i64,
        t: (i64, i64),
        outcome: &str,
    ) -> Self {
        self.call(worker, "commit", t.0, t.1, |r| {
            (r.lease, r.epoch, r.batch, r.end) = (lease.into(), epoch, batch, (snapshot, 0, 1));
            match outcome {
                "LOST" => r.code = "Unavailable".into(),
                "LEASE_NOT_HELD" | "BATCH_CONFLICT" | "POSITION_REGRESSION" => {
                    (r.code, r.reason) = ("FailedPrecondition".into(), outcome.into());
                }
                _ => {
                    r.outcome = format!("COMMIT_OUTCOME_{outcome}");
                    r.next = Some(snapshot + 1);
                    r.ttl_us = TTL;
                }
            }
        })
    }

    fn recover(self, worker: u32, lease: &str, epoch: i64, t: (i64, i64), start: Option<i64>) -> Self {
        self.call(worker, "recover", t.0, t.1, |r| {
            (r.lease, r.epoch, r.next) = (lease.into(), epoch, start);
            r.outcome = if start.is_some() {
                "RECOVERY_SOURCE_CONSUMER"
            } else {
                "RECOVERY_SOURCE_STARTUP_OPTIONS"
            }
            .into();
        })
    }

    fn release(self, worker: u32, lease: &str, epoch: i64, t: (i64, i64), released: bool) -> Self {
        self.call(worker, "release", t.0, t.1, |r| {
            (r.lease, r.epoch) = (lease.into(), epoch);
            r.outcome = if released { "RELEASED" } else { "NOT_HELD" }.into();
        })
    }

    fn verdict(&self) -> Verdict {
        let records: Vec<&Record> = self.0.iter().collect();
        check_key(&records, 100_000, SLACK_US)
    }

    fn passes(&self) -> bool {
        matches!(self.verdict(), Verdict::Linearizable { .. })
    }

    fn fails(&self) -> bool {
        matches!(self.verdict(), Verdict::Violation { .. })
    }
}

fn streaming() -> H {
    H::default()
        .acquire(0, "a", 1, 0, 2)
        .recover(0, "a", 1, (3, 4), None)
        .commit(0, ("a", 1), 0, 10, (5, 6), "CREATED")
        .commit(0, ("a", 1), 1, 11, (7, 8), "ADVANCED")
}

#[test]
fn a_plain_stream_and_a_handover_pass() {
    let h = streaming()
        .held(1, 10, 11)
        .release(0, "a", 1, (20, 21), true)
        .acquire(1, "b", 2, 30, 31)
        .recover(1, "b", 2, (32, 33), Some(12))
        .commit(1, ("b", 2), 0, 12, (34, 35), "ADVANCED")
        .commit(0, ("a", 1), 2, 12, (40, 41), "LEASE_NOT_HELD");
    assert!(h.passes(), "{:?}", h.verdict());
}

#[test]
fn a_grant_over_a_live_lease_fails() {
    // The first lease was renewed by its commit at 7-8 ms: live until 1.5 s.
    let h = streaming().acquire(1, "b", 2, 100, 101);
    assert!(h.fails(), "{:?}", h.verdict());
    // After its deadline (with the slack), the takeover is fine.
    assert!(streaming().acquire(1, "b", 2, 1_520, 1_521).passes());
    // And the same holder may take over at once (L3).
    assert!(streaming().acquire(0, "b", 2, 100, 101).passes());
}

#[test]
fn a_commit_accepted_after_expiry_or_takeover_fails() {
    let late = streaming().commit(0, ("a", 1), 2, 12, (1_600, 1_601), "ADVANCED");
    assert!(late.fails(), "{:?}", late.verdict());
    let fenced = streaming()
        .acquire(0, "b", 2, 100, 101)
        .commit(0, ("a", 1), 2, 12, (120, 121), "ADVANCED");
    assert!(fenced.fails(), "{:?}", fenced.verdict());
    // Refused as not held before its deadline: the lease was live.
    let early = streaming().commit(0, ("a", 1), 2, 12, (100, 101), "LEASE_NOT_HELD");
    assert!(early.fails(), "{:?}", early.verdict());
}

#[test]
fn a_stale_or_invented_position_fails() {
    let stale = streaming()
        .release(0, "a", 1, (20, 21), true)
        .acquire(1, "b", 2, 30, 31)
        .recover(1, "b", 2, (32, 33), Some(11));
    assert!(stale.fails(), "{:?}", stale.verdict());
    let wrong_outcome = streaming().commit(0, ("a", 1), 2, 9, (10, 11), "REWOUND");
    assert!(wrong_outcome.fails(), "{:?}", wrong_outcome.verdict());
    let regression = streaming().commit(0, ("a", 1), 2, 9, (10, 11), "POSITION_REGRESSION");
    assert!(regression.passes(), "{:?}", regression.verdict());
}

#[test]
fn a_lost_answer_may_or_may_not_have_taken_effect() {
    let took = streaming()
        .commit(0, ("a", 1), 2, 20, (10, 11), "LOST")
        .release(0, "a", 1, (20, 21), true)
        .acquire(1, "b", 2, 30, 31)
        .recover(1, "b", 2, (32, 33), Some(21));
    assert!(took.passes(), "{:?}", took.verdict());
    let not_taken = streaming()
        .commit(0, ("a", 1), 2, 20, (10, 11), "LOST")
        .release(0, "a", 1, (20, 21), true)
        .acquire(1, "b", 2, 30, 31)
        .recover(1, "b", 2, (32, 33), Some(12));
    assert!(not_taken.passes(), "{:?}", not_taken.verdict());
    let invented = streaming()
        .commit(0, ("a", 1), 2, 20, (10, 11), "LOST")
        .release(0, "a", 1, (20, 21), true)
        .acquire(1, "b", 2, 30, 31)
        .recover(1, "b", 2, (32, 33), Some(30));
    assert!(invented.fails(), "{:?}", invented.verdict());
}

#[test]
fn epochs_count_every_grant_even_unanswered_ones() {
    let skipped = streaming()
        .release(0, "a", 1, (20, 21), true)
        .acquire(1, "b", 3, 30, 31);
    assert!(skipped.fails(), "{:?}", skipped.verdict());
    let explained = streaming()
        .release(0, "a", 1, (20, 21), true)
        .lost_acquire(2, 22)
        .acquire(2, "b", 3, 30, 31);
    assert!(explained.passes(), "{:?}", explained.verdict());
}

#[test]
fn concurrent_calls_may_go_in_either_order() {
    // A recovery overlapping a commit may see the position before or after.
    for seen in [12, 13] {
        let h = streaming()
            .commit(0, ("a", 1), 2, 12, (10, 20), "ADVANCED")
            .recover(0, "a", 1, (12, 14), Some(seen));
        assert!(h.passes(), "{seen}: {:?}", h.verdict());
    }
    // Not overlapping: only after.
    let h = streaming()
        .commit(0, ("a", 1), 2, 12, (10, 11), "ADVANCED")
        .recover(0, "a", 1, (30, 31), Some(12));
    assert!(h.fails(), "{:?}", h.verdict());
}

#[test]
fn a_budget_too_small_is_inconclusive_not_passed() {
    let h = streaming();
    let records: Vec<&Record> = h.0.iter().collect();
    assert!(matches!(check_key(&records, 2, SLACK_US), Verdict::Inconclusive { .. }));
}
