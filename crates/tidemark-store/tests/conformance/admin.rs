//! Conformance cases for retention fences, expiration and the operator
//! changes (SPEC §5, §6). Time-sensitive cases stop the database clock
//! (SQLite: a manual clock; Postgres: the schema's `tidemark_now()`).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use tidemark_core::admin::ConsumerSelector;
use tidemark_core::commit::{CommitBatch, CommitOutcome};
use tidemark_core::lease::LeasePolicy;
use tidemark_core::{
    BranchName, ConsumerKey, CoreError, EventKind, Offset, OnExpired, RecoveryRequest, RecoverySource, SnapshotRange,
    StartupMode, TableName,
};
use tidemark_store::{CallContext, HistoryFilter, HolderKind, KeyFilter, Store, StoreError, Timestamp};
use tidemark_testkit::{Kind, TestDb};
use uuid::Uuid;

/// Expands to one `#[tokio::test]` per case for a database kind.
#[macro_export]
macro_rules! admin_conformance_suite {
    ($kind:expr) => {
        $crate::admin_conformance_suite!($kind;
            expiry_boundary_equal_is_kept_strictly_older_expires,
            a_renewed_lease_keeps_an_idle_consumer_alive_a_released_one_does_not,
            fences_ignore_expired_consumers_and_name_their_holders,
            changelog_only_matters_only_when_the_lifecycle_is_decoupled,
            pin_protects_an_initial_full_scan_until_it_completes_or_the_lease_ends,
            reset_is_plan_only_unless_executed_and_honours_expectations_and_leases,
            delete_is_plan_only_unless_executed_and_honours_expectations_and_leases,
            clear_uses_full_match_patterns_and_reports_every_consumer,
            revoke_is_plan_only_unless_executed,
            a_bulk_reset_shifts_from_the_position_it_compares_and_forces_only_the_listed_lease,
            every_change_leaves_history_with_principal_and_request_id,
            list_consumers_pages_and_filters,
            table_options_are_validated_and_compare_and_set,
            expire_consumers_once_even_from_two_replicas_at_once,
            acquiring_a_key_expires_its_expired_consumer_first,
            prune_removes_old_history_and_stale_grants_only,
            pruning_catches_up_in_batches_within_its_budget,
            fleet_stats_report_branches_lag_leases_and_history,
            compact_refresh_history_writes_no_row_for_a_repeated_end,
            explain_lists_holders_lowest_first_with_idle_and_expiry,
            export_sends_every_row_and_new_keys_are_inserted_as_given,
            a_lease_keeps_its_caller_and_last_commit_and_a_branch_its_highest_reported_latest,
        );
    };
    ($kind:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                if $kind == tidemark_testkit::Kind::Postgres && tidemark_testkit::postgres_url().is_none() {
                    return;
                }
                conformance::admin::$case($kind).await;
            }
        )*
    };
}

const T0: Timestamp = Timestamp::from_micros(1_800_000_000_000_000);
const HOUR: Duration = Duration::from_secs(3600);

fn ctx(request_id: &str) -> CallContext {
    CallContext::new("operator-alice", request_id)
}

fn table() -> TableName {
    TableName::parse("db.events", "table").unwrap()
}

fn main_branch() -> BranchName {
    BranchName::main()
}

fn key(id: &str) -> ConsumerKey {
    ConsumerKey::parse("db.events", "main", id, "").unwrap()
}

fn policy() -> LeasePolicy {
    LeasePolicy {
        min_ttl: Duration::from_millis(50),
        max_ttl: Duration::from_secs(600),
        default_ttl: Duration::from_secs(30),
    }
}

async fn manual(kind: Kind) -> (TestDb, Store) {
    let db = TestDb::with_manual_clock(kind, T0).await.expect("database");
    let store = Store::new(db.backend().await, policy());
    (db, store)
}

fn off(snapshot_id: i64, index: i64, full: bool, total: Option<i64>) -> Offset {
    Offset {
        snapshot_id,
        index,
        scan_snapshot: full,
        total_splits: total,
    }
}

