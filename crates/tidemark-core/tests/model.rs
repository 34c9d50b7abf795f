//! A model-based property test of the lease and commit rules.
//!
//! Random sequences of acquire / renew / commit / release / revoke /
//! advance-clock / takeover run through the domain rules, while an
//! independent oracle, written from the SPEC rather than from the code, keeps
//! its own view of which lease should be live. After every step we check:
//! - at most one live lease per key (an acquire succeeds only when the oracle
//!   sees no other holder's live lease);
//! - epochs strictly increase per key and are never reused;
//! - a fenced or expired lease never changes a consumer;
//! - a position never passes an incomplete snapshot;
//! - within a lease the position never moves back.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tidemark_core::commit::{self, CommitBatch, CommitOutcome};
use tidemark_core::lease::{self, LeasePolicy, LeaseRequest};
use tidemark_core::{ConsumerKey, CoreError, KeyState, Offset, Timestamp};
use uuid::Uuid;

const KEYS: usize = 2;
const HOLDERS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Acquire { key: usize, holder: usize, ttl_secs: u64 },
    Renew { grant: usize },
    Commit { grant: usize, batch_step: i64, end: Offset },
    Release { grant: usize },
    Revoke { key: usize },
    Advance { millis: u64 },
}

fn offset() -> impl Strategy<Value = Offset> {
    (1i64..8, 1i64..5, any::<bool>(), prop::bool::weighted(0.1)).prop_flat_map(|(snapshot_id, total, full, legacy)| {
        (-1i64..total).prop_map(move |index| Offset {
            snapshot_id,
            index,
            scan_snapshot: full,
            total_splits: if legacy { None } else { Some(total) },
        })
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..KEYS, 0..HOLDERS, 0u64..40).prop_map(|(key, holder, ttl_secs)| Op::Acquire { key, holder, ttl_secs }),
        2 => (0usize..16).prop_map(|grant| Op::Renew { grant }),
        8 => (0usize..16, -2i64..4, offset()).prop_map(|(grant, batch_step, end)| Op::Commit { grant, batch_step, end }),
        1 => (0usize..16).prop_map(|grant| Op::Release { grant }),
        1 => (0..KEYS).prop_map(|key| Op::Revoke { key }),
        3 => (0u64..20_000).prop_map(|millis| Op::Advance { millis }),
    ]
}

/// One lease grant, as the oracle tracks it.
#[derive(Debug)]
struct Grant {
    key: usize,
    lease_id: Uuid,
    epoch: i64,
    holder: String,
    ttl: Duration,
    deadline: Timestamp,
    ended: bool,
    last_batch: i64,
    last_written: Option<i64>,
}

struct World {
    policy: LeasePolicy,
    now: Timestamp,
    keys: Vec<ConsumerKey>,
    states: HashMap<usize, KeyState>,
    grants: Vec<Grant>,
    /// Per key: the grant the oracle considers current.
    current: HashMap<usize, usize>,
    /// Per key: the highest epoch seen (granted or burned).
    max_epoch: HashMap<usize, i64>,
    next_id: u128,
}

impl World {
    fn new() -> Self {
        Self {
            policy: LeasePolicy::default(),
            now: Timestamp::from_micros(1_000_000),
            keys: (0..KEYS)
                .map(|k| ConsumerKey::parse("db.t", "main", &format!("c{k}"), "").unwrap())
                .collect(),
            states: HashMap::new(),
            grants: Vec::new(),
            current: HashMap::new(),
            max_epoch: HashMap::new(),
            next_id: 1,
        }
    }

    /// The oracle's view: is `grant` the key's live lease?
    fn oracle_live(&self, grant: usize) -> bool {
        let g = &self.grants[grant];
        self.current.get(&g.key) == Some(&grant) && !g.ended && self.now < g.deadline
    }

