//! SPEC §9 storage: registered Paimon tables and what each consumer's
//! Paimon file shows, so the mirror knows what to write, refresh or delete.

use std::time::Duration;

use tidemark_core::Timestamp;
use tidemark_core::commit::CommitBatch;
use tidemark_store::{CallContext, MirrorBackoff, MirrorFailure, MirrorTask, Store};
use tidemark_testkit::{Kind, TestDb};

use super::{key, off, policy};

/// Expands to the mirror cases for a database kind.
#[macro_export]
macro_rules! mirror_conformance_suite {
    ($kind:expr) => {
        $crate::mirror_conformance_suite!($kind;
            registered_tables_are_listed_and_moves_forget_the_mirror,
            stale_and_deleted_consumers_are_mirror_tasks_until_done,
            the_keepers_inventory_identities_and_repairs,
            the_branch_overview_aggregates_each_branchs_keys,
        );
    };
    ($kind:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                if $kind == tidemark_testkit::Kind::Postgres && tidemark_testkit::postgres_url().is_none() {
                    return;
                }
                conformance::mirror::$case($kind).await;
            }
        )*
    };
}

fn ctx() -> CallContext {
    CallContext::new("operator-1", "r")
}

fn table() -> tidemark_core::TableName {
    key("x").table
}

async fn commit(store: &Store, id: &str, snapshot: i64) {
    let lease = store.acquire_lease(&ctx(), &key(id), "q", None).await.unwrap().lease;
    store
        .commit_batch(
            &ctx(),
            &CommitBatch {
                lease_id: lease.lease_id,
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(off(snapshot, 0, false, Some(1))),
                latest_snapshot: None,
            },
        )
        .await
        .unwrap();
    store.release_lease(&ctx(), lease.lease_id, lease.epoch).await.unwrap();
}

/// Marks every current task done; returns what they were.
async fn mirror_all(store: &Store, refresh: Duration) -> Vec<(String, Option<i64>)> {
    let tasks = store.paimon().mirror_tasks(refresh, 100).await.unwrap();
    for task in &tasks {
        store.paimon().mirror_done(task, None).await.unwrap();
    }
    positions(&tasks)
}

/// The tasks due with a one-minute refresh.
async fn due(backend: tidemark_store::PaimonRegistry<'_>) -> Vec<MirrorTask> {
    backend.mirror_tasks(Duration::from_secs(60), 100).await.unwrap()
}

fn positions(tasks: &[MirrorTask]) -> Vec<(String, Option<i64>)> {
    tasks
        .iter()
        .map(|t| (t.key.consumer_id.as_str().to_owned(), t.next_snapshot))
        .collect()
}

pub(crate) async fn registered_tables_are_listed_and_moves_forget_the_mirror(kind: Kind) {
    let db = TestDb::new(kind).await.unwrap();
    let store = Store::new(db.backend().await, policy());
    let backend = store.paimon();
    assert!(backend.registered_tables().await.unwrap().is_empty());
    backend
        .register_table(&table(), "/warehouse/a", None, &ctx())
        .await
        .unwrap();
    let listed = backend.registered_tables().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].table.as_str(),
            listed[0].location.as_str(),
            listed[0].registered_by.as_str()
        ),
        ("db.orders", "/warehouse/a", "operator-1")
    );

    commit(&store, "c1", 5).await;
    let tasks = due(backend).await;
    assert_eq!(positions(&tasks), [("c1".to_owned(), Some(6))]);
    assert_eq!(tasks[0].location, "/warehouse/a");
    backend.mirror_done(&tasks[0], None).await.unwrap();
    assert!(due(backend).await.is_empty());

    // Same location again: nothing to redo. A new location: everything.
    backend
        .register_table(&table(), "/warehouse/a", None, &ctx())
        .await
        .unwrap();
    assert!(due(backend).await.is_empty());
    backend
        .register_table(&table(), "s3://bucket/a", None, &ctx())
        .await
        .unwrap();
    let tasks = due(backend).await;
    assert_eq!(positions(&tasks), [("c1".to_owned(), Some(6))]);
    assert_eq!(tasks[0].location, "s3://bucket/a");
    // A round that read the old location records its write after the move:
    // that file is not the new location's, which stays due (item 8).
    let late = MirrorTask {
        location: "/warehouse/a".to_owned(),
        ..tasks[0].clone()
    };
    backend.mirror_done(&late, None).await.unwrap();
    let tasks = due(backend).await;
    assert_eq!(positions(&tasks), [("c1".to_owned(), Some(6))]);
    assert_eq!(tasks[0].location, "s3://bucket/a");
    let inventory = backend.mirror_inventory().await.unwrap();
    assert_eq!(inventory[0].mirrored_next, None, "not mirrored at the table's location");
    backend.mirror_done(&tasks[0], None).await.unwrap();
    assert!(due(backend).await.is_empty());
    assert_eq!(backend.mirror_inventory().await.unwrap()[0].mirrored_next, Some(6));

    assert!(backend.unregister_table(&table()).await.unwrap());
    assert!(!backend.unregister_table(&table()).await.unwrap());
    assert!(backend.registered_tables().await.unwrap().is_empty());
    assert!(due(backend).await.is_empty());
    assert_eq!(backend.mirror_state(&key("c1")).await.unwrap(), None);
}

