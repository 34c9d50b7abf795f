//! Model-based test of the store: random operation sequences run against the
//! real store (SQLite and Postgres, with a manual database clock) and against
//! an in-memory model that applies the pure domain rules to a map of key
//! states. After every step the answers must be identical (same value or
//! same refusal) and so must every key's stored state and history.
//!
//! The model shares the domain rules with the store on purpose: what is
//! checked here is the storage layer (rows, versions, compare-and-set, the
//! one-round-trip path, grants, history, time from the database clock), not
//! the rules themselves (those have their own oracle in tidemark-core).
//!
//! `PROPTEST_CASES` sets the number of sequences (default 64 a backend).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tidemark_core::commit::{self, CommitBatch};
use tidemark_core::lease::{self, LeasePolicy, LeaseRequest};
use tidemark_core::{
    ConsumerKey, CoreError, EventKind, HistoryEvent, KeyState, Offset, OnExpired, RecoveryRequest, SnapshotRange,
    StartupMode, TableOptions, Timestamp, Transition, admin, recovery,
};
use tidemark_store::{CallContext, Store, StoreError};
use tidemark_testkit::{Kind, TestDb};
use uuid::Uuid;

/// Expands to the model test for a database kind.
#[macro_export]
macro_rules! model_conformance_suite {
    ($kind:expr) => {
        #[test]
        fn store_matches_the_domain_model() {
            conformance::model::run($kind);
        }
    };
}

const KEYS: usize = 3;
const HOLDERS: usize = 2;

fn policy() -> LeasePolicy {
    LeasePolicy {
        min_ttl: Duration::from_secs(1),
        max_ttl: Duration::from_secs(60),
        default_ttl: Duration::from_secs(30),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        key: usize,
        holder: usize,
        ttl_secs: Option<u64>,
    },
    Renew {
        grant: usize,
        epoch_delta: i64,
        ttl_secs: Option<u64>,
    },
    Release {
        grant: usize,
        epoch_delta: i64,
    },
    Commit {
        grant: usize,
        epoch_delta: i64,
        batch_step: i64,
        end: Offset,
        latest: Option<i64>,
    },
    Recover {
        key: usize,
        startup: StartupMode,
        ignore_progress: bool,
        latest: i64,
        clamp: bool,
        pin: Option<usize>,
    },
    Revoke {
        key: usize,
    },
    Reset {
        key: usize,
        next: i64,
        expected: Option<i64>,
        force: bool,
        execute: bool,
    },
    Delete {
        key: usize,
        force: bool,
        execute: bool,
    },
    Expire,
    /// At least two seconds: a remembered decision is only used within
    /// `ESTIMATED_NOW_TOLERANCE` (1 s) of its estimated database time, and
    /// inside that window it legitimately answers more conservatively than
    /// the model (a deadline up to that much earlier). Bigger steps send
    /// the call to a fresh read, where answers must match exactly.
    Advance {
        secs: u64,
    },
}

fn offset() -> impl Strategy<Value = Offset> {
    (1i64..7, 1i64..4, any::<bool>(), prop::bool::weighted(0.1)).prop_flat_map(|(snapshot_id, total, full, legacy)| {
        (-1i64..total).prop_map(move |index| Offset {
            snapshot_id,
            index,
            scan_snapshot: full,
            total_splits: if legacy { None } else { Some(total) },
        })
    })
}

fn ttl() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![1 => Just(None), 3 => (0u64..70).prop_map(Some)]
}

fn epoch_delta() -> impl Strategy<Value = i64> {
    prop_oneof![8 => Just(0i64), 1 => Just(-1i64), 1 => Just(1i64)]
}

