//! The storage conformance suite: every case runs against SQLite and against
//! a real Postgres (see `sqlite.rs` and `postgres.rs` next to this module).
//!
//! Cases use real time with short lease ttls; both backends take `now` from
//! their clock (the database's for Postgres).

pub(crate) mod admin;
pub(crate) mod mirror;
pub(crate) mod model;
pub(crate) mod remembered;
pub(crate) mod seams;
pub(crate) mod sessions;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tidemark_core::commit::{CommitBatch, CommitOutcome};
use tidemark_core::lease::LeasePolicy;
use tidemark_core::{
    ConsumerKey, CoreError, EventKind, KeyState, LeaseLoss, Offset, OnExpired, RecoveryRequest, RecoverySource,
    SnapshotRange, StartupMode,
};
use tidemark_store::{CallContext, Change, FindKey, Store, StoreError};
use tidemark_testkit::TestDb;
use uuid::Uuid;

/// Expands to one `#[tokio::test]` per conformance case for a database kind.
#[macro_export]
macro_rules! conformance_suite {
    ($kind:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(db) = tidemark_testkit::TestDb::new($kind).await else { return };
                conformance::$case(&db).await;
            }
        )*
    };
}

/// Every case, for the per-backend test files.
#[macro_export]
macro_rules! all_conformance_cases {
    ($kind:expr) => {
        conformance_suite!($kind;
            lease_lifecycle_writes_history_with_principal_and_request_id,
            lease_held_by_another_holder_and_takeover_by_the_same_holder,
            expired_lease_is_fenced_and_the_key_can_be_taken,
            superseded_and_unknown_leases_are_not_held,
            commit_decision_table_is_persisted,
            duplicates_and_batch_conflicts_survive_reloads,
            regression_is_refused_and_first_write_rewinds,
            failed_operations_change_nothing,
            revoke_burns_an_epoch_that_is_never_reused,
            recovery_reads_the_consumer_and_pins_full_scans,
            legacy_offsets_are_logged_once_per_snapshot,
            concurrent_acquires_have_exactly_one_winner,
            concurrent_commits_on_one_lease_serialize,
            replicas_sharing_the_database_fence_each_other,
            concurrent_migrations_are_safe,
            stale_version_save_is_rejected,
            save_requiring_a_live_lease_fails_after_its_deadline,
            release_is_idempotent_and_frees_the_key,
        );
    };
}

pub(crate) fn policy() -> LeasePolicy {
    LeasePolicy {
        min_ttl: Duration::from_millis(50),
        max_ttl: Duration::from_secs(60),
        default_ttl: Duration::from_secs(30),
    }
}

pub(crate) async fn store(db: &TestDb) -> Store {
    Store::new(db.backend().await, policy())
}

pub(crate) fn ctx(request_id: &str) -> CallContext {
    CallContext::new("tester", request_id)
}

pub(crate) fn key(id: &str) -> ConsumerKey {
    ConsumerKey::parse("db.orders", "main", id, "").unwrap()
}

pub(crate) fn off(snapshot_id: i64, index: i64, full: bool, total: Option<i64>) -> Offset {
    Offset {
        snapshot_id,
        index,
        scan_snapshot: full,
        total_splits: total,
    }
}

pub(crate) fn commit_req(lease_id: Uuid, epoch: i64, batch_id: i64, end: Offset) -> CommitBatch {
    CommitBatch {
        lease_id,
        epoch,
        batch_id,
        end: Some(end),
        latest_snapshot: None,
    }
}

pub(crate) fn rule(err: StoreError) -> CoreError {
    match err {
        StoreError::Rule(e) => e,
        other => panic!("expected a rule error, got {other:?}"),
    }
}

async fn snapshot(store: &Store, key: &ConsumerKey) -> (Option<KeyState>, usize) {
    let state = store.key_state(key).await.unwrap();
    let history = store.history(key, 1000).await.unwrap().len();
    (state, history)
}

