//! A per-key linearizability check of what the clients saw, in the manner
//! of Wing & Gong and Lowe (the algorithm Porcupine and Knossos implement):
//! a depth-first search for one order of each key's calls that respects
//! real time and that the SPEC's sequential model accepts answer by answer.
//! Unlike the invariant checks in `check/mod.rs`, it trusts nothing the server
//! wrote about itself: only requests, answers and the clients' clocks.
//!
//! The model is the SPEC's, not a register. Every call takes effect at one
//! instant (the database's clock, which on this one host is the clients'
//! clock within [`SLACK_US`]) between its request and its answer; a lease
//! is live until its deadline, which the call that granted or renewed it
//! set to that instant plus its ttl. The search picks each call's instant
//! too: the earliest one the model allows, with the deadline kept as an
//! interval (earliest, latest) that later answers narrow. That relaxation
//! can only accept more histories, never fewer, so a key it fails has no
//! valid order at all: a failure is a real violation.
//!
//! A call whose answer was lost (a cut connection, a timeout, an
//! unavailable replica) may have taken effect at any instant after it was
//! sent, or never. The search tries both, which is what makes it
//! exponential in the worst case; each key gets a budget of search steps,
//! and a key that exhausts it is inconclusive (never counted as passed).
//!
//! The search (`linearize/search.rs`) is generic over the specification;
//! `linearize/porcupine.rs` checks it against Porcupine's published etcd
//! histories, whose verdicts are known.

mod search;

use std::collections::HashMap;

pub(crate) use search::Verdict;
use search::{Limits, Spec};

use crate::record::Record;

/// Slack for comparing times taken in different processes (µs): the
/// clients' clocks and the database's. Also covers the one-round-trip
/// path, which decides on an estimate of the database clock up to ~2 ms
/// behind it.
pub(crate) const SLACK_US: i64 = 5_000;

/// How long after it was sent a call whose answer was lost may still take
/// effect (µs). Generous against the runs' faults: a killed replica's
/// transaction dies with its connection, a paused one resumes within a
/// few seconds.
const LOST_ANSWER_HORIZON_US: i64 = 30_000_000;