    fn oracle_live_holder(&self, key: usize) -> Option<&str> {
        let &grant = self.current.get(&key)?;
        self.oracle_live(grant).then(|| self.grants[grant].holder.as_str())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Advance { millis } => self.now = self.now.plus(Duration::from_millis(millis)),
            Op::Acquire { key, holder, ttl_secs } => self.acquire(key, holder, ttl_secs)?,
            Op::Renew { grant } => self.renew(grant)?,
            Op::Commit { grant, batch_step, end } => self.commit(grant, batch_step, end)?,
            Op::Release { grant } => self.release(grant)?,
            Op::Revoke { key } => self.revoke(key)?,
        }
        Ok(())
    }

    fn acquire(&mut self, key: usize, holder: usize, ttl_secs: u64) -> Result<(), TestCaseError> {
        let holder = format!("h{holder}");
        let lease_id = Uuid::from_u128(self.next_id);
        self.next_id += 1;
        let requested = Some(Duration::from_secs(ttl_secs));
        let result = lease::acquire(
            self.states.get(&key),
            &self.keys[key],
            LeaseRequest {
                holder: &holder,
                principal: "anonymous",
                ttl: requested,
                lease_id,
                caller: &tidemark_core::Caller::UNKNOWN,
            },
            &self.policy,
            None,
            self.now,
        );
        let other_live = self.oracle_live_holder(key).filter(|h| *h != holder).map(str::to_owned);
        match result {
            Ok(t) => {
                prop_assert!(
                    other_live.is_none(),
                    "acquire by {holder} succeeded while {other_live:?} was live"
                );
                let lease = &t.output.lease;
                let max = self.max_epoch.get(&key).copied().unwrap_or(0);
                prop_assert!(lease.epoch > max, "epoch {} not above {max}", lease.epoch);
                self.max_epoch.insert(key, lease.epoch);
                if let Some(&previous) = self.current.get(&key) {
                    self.grants[previous].ended = true;
                }
                self.grants.push(Grant {
                    key,
                    lease_id,
                    epoch: lease.epoch,
                    holder,
                    ttl: self.policy.clamp(requested),
                    deadline: self.now.plus(self.policy.clamp(requested)),
                    ended: false,
                    last_batch: -1,
                    last_written: None,
                });
                self.current.insert(key, self.grants.len() - 1);
                self.states.insert(key, t.write.unwrap());
            }
            Err(CoreError::LeaseHeld { holder: live, .. }) => {
                prop_assert_eq!(other_live, Some(live));
            }
            Err(e) => return Err(TestCaseError::fail(format!("unexpected acquire error {e:?}"))),
        }
        Ok(())
    }

    fn pick(&self, grant: usize) -> Option<usize> {
        (!self.grants.is_empty()).then(|| grant % self.grants.len())
    }

    fn renew(&mut self, grant: usize) -> Result<(), TestCaseError> {
        let Some(g) = self.pick(grant) else { return Ok(()) };
        let (key, lease_id, epoch) = (self.grants[g].key, self.grants[g].lease_id, self.grants[g].epoch);
        let live = self.oracle_live(g);
        match lease::renew(self.states.get(&key), lease_id, epoch, None, &self.policy, self.now) {
            Ok(t) => {
                prop_assert!(live, "renew of a lease the oracle sees as not live");
                self.grants[g].deadline = self.now.plus(self.grants[g].ttl);
                self.states.insert(key, t.write.unwrap());
            }
            Err(CoreError::LeaseNotHeld { .. }) => prop_assert!(!live, "live lease refused a renewal"),
            Err(e) => return Err(TestCaseError::fail(format!("unexpected renew error {e:?}"))),
        }
        Ok(())
    }

    fn commit(&mut self, grant: usize, batch_step: i64, end: Offset) -> Result<(), TestCaseError> {
        let Some(g) = self.pick(grant) else { return Ok(()) };
        let key = self.grants[g].key;
        let batch_id = (self.grants[g].last_batch + batch_step).max(0);
        let req = CommitBatch {
            lease_id: self.grants[g].lease_id,
            epoch: self.grants[g].epoch,
            batch_id,
            end: Some(end),
            latest_snapshot: None,
        };
        let live = self.oracle_live(g);
        let before = self.states.get(&key).and_then(KeyState::next_snapshot);
        match commit::commit(self.states.get(&key), &req, self.now) {
            Ok(t) => {
                prop_assert!(live, "a fenced or expired lease was accepted");
                let after = t.write.unwrap();
                let next = after.next_snapshot();
                let outcome = t.output.outcome;
                if outcome.writes_consumer() {
                    let expected = if end.is_complete() {
                        end.snapshot_id + 1
                    } else {
                        end.snapshot_id
                    };
                    prop_assert_eq!(next, Some(expected), "position must be exactly what {} proves", end);
                    prop_assert!(end.total_splits.is_some(), "legacy offsets never write");
                    prop_assert!(
                        end.is_complete() || !end.scan_snapshot,
                        "an incomplete full scan never writes"
                    );
                    if let Some(previous) = self.grants[g].last_written {
                        prop_assert!(next.unwrap() >= previous, "moved back under one lease");
                    }
                    self.grants[g].last_written = next;
                } else {
                    prop_assert_eq!(next, before, "outcome {:?} changed the consumer", outcome);
                }
                if outcome != CommitOutcome::Duplicate {
                    prop_assert!(batch_id > self.grants[g].last_batch || self.grants[g].last_batch < 0);
                    self.grants[g].last_batch = batch_id;
                }
                self.grants[g].deadline = self.now.plus(self.grants[g].ttl);
                self.states.insert(key, after);
            }
            Err(CoreError::LeaseNotHeld { .. }) => prop_assert!(!live, "a live lease was refused"),
            Err(CoreError::BatchConflict { .. }) => prop_assert_eq!(batch_id, self.grants[g].last_batch),
            Err(CoreError::PositionRegression { current, computed }) => {
                prop_assert!(computed < current);
                prop_assert!(self.grants[g].last_written.is_some(), "regression only after a write");
            }
            Err(e) => return Err(TestCaseError::fail(format!("unexpected commit error {e:?}"))),
        }
        Ok(())
    }

    fn release(&mut self, grant: usize) -> Result<(), TestCaseError> {
        let Some(g) = self.pick(grant) else { return Ok(()) };
        let key = self.grants[g].key;
        let live = self.oracle_live(g);
        let t = lease::release(
            self.states.get(&key),
            self.grants[g].lease_id,
            self.grants[g].epoch,
            self.now,
        );
        prop_assert_eq!(t.output, live);
        if let Some(state) = t.write {
            self.grants[g].ended = true;
            self.states.insert(key, state);
        }
        Ok(())
    }

    fn revoke(&mut self, key: usize) -> Result<(), TestCaseError> {
        let live = self.current.get(&key).is_some_and(|&g| self.oracle_live(g));
        // The model's epochs stay far below the ceiling: a revoke never fails.
        let t = lease::revoke(self.states.get(&key), self.now, "model").expect("below the epoch ceiling");
        prop_assert_eq!(t.output.lease.is_some(), live);
        if let Some(state) = t.write {
            let g = self.current[&key];
            self.grants[g].ended = true;
            prop_assert!(state.epoch > self.grants[g].epoch, "revoke burns an epoch");
            self.max_epoch.insert(key, state.epoch);
            self.states.insert(key, state);
        }
        Ok(())
    }

    fn check_global(&self) -> Result<(), TestCaseError> {
        for (key, state) in &self.states {
            let live: Vec<_> = self
                .grants
                .iter()
                .enumerate()
                .filter(|(i, _)| self.oracle_live(*i))
                .collect();
            prop_assert!(live.iter().filter(|(_, g)| g.key == *key).count() <= 1);
            match state.live_lease(self.now) {
                Some(lease) => {
                    let g = self.current[key];
                    prop_assert!(self.oracle_live(g));
                    prop_assert_eq!(lease.lease_id, self.grants[g].lease_id);
                }
                None => prop_assert!(self.current.get(key).is_none_or(|&g| !self.oracle_live(g))),
            }
            prop_assert!(state.epoch >= self.max_epoch.get(key).copied().unwrap_or(0));
            if let Some(next) = state.next_snapshot() {
                prop_assert!(next >= 1);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn lease_and_commit_rules_hold_for_any_sequence(ops in prop::collection::vec(op(), 1..80)) {
        let mut world = World::new();
        for op in &ops {
            world.step(op)?;
            world.check_global()?;
        }
    }
}