pub(crate) async fn lease_lifecycle_writes_history_with_principal_and_request_id(db: &TestDb) {
    let store = store(db).await;
    let k = key("lifecycle");
    let acquired = store.acquire_lease(&ctx("r1"), &k, "query-1", None).await.unwrap();
    assert_eq!(acquired.lease.epoch, 1);
    assert!(!acquired.takeover);
    let lease = acquired.lease;
    let c = store
        .commit_batch(&ctx("r2"), &commit_req(lease.lease_id, 1, 0, off(5, 2, false, Some(3))))
        .await
        .unwrap();
    assert_eq!((c.outcome, c.next_snapshot), (CommitOutcome::Created, Some(6)));
    assert!(store.release_lease(&ctx("r3"), lease.lease_id, 1).await.unwrap());

    let state = store.key_state(&k).await.unwrap().unwrap();
    assert_eq!(state.next_snapshot(), Some(6));
    assert!(state.live_lease(state.lease.as_ref().unwrap().acquired_at).is_none());

    let history = store.history(&k, 10).await.unwrap();
    let kinds: Vec<_> = history.iter().rev().map(|h| h.event.kind).collect();
    assert_eq!(
        kinds,
        [EventKind::LeaseAcquire, EventKind::Create, EventKind::LeaseRelease]
    );
    let create = &history[1];
    assert_eq!((create.event.old_next, create.event.new_next), (None, Some(6)));
    assert_eq!(
        (create.event.epoch, create.event.batch_id, create.event.lease_id),
        (Some(1), Some(0), Some(lease.lease_id))
    );
    assert_eq!(create.event.holder.as_deref(), Some("query-1"));
    assert_eq!(
        (create.principal.as_str(), create.request_id.as_str()),
        ("tester", "r2")
    );
    assert!(
        history[0].id > history[1].id && history[1].id > history[2].id,
        "newest first"
    );
}

pub(crate) async fn lease_held_by_another_holder_and_takeover_by_the_same_holder(db: &TestDb) {
    let store = store(db).await;
    let k = key("held");
    let first = store.acquire_lease(&ctx("a"), &k, "q1", None).await.unwrap().lease;
    let err = rule(store.acquire_lease(&ctx("b"), &k, "q2", None).await.unwrap_err());
    match err {
        CoreError::LeaseHeld {
            holder,
            remaining,
            epoch,
            ..
        } => {
            assert_eq!((holder.as_str(), epoch), ("q1", 1));
            assert!(remaining > Duration::from_secs(25) && remaining <= Duration::from_secs(30));
        }
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
    let again = store.acquire_lease(&ctx("c"), &k, "q1", None).await.unwrap();
    assert!(again.takeover);
    assert_eq!((again.lease.epoch, again.previous_epoch), (2, Some(1)));
    let err = rule(
        store
            .commit_batch(&ctx("d"), &commit_req(first.lease_id, 1, 0, off(1, 0, false, Some(1))))
            .await
            .unwrap_err(),
    );
    assert!(matches!(
        err,
        CoreError::LeaseNotHeld {
            loss: LeaseLoss::Superseded,
            current_epoch: Some(2),
            ..
        }
    ));
    let history = store.history(&k, 10).await.unwrap();
    assert_eq!(history[0].event.kind, EventKind::LeaseTakeover);
}

pub(crate) async fn expired_lease_is_fenced_and_the_key_can_be_taken(db: &TestDb) {
    let store = store(db).await;
    let k = key("expiry");
    let lease = store
        .acquire_lease(&ctx("a"), &k, "q1", Some(Duration::from_millis(200)))
        .await
        .unwrap()
        .lease;
    assert_eq!(lease.ttl, Duration::from_millis(200));
    store
        .commit_batch(&ctx("b"), &commit_req(lease.lease_id, 1, 0, off(3, 0, false, Some(2))))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    let before = snapshot(&store, &k).await;
    let err = rule(
        store
            .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 1, off(3, 1, false, Some(2))))
            .await
            .unwrap_err(),
    );
    assert!(matches!(
        err,
        CoreError::LeaseNotHeld {
            loss: LeaseLoss::Expired,
            ..
        }
    ));
    assert!(matches!(
        rule(store.renew_lease(&ctx("d"), lease.lease_id, 1, None).await.unwrap_err()),
        CoreError::LeaseNotHeld {
            loss: LeaseLoss::Expired,
            ..
        }
    ));
    assert_eq!(snapshot(&store, &k).await, before, "a fenced commit changes nothing");
    let taken = store.acquire_lease(&ctx("e"), &k, "q2", None).await.unwrap();
    assert_eq!(taken.lease.epoch, 2);
    assert!(taken.takeover, "the expired lease was never released");
    assert_eq!(taken.consumer.map(|c| c.next_snapshot), Some(3));
}