/// Creates a consumer at `next` through a lease, then releases it.
async fn consumer_at(store: &Store, id: &str, next: i64) {
    let lease = store
        .acquire_lease(&ctx("setup"), &key(id), "setup", None)
        .await
        .unwrap()
        .lease;
    let c = store
        .commit_batch(
            &ctx("setup"),
            &CommitBatch {
                lease_id: lease.lease_id,
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(off(next, 0, false, Some(2))),
                latest_snapshot: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(c.next_snapshot, Some(next));
    assert!(
        store
            .release_lease(&ctx("setup"), lease.lease_id, lease.epoch)
            .await
            .unwrap()
    );
}

async fn set_options(store: &Store, options: &[(&str, &str)]) {
    let set: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    store
        .set_table_options(&ctx("opts"), &table(), &set, &[], true)
        .await
        .unwrap();
}

fn rule(err: StoreError) -> CoreError {
    match err {
        StoreError::Rule(e) => e,
        other => panic!("expected a rule error, got {other:?}"),
    }
}

fn range(earliest: i64, latest: i64) -> SnapshotRange {
    SnapshotRange {
        earliest_snapshot: earliest,
        latest_snapshot: latest,
        earliest_changelog: None,
        changelog_decoupled: false,
    }
}

async fn recovery_source(store: &Store, id: &str) -> RecoverySource {
    let req = RecoveryRequest {
        startup: StartupMode::LatestFull,
        ignore_progress: false,
        range: range(1, 100),
        checkpoint: None,
        on_expired: OnExpired::Fail,
    };
    store
        .recovery_position(&ctx("r"), &key(id), &req, None)
        .await
        .unwrap()
        .plan
        .source
}

pub(crate) async fn expiry_boundary_equal_is_kept_strictly_older_expires(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "1 h")]).await;
    consumer_at(&store, "idle", 5).await;

    db.advance(HOUR).await; // updated_at + expiration == now: kept
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!(fence.fences.snapshot, Some(5), "equal is kept");
    assert!(
        store
            .expire_consumers(&ctx("x"), None, None, 10, false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(recovery_source(&store, "idle").await, RecoverySource::Consumer);

    db.advance(Duration::from_micros(1)).await; // strictly older: expired
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!(fence.fences.snapshot, None, "an expired consumer stops fencing at once");
    assert_eq!(recovery_source(&store, "idle").await, RecoverySource::StartupOptions);
    let plan = store.expire_consumers(&ctx("x"), None, None, 10, false).await.unwrap();
    assert_eq!(plan.len(), 1);
    assert!(
        store.key_state(&key("idle")).await.unwrap().unwrap().consumer.is_some(),
        "a plan changes nothing"
    );
    let done = store.expire_consumers(&ctx("x"), None, None, 10, true).await.unwrap();
    assert_eq!((done[0].key.clone(), done[0].next_snapshot), (key("idle"), 5));
    assert!(store.key_state(&key("idle")).await.unwrap().unwrap().consumer.is_none());
    let h = &store.history(&key("idle"), 1).await.unwrap()[0];
    assert_eq!(
        (h.event.kind, h.event.old_next, h.event.new_next),
        (EventKind::Expire, Some(5), None)
    );
}

pub(crate) async fn a_renewed_lease_keeps_an_idle_consumer_alive_a_released_one_does_not(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "10 min")]).await;
    consumer_at(&store, "kept", 7).await;
    consumer_at(&store, "dropped", 8).await;
    // A query holds "kept" with a lease it keeps renewing, but commits nothing.
    let lease = store
        .acquire_lease(&ctx("a"), &key("kept"), "q", Some(Duration::from_secs(300)))
        .await
        .unwrap()
        .lease;
    for _ in 0..6 {
        db.advance(Duration::from_secs(240)).await;
        store
            .renew_lease(&ctx("r"), lease.lease_id, lease.epoch, None)
            .await
            .unwrap();
    }
    // 24 minutes idle: "kept" is alive (leased), "dropped" expired.
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!(fence.fences.snapshot, Some(7));
    let plan = store.expire_consumers(&ctx("x"), None, None, 10, false).await.unwrap();
    assert_eq!(plan.iter().map(|e| e.key.clone()).collect::<Vec<_>>(), [key("dropped")]);
    // Once released, "kept" is idle past its expiration too.
    store
        .release_lease(&ctx("rel"), lease.lease_id, lease.epoch)
        .await
        .unwrap();
    let plan = store.expire_consumers(&ctx("x"), None, None, 10, false).await.unwrap();
    assert_eq!(plan.len(), 2);
}

pub(crate) async fn fences_ignore_expired_consumers_and_name_their_holders(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "1 h")]).await;
    consumer_at(&store, "old", 3).await;
    db.advance(HOUR / 2).await;
    consumer_at(&store, "b", 9).await;
    consumer_at(&store, "a", 9).await;
    consumer_at(&store, "c", 12).await;
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!((fence.fences.snapshot, fence.fences.changelog), (Some(3), Some(3)));
    assert_eq!(fence.snapshot_holders.len(), 1);
    assert_eq!(fence.snapshot_holders[0].view.state.key, key("old"));
    db.advance(HOUR / 2 + Duration::from_secs(1)).await;
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!(fence.fences.snapshot, Some(9), "the expired consumer no longer holds");
    let holders: Vec<_> = fence
        .snapshot_holders
        .iter()
        .map(|h| h.view.state.key.clone())
        .collect();
    assert_eq!(holders, [key("a"), key("b")], "every consumer at the fence, by id");
    // Another branch is fenced separately; an unknown branch has no fence.
    let dev = BranchName::parse("dev", "branch").unwrap();
    assert_eq!(
        store.fence(&table(), &dev, false, 10).await.unwrap().fences.snapshot,
        None
    );
}

pub(crate) async fn changelog_only_matters_only_when_the_lifecycle_is_decoupled(kind: Kind) {
    let (_db, store) = manual(kind).await;
    consumer_at(&store, "c", 6).await;
    set_options(&store, &[("consumer.changelog-only", "true")]).await;
    let coupled = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!((coupled.fences.snapshot, coupled.fences.changelog), (Some(6), Some(6)));
    assert!(!coupled.fences.changelog_only);
    let decoupled = store.fence(&table(), &main_branch(), true, 10).await.unwrap();
    assert_eq!((decoupled.fences.snapshot, decoupled.fences.changelog), (None, Some(6)));
    assert!(decoupled.fences.changelog_only);
    assert!(decoupled.snapshot_holders.is_empty());
    assert_eq!(decoupled.changelog_holders.len(), 1);
}

pub(crate) async fn pin_protects_an_initial_full_scan_until_it_completes_or_the_lease_ends(kind: Kind) {
    let (db, store) = manual(kind).await;
    consumer_at(&store, "ahead", 40).await;
    let lease = store
        .acquire_lease(&ctx("a"), &key("scan"), "q", None)
        .await
        .unwrap()
        .lease;
    let req = RecoveryRequest {
        startup: StartupMode::LatestFull,
        ignore_progress: false,
        range: range(1, 30),
        checkpoint: None,
        on_expired: OnExpired::Fail,
    };
    let plan = store
        .recovery_position(&ctx("r"), &key("scan"), &req, Some(lease.lease_id))
        .await
        .unwrap();
    assert!(plan.pinned);
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!(fence.fences.snapshot, Some(30), "the scan's snapshot is pinned");
    assert_eq!(fence.snapshot_holders[0].kind, HolderKind::FullScanPin);
    // Partway through: still pinned. Last split: the pin becomes a consumer.
    let commit = |batch_id, end| CommitBatch {
        lease_id: lease.lease_id,
        epoch: lease.epoch,
        batch_id,
        end: Some(end),
        latest_snapshot: None,
    };
    let c = store
        .commit_batch(&ctx("c"), &commit(0, off(30, 0, true, Some(2))))
        .await
        .unwrap();
    assert_eq!(c.outcome, CommitOutcome::UnchangedIncompleteFullScan);
    assert_eq!(
        store
            .fence(&table(), &main_branch(), false, 10)
            .await
            .unwrap()
            .fences
            .snapshot,
        Some(30)
    );
    store
        .commit_batch(&ctx("c"), &commit(1, off(30, 1, true, Some(2))))
        .await
        .unwrap();
    let fence = store.fence(&table(), &main_branch(), false, 10).await.unwrap();
    assert_eq!(fence.fences.snapshot, Some(31));
    assert_eq!(fence.snapshot_holders[0].kind, HolderKind::Consumer);

    // A second scan whose lease expires: the pin disappears with the lease.
    let other = store
        .acquire_lease(&ctx("a"), &key("scan2"), "q2", Some(Duration::from_secs(60)))
        .await
        .unwrap()
        .lease;
    store
        .recovery_position(&ctx("r"), &key("scan2"), &req, Some(other.lease_id))
        .await
        .unwrap();
    assert_eq!(
        store
            .fence(&table(), &main_branch(), false, 10)
            .await
            .unwrap()
            .fences
            .snapshot,
        Some(30)
    );
    db.advance(Duration::from_secs(61)).await;
    assert_eq!(
        store
            .fence(&table(), &main_branch(), false, 10)
            .await
            .unwrap()
            .fences
            .snapshot,
        Some(31)
    );
}

