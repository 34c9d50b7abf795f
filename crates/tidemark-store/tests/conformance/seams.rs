//! Seams between several reads or writes that must not show a state that
//! never existed (issue: "safety at the seams"): retention fences read while
//! full scans complete, imports racing first commits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use tidemark_core::{BranchName, ConsumerKey, StartupMode, TableName};
use tidemark_store::Store;
use tidemark_testkit::TestDb;

use super::{commit_req, ctx, off, recovery, store};

/// Expands to the seam cases for a database kind.
#[macro_export]
macro_rules! seams_conformance_suite {
    ($kind:expr) => {
        $crate::seams_conformance_suite!($kind;
            fences_never_vanish_while_full_scans_complete,
            import_never_overwrites_a_consumer_created_meanwhile,
        );
    };
    ($kind:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(db) = tidemark_testkit::TestDb::new($kind).await else { return };
                conformance::seams::$case(&db).await;
            }
        )*
    };
}

/// Fresh keys to pin and complete, one branch each.
const FULL_SCANS: i64 = 250;
const READERS: usize = 4;

/// E4/E5, SPEC §8: a branch whose only query completes its initial full
/// scan of F goes from "pinned at F" to "consumer at F + 1" in one write,
/// so every fence answer from the moment the pin exists shows F or F + 1,
/// never nothing and never more. Several readers poll the fence and the
/// explanation of the branch being completed while a writer walks through
/// fresh branches as fast as it can.
pub(crate) async fn fences_never_vanish_while_full_scans_complete(db: &TestDb) {
    let store = store(db).await;
    let table = TableName::parse("db.fence_seam", "table").unwrap();
    // The branch whose pin is written, as (index); -1 before the first.
    let armed = Arc::new(AtomicI64::new(-1));
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let lacking = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let branch = |i: i64| BranchName::parse(&format!("b{i}"), "branch").unwrap();
    let scanned = |i: i64| 10 + i;

    let mut readers = Vec::new();
    for r in 0..READERS {
        let (store, table, armed, stop, checked, lacking, wrong) = (
            store.clone(),
            table.clone(),
            Arc::clone(&armed),
            Arc::clone(&stop),
            Arc::clone(&checked),
            Arc::clone(&lacking),
            Arc::clone(&wrong),
        );
        readers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let i = armed.load(Ordering::Acquire);
                if i < 0 {
                    tokio::task::yield_now().await;
                    continue;
                }
                let f = scanned(i);
                n += 1;
                let fence = if (n + r as u64).is_multiple_of(2) {
                    store
                        .fence(&table, &branch(i), false, 10)
                        .await
                        .unwrap()
                        .fences
                        .snapshot
                } else {
                    store
                        .explain(&table, &branch(i), false, 10)
                        .await
                        .unwrap()
                        .fences
                        .fences
                        .snapshot
                };
                checked.fetch_add(1, Ordering::Relaxed);
                match fence {
                    Some(s) if s == f || s == f + 1 => {}
                    None => {
                        lacking.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(other) => wrong
                        .lock()
                        .unwrap()
                        .push(format!("branch b{i}: fence {other}, expected {f} or {}", f + 1)),
                }
            }
        }));
    }

    for i in 0..FULL_SCANS {
        let k = ConsumerKey::parse(table.as_str(), branch(i).as_str(), "q", "").unwrap();
        let f = scanned(i);
        let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
        let plan = store
            .recovery_position(
                &ctx("p"),
                &k,
                &recovery(StartupMode::LatestFull, 1, f),
                Some(lease.lease_id),
            )
            .await
            .unwrap();
        assert!(plan.pinned);
        armed.store(i, Ordering::Release);
        // Let the readers see the pin, then complete the scan.
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        store
            .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 0, off(f, 0, true, Some(1))))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    let (checked, lacking) = (checked.load(Ordering::Relaxed), lacking.load(Ordering::Relaxed));
    eprintln!("fence seam: {checked} answers checked, {lacking} without a fence");
    let wrong = wrong.lock().unwrap();
    assert!(wrong.is_empty(), "fences above F + 1 or below F: {wrong:?}");
    assert!(checked > FULL_SCANS as u64, "the readers ran ({checked} answers)");
    assert_eq!(lacking, 0, "{lacking} of {checked} fence answers showed no fence");
}

/// ImportConsumers creates a consumer only while none exists: a first
/// commit that lands between its existence check and its write wins.
pub(crate) async fn import_never_overwrites_a_consumer_created_meanwhile(db: &TestDb) {
    let store: Store = store(db).await;
    // A consumer that exists (created by a first commit, its lease released
    // so no live lease refuses the import) is never overwritten.
    let k = ConsumerKey::parse("db.import_race", "main", "existing", "").unwrap();
    let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
    store
        .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 0, off(50, 0, false, Some(1))))
        .await
        .unwrap();
    store.release_lease(&ctx("r"), lease.lease_id, 1).await.unwrap();
    let imported = store.import_consumer(&ctx("i"), &k, 7).await.unwrap();
    assert_eq!(imported, tidemark_core::admin::Imported::Exists { next_snapshot: 51 });
    assert_eq!(store.key_state(&k).await.unwrap().unwrap().next_snapshot(), Some(51));
    // An absent one is created.
    let fresh = ConsumerKey::parse("db.import_race", "main", "fresh", "").unwrap();
    let imported = store.import_consumer(&ctx("i"), &fresh, 7).await.unwrap();
    assert_eq!(imported, tidemark_core::admin::Imported::Created);
    assert_eq!(store.key_state(&fresh).await.unwrap().unwrap().next_snapshot(), Some(7));
    // And racing: whichever lands first, the commit's consumer survives.
    for round in 0..40 {
        let k = ConsumerKey::parse("db.import_race", "main", &format!("q{round}"), "").unwrap();
        let lease = store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
        // The query commits its first batch and stops (releasing its lease,
        // which no longer blocks an operator change) while the import runs.
        let commit = {
            let store = store.clone();
            tokio::spawn(async move {
                let committed = store
                    .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 0, off(50, 0, false, Some(1))))
                    .await
                    .unwrap();
                store.release_lease(&ctx("r"), lease.lease_id, 1).await.unwrap();
                committed
            })
        };
        let imported = store.import_consumer(&ctx("i"), &k, 7).await;
        let committed = commit.await.unwrap();
        assert_eq!(committed.next_snapshot, Some(51));
        let state = store.key_state(&k).await.unwrap().unwrap();
        assert_eq!(
            state.next_snapshot(),
            Some(51),
            "round {round}: the commit's consumer survives the import ({imported:?})"
        );
    }
}