pub(crate) async fn superseded_and_unknown_leases_are_not_held(db: &TestDb) {
    let store = store(db).await;
    let k = key("superseded");
    let old = store.acquire_lease(&ctx("a"), &k, "q1", None).await.unwrap().lease;
    store.acquire_lease(&ctx("b"), &k, "q1", None).await.unwrap();
    let err = rule(store.renew_lease(&ctx("c"), old.lease_id, 1, None).await.unwrap_err());
    assert_eq!(
        err,
        CoreError::LeaseNotHeld {
            lease_id: old.lease_id,
            loss: LeaseLoss::Superseded,
            current_epoch: Some(2)
        }
    );
    let unknown = Uuid::new_v4();
    let err = rule(store.renew_lease(&ctx("d"), unknown, 1, None).await.unwrap_err());
    assert_eq!(
        err,
        CoreError::LeaseNotHeld {
            lease_id: unknown,
            loss: LeaseLoss::Unknown,
            current_epoch: None
        }
    );
    assert!(!store.release_lease(&ctx("e"), unknown, 1).await.unwrap());
}

pub(crate) async fn commit_decision_table_is_persisted(db: &TestDb) {
    let store = store(db).await;
    let k = key("table");
    let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    let commit = |batch: i64, end: Offset| {
        let store = store.clone();
        async move {
            store
                .commit_batch(&ctx("c"), &commit_req(lease.lease_id, lease.epoch, batch, end))
                .await
                .unwrap()
        }
    };
    // Partway through an initial full scan: no consumer.
    let c = commit(0, off(10, 1, true, Some(3))).await;
    assert_eq!(
        (c.outcome, c.next_snapshot),
        (CommitOutcome::UnchangedIncompleteFullScan, None)
    );
    assert_eq!(store.key_state(&k).await.unwrap().unwrap().consumer, None);
    // Last split of the full scan: latest + 1.
    let c = commit(1, off(10, 2, true, Some(3))).await;
    assert_eq!((c.outcome, c.next_snapshot), (CommitOutcome::Created, Some(11)));
    // Partway through delta 11: stays at 11, refreshed.
    let before = store.key_state(&k).await.unwrap().unwrap().consumer.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let c = commit(2, off(11, 0, false, Some(2))).await;
    assert_eq!((c.outcome, c.next_snapshot), (CommitOutcome::Refreshed, Some(11)));
    let after = store.key_state(&k).await.unwrap().unwrap().consumer.unwrap();
    assert!(after.updated_at > before.updated_at, "C4: refreshed");
    assert_eq!(after.created_at, before.created_at);
    // Complete delta 11: 12.
    let c = commit(3, off(11, 1, false, Some(2))).await;
    assert_eq!((c.outcome, c.next_snapshot), (CommitOutcome::Advanced, Some(12)));
    // Partway through delta 14: 14.
    let c = commit(4, off(14, 0, false, Some(5))).await;
    assert_eq!((c.outcome, c.next_snapshot), (CommitOutcome::Advanced, Some(14)));
    // Legacy: nothing.
    let c = commit(5, off(15, 0, false, None)).await;
    assert_eq!(
        (c.outcome, c.next_snapshot),
        (CommitOutcome::UnchangedLegacyOffset, Some(14))
    );
    // A commit that reports the latest snapshot: its history row keeps it
    // (the console's lag chart reads these back).
    let mut reporting = commit_req(lease.lease_id, lease.epoch, 6, off(16, 0, false, Some(5)));
    reporting.latest_snapshot = Some(20);
    let c = store.commit_batch(&ctx("c"), &reporting).await.unwrap();
    assert_eq!((c.outcome, c.next_snapshot), (CommitOutcome::Advanced, Some(16)));
    let history = store.history(&k, 10).await.unwrap();
    let latest: Vec<_> = history.iter().map(|h| h.event.latest_snapshot).collect();
    assert_eq!(latest, [Some(20), None, None, None, None, None]);
    let kinds: Vec<_> = history.iter().map(|h| h.event.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Advance,
            EventKind::Advance,
            EventKind::Advance,
            EventKind::Refresh,
            EventKind::Create,
            EventKind::LeaseAcquire
        ]
    );
}