pub(crate) async fn reset_is_plan_only_unless_executed_and_honours_expectations_and_leases(kind: Kind) {
    let (_db, store) = manual(kind).await;
    consumer_at(&store, "r", 10).await;
    let plan = store
        .reset_consumer(&ctx("p"), &key("r"), 4, None, false, false)
        .await
        .unwrap();
    assert!(!plan.applied);
    assert_eq!((plan.change.old_next, plan.change.new_next), (Some(10), Some(4)));
    assert_eq!(
        store.key_state(&key("r")).await.unwrap().unwrap().next_snapshot(),
        Some(10)
    );

    let err = rule(
        store
            .reset_consumer(&ctx("p"), &key("r"), 4, Some(9), false, true)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err,
        CoreError::NextSnapshotMismatch {
            expected: 9,
            actual: Some(10)
        }
    );
    assert_eq!(
        store.key_state(&key("r")).await.unwrap().unwrap().next_snapshot(),
        Some(10)
    );
    let done = store
        .reset_consumer(&ctx("p"), &key("r"), 4, Some(10), false, true)
        .await
        .unwrap();
    assert!(done.applied);
    assert_eq!(
        store.key_state(&key("r")).await.unwrap().unwrap().next_snapshot(),
        Some(4)
    );

    // A live lease refuses it; force revokes the lease and fences its holder.
    let lease = store
        .acquire_lease(&ctx("a"), &key("r"), "running", None)
        .await
        .unwrap()
        .lease;
    let err = rule(
        store
            .reset_consumer(&ctx("p"), &key("r"), 2, None, false, true)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.reason(), "LEASE_HELD");
    let plan = store
        .reset_consumer(&ctx("p"), &key("r"), 2, None, true, false)
        .await
        .unwrap();
    assert_eq!(plan.change.revoked.as_ref().map(|l| l.lease_id), Some(lease.lease_id));
    assert!(
        store.key_state(&key("r")).await.unwrap().unwrap().lease.unwrap().status == tidemark_core::LeaseStatus::Active
    );
    let forced = store
        .reset_consumer(&ctx("p"), &key("r"), 2, None, true, true)
        .await
        .unwrap();
    assert_eq!(forced.change.epoch, lease.epoch + 1);
    let zombie = store
        .commit_batch(
            &ctx("z"),
            &CommitBatch {
                lease_id: lease.lease_id,
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(off(50, 0, false, Some(1))),
                latest_snapshot: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(rule(zombie).reason(), "LEASE_NOT_HELD");
    assert_eq!(
        store.key_state(&key("r")).await.unwrap().unwrap().next_snapshot(),
        Some(2)
    );
    // Reset creates a consumer that does not exist.
    store
        .reset_consumer(&ctx("p"), &key("new"), 3, None, false, true)
        .await
        .unwrap();
    assert_eq!(
        store.key_state(&key("new")).await.unwrap().unwrap().next_snapshot(),
        Some(3)
    );
}

pub(crate) async fn delete_is_plan_only_unless_executed_and_honours_expectations_and_leases(kind: Kind) {
    let (_db, store) = manual(kind).await;
    consumer_at(&store, "d", 10).await;
    let plan = store
        .delete_consumer(&ctx("p"), &key("d"), None, false, false)
        .await
        .unwrap();
    assert_eq!(
        (plan.applied, plan.change.old_next, plan.change.new_next),
        (false, Some(10), None)
    );
    assert!(store.key_state(&key("d")).await.unwrap().unwrap().consumer.is_some());
    assert!(
        store
            .delete_consumer(&ctx("p"), &key("d"), Some(11), false, true)
            .await
            .is_err()
    );
    assert!(store.key_state(&key("d")).await.unwrap().unwrap().consumer.is_some());
    let lease = store
        .acquire_lease(&ctx("a"), &key("d"), "running", None)
        .await
        .unwrap()
        .lease;
    assert_eq!(
        rule(
            store
                .delete_consumer(&ctx("p"), &key("d"), None, false, true)
                .await
                .unwrap_err()
        )
        .reason(),
        "LEASE_HELD"
    );
    let done = store
        .delete_consumer(&ctx("p"), &key("d"), Some(10), true, true)
        .await
        .unwrap();
    assert!(done.applied && done.change.revoked.is_some());
    let state = store.key_state(&key("d")).await.unwrap().unwrap();
    assert!(state.consumer.is_none());
    assert_eq!(state.epoch, lease.epoch + 1, "the row keeps its epoch high-water mark");
    // Deleting again is a no-op; re-acquiring never reuses an epoch.
    let again = store
        .delete_consumer(&ctx("p"), &key("d"), None, false, true)
        .await
        .unwrap();
    assert!(!again.change.changes_anything());
    let next = store
        .acquire_lease(&ctx("a"), &key("d"), "new", None)
        .await
        .unwrap()
        .lease;
    assert_eq!(next.epoch, lease.epoch + 2);
}

pub(crate) async fn clear_uses_full_match_patterns_and_reports_every_consumer(kind: Kind) {
    let (_db, store) = manual(kind).await;
    for (id, next) in [
        ("etl-1", 3),
        ("etl-2", 4),
        ("old-etl-1", 5),
        ("keep-etl", 6),
        ("etl-leased", 7),
    ] {
        consumer_at(&store, id, next).await;
    }
    store
        .acquire_lease(&ctx("a"), &key("etl-leased"), "running", None)
        .await
        .unwrap();
    let ids = |cleared: &[tidemark_store::BulkChange]| -> Vec<(String, bool)> {
        cleared
            .iter()
            .map(|c| (c.key.consumer_id.as_str().to_owned(), c.result.is_ok()))
            .collect()
    };
    let selector = ConsumerSelector::parse("etl-.*", "").unwrap();
    let plan = store
        .clear_consumers(&ctx("c"), &table(), &main_branch(), &selector, false, false, None)
        .await
        .unwrap();
    assert_eq!(
        ids(&plan),
        [
            ("etl-1".into(), true),
            ("etl-2".into(), true),
            ("etl-leased".into(), false)
        ],
        "full match: old-etl-1 and keep-etl are not selected; the leased one is refused"
    );
    assert_eq!(
        store
            .list_consumers(&KeyFilter::default(), None, 100)
            .await
            .unwrap()
            .consumers
            .len(),
        5
    );
    // Excluding alone works (including defaults to all).
    let selector = ConsumerSelector::parse("", "keep-.*|etl-leased").unwrap();
    let done = store
        .clear_consumers(&ctx("c"), &table(), &main_branch(), &selector, false, true, None)
        .await
        .unwrap();
    assert_eq!(
        ids(&done),
        [
            ("etl-1".into(), true),
            ("etl-2".into(), true),
            ("old-etl-1".into(), true)
        ]
    );
    let left: Vec<_> = store
        .list_consumers(&KeyFilter::default(), None, 100)
        .await
        .unwrap()
        .consumers
        .iter()
        .filter(|c| c.state.consumer.is_some())
        .map(|c| c.state.key.consumer_id.as_str().to_owned())
        .collect();
    assert_eq!(left, ["etl-leased", "keep-etl"]);
    // Force clears the leased one too, revoking its lease.
    let selector = ConsumerSelector::parse("etl-leased", "").unwrap();
    let forced = store
        .clear_consumers(&ctx("c"), &table(), &main_branch(), &selector, true, true, None)
        .await
        .unwrap();
    assert!(forced[0].result.as_ref().unwrap().revoked.is_some());
}

pub(crate) async fn revoke_is_plan_only_unless_executed(kind: Kind) {
    let (_db, store) = manual(kind).await;
    let lease = store
        .acquire_lease(&ctx("a"), &key("v"), "q", None)
        .await
        .unwrap()
        .lease;
    let plan = store.revoke(&ctx("p"), &key("v"), "maintenance", false).await.unwrap();
    assert!(!plan.applied && plan.change.lease.is_some());
    store
        .renew_lease(&ctx("r"), lease.lease_id, lease.epoch, None)
        .await
        .unwrap();
    let done = store.revoke(&ctx("p"), &key("v"), "maintenance", true).await.unwrap();
    assert_eq!(done.change.epoch, 2);
    assert!(
        store
            .renew_lease(&ctx("r"), lease.lease_id, lease.epoch, None)
            .await
            .is_err()
    );
    let nothing = store.revoke(&ctx("p"), &key("v"), "again", true).await.unwrap();
    assert!(nothing.change.lease.is_none());
}

pub(crate) async fn every_change_leaves_history_with_principal_and_request_id(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "1 h")]).await;
    consumer_at(&store, "h", 5).await;
    store
        .reset_consumer(&ctx("reset-1"), &key("h"), 3, None, false, true)
        .await
        .unwrap();
    store.acquire_lease(&ctx("acq-1"), &key("h"), "q", None).await.unwrap();
    store.revoke(&ctx("revoke-1"), &key("h"), "why", true).await.unwrap();
    store
        .delete_consumer(&ctx("delete-1"), &key("h"), None, false, true)
        .await
        .unwrap();
    store
        .reset_consumer(&ctx("reset-2"), &key("h"), 8, None, false, true)
        .await
        .unwrap();
    db.advance(HOUR * 2).await;
    store
        .expire_consumers(&ctx("sweep-1"), None, None, 10, true)
        .await
        .unwrap();
    let history = store.history(&key("h"), 100).await.unwrap();
    let mine: Vec<_> = history
        .iter()
        .rev()
        .filter(|h| h.request_id != "setup")
        .map(|h| (h.event.kind, h.event.old_next, h.event.new_next, h.request_id.as_str()))
        .collect();
    assert_eq!(
        mine,
        [
            (EventKind::Reset, Some(5), Some(3), "reset-1"),
            (EventKind::LeaseAcquire, Some(3), Some(3), "acq-1"),
            (EventKind::LeaseRevoke, Some(3), Some(3), "revoke-1"),
            (EventKind::Delete, Some(3), None, "delete-1"),
            (EventKind::Reset, None, Some(8), "reset-2"),
            (EventKind::Expire, Some(8), None, "sweep-1"),
        ]
    );
    assert!(history.iter().all(|h| h.principal == "operator-alice"));
    // Paged by table, newest first.
    let filter = HistoryFilter {
        table: table(),
        branch: None,
        consumer_id: None,
    };
    let first = store.list_history(&filter, None, 3).await.unwrap();
    let second = store.list_history(&filter, Some(first[2].id), 3).await.unwrap();
    assert_eq!(first.len(), 3);
    assert!(second[0].id < first[2].id);
    // The history of a consumer tidemark has never seen is NOT_FOUND, not an
    // empty page a typo hides behind (issue 34); a known key with no rows in
    // the page asked for is an empty page.
    let never_seen = HistoryFilter::key(&key("nobody"));
    let err = rule(store.list_history(&never_seen, None, 10).await.unwrap_err());
    assert_eq!(err.reason(), "CONSUMER_NOT_FOUND", "{err:?}");
    let known = HistoryFilter::key(&key("h"));
    assert!(store.list_history(&known, Some(1), 10).await.unwrap().is_empty());
}