fn startup() -> impl Strategy<Value = StartupMode> {
    prop_oneof![
        Just(StartupMode::LatestFull),
        Just(StartupMode::Latest),
        (1i64..8).prop_map(StartupMode::FromSnapshot),
        (1i64..8).prop_map(StartupMode::FromSnapshotFull),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS, 0..HOLDERS, ttl()).prop_map(|(key, holder, ttl_secs)| Op::Acquire { key, holder, ttl_secs }),
        2 => (0usize..8, epoch_delta(), ttl()).prop_map(|(grant, epoch_delta, ttl_secs)| Op::Renew { grant, epoch_delta, ttl_secs }),
        1 => (0usize..8, epoch_delta()).prop_map(|(grant, epoch_delta)| Op::Release { grant, epoch_delta }),
        8 => (0usize..8, epoch_delta(), -1i64..3, offset(), prop::option::of(0i64..9))
            .prop_map(|(grant, epoch_delta, batch_step, end, latest)| Op::Commit { grant, epoch_delta, batch_step, end, latest }),
        2 => (0..KEYS, startup(), prop::bool::weighted(0.2), 0i64..9, any::<bool>(), prop::option::weighted(0.3, 0usize..8))
            .prop_map(|(key, startup, ignore_progress, latest, clamp, pin)| Op::Recover { key, startup, ignore_progress, latest, clamp, pin }),
        1 => (0..KEYS).prop_map(|key| Op::Revoke { key }),
        1 => (0..KEYS, 1i64..9, prop::option::weighted(0.3, 0i64..9), any::<bool>(), prop::bool::weighted(0.8))
            .prop_map(|(key, next, expected, force, execute)| Op::Reset { key, next, expected, force, execute }),
        1 => (0..KEYS, any::<bool>(), prop::bool::weighted(0.8)).prop_map(|(key, force, execute)| Op::Delete { key, force, execute }),
        1 => Just(Op::Expire),
        2 => (2u64..45).prop_map(|secs| Op::Advance { secs }),
    ]
}

/// One generated case: the table's consumer expiration and the operations.
fn case() -> impl Strategy<Value = (Option<u64>, Vec<Op>)> {
    (
        prop_oneof![Just(None), Just(Some(20u64)), Just(Some(90u64))],
        prop::collection::vec(op(), 1..40),
    )
}

/// The in-memory model: key states, every grant ever made (lease id -> key)
/// and the history each key should have.
#[derive(Debug, Default)]
struct Model {
    states: HashMap<ConsumerKey, KeyState>,
    grants: HashMap<Uuid, ConsumerKey>,
    history: HashMap<ConsumerKey, Vec<HistoryEvent>>,
    options: TableOptions,
}

impl Model {
    /// Decides on the model's state of `key` and applies the write, as the
    /// store does in one transaction.
    fn apply<T>(
        &mut self,
        key: &ConsumerKey,
        execute: bool,
        decide: impl FnOnce(Option<&KeyState>) -> Result<Transition<T>, CoreError>,
    ) -> Result<T, CoreError> {
        let transition = decide(self.states.get(key))?;
        if execute && let Some(state) = transition.write {
            if let Some(lease) = &state.lease {
                self.grants.insert(lease.lease_id, key.clone());
            }
            self.history.entry(key.clone()).or_default().extend(transition.events);
            self.states.insert(key.clone(), state);
        }
        Ok(transition.output)
    }

    fn key_of(&self, lease_id: Uuid) -> Option<ConsumerKey> {
        self.grants.get(&lease_id).cloned()
    }
}

/// The answers compared, with refusals as domain errors.
fn rule<T>(result: Result<T, StoreError>) -> Result<Result<T, CoreError>, TestCaseError> {
    match result {
        Ok(v) => Ok(Ok(v)),
        Err(StoreError::Rule(e)) => Ok(Err(e)),
        Err(other) => Err(TestCaseError::fail(format!("store failed: {other:?}"))),
    }
}

/// Answers seen over the whole run (successes and refusals by operation),
/// so a run that never reached the interesting paths fails loudly.
static ANSWERS: std::sync::Mutex<BTreeMap<String, usize>> = std::sync::Mutex::new(BTreeMap::new());

fn same<T: PartialEq + std::fmt::Debug>(
    step: usize,
    op: &Op,
    store: Result<T, CoreError>,
    model: Result<T, CoreError>,
) -> Result<(), TestCaseError> {
    let name = format!("{op:?}");
    let name = name.split([' ', '{']).next().unwrap_or_default();
    let answer = match &store {
        Ok(_) => format!("{name} ok"),
        Err(e) => format!("{name} {}", e.reason()),
    };
    *ANSWERS.lock().unwrap().entry(answer).or_default() += 1;
    prop_assert_eq!(store, model, "step {}: {:?}", step, op);
    Ok(())
}

/// Runs the model test on `kind` (skipped when that database is absent).
pub(crate) fn run(kind: Kind) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let start = Timestamp::from_micros(1_800_000_000_000_000);
    let Some(db) = runtime.block_on(TestDb::with_manual_clock(kind, start)) else {
        return;
    };
    let store = runtime.block_on(async { Store::new(db.backend().await, policy()) });
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    // Every case (and every shrunk replay) gets its own table.
    let table_seq = AtomicUsize::new(0);
    let result = runner.run(&case(), |(expiration, ops)| {
        let table = format!("db.model{}", table_seq.fetch_add(1, Ordering::SeqCst));
        runtime.block_on(run_case(&db, &store, &table, expiration, &ops))
    });
    if let Err(e) = result {
        panic!("{kind:?}: {e}");
    }
    let answers = ANSWERS.lock().unwrap().clone();
    eprintln!("{kind:?}: answers compared: {answers:?}");
    for needed in [
        "Acquire ok",
        "Acquire LEASE_HELD",
        "Commit ok",
        "Commit LEASE_NOT_HELD",
        "Renew ok",
        "Recover ok",
        "Reset ok",
    ] {
        assert!(
            answers.contains_key(needed) || cases < 16,
            "{kind:?}: no {needed:?} in {cases} cases"
        );
    }
}