pub(crate) async fn duplicates_and_batch_conflicts_survive_reloads(db: &TestDb) {
    let store = store(db).await;
    let k = key("dup");
    let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    let end = off(4, 1, false, Some(3));
    store
        .commit_batch(&ctx("b"), &commit_req(lease.lease_id, 1, 7, end))
        .await
        .unwrap();
    let before = snapshot(&store, &k).await.1;
    // A second Store (a fresh process) sees the remembered batch.
    let other = Store::new(db.backend().await, policy());
    let dup = other
        .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 7, end))
        .await
        .unwrap();
    assert_eq!((dup.outcome, dup.next_snapshot), (CommitOutcome::Duplicate, Some(4)));
    let late = other
        .commit_batch(&ctx("d"), &commit_req(lease.lease_id, 1, 6, off(3, 0, false, Some(1))))
        .await
        .unwrap();
    assert_eq!(late.outcome, CommitOutcome::Duplicate);
    let err = rule(
        other
            .commit_batch(&ctx("e"), &commit_req(lease.lease_id, 1, 7, off(4, 2, false, Some(3))))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.reason(), "BATCH_CONFLICT");
    assert_eq!(snapshot(&store, &k).await.1, before, "duplicates add no history");
}

pub(crate) async fn regression_is_refused_and_first_write_rewinds(db: &TestDb) {
    let store = store(db).await;
    let k = key("rewind");
    let first = store.acquire_lease(&ctx("a"), &k, "q1", None).await.unwrap().lease;
    store
        .commit_batch(&ctx("b"), &commit_req(first.lease_id, 1, 0, off(20, 0, false, Some(1))))
        .await
        .unwrap();
    let err = rule(
        store
            .commit_batch(&ctx("c"), &commit_req(first.lease_id, 1, 1, off(15, 0, false, Some(2))))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err,
        CoreError::PositionRegression {
            current: 21,
            computed: 15
        }
    );
    store.release_lease(&ctx("d"), first.lease_id, 1).await.unwrap();
    let second = store.acquire_lease(&ctx("e"), &k, "q2", None).await.unwrap().lease;
    let c = store
        .commit_batch(
            &ctx("f"),
            &commit_req(second.lease_id, 2, 0, off(15, 0, false, Some(2))),
        )
        .await
        .unwrap();
    assert_eq!(
        (c.outcome, c.previous_next_snapshot, c.next_snapshot),
        (CommitOutcome::Rewound, Some(21), Some(15))
    );
    let h = &store.history(&k, 1).await.unwrap()[0];
    assert_eq!(
        (h.event.kind, h.event.old_next, h.event.new_next),
        (EventKind::Rewind, Some(21), Some(15))
    );
}

pub(crate) async fn failed_operations_change_nothing(db: &TestDb) {
    let store = store(db).await;
    let k = key("nochange");
    let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    store
        .commit_batch(&ctx("b"), &commit_req(lease.lease_id, 1, 3, off(8, 1, false, Some(4))))
        .await
        .unwrap();
    let before = snapshot(&store, &k).await;
    let attempts = [
        commit_req(lease.lease_id, 1, 4, off(0, 0, false, Some(1))),
        commit_req(lease.lease_id, 1, 4, off(8, 4, false, Some(4))),
        commit_req(lease.lease_id, 1, 3, off(8, 2, false, Some(4))),
        commit_req(lease.lease_id, 1, 4, off(5, 0, false, Some(4))),
        commit_req(lease.lease_id, 2, 4, off(9, 0, false, Some(4))),
    ];
    for req in attempts {
        assert!(store.commit_batch(&ctx("x"), &req).await.is_err(), "{req:?}");
        assert_eq!(snapshot(&store, &k).await, before, "{req:?} changed something");
    }
    assert!(store.acquire_lease(&ctx("y"), &k, "other", None).await.is_err());
    assert_eq!(snapshot(&store, &k).await, before);
}