pub(crate) async fn stale_and_deleted_consumers_are_mirror_tasks_until_done(kind: Kind) {
    let db = TestDb::with_manual_clock(kind, Timestamp::from_micros(1_800_000_000_000_000))
        .await
        .unwrap();
    let store = Store::new(db.backend().await, policy());
    let backend = store.paimon();
    let refresh = Duration::from_secs(60);
    // Consumers of unregistered tables are never mirrored.
    commit(&store, "c1", 5).await;
    assert!(backend.mirror_tasks(refresh, 100).await.unwrap().is_empty());
    backend
        .register_table(&table(), "/warehouse/a", None, &ctx())
        .await
        .unwrap();
    commit(&store, "c2", 7).await;
    let tasks = backend.mirror_tasks(refresh, 100).await.unwrap();
    assert_eq!(
        positions(&tasks),
        [("c1".to_owned(), Some(6)), ("c2".to_owned(), Some(8))]
    );

    // A failure is recorded and sorts last; success clears it.
    let failure = MirrorFailure {
        error: "permission denied",
        backoff: MirrorBackoff {
            base: Duration::from_secs(10),
            cap: Duration::from_secs(25),
        },
    };
    backend.mirror_done(&tasks[0], Some(failure)).await.unwrap();
    backend.mirror_done(&tasks[1], None).await.unwrap();
    let state = backend.mirror_state(&key("c1")).await.unwrap().unwrap();
    assert_eq!(
        (state.failures, state.last_error.as_deref()),
        (1, Some("permission denied"))
    );
    assert_eq!(state.mirrored_next, None);
    let state = backend.mirror_state(&key("c2")).await.unwrap().unwrap();
    assert_eq!((state.mirrored_next, state.failures), (Some(8), 0));
    assert_eq!(state.mirrored_at, Some(db.now()));
    // Where it was written: the rounds tell an outside change only from a
    // record at the table's current location.
    assert_eq!(state.location.as_deref(), Some(tasks[1].location.as_str()));
    // The failing task waits out its backoff before it is due again: 10 s,
    // then twice as long after each further failure, up to the 25 s cap.
    for (failures, wait) in [(1, 10), (2, 20), (3, 25), (4, 25)] {
        assert_eq!(
            backend.mirror_state(&key("c1")).await.unwrap().unwrap().failures,
            failures
        );
        db.advance(Duration::from_secs(wait - 1)).await;
        assert!(
            backend.mirror_tasks(refresh, 100).await.unwrap().is_empty(),
            "due before its {wait} s backoff passed"
        );
        db.advance(Duration::from_secs(1)).await;
        let again = backend.mirror_tasks(refresh, 100).await.unwrap();
        assert_eq!(
            positions(&again),
            [("c1".to_owned(), Some(6))],
            "due once its {wait} s passed"
        );
        if failures < 4 {
            backend.mirror_done(&again[0], Some(failure)).await.unwrap();
        }
    }
    assert_eq!(mirror_all(&store, refresh).await, [("c1".to_owned(), Some(6))]);
    assert_eq!(backend.mirror_state(&key("c1")).await.unwrap().unwrap().failures, 0);
    assert!(backend.mirror_tasks(refresh, 100).await.unwrap().is_empty());

    // A new position is a task at once; a refresh only once the file's
    // updated_at is older than `refresh`.
    commit(&store, "c1", 9).await;
    assert_eq!(mirror_all(&store, refresh).await, [("c1".to_owned(), Some(10))]);
    db.advance(Duration::from_secs(30)).await;
    commit(&store, "c1", 9).await; // same position, newer updated_at
    assert!(backend.mirror_tasks(refresh, 100).await.unwrap().is_empty());
    db.advance(Duration::from_secs(31)).await;
    commit(&store, "c1", 9).await;
    assert_eq!(mirror_all(&store, refresh).await, [("c1".to_owned(), Some(10))]);

    // A deleted consumer's file is deleted, once.
    store
        .delete_consumer(&ctx(), &key("c2"), None, true, true)
        .await
        .unwrap();
    assert_eq!(mirror_all(&store, refresh).await, [("c2".to_owned(), None)]);
    assert_eq!(
        backend.mirror_state(&key("c2")).await.unwrap().unwrap().mirrored_next,
        None
    );
    assert!(backend.mirror_tasks(refresh, 100).await.unwrap().is_empty());
    // A branch's states in one read: the same as one by one.
    let states = backend
        .mirror_states(&table(), &tidemark_core::BranchName::main())
        .await
        .unwrap();
    assert_eq!(states.len(), 2);
    for id in ["c1", "c2"] {
        assert_eq!(
            states.get(id),
            backend.mirror_state(&key(id)).await.unwrap().as_ref(),
            "{id}"
        );
    }
    // The limit holds.
    commit(&store, "c3", 1).await;
    commit(&store, "c4", 1).await;
    assert_eq!(backend.mirror_tasks(refresh, 1).await.unwrap().len(), 1);
}