async fn run_case(
    db: &TestDb,
    store: &Store,
    table: &str,
    expiration: Option<u64>,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let keys: Vec<ConsumerKey> = (0..KEYS)
        .map(|i| ConsumerKey::parse(table, if i == 2 { "b1" } else { "main" }, &format!("c{i}"), "").unwrap())
        .collect();
    let holders = ["query-a", "query-b"];
    let ctx = CallContext::new("tester", "model");
    let mut model = Model::default();
    if let Some(secs) = expiration {
        let set = BTreeMap::from([("consumer.expiration-time".to_owned(), format!("{secs} s"))]);
        let planned = store
            .set_table_options(&ctx, &keys[0].table, &set, &[], true)
            .await
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        model.options = planned.change.after;
    }
    // Grants handed out so far (lease id, epoch), for renew/commit/release.
    let mut grants: Vec<(Uuid, i64)> = Vec::new();
    // Each grant's last batch id, so steps make duplicates and conflicts.
    let mut batches: HashMap<Uuid, i64> = HashMap::new();
    let grant = |grants: &Vec<(Uuid, i64)>, i: usize, delta: i64| -> (Uuid, i64) {
        if grants.is_empty() {
            (Uuid::nil(), 1)
        } else {
            // Mostly the newest grant (a live worker), sometimes an older
            // one (a zombie).
            let (id, epoch) = if i < 5 {
                grants[grants.len() - 1]
            } else {
                grants[i % grants.len()]
            };
            (id, epoch + delta)
        }
    };

    for (step, op) in ops.iter().enumerate() {
        let now = db.now();
        match op {
            Op::Acquire { key, holder, ttl_secs } => {
                let k = &keys[*key];
                let ttl = ttl_secs.map(Duration::from_secs);
                let got = rule(store.acquire_lease(&ctx, k, holders[*holder], ttl).await)?;
                // The store draws the new lease id; the model grants the same.
                let lease_id = got.as_ref().map_or_else(|_| Uuid::now_v7(), |a| a.lease.lease_id);
                let options = model.options;
                let want = model.apply(k, true, |s| {
                    let request = LeaseRequest {
                        holder: holders[*holder],
                        principal: "tester",
                        ttl,
                        lease_id,
                        caller: &tidemark_core::Caller::UNKNOWN,
                    };
                    lease::acquire(s, k, request, &policy(), options.expiration, now)
                });
                if let Ok(a) = &got
                    && !grants.contains(&(a.lease.lease_id, a.lease.epoch))
                {
                    grants.push((a.lease.lease_id, a.lease.epoch));
                }
                same(step, op, got, want)?;
            }
            Op::Renew {
                grant: g,
                epoch_delta,
                ttl_secs,
            } => {
                let (lease_id, epoch) = grant(&grants, *g, *epoch_delta);
                let ttl = ttl_secs.map(Duration::from_secs);
                let got = rule(store.renew_lease(&ctx, lease_id, epoch, ttl).await)?;
                let want = match model.key_of(lease_id) {
                    Some(k) => model.apply(&k, true, |s| lease::renew(s, lease_id, epoch, ttl, &policy(), now)),
                    None => lease::renew(None, lease_id, epoch, ttl, &policy(), now).map(|t| t.output),
                };
                same(step, op, got, want)?;
            }
            Op::Release { grant: g, epoch_delta } => {
                let (lease_id, epoch) = grant(&grants, *g, *epoch_delta);
                let got = rule(store.release_lease(&ctx, lease_id, epoch).await)?;
                let want = match model.key_of(lease_id) {
                    Some(k) => model.apply(&k, true, |s| Ok(lease::release(s, lease_id, epoch, now))),
                    None => Ok(lease::release(None, lease_id, epoch, now).output),
                };
                same(step, op, got, want)?;
            }
            Op::Commit {
                grant: g,
                epoch_delta,
                batch_step,
                end,
                latest,
            } => {
                let (lease_id, epoch) = grant(&grants, *g, *epoch_delta);
                let last = batches.get(&lease_id).copied().unwrap_or(-1);
                let batch_id = (last + batch_step).max(0);
                let req = CommitBatch {
                    lease_id,
                    epoch,
                    batch_id,
                    end: Some(*end),
                    latest_snapshot: *latest,
                };
                let got = rule(store.commit_batch(&ctx, &req).await)?;
                if got.is_ok() {
                    batches.insert(lease_id, batch_id.max(last));
                }
                let want = match model.key_of(lease_id) {
                    Some(k) => model.apply(&k, true, |s| commit::commit(s, &req, now)),
                    None => commit::commit(None, &req, now).map(|t| t.output),
                };
                same(step, op, got, want)?;
            }
            Op::Recover {
                key,
                startup,
                ignore_progress,
                latest,
                clamp,
                pin,
            } => {
                let k = &keys[*key];
                let req = RecoveryRequest {
                    startup: *startup,
                    ignore_progress: *ignore_progress,
                    range: SnapshotRange {
                        earliest_snapshot: if *latest > 0 { (*latest - 4).max(1) } else { 0 },
                        latest_snapshot: *latest,
                        earliest_changelog: None,
                        changelog_decoupled: false,
                    },
                    checkpoint: None,
                    on_expired: if *clamp {
                        OnExpired::ClampToEarliest
                    } else {
                        OnExpired::Fail
                    },
                };
                let lease_id = pin.and_then(|i| (!grants.is_empty()).then(|| grants[i % grants.len()].0));
                let got = rule(store.recovery_position(&ctx, k, &req, lease_id).await)?;
                let options = model.options;
                let want = model.apply(k, true, |s| {
                    recovery::recover(s, &req, lease_id, options.expiration, now)
                });
                same(step, op, got, want)?;
            }
            Op::Revoke { key } => {
                let k = &keys[*key];
                let got = rule(store.revoke(&ctx, k, "model", true).await.map(|planned| planned.change))?;
                let want = model.apply(k, true, |s| lease::revoke(s, now, "model"));
                same(step, op, got, want)?;
            }
            Op::Reset {
                key,
                next,
                expected,
                force,
                execute,
            } => {
                let k = &keys[*key];
                let got = rule(store.reset_consumer(&ctx, k, *next, *expected, *force, *execute).await)?
                    .map(|p| (p.change, p.applied));
                let want = model
                    .apply(k, *execute, |s| admin::reset(s, k, *next, *expected, *force, now))
                    .map(|c| (c, *execute));
                same(step, op, got, want)?;
            }
            Op::Delete { key, force, execute } => {
                let k = &keys[*key];
                let got =
                    rule(store.delete_consumer(&ctx, k, None, *force, *execute).await)?.map(|p| (p.change, p.applied));
                let want = model
                    .apply(k, *execute, |s| {
                        admin::delete(s, k, None, *force, now, EventKind::Delete)
                    })
                    .map(|c| (c, *execute));
                same(step, op, got, want)?;
            }
            Op::Expire => {
                let got = rule(
                    store
                        .expire_consumers(&ctx, Some(&keys[0].table), None, 100, true)
                        .await,
                )?;
                let mut got: Vec<(ConsumerKey, i64)> = got
                    .map_err(|e| TestCaseError::fail(format!("{e:?}")))?
                    .into_iter()
                    .map(|e| (e.key, e.next_snapshot))
                    .collect();
                got.sort_by(|a, b| a.0.cmp(&b.0));
                let mut want = Vec::new();
                let expiration = model.options.expiration;
                for k in &keys {
                    if let Ok(Some(next)) =
                        model.apply(k, true, |s| Ok(tidemark_core::expiry::expire(s, expiration, now)))
                    {
                        want.push((k.clone(), next));
                    }
                }
                want.sort_by(|a, b| a.0.cmp(&b.0));
                prop_assert_eq!(got, want, "step {}: {:?}", step, op);
            }
            Op::Advance { secs } => db.advance(Duration::from_secs(*secs)).await,
        }
        for k in &keys {
            let stored = store
                .key_state(k)
                .await
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(
                stored.as_ref(),
                model.states.get(k),
                "state of {} after step {}: {:?}",
                k,
                step,
                op
            );
        }
    }
    for k in &keys {
        let mut stored: Vec<HistoryEvent> = store
            .history(k, 10_000)
            .await
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?
            .into_iter()
            .map(|h| h.event)
            .collect();
        stored.reverse();
        let want = model.history.get(k).cloned().unwrap_or_default();
        prop_assert_eq!(stored, want, "history of {}", k);
    }
    Ok(())
}