pub(crate) async fn revoke_burns_an_epoch_that_is_never_reused(db: &TestDb) {
    let store = store(db).await;
    let k = key("revoke");
    let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    let revoked = store
        .revoke(&ctx("b"), &k, "operator request", true)
        .await
        .map(|planned| planned.change)
        .unwrap();
    assert_eq!(revoked.epoch, 2);
    assert_eq!(revoked.lease.unwrap().lease_id, lease.lease_id);
    let err = rule(
        store
            .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 0, off(1, 0, false, Some(1))))
            .await
            .unwrap_err(),
    );
    assert!(matches!(
        err,
        CoreError::LeaseNotHeld {
            loss: LeaseLoss::Revoked,
            current_epoch: Some(2),
            ..
        }
    ));
    let next = store.acquire_lease(&ctx("d"), &k, "q", None).await.unwrap().lease;
    assert_eq!(next.epoch, 3);
    let h = store.history(&k, 2).await.unwrap();
    assert_eq!(h[1].event.kind, EventKind::LeaseRevoke);
    assert_eq!(h[1].event.detail.as_deref(), Some("operator request"));
}

pub(crate) fn recovery(startup: StartupMode, earliest: i64, latest: i64) -> RecoveryRequest {
    RecoveryRequest {
        startup,
        ignore_progress: false,
        range: SnapshotRange {
            earliest_snapshot: earliest,
            latest_snapshot: latest,
            earliest_changelog: None,
            changelog_decoupled: false,
        },
        checkpoint: None,
        on_expired: OnExpired::Fail,
    }
}

pub(crate) async fn recovery_reads_the_consumer_and_pins_full_scans(db: &TestDb) {
    let store = store(db).await;
    let k = key("recover");
    let req = recovery(StartupMode::LatestFull, 1, 9);
    let plan = store.recovery_position(&ctx("a"), &k, &req, None).await.unwrap();
    assert_eq!(
        (plan.plan.source, plan.plan.start),
        (RecoverySource::StartupOptions, Offset::start_of(9, true))
    );
    assert!(store.key_state(&k).await.unwrap().is_none(), "a read creates nothing");

    let lease = store.acquire_lease(&ctx("b"), &k, "q", None).await.unwrap().lease;
    let plan = store
        .recovery_position(&ctx("c"), &k, &req, Some(lease.lease_id))
        .await
        .unwrap();
    assert!(plan.pinned);
    let state = store.key_state(&k).await.unwrap().unwrap();
    assert_eq!(state.lease.as_ref().unwrap().full_scan_pin, Some(9));

    store
        .commit_batch(&ctx("d"), &commit_req(lease.lease_id, 1, 0, off(9, 0, true, Some(1))))
        .await
        .unwrap();
    let state = store.key_state(&k).await.unwrap().unwrap();
    assert_eq!(
        state.lease.as_ref().unwrap().full_scan_pin,
        None,
        "pin lifted when the scan completes"
    );

    let plan = store.recovery_position(&ctx("e"), &k, &req, None).await.unwrap();
    assert_eq!(
        (plan.plan.source, plan.plan.start),
        (RecoverySource::Consumer, Offset::start_of(10, false))
    );
    assert_eq!(plan.consumer.map(|c| c.next_snapshot), Some(10));

    let err = rule(
        store
            .recovery_position(&ctx("f"), &k, &req, Some(Uuid::new_v4()))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.reason(), "LEASE_NOT_HELD");
}