pub(crate) async fn list_consumers_pages_and_filters(kind: Kind) {
    let (_db, store) = manual(kind).await;
    for i in 0..7 {
        consumer_at(&store, &format!("c{i}"), 10 + i).await;
    }
    consumer_at(&store, "other", 1).await;
    store
        .acquire_lease(&ctx("a"), &key("leased-only"), "q", None)
        .await
        .unwrap();
    let mut after = None;
    let mut seen = Vec::new();
    loop {
        let page = store
            .list_consumers(&KeyFilter::default(), after.as_ref(), 3)
            .await
            .unwrap();
        seen.extend(
            page.consumers
                .iter()
                .map(|c| c.state.key.consumer_id.as_str().to_owned()),
        );
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "leased-only", "other"]);
    let filter = KeyFilter {
        table: Some(table()),
        branch: Some(main_branch()),
        consumer_id_prefix: Some("c".into()),
    };
    let page = store.list_consumers(&filter, None, 100).await.unwrap();
    assert_eq!(page.consumers.len(), 7);
    assert!(page.next.is_none());
    let none = KeyFilter {
        table: Some(TableName::parse("db.other", "t").unwrap()),
        ..KeyFilter::default()
    };
    assert!(
        store
            .list_consumers(&none, None, 100)
            .await
            .unwrap()
            .consumers
            .is_empty()
    );
}