/// What a call did, as the model needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Acquire {
        holder: u32,
        ttl: i64,
        /// The granted lease and epoch, when the answer was OK.
        granted: Option<(u32, i64)>,
        held: bool,
    },
    Renew {
        lease: u32,
        epoch: i64,
        ttl: i64,
        ok: bool,
    },
    Commit {
        lease: u32,
        epoch: i64,
        batch: i64,
        end: (i64, i64, i64),
        /// The answer: an outcome and position, or an error reason.
        answer: CommitAnswer,
    },
    Release {
        lease: u32,
        epoch: i64,
        /// `Some(released)` when answered.
        released: Option<bool>,
    },
    Recover {
        lease: u32,
        epoch: i64,
        /// `Some(Some(start))` from the consumer, `Some(None)` from the
        /// startup options, `None` when refused (LEASE_NOT_HELD).
        consumer: Option<Option<i64>>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum CommitAnswer {
    Lost,
    Applied { outcome: String, next: Option<i64> },
    Refused(String),
}

type Op = search::Op<Call>;

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
struct Lease {
    id: u32,
    epoch: i64,
    holder: u32,
    ttl: i64,
    /// The deadline lies in `[deadline_lo, deadline_hi]`.
    deadline_lo: i64,
    deadline_hi: i64,
    released: bool,
    wrote: bool,
    last_batch: Option<(i64, (i64, i64, i64))>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
struct Model {
    /// The instant of the last call placed.
    now: i64,
    high_water: i64,
    lease: Option<Lease>,
    position: Option<i64>,
}

/// The lease id the model gives a grant whose answer was lost: no client
/// knows it, so no call presents it.
const UNKNOWN_LEASE: u32 = u32::MAX;

impl Model {
    /// The current lease, if it is `(id, epoch)` and not released.
    fn presented(&self, id: u32, epoch: i64) -> Option<&Lease> {
        self.lease
            .as_ref()
            .filter(|l| l.id == id && l.epoch == epoch && !l.released)
    }

    /// Places a call at the earliest instant in `[t0, t1]` (with slack) not
    /// before the last one; `None` when there is none.
    fn at(&self, op: &Op, slack: i64) -> Option<i64> {
        let t = self.now.max(op.t0 - slack);
        (t <= op.t1.saturating_add(slack)).then_some(t)
    }

    /// The model after `op`, or `None` when the model cannot give `op`'s
    /// answer at any instant the call allows. Placing a call whose answer
    /// was lost means it took effect (not placing it, that it did not).
    fn apply(&self, op: &Op, slack: i64) -> Option<Model> {
        let mut t = self.at(op, slack)?;
        let latest = op.t1.saturating_add(slack);
        let mut next = self.clone();
        // The deadline a call placed at `t` sets, as an interval: the
        // database's instant lies somewhere up to the answer.
        let deadline = |t: i64, ttl: i64| (t + ttl, latest.saturating_add(ttl));
        let presented = |lease: u32, epoch: i64| self.presented(lease, epoch);
        // What a live lease at `t` implies: its deadline is later.
        let live = |next: &mut Model, t: i64| -> Option<()> {
            let l = next.lease.as_mut()?;
            (t < l.deadline_hi).then(|| l.deadline_lo = l.deadline_lo.max(t + 1))
        };
        // What an expired one implies: the call is placed at or after its
        // earliest deadline, and the deadline was no later.
        let expired = |next: &mut Model, t: &mut i64| -> Option<()> {
            let l = next.lease.as_mut()?;
            *t = (*t).max(l.deadline_lo);
            (*t <= latest).then(|| l.deadline_hi = l.deadline_hi.min(*t))
        };
        match &op.call {
            Call::Acquire {
                holder,
                ttl,
                granted,
                held,
            } => {
                let blocked = self.lease.as_ref().is_some_and(|l| !l.released && l.holder != *holder);
                if *held {
                    // LEASE_HELD: another holder's lease was live.
                    if !blocked {
                        return None;
                    }
                    live(&mut next, t)?;
                } else {
                    // Granted (or, for a lost answer, placed as granted):
                    // another holder's lease had expired (L1, L2); the same
                    // holder takes over at once (L3).
                    if blocked {
                        expired(&mut next, &mut t)?;
                    }
                    let (id, epoch) = granted.unwrap_or((UNKNOWN_LEASE, self.high_water + 1));
                    if epoch != self.high_water + 1 {
                        return None;
                    }
                    let (deadline_lo, deadline_hi) = deadline(t, *ttl);
                    next.high_water = epoch;
                    next.lease = Some(Lease {
                        id,
                        epoch,
                        holder: *holder,
                        ttl: *ttl,
                        deadline_lo,
                        deadline_hi,
                        released: false,
                        wrote: false,
                        last_batch: None,
                    });
                }
            }
            Call::Renew { lease, epoch, ttl, ok } => match presented(*lease, *epoch) {
                Some(_) if *ok || op.lost => {
                    live(&mut next, t)?;
                    let l = next.lease.as_mut().expect("presented");
                    (l.ttl, (l.deadline_lo, l.deadline_hi)) = (*ttl, deadline(t, *ttl));
                }
                Some(_) => expired(&mut next, &mut t)?,
                None if *ok => return None,
                None => {}
            },
            Call::Commit {
                lease,
                epoch,
                batch,
                end,
                answer,
            } => {
                let Some(l) = presented(*lease, *epoch) else {
                    // Not this key's current lease: refused (C1).
                    return match answer {
                        CommitAnswer::Refused(reason) if reason == "LEASE_NOT_HELD" => Some(Model { now: t, ..next }),
                        CommitAnswer::Lost => Some(Model { now: t, ..next }),
                        _ => None,
                    };
                };
                if matches!(answer, CommitAnswer::Refused(reason) if reason == "LEASE_NOT_HELD") {
                    expired(&mut next, &mut t)?;
                    next.now = t;
                    return Some(next);
                }
                live(&mut next, t)?;
                let (outcome, position, wrote) = commit_outcome(l, self.position, *batch, *end);
                match answer {
                    CommitAnswer::Applied {
                        outcome: said,
                        next: shown,
                    } if *said != outcome || *shown != position => {
                        return None;
                    }
                    CommitAnswer::Refused(reason) if *reason != outcome => return None,
                    _ => {}
                }
                if !matches!(outcome.as_str(), "BATCH_CONFLICT" | "POSITION_REGRESSION") {
                    let l = next.lease.as_mut().expect("presented");
                    if outcome != "DUPLICATE" {
                        l.last_batch = Some((*batch, *end));
                    }
                    l.wrote |= wrote;
                    // Every successful commit renews (L7).
                    (l.deadline_lo, l.deadline_hi) = deadline(t, l.ttl);
                    next.position = position;
                }
            }
            Call::Release { lease, epoch, released } => match (presented(*lease, *epoch), released) {
                (Some(_), Some(true) | None) => {
                    live(&mut next, t)?;
                    next.lease.as_mut().expect("presented").released = true;
                }
                (Some(_), Some(false)) => expired(&mut next, &mut t)?,
                (None, Some(true)) => return None,
                (None, _) => {}
            },
            Call::Recover { lease, epoch, consumer } => match (presented(*lease, *epoch), consumer) {
                (Some(_), Some(start)) => {
                    if *start != self.position {
                        return None;
                    }
                    live(&mut next, t)?;
                }
                (Some(_), None) => expired(&mut next, &mut t)?,
                (None, Some(_)) => return None,
                (None, None) => {}
            },
        }
        next.now = t;
        Some(next)
    }
}

/// C3/C5/C6 for a commit on a live lease: the outcome (or refusal reason),
/// the position after, and whether the lease has now written the consumer.
fn commit_outcome(
    lease: &Lease,
    position: Option<i64>,
    batch: i64,
    end: (i64, i64, i64),
) -> (String, Option<i64>, bool) {
    if let Some((last, last_end)) = lease.last_batch
        && batch <= last
    {
        if batch == last && last_end != end {
            return ("BATCH_CONFLICT".into(), position, lease.wrote);
        }
        return ("DUPLICATE".into(), position, lease.wrote);
    }
    let (snapshot, index, total) = end;
    let target = if index == total - 1 { snapshot + 1 } else { snapshot };
    let outcome = match position {
        None => "CREATED",
        Some(n) if target > n => "ADVANCED",
        Some(n) if target == n => "REFRESHED",
        Some(_) if lease.wrote => return ("POSITION_REGRESSION".into(), position, true),
        Some(_) => "REWOUND",
    };
    (outcome.into(), Some(target), true)
}

/// Turns one key's records into calls; records the model does not cover
/// (refused as invalid, shed, other keys) are left out: they changed
/// nothing.
fn calls(records: &[&Record]) -> Vec<Op> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut ops = Vec::new();
    // The ttl each lease was granted with (renews and commits answer the
    // time left, which the model does not need).
    let mut ttl_of: HashMap<String, i64> = HashMap::new();
    for r in records {
        if r.op == "acquire" && r.ok() {
            ttl_of.insert(r.lease.clone(), r.ttl_us);
        }
    }
    for r in records {
        let lost = crate::worker::ambiguous(&r.code);
        let lease = if r.lease.is_empty() {
            UNKNOWN_LEASE - 1
        } else {
            let n = ids.len() as u32;
            *ids.entry(r.lease.as_str()).or_insert(n)
        };
        let call = match r.op.as_str() {
            "acquire" => {
                let holder = r.worker;
                let held = r.reason == "LEASE_HELD";
                if !(r.ok() || held || lost) {
                    continue;
                }
                Call::Acquire {
                    holder,
                    ttl: requested_ttl(records, r),
                    granted: r.ok().then_some((lease, r.epoch)),
                    held,
                }
            }
            "renew" => {
                if !(r.ok() || lost || r.reason == "LEASE_NOT_HELD") {
                    continue;
                }
                Call::Renew {
                    lease,
                    epoch: r.epoch,
                    ttl: ttl_of.get(&r.lease).copied().unwrap_or(r.ttl_us),
                    ok: r.ok(),
                }
            }
            "commit" => {
                let answer = if lost {
                    CommitAnswer::Lost
                } else if r.ok() {
                    CommitAnswer::Applied {
                        outcome: r.outcome.trim_start_matches("COMMIT_OUTCOME_").to_owned(),
                        next: r.next,
                    }
                } else if matches!(
                    r.reason.as_str(),
                    "LEASE_NOT_HELD" | "BATCH_CONFLICT" | "POSITION_REGRESSION"
                ) {
                    CommitAnswer::Refused(r.reason.clone())
                } else {
                    continue;
                };
                Call::Commit {
                    lease,
                    epoch: r.epoch,
                    batch: r.batch,
                    end: r.end,
                    answer,
                }
            }
            "release" => {
                if !(r.ok() || lost) {
                    continue;
                }
                Call::Release {
                    lease,
                    epoch: r.epoch,
                    released: r.ok().then(|| r.outcome == "RELEASED"),
                }
            }
            "recover" => {
                let consumer = if r.ok() {
                    match r.outcome.as_str() {
                        "RECOVERY_SOURCE_CONSUMER" => Some(r.next),
                        "RECOVERY_SOURCE_STARTUP_OPTIONS" => Some(None),
                        _ => continue,
                    }
                } else if r.reason == "LEASE_NOT_HELD" {
                    None
                } else {
                    continue; // a read: a lost answer changed nothing
                };
                Call::Recover {
                    lease,
                    epoch: r.epoch,
                    consumer,
                }
            }
            _ => continue,
        };
        ops.push(Op {
            call,
            t0: r.t0,
            t1: if lost { i64::MAX } else { r.t1 },
            lost,
        });
    }
    ops.sort_by_key(|o| (o.t0, o.t1));
    ops
}

/// The ttl an acquire asked for, as granted: the answer's, or for a lost
/// answer the one its worker's other grants got.
fn requested_ttl(records: &[&Record], r: &Record) -> i64 {
    if r.ok() {
        return r.ttl_us;
    }
    records
        .iter()
        .find(|o| o.op == "acquire" && o.ok() && o.worker == r.worker)
        .or_else(|| records.iter().find(|o| o.op == "acquire" && o.ok()))
        .map_or(1_500_000, |o| o.ttl_us)
}

/// The SPEC's model, for the search, with the slack allowed between the
/// database's clock and the clients' (µs).
struct LeaseSpec {
    slack: i64,
}

impl Spec for LeaseSpec {
    type Call = Call;
    type State = Model;

    fn initial(&self) -> Model {
        Model {
            now: i64::MIN / 4,
            high_water: 0,
            lease: None,
            position: None,
        }
    }

    fn apply(&self, state: &Model, op: &Op) -> Option<Model> {
        state.apply(op, self.slack)
    }

    fn may_still_matter(&self, state: &Model, op: &Op) -> bool {
        may_still_matter(op, state)
    }

    fn now(&self, state: &Model) -> Option<i64> {
        Some(state.now)
    }
}

/// Checks one key's records within `budget` search steps, the database's
/// clock within `slack` µs of the clients' (at least [`SLACK_US`]; more
/// when a failover moves it to a member whose clock is off).
pub(crate) fn check_key(records: &[&Record], budget: u64, slack: i64) -> Verdict {
    // Calls are ordered by the clients' clocks (one host: SLACK_US apart at
    // most); only where the database placed them, and so the deadlines it
    // set, may be further off.
    let limits = Limits {
        slack: SLACK_US,
        lost_horizon: Some(LOST_ANSWER_HORIZON_US),
        budget,
    };
    search::search(
        &LeaseSpec {
            slack: slack.max(SLACK_US),
        },
        &calls(records),
        limits,
    )
}

/// Whether a call whose answer was lost can still change anything: calls on
/// a lease that is no longer current never can (leases never come back).
fn may_still_matter(op: &Op, model: &Model) -> bool {
    let current = |lease: u32, epoch: i64| model.presented(lease, epoch).is_some();
    match &op.call {
        Call::Acquire { .. } => true,
        Call::Renew { lease, epoch, .. }
        | Call::Commit { lease, epoch, .. }
        | Call::Release { lease, epoch, .. }
        | Call::Recover { lease, epoch, .. } => current(*lease, *epoch),
    }
}

#[cfg(test)]
mod porcupine;
#[cfg(test)]
mod tests;