pub(crate) async fn legacy_offsets_are_logged_once_per_snapshot(db: &TestDb) {
    let store = store(db).await;
    let k = key("legacy");
    let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    let mut logged = Vec::new();
    for (batch, snapshot) in [(0, 3), (1, 3), (2, 4)] {
        let c = store
            .commit_batch(
                &ctx("b"),
                &commit_req(lease.lease_id, 1, batch, off(snapshot, 0, false, None)),
            )
            .await
            .unwrap();
        assert_eq!(c.outcome, CommitOutcome::UnchangedLegacyOffset);
        assert_eq!(c.warnings.len(), 1);
        logged.push(c.first_legacy_offset);
    }
    assert_eq!(logged, [true, false, true]);
}

pub(crate) async fn concurrent_acquires_have_exactly_one_winner(db: &TestDb) {
    // Several replicas (own pools) racing for one fresh key.
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(store(db).await);
    }
    let k = key("race");
    let attempts = (0..16).map(|i| {
        let store = stores[i % stores.len()].clone();
        let k = k.clone();
        tokio::spawn(async move {
            store
                .acquire_lease(&ctx("race"), &k, &format!("holder-{i}"), None)
                .await
        })
    });
    let results: Vec<_> = join_all(attempts).await.into_iter().map(|r| r.unwrap()).collect();
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e, StoreError::Rule(CoreError::LeaseHeld { .. })), "{e:?}");
        }
    }
    assert_eq!(winners[0].lease.epoch, 1);
    let history = stores[0].history(&k, 100).await.unwrap();
    assert_eq!(history.len(), 1, "exactly one acquisition recorded");
}

pub(crate) async fn concurrent_commits_on_one_lease_serialize(db: &TestDb) {
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(store(db).await);
    }
    let k = key("commits");
    let lease = stores[0].acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    // 24 batches, each ending partway through snapshot 100 + batch, sent at
    // once from four replicas: every commit must be either applied in some
    // serial order or refused as a late duplicate / regression, never lost
    // or interleaved.
    let attempts = (0..24i64).map(|batch| {
        let store = stores[usize::try_from(batch).unwrap() % stores.len()].clone();
        tokio::spawn(async move {
            let end = off(100 + batch, 0, false, Some(2));
            let r = store
                .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, batch, end))
                .await;
            (batch, r)
        })
    });
    let results: Vec<_> = join_all(attempts).await.into_iter().map(|r| r.unwrap()).collect();
    let mut applied = 0;
    for (batch, r) in &results {
        match r {
            Ok(c) if c.outcome.writes_consumer() => {
                applied += 1;
                assert_eq!(c.next_snapshot, Some(100 + batch));
            }
            Ok(c) => assert_eq!(c.outcome, CommitOutcome::Duplicate, "batch {batch}"),
            Err(e) => panic!("batch {batch}: {e:?}"),
        }
    }
    let state = stores[0].key_state(&k).await.unwrap().unwrap();
    let last = state.lease.as_ref().unwrap().last_batch.unwrap();
    assert_eq!(
        state.next_snapshot(),
        Some(100 + last.batch_id),
        "position matches the last batch"
    );
    let history = stores[0].history(&k, 100).await.unwrap();
    let writes: Vec<_> = history.iter().filter(|h| h.event.batch_id.is_some()).collect();
    assert_eq!(writes.len(), applied, "one history row per applied commit");
    // History, oldest first, moves strictly forward in batch id and position.
    let mut previous = (-1, 0);
    for h in writes.iter().rev() {
        let now = (h.event.batch_id.unwrap(), h.event.new_next.unwrap());
        assert!(now.0 > previous.0 && now.1 > previous.1, "{previous:?} then {now:?}");
        previous = now;
    }
}

pub(crate) async fn replicas_sharing_the_database_fence_each_other(db: &TestDb) {
    let a = store(db).await;
    let b = store(db).await;
    let k = key("replicas");
    let first = a.acquire_lease(&ctx("1"), &k, "q", None).await.unwrap().lease;
    let second = b.acquire_lease(&ctx("2"), &k, "q", None).await.unwrap().lease;
    assert_eq!(second.epoch, 2);
    let err = rule(
        a.commit_batch(&ctx("3"), &commit_req(first.lease_id, 1, 0, off(2, 0, false, Some(1))))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.reason(), "LEASE_NOT_HELD");
    let ok = a
        .commit_batch(&ctx("4"), &commit_req(second.lease_id, 2, 0, off(2, 0, false, Some(1))))
        .await
        .unwrap();
    assert_eq!(ok.next_snapshot, Some(3));
}