pub(crate) async fn table_options_are_validated_and_compare_and_set(kind: Kind) {
    let (_db, store) = manual(kind).await;
    assert_eq!(store.table_options(&table()).await.unwrap().version, None);
    let set: BTreeMap<String, String> = [("consumer.expiration-time".into(), "30 min".into())].into();
    let plan = store
        .set_table_options(&ctx("o"), &table(), &set, &[], false)
        .await
        .unwrap();
    assert!(!plan.applied);
    assert_eq!(plan.change.after.expiration, Some(HOUR / 2));
    assert_eq!(
        store.table_options(&table()).await.unwrap().version,
        None,
        "a plan writes nothing"
    );
    store
        .set_table_options(&ctx("o"), &table(), &set, &[], true)
        .await
        .unwrap();
    let stored = store.table_options(&table()).await.unwrap();
    assert_eq!((stored.version, stored.options.expiration), (Some(1), Some(HOUR / 2)));
    assert_eq!(stored.updated_by.as_deref(), Some("operator-alice"));
    let bad: BTreeMap<String, String> = [("consumer.expire".into(), "1 d".into())].into();
    let err = rule(
        store
            .set_table_options(&ctx("o"), &table(), &bad, &[], true)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.reason(), "INVALID_ARGUMENT");
    store
        .set_table_options(
            &ctx("o"),
            &table(),
            &BTreeMap::new(),
            &["consumer.expiration-time".into()],
            true,
        )
        .await
        .unwrap();
    let stored = store.table_options(&table()).await.unwrap();
    assert_eq!((stored.version, stored.options.expiration), (Some(2), None));
}

pub(crate) async fn expire_consumers_once_even_from_two_replicas_at_once(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "1 min")]).await;
    for i in 0..12 {
        consumer_at(&store, &format!("e{i}"), 5).await;
    }
    db.advance(Duration::from_secs(120)).await;
    let replicas = [
        Store::new(db.backend().await, policy()),
        Store::new(db.backend().await, policy()),
    ];
    let runs = replicas.iter().map(|s| {
        let s = s.clone();
        tokio::spawn(async move { s.expire_consumers_counted(&ctx("sweep"), None, None, 100, true).await })
    });
    let runs: Vec<_> = join_all(runs).await.into_iter().map(|r| r.unwrap().unwrap()).collect();
    let total: usize = runs.iter().map(|r| r.expired.len()).sum();
    assert_eq!(total, 12, "each consumer expired exactly once across both replicas");
    // What each found is reported whoever won it, so a sweeper that lost
    // part of a capped backlog to another replica still sees its size.
    for run in &runs {
        assert!(run.found >= run.expired.len(), "{run:?}");
    }
    assert!(
        runs.iter().any(|r| r.found == 12),
        "the first to look found all twelve: {runs:?}"
    );
    for i in 0..12 {
        let expires = store
            .history(&key(&format!("e{i}")), 100)
            .await
            .unwrap()
            .iter()
            .filter(|h| h.event.kind == EventKind::Expire)
            .count();
        assert_eq!(expires, 1);
    }
}

pub(crate) async fn acquiring_a_key_expires_its_expired_consumer_first(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "1 h")]).await;
    consumer_at(&store, "stale", 4).await;
    db.advance(HOUR * 3).await;
    let acquired = store
        .acquire_lease(&ctx("a"), &key("stale"), "new-query", None)
        .await
        .unwrap();
    assert!(
        acquired.consumer.is_none(),
        "the expired consumer is not revived by the new lease"
    );
    let kinds: Vec<_> = store
        .history(&key("stale"), 2)
        .await
        .unwrap()
        .iter()
        .rev()
        .map(|h| h.event.kind)
        .collect();
    assert_eq!(kinds, [EventKind::Expire, EventKind::LeaseAcquire]);
}

pub(crate) async fn prune_removes_old_history_and_stale_grants_only(kind: Kind) {
    let (db, store) = manual(kind).await;
    consumer_at(&store, "p", 5).await;
    let current = store
        .acquire_lease(&ctx("a"), &key("p"), "q", Some(Duration::from_secs(600)))
        .await
        .unwrap()
        .lease;
    let before = store.history(&key("p"), 100).await.unwrap().len();
    db.advance(Duration::from_secs(86_400 * 40)).await;
    store
        .reset_consumer(&ctx("late"), &key("other"), 2, None, false, true)
        .await
        .unwrap();
    let pruned = store.prune(Duration::from_secs(86_400 * 30), 10_000).await.unwrap();
    assert_eq!(pruned.history, u64::try_from(before).unwrap());
    assert_eq!(pruned.grants, 1, "the released setup lease; the current one stays");
    assert!(store.history(&key("p"), 100).await.unwrap().is_empty());
    assert_eq!(store.history(&key("other"), 100).await.unwrap().len(), 1);
    // The current lease still resolves (its grant was kept).
    let err = store
        .renew_lease(&ctx("r"), current.lease_id, current.epoch, None)
        .await
        .unwrap_err();
    assert!(matches!(
        rule(err),
        CoreError::LeaseNotHeld {
            loss: tidemark_core::LeaseLoss::Expired,
            ..
        }
    ));
    let unknown = store.renew_lease(&ctx("r"), Uuid::new_v4(), 1, None).await.unwrap_err();
    assert_eq!(rule(unknown).reason(), "LEASE_NOT_HELD");
}