/// What the keeper reads and writes: every consumer and live pin of
/// registered tables with what was mirrored and whether it is kept (E2);
/// identities recorded once; repairs appended to history without touching
/// the row; a row and its history read from one snapshot.
pub(crate) async fn the_keepers_inventory_identities_and_repairs(kind: Kind) {
    let db = TestDb::with_manual_clock(kind, Timestamp::from_micros(1_800_000_000_000_000))
        .await
        .unwrap();
    let store = Store::new(db.backend().await, policy());
    let backend = store.paimon();
    backend
        .register_table(&table(), "/warehouse/a", None, &ctx())
        .await
        .unwrap();
    assert_eq!(backend.registered_tables().await.unwrap()[0].identity, None);
    backend
        .set_table_identity(&table(), "/warehouse/a", "schema-0:aa")
        .await
        .unwrap();
    // Only while it has none, and only at that location.
    backend
        .set_table_identity(&table(), "/warehouse/a", "schema-0:bb")
        .await
        .unwrap();
    backend
        .set_table_identity(&table(), "/elsewhere", "schema-0:cc")
        .await
        .unwrap();
    assert_eq!(
        backend.registered_tables().await.unwrap()[0].identity.as_deref(),
        Some("schema-0:aa")
    );
    backend
        .register_table(&table(), "/warehouse/a", Some("schema-0:dd"), &ctx())
        .await
        .unwrap();
    assert_eq!(
        backend.registered_tables().await.unwrap()[0].identity.as_deref(),
        Some("schema-0:dd"),
        "registering again takes the table's identity now"
    );

    store
        .set_table_options(
            &ctx(),
            &table(),
            &[("consumer.expiration-time".to_owned(), "1h".to_owned())].into(),
            &[],
            true,
        )
        .await
        .unwrap();
    commit(&store, "idle", 5).await;
    mirror_all(&store, Duration::from_secs(60)).await;
    let pinned = store
        .acquire_lease(&ctx(), &key("pinned"), "q", None)
        .await
        .unwrap()
        .lease;
    let range = tidemark_core::RecoveryRequest {
        startup: tidemark_core::StartupMode::LatestFull,
        ignore_progress: false,
        range: tidemark_core::SnapshotRange {
            earliest_snapshot: 1,
            latest_snapshot: 9,
            earliest_changelog: None,
            changelog_decoupled: false,
        },
        checkpoint: None,
        on_expired: tidemark_core::OnExpired::Fail,
    };
    store
        .recovery_position(&ctx(), &key("pinned"), &range, Some(pinned.lease_id))
        .await
        .unwrap();
    let inventory = backend.mirror_inventory().await.unwrap();
    let summary: Vec<_> = inventory
        .iter()
        .map(|e| {
            (
                e.key.consumer_id.as_str(),
                e.next_snapshot,
                e.mirrored_next,
                e.kept,
                e.pin,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("idle", Some(6), Some(6), true, None),
            ("pinned", None, None, false, Some((pinned.lease_id, 9))),
        ]
    );
    assert_eq!(
        inventory[1].lease,
        Some(pinned.lease_id),
        "the key's lease names its pin file"
    );
    // Idle past the expiration time, its lease released: no longer kept. The
    // pin ends with its lease.
    db.advance(Duration::from_secs(7200)).await;
    let inventory = backend.mirror_inventory().await.unwrap();
    let summary: Vec<_> = inventory
        .iter()
        .map(|e| (e.key.consumer_id.as_str(), e.kept, e.pin))
        .collect();
    assert_eq!(summary, [("idle", false, None)]);

    let before = store.key_state(&key("idle")).await.unwrap();
    let mut repair = tidemark_core::HistoryEvent::new(tidemark_core::EventKind::MirrorRepair, Some(99), Some(6));
    repair.detail = Some("changed: /warehouse/a/consumer/consumer-idle".into());
    store
        .append_history(&key("idle"), &[repair], &CallContext::new("mirror", "r-repair"))
        .await
        .unwrap();
    assert_eq!(
        store.key_state(&key("idle")).await.unwrap(),
        before,
        "the row is untouched"
    );
    let (state, history) = (
        store.key_state(&key("idle")).await.unwrap(),
        store.history(&key("idle"), 2).await.unwrap(),
    );
    assert_eq!(state.and_then(|s| s.next_snapshot()), Some(6));
    assert_eq!(history.len(), 2);
    let newest = &history[0];
    assert_eq!(newest.event.kind, tidemark_core::EventKind::MirrorRepair);
    assert_eq!((newest.event.old_next, newest.event.new_next), (Some(99), Some(6)));
    assert_eq!(
        (newest.principal.as_str(), newest.request_id.as_str()),
        ("mirror", "r-repair")
    );
}

/// The console's tables page from aggregates: per branch, keys with a
/// consumer or a live lease, the leased ones, the lowest position and the
/// worst lag against what each consumer reported.
pub(crate) async fn the_branch_overview_aggregates_each_branchs_keys(kind: Kind) {
    let db = TestDb::new(kind).await.unwrap();
    let store = Store::new(db.backend().await, policy());
    assert!(
        store
            .branch_overview(10, &tidemark_core::TableScope::All)
            .await
            .unwrap()
            .is_empty()
    );
    commit(&store, "c1", 5).await; // next 6, released
    commit(&store, "c2", 8).await; // next 9, released
    // A live lease without a consumer counts as a key, and as leased.
    store.acquire_lease(&ctx(), &key("c3"), "q", None).await.unwrap();
    let dev = tidemark_core::ConsumerKey::parse("db.orders", "dev", "d1", "").unwrap();
    store.acquire_lease(&ctx(), &dev, "q", None).await.unwrap();
    let all = tidemark_core::TableScope::All;
    let rows = store.branch_overview(10, &all).await.unwrap();
    let summary: Vec<_> = rows
        .iter()
        .map(|r| (r.branch.as_str(), r.keys, r.leased, r.expired, r.min_next))
        .collect();
    assert_eq!(summary, [("dev", 1, 1, 0, None), ("main", 3, 1, 0, Some(6))]);
    assert!(rows.iter().all(|r| r.table == "db.orders"));
    // The limit holds.
    assert_eq!(store.branch_overview(1, &all).await.unwrap().len(), 1);
    // The scope is the statement's: globs as credentials write them, with
    // SQL's wildcards matching only themselves.
    let other = tidemark_core::ConsumerKey::parse("db_x.t%1", "main", "o", "").unwrap();
    store.acquire_lease(&ctx(), &other, "q", None).await.unwrap();
    let scoped = |globs: &[&str]| {
        tidemark_core::TableScope::Only(
            globs
                .iter()
                .map(|g| tidemark_core::TablePattern::parse(g).unwrap())
                .collect(),
        )
    };
    for (globs, want) in [
        (vec!["db.*"], vec!["db.orders", "db.orders"]),
        (vec!["db_x.*"], vec!["db_x.t%1"]),
        (vec!["db?x.t%1"], vec!["db_x.t%1"]),
        (vec!["db%"], vec![]),
        (vec!["dbax.*", "DB.*"], vec![]),
        (vec!["*"], vec!["db.orders", "db.orders", "db_x.t%1"]),
    ] {
        let rows = store.branch_overview(10, &scoped(&globs)).await.unwrap();
        let tables: Vec<_> = rows.iter().map(|r| r.table.as_str()).collect();
        assert_eq!(tables, want, "{globs:?}");
    }
}