pub(crate) async fn concurrent_migrations_are_safe(db: &TestDb) {
    let mut backends = Vec::new();
    for _ in 0..4 {
        backends.push(db.unmigrated_backend().await);
    }
    let runs = backends.iter().map(|b| {
        let b = Arc::clone(b);
        tokio::spawn(async move { b.migrate().await })
    });
    for r in join_all(runs).await {
        r.unwrap().expect("concurrent migration");
    }
    // Migrating again is a no-op, and the schema works.
    backends[0].migrate().await.unwrap();
    let store = Store::new(Arc::clone(&backends[1]), policy());
    store
        .acquire_lease(&ctx("m"), &key("migrated"), "q", None)
        .await
        .unwrap();
}

pub(crate) async fn stale_version_save_is_rejected(db: &TestDb) {
    let backend = db.backend().await;
    let store = Store::new(Arc::clone(&backend), policy());
    let k = key("cas");
    store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap();
    let stale = backend.load(FindKey::Key(&k)).await.unwrap();
    let lease = stale.state.as_ref().unwrap().lease.clone().unwrap();
    store.renew_lease(&ctx("b"), lease.lease_id, 1, None).await.unwrap();
    let mut changed = stale.state.clone().unwrap();
    changed.epoch = 99;
    let change = Change {
        state: &changed,
        requires_live_lease: false,
        new_grant: None,
        events: &[],
        ctx: &ctx("c"),
        estimated_now: None,
    };
    assert!(
        backend.save(&stale, &change).await.unwrap().is_none(),
        "a stale version must not be written"
    );
    assert_eq!(store.key_state(&k).await.unwrap().unwrap().epoch, 1);
    // A second insert of a key that now exists loses too.
    let fresh = backend.load(FindKey::Key(&key("cas-new"))).await.unwrap();
    let mut new_state = KeyState::new(key("cas-new"));
    new_state.epoch = 5;
    let change = Change {
        state: &new_state,
        ..change
    };
    let written_at = backend.save(&fresh, &change).await.unwrap();
    assert!(
        written_at.is_some_and(|at| at >= fresh.now),
        "written, at the database time of the write"
    );
    assert!(
        backend.save(&fresh, &change).await.unwrap().is_none(),
        "insert races are detected"
    );
}

pub(crate) async fn save_requiring_a_live_lease_fails_after_its_deadline(db: &TestDb) {
    let backend = db.backend().await;
    let store = Store::new(Arc::clone(&backend), policy());
    let k = key("deadline");
    store
        .acquire_lease(&ctx("a"), &k, "q", Some(Duration::from_millis(100)))
        .await
        .unwrap();
    let loaded = backend.load(FindKey::Key(&k)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let state = loaded.state.clone().unwrap();
    let change = Change {
        state: &state,
        requires_live_lease: true,
        new_grant: None,
        events: &[],
        ctx: &ctx("b"),
        estimated_now: None,
    };
    assert!(
        backend.save(&loaded, &change).await.unwrap().is_none(),
        "the lease expired between the read and the write (by the database clock)"
    );
}

pub(crate) async fn release_is_idempotent_and_frees_the_key(db: &TestDb) {
    let store = store(db).await;
    let k = key("release");
    let lease = store.acquire_lease(&ctx("a"), &k, "q1", None).await.unwrap().lease;
    assert!(store.release_lease(&ctx("b"), lease.lease_id, 1).await.unwrap());
    assert!(!store.release_lease(&ctx("c"), lease.lease_id, 1).await.unwrap());
    let next = store.acquire_lease(&ctx("d"), &k, "q2", None).await.unwrap();
    assert!(!next.takeover);
    assert_eq!(next.lease.epoch, 2);
    let history = store.history(&k, 10).await.unwrap();
    assert_eq!(
        history
            .iter()
            .filter(|h| h.event.kind == EventKind::LeaseRelease)
            .count(),
        1
    );
}