pub(crate) async fn pruning_catches_up_in_batches_within_its_budget(kind: Kind) {
    let (db, store) = manual(kind).await;
    for next in 2..12 {
        store
            .reset_consumer(&ctx("op"), &key("busy"), next, None, false, true)
            .await
            .unwrap();
    }
    let rows = store.history(&key("busy"), 100).await.unwrap().len();
    assert_eq!(rows, 10);
    db.advance(Duration::from_secs(86_400 * 40)).await;
    let month = Duration::from_secs(86_400 * 30);
    // No budget: one batch, and it says it has not caught up.
    let first = store.prune_until_caught_up(month, 3, Duration::ZERO).await.unwrap();
    assert_eq!((first.history, first.batches, first.caught_up), (3, 1, false));
    // Then batches until one finds fewer than a batch.
    let rest = store
        .prune_until_caught_up(month, 3, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!((rest.history, rest.batches, rest.caught_up), (7, 3, true));
    assert!(store.history(&key("busy"), 100).await.unwrap().is_empty());
}

pub(crate) async fn explain_lists_holders_lowest_first_with_idle_and_expiry(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "2 h")]).await;
    consumer_at(&store, "slow", 3).await;
    db.advance(HOUR / 2).await;
    consumer_at(&store, "fast", 20).await;
    let lease = store
        .acquire_lease(&ctx("a"), &key("scan"), "scanner", None)
        .await
        .unwrap()
        .lease;
    let req = RecoveryRequest {
        startup: StartupMode::LatestFull,
        ignore_progress: false,
        range: range(1, 15),
        checkpoint: None,
        on_expired: OnExpired::Fail,
    };
    store
        .recovery_position(&ctx("r"), &key("scan"), &req, Some(lease.lease_id))
        .await
        .unwrap();
    let explained = store.explain(&table(), &main_branch(), false, 100).await.unwrap();
    let rows: Vec<_> = explained
        .holders
        .iter()
        .map(|h| (h.view.state.key.consumer_id.as_str().to_owned(), h.kind, h.snapshot))
        .collect();
    assert_eq!(
        rows,
        [
            ("slow".into(), HolderKind::Consumer, 3),
            ("scan".into(), HolderKind::FullScanPin, 15),
            ("fast".into(), HolderKind::Consumer, 20),
        ]
    );
    let slow = explained.holders[0].view.liveness.unwrap();
    assert_eq!(slow.idle, HOUR / 2);
    assert_eq!(slow.expires_in, Some(HOUR * 3 / 2));
    assert_eq!(explained.fences.fences.snapshot, Some(3));
    assert!(!explained.truncated);
}

