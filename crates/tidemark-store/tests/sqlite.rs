//! The storage conformance suite on SQLite, plus SQLite-only checks.

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use tidemark_core::lease::LeasePolicy;
use tidemark_core::{LeaseLoss, Timestamp};
use tidemark_store::{Backend, CallContext, ManualClock, SqliteBackend, Store, StoreError};
use tidemark_testkit::Kind;

all_conformance_cases!(Kind::Sqlite);
admin_conformance_suite!(Kind::Sqlite);
remembered_conformance_suite!(Kind::Sqlite);
model_conformance_suite!(Kind::Sqlite);
seams_conformance_suite!(Kind::Sqlite);
mirror_conformance_suite!(Kind::Sqlite);
sessions_conformance_suite!(Kind::Sqlite);

/// A store on a fresh SQLite file with a manual clock (and the file's URL).
async fn manual_clock_store(dir: &std::path::Path) -> (String, ManualClock, Store) {
    let url = format!("sqlite://{}", dir.join("t.db").display());
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let backend = SqliteBackend::open(&url, Arc::new(clock.clone())).await.unwrap();
    backend.migrate().await.unwrap();
    (url, clock, Store::new(Arc::new(backend), LeasePolicy::default()))
}

/// SQLite takes `now` from the server clock; a manual clock proves every
/// deadline is judged by it (and lets expiry be tested without sleeping).
#[tokio::test]
async fn sqlite_judges_deadlines_by_its_clock() {
    let dir = tempfile::tempdir().unwrap();
    let (_, clock, store) = manual_clock_store(dir.path()).await;
    let ctx = CallContext::internal("t");
    let key = tidemark_core::ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    let lease = store.acquire_lease(&ctx, &key, "q", None).await.unwrap().lease;
    assert_eq!(lease.deadline, Timestamp::from_micros(1_700_000_030_000_000));
    clock.advance(Duration::from_secs(29));
    store.renew_lease(&ctx, lease.lease_id, 1, None).await.unwrap();
    clock.advance(Duration::from_secs(30));
    match store.renew_lease(&ctx, lease.lease_id, 1, None).await {
        Err(StoreError::Rule(tidemark_core::CoreError::LeaseNotHeld { loss, .. })) => {
            assert_eq!(loss, LeaseLoss::Expired)
        }
        other => panic!("expected an expired lease, got {other:?}"),
    }
}

/// The file survives a restart: a new backend on the same file sees
/// everything an acknowledged commit wrote.
#[tokio::test]
async fn sqlite_state_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let ctx = CallContext::internal("t");
    let key = tidemark_core::ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    {
        let backend = SqliteBackend::open(&url, Arc::new(tidemark_store::SystemClock))
            .await
            .unwrap();
        backend.migrate().await.unwrap();
        let store = Store::new(Arc::new(backend.clone()), LeasePolicy::default());
        let lease = store.acquire_lease(&ctx, &key, "q", None).await.unwrap().lease;
        let req = tidemark_core::CommitBatch {
            lease_id: lease.lease_id,
            epoch: 1,
            batch_id: 0,
            end: Some(tidemark_core::Offset {
                snapshot_id: 4,
                index: 0,
                scan_snapshot: false,
                total_splits: Some(1),
            }),
            latest_snapshot: Some(9),
        };
        store.commit_batch(&ctx, &req).await.unwrap();
        backend.close().await;
    }
    let backend = SqliteBackend::open(&url, Arc::new(tidemark_store::SystemClock))
        .await
        .unwrap();
    backend.migrate().await.unwrap();
    let store = Store::new(Arc::new(backend), LeasePolicy::default());
    let state = store.key_state(&key).await.unwrap().unwrap();
    assert_eq!(
        (state.next_snapshot(), state.latest_snapshot, state.lag()),
        (Some(5), Some(9), Some(5))
    );
}

/// SPEC §1: a deadline is judged when the write lands. A commit that waits
/// for the file's write lock (held here by another connection, as another
/// process would) past its lease's deadline is refused, although the lease
/// was live when the commit was asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_commit_that_waited_for_the_writer_past_its_deadline_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (url, clock, store) = manual_clock_store(dir.path()).await;
    let ctx = CallContext::internal("t");
    let key = tidemark_core::ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    let lease = store.acquire_lease(&ctx, &key, "q", None).await.unwrap().lease;

    let other = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let mut holder = other.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let commit = {
        let store = store.clone();
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let req = tidemark_core::CommitBatch {
                lease_id: lease.lease_id,
                epoch: 1,
                batch_id: 0,
                end: Some(tidemark_core::Offset {
                    snapshot_id: 4,
                    index: 0,
                    scan_snapshot: false,
                    total_splits: Some(1),
                }),
                latest_snapshot: None,
            };
            store.commit_batch(&ctx, &req).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!commit.is_finished(), "the commit waits for the write lock");
    clock.advance(Duration::from_secs(31));
    sqlx::query("SELECT 1").execute(&mut *holder).await.unwrap();
    holder.rollback().await.unwrap();
    match commit.await.unwrap() {
        Err(StoreError::Rule(tidemark_core::CoreError::LeaseNotHeld { loss, .. })) => {
            assert_eq!(loss, LeaseLoss::Expired)
        }
        other => panic!("a commit landing after its lease's deadline must be refused, got {other:?}"),
    }
    assert_eq!(store.key_state(&key).await.unwrap().unwrap().next_snapshot(), None);
}

/// SQLite out of memory (SQLITE_NOMEM) is a condition of the deployment,
/// not a bug: UNAVAILABLE (retryable), as SPEC §7 asks for memory. The
/// process-wide heap limit makes SQLite's own allocations fail.
#[tokio::test]
async fn sqlite_out_of_memory_is_unavailable() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let (url, _clock, store) = manual_clock_store(dir.path()).await;
    let ctx = CallContext::internal("t");
    let key = tidemark_core::ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    store.acquire_lease(&ctx, &key, "q", None).await.unwrap();
    let mut side = sqlx::SqliteConnection::connect(&url).await.unwrap();
    // The limit is the library's, shared by every connection in the process;
    // the pragma's own answer already fails to allocate.
    let _ = sqlx::query("PRAGMA hard_heap_limit = 1").execute(&mut side).await;
    // A cached statement on a warm connection may still find its memory
    // (lookaside, page cache): the first call that needs more fails.
    let mut failed = None;
    for i in 0..200 {
        let key = tidemark_core::ConsumerKey::parse(&format!("db.t{i}"), "main", &format!("c{i}"), "").unwrap();
        if let Err(e) = store.acquire_lease(&ctx, &key, "q", None).await {
            failed = Some(e);
            break;
        }
    }
    let err = failed.expect("no allocation failed under a 1-byte heap limit");
    sqlx::query("PRAGMA hard_heap_limit = 0").execute(&mut side).await.ok();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
}