pub(crate) async fn fleet_stats_report_branches_lag_leases_and_history(kind: Kind) {
    let (db, store) = manual(kind).await;
    assert!(store.claim_collector().await.unwrap(), "a lone process collects");
    assert!(store.claim_collector().await.unwrap(), "and keeps collecting");
    // "ahead" sits at 20 (no latest reported); "behind" leases, reads up to
    // snapshot 4 and reports 10 as the latest; a consumer on another branch.
    consumer_at(&store, "ahead", 20).await;
    db.advance(Duration::from_secs(5)).await;
    let lease = store
        .acquire_lease(&ctx("b"), &key("behind"), "q", Some(Duration::from_secs(60)))
        .await
        .unwrap()
        .lease;
    let behind_at = db.now();
    store
        .commit_batch(
            &ctx("b"),
            &CommitBatch {
                lease_id: lease.lease_id,
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(off(4, 0, false, Some(1))),
                latest_snapshot: Some(10),
            },
        )
        .await
        .unwrap();
    let dev = ConsumerKey::parse("db.events", "dev", "other", "").unwrap();
    let other = store.acquire_lease(&ctx("d"), &dev, "q", None).await.unwrap().lease;
    store
        .release_lease(&ctx("d"), other.lease_id, other.epoch)
        .await
        .unwrap();
    let history_rows = store.history(&key("ahead"), 100).await.unwrap().len()
        + store.history(&key("behind"), 100).await.unwrap().len()
        + store.history(&dev, 100).await.unwrap().len();
    db.advance(Duration::from_secs(10)).await;

    let month = Duration::from_secs(86_400 * 30);
    let stats = store
        .fleet_stats(100, 1, Some(month), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(stats.now, db.now());
    let main = &stats.branches[0];
    assert_eq!(
        stats.branches.len(),
        1,
        "a branch without consumers is not listed: {stats:?}"
    );
    assert_eq!((main.table.as_str(), main.branch.as_str()), ("db.events", "main"));
    assert_eq!((main.consumers, main.min_next, main.reported_latest), (2, 5, Some(10)));
    assert_eq!(main.oldest_behind, Some(behind_at), "only the consumer behind counts");
    assert_eq!(stats.worst.len(), 1, "capped at the one asked for");
    assert_eq!(
        (
            stats.worst[0].consumer_id.as_str(),
            stats.worst[0].next_snapshot,
            stats.worst[0].branch_latest
        ),
        ("behind", 5, 10)
    );
    assert_eq!(stats.live_leases, 1);
    assert_eq!(stats.history_rows, Some(history_rows as i64));
    assert_eq!(stats.history_oldest, Some(T0), "the first row was written at T0");
    assert!(
        store
            .fleet_stats(100, 0, None, Duration::from_secs(60))
            .await
            .unwrap()
            .worst
            .is_empty()
    );
    assert_eq!(
        store
            .fleet_stats(100, 0, None, Duration::from_secs(60))
            .await
            .unwrap()
            .history_oldest,
        None,
        "no retention, no search"
    );

    // The lease lapses.
    db.advance(Duration::from_secs(120)).await;
    let later = store
        .fleet_stats(100, 0, Some(month), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(later.live_leases, 0);
    assert!(store.pool_stats().max >= 1);
}

pub(crate) async fn compact_refresh_history_writes_no_row_for_a_repeated_end(kind: Kind) {
    let (db, store) = manual(kind).await;
    let store = store.with_refresh_history(tidemark_core::RefreshHistory::Compact);
    let lease = store
        .acquire_lease(&ctx("c"), &key("idle"), "q", None)
        .await
        .unwrap()
        .lease;
    let commit = |batch_id: i64, snapshot: i64| CommitBatch {
        lease_id: lease.lease_id,
        epoch: lease.epoch,
        batch_id,
        end: Some(off(snapshot, 0, false, Some(1))),
        latest_snapshot: None,
    };
    store.commit_batch(&ctx("c"), &commit(0, 4)).await.unwrap();
    let rows = store.history(&key("idle"), 100).await.unwrap().len();
    for batch in 1..=5 {
        db.advance(Duration::from_secs(1)).await;
        let c = store.commit_batch(&ctx("c"), &commit(batch, 4)).await.unwrap();
        assert_eq!(c.outcome, CommitOutcome::Refreshed);
    }
    assert_eq!(
        store.history(&key("idle"), 100).await.unwrap().len(),
        rows,
        "idle refreshes add no history"
    );
    let state = store.key_state(&key("idle")).await.unwrap().unwrap();
    assert_eq!(
        state.consumer.unwrap().updated_at,
        db.now(),
        "the consumer still shows the last refresh"
    );
    store.commit_batch(&ctx("c"), &commit(6, 7)).await.unwrap();
    assert_eq!(
        store.history(&key("idle"), 100).await.unwrap().len(),
        rows + 1,
        "a move is recorded"
    );
}

/// A7's two storage operations: an export sends the options, the
/// registrations and every key row (epoch-only ones too) in key order; new
/// keys are inserted with the times given (not restamped) and one history
/// row each, and a key that already has a row is left alone.
pub(crate) async fn export_sends_every_row_and_new_keys_are_inserted_as_given(kind: Kind) {
    let (db, store) = manual(kind).await;
    set_options(&store, &[("consumer.expiration-time", "1 h")]).await;
    consumer_at(&store, "b-consumer", 5).await;
    let backend = db.backend().await;
    let then = Timestamp::from_micros(T0.as_micros() - 3_600_000_000);
    let new = |id: &str, epoch: i64| {
        let state = tidemark_core::KeyState {
            epoch,
            consumer: Some(tidemark_core::ConsumerRecord {
                next_snapshot: 9,
                created_at: then,
                updated_at: then,
            }),
            ..tidemark_core::KeyState::new(key(id))
        };
        let event = tidemark_core::HistoryEvent::new(EventKind::Create, None, Some(9));
        (state, event)
    };
    let rows = vec![new("a-new", 4), new("b-consumer", 9), new("c-new", 0)];
    let created = backend.insert_new_keys(&rows, &ctx("import")).await.unwrap();
    assert_eq!(created, [true, false, true], "an existing row is left alone");
    let a = store.key_state(&key("a-new")).await.unwrap().unwrap();
    assert_eq!(a, rows[0].0, "inserted exactly as given, times included");
    let b = store.key_state(&key("b-consumer")).await.unwrap().unwrap();
    assert_eq!((b.epoch, b.next_snapshot()), (1, Some(5)));
    let history = store.history(&key("a-new"), 10).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].request_id.as_str(), history[0].event.kind),
        ("import", EventKind::Create)
    );

    let (sender, mut parts) = tokio::sync::mpsc::channel(16);
    backend.export_state(None, 2, sender).await.unwrap();
    let mut keys = Vec::new();
    let mut head = None;
    while let Some(part) = parts.recv().await {
        match part {
            tidemark_store::ExportPart::Head { options, .. } => head = Some(options),
            tidemark_store::ExportPart::Keys(page) => {
                assert!(page.len() <= 2, "pages of the asked size");
                keys.extend(page);
            }
        }
    }
    let options = head.expect("the head comes first");
    assert_eq!(options.len(), 1);
    assert_eq!(options[0].1.expiration, Some(HOUR));
    let ids: Vec<&str> = keys.iter().map(|s| s.key.consumer_id.as_str()).collect();
    assert_eq!(ids, ["a-new", "b-consumer", "c-new"], "every row, in key order");
    assert_eq!(keys[0], rows[0].0);
    // Only one table when asked.
    let (sender, mut parts) = tokio::sync::mpsc::channel(16);
    let other = TableName::parse("db.other", "table").unwrap();
    backend.export_state(Some(&other), 2, sender).await.unwrap();
    while let Some(part) = parts.recv().await {
        if let tidemark_store::ExportPart::Keys(page) = part {
            panic!("keys of another table: {page:?}");
        }
    }
}

/// Runs `work` on `store` from inside a synchronous closure the store calls
/// (a bulk reset's target), as another operator acting at that moment.
fn meanwhile(work: impl Future<Output = ()>) {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(work));
}

/// A bulk reset lists the consumers, then writes each. Something may move a
/// consumer, or replace its lease, in between: the shift is taken from the
/// position the write compares against (not the listing's), and `force`
/// revokes only the lease the listing showed (a lease granted since refuses
/// as if not forced). Before: the shift was applied to the listed position
/// (15 written over 20), and the new lease was revoked.
pub(crate) async fn a_bulk_reset_shifts_from_the_position_it_compares_and_forces_only_the_listed_lease(kind: Kind) {
    let (_db, store) = manual(kind).await;
    consumer_at(&store, "moved", 10).await;
    let once = std::sync::atomic::AtomicBool::new(false);
    let selector = ConsumerSelector::parse("moved", "").unwrap();
    let other = store.clone();
    let reset = store
        .reset_consumers(
            &ctx("bulk"),
            &table(),
            &main_branch(),
            &selector,
            |current| {
                if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    meanwhile(async {
                        other
                            .reset_consumer(&ctx("other"), &key("moved"), 20, None, false, true)
                            .await
                            .unwrap();
                    });
                }
                Ok(current.unwrap() + 5)
            },
            &tidemark_store::BulkExpected::default(),
            false,
            true,
            None,
        )
        .await
        .unwrap();
    assert_eq!(reset[0].result.as_ref().unwrap().new_next, Some(25), "{reset:?}");
    assert_eq!(
        store.key_state(&key("moved")).await.unwrap().unwrap().next_snapshot(),
        Some(25)
    );

    consumer_at(&store, "leased", 10).await;
    let first = store
        .acquire_lease(&ctx("a"), &key("leased"), "q1", None)
        .await
        .unwrap()
        .lease;
    let second = std::sync::Mutex::new(None);
    let once = std::sync::atomic::AtomicBool::new(false);
    let selector = ConsumerSelector::parse("leased", "").unwrap();
    let reset = store
        .reset_consumers(
            &ctx("bulk"),
            &table(),
            &main_branch(),
            &selector,
            |current| {
                if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    // The listed lease's query stops; another takes the key.
                    meanwhile(async {
                        assert!(
                            other
                                .release_lease(&ctx("a"), first.lease_id, first.epoch)
                                .await
                                .unwrap()
                        );
                        let lease = other
                            .acquire_lease(&ctx("b"), &key("leased"), "q2", None)
                            .await
                            .unwrap()
                            .lease;
                        *second.lock().unwrap() = Some(lease);
                    });
                }
                Ok(current.unwrap() + 1)
            },
            &tidemark_store::BulkExpected::default(),
            true,
            true,
            None,
        )
        .await
        .unwrap();
    assert!(
        matches!(&reset[0].result, Err(CoreError::LeaseHeld { holder, .. }) if holder == "q2"),
        "the lease granted after the listing is not forced: {reset:?}"
    );
    let second = second.lock().unwrap().clone().unwrap();
    store
        .renew_lease(&ctx("b"), second.lease_id, second.epoch, None)
        .await
        .expect("the new lease is still live");
    assert_eq!(
        store.key_state(&key("leased")).await.unwrap().unwrap().next_snapshot(),
        Some(10)
    );
}

pub(crate) async fn a_lease_keeps_its_caller_and_last_commit_and_a_branch_its_highest_reported_latest(kind: Kind) {
    let (db, store) = manual(kind).await;
    let mut caller_ctx = ctx("caller");
    caller_ctx.caller = tidemark_core::Caller::new(
        Some("10.0.0.7:51234".into()),
        Some("tidemark-python/0.1.0 grpc-python/1.71.0"),
    );
    let lease = store
        .acquire_lease(&caller_ctx, &key("a"), "q-a", None)
        .await
        .unwrap()
        .lease;
    let (view, _) = store.describe(&key("a"), 1).await.unwrap();
    let stored = view.state.lease.clone().unwrap();
    assert_eq!(stored.caller, caller_ctx.caller, "the caller is stored with the grant");
    assert_eq!(stored.committed_at, None);
    db.advance(Duration::from_secs(5)).await;
    let commit = |batch_id, end, latest| CommitBatch {
        lease_id: lease.lease_id,
        epoch: lease.epoch,
        batch_id,
        end: Some(off(end, 0, false, Some(1))),
        latest_snapshot: Some(latest),
    };
    store.commit_batch(&ctx("c"), &commit(0, 5, 7)).await.unwrap();
    let (view, _) = store.describe(&key("a"), 1).await.unwrap();
    let committed = view.state.lease.clone().unwrap();
    assert_eq!(committed.committed_at, Some(view.now), "stamped with the commit");
    assert_eq!(committed.caller, caller_ctx.caller, "a commit keeps the caller");
    // A retry of the same batch renews but is not a new commit.
    db.advance(Duration::from_secs(5)).await;
    store.commit_batch(&ctx("c"), &commit(0, 5, 7)).await.unwrap();
    let (view, _) = store.describe(&key("a"), 1).await.unwrap();
    assert_eq!(view.state.lease.unwrap().committed_at, committed.committed_at);

    // The branch's highest reported latest snapshot, not the key's own.
    assert_eq!(store.reported_latest(&table(), &main_branch()).await.unwrap(), Some(7));
    consumer_at(&store, "b", 3).await; // reports nothing
    let other = store
        .acquire_lease(&ctx("o"), &key("c"), "q-c", None)
        .await
        .unwrap()
        .lease;
    store
        .commit_batch(
            &ctx("o"),
            &CommitBatch {
                lease_id: other.lease_id,
                epoch: other.epoch,
                batch_id: 0,
                end: Some(off(16, 0, false, Some(1))),
                latest_snapshot: Some(18),
            },
        )
        .await
        .unwrap();
    assert_eq!(store.reported_latest(&table(), &main_branch()).await.unwrap(), Some(18));
    let dev = BranchName::parse("dev", "branch").unwrap();
    assert_eq!(store.reported_latest(&table(), &dev).await.unwrap(), None);

    // The tables tidemark has seen: keys, registrations, options.
    assert!(store.table_known(&table()).await.unwrap());
    let other = TableName::parse("db.other", "table").unwrap();
    assert!(!store.table_known(&other).await.unwrap());
    let registered = TableName::parse("db.registered", "table").unwrap();
    store
        .paimon()
        .register_table(&registered, "/tmp/nowhere", None, &ctx("r"))
        .await
        .unwrap();
    assert!(store.table_known(&registered).await.unwrap());
    let zkey = ConsumerKey::parse("db.zeta", "main", "z", "").unwrap();
    store.acquire_lease(&ctx("z"), &zkey, "q-z", None).await.unwrap();
    assert_eq!(
        store.known_tables(100).await.unwrap(),
        ["db.events", "db.registered", "db.zeta"]
    );
    assert_eq!(store.known_tables(1).await.unwrap(), ["db.events"]);
}
