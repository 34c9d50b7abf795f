//! SPEC C3: an end offset without `total_splits` (restored from an older
//! checkpoint) changes nothing, warns the worker on every commit, and is
//! written to the operator's log once per (lease, snapshot) — however often
//! the query commits it, again for a new snapshot or a new lease.

mod support;

use std::time::Duration;

use support::Served;
use tidemark_proto::v1 as pb;
use tidemark_testkit::load::{coordinator, key};

const LOGGED: &str = "the end offset has no total_splits";

fn legacy_commit(lease: &pb::Lease, batch: i64, snapshot: i64) -> pb::CommitBatchRequest {
    pb::CommitBatchRequest {
        lease_id: lease.lease_id.clone(),
        epoch: lease.epoch,
        batch_id: batch,
        end: Some(pb::Offset {
            snapshot_id: snapshot,
            index: 0,
            scan_snapshot: false,
            total_splits: None,
        }),
        latest_snapshot: Some(20),
    }
}

#[tokio::test]
async fn a_legacy_offset_is_logged_once_per_lease_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&[], dir.path());
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    let acquire = |holder: &str| pb::AcquireLeaseRequest {
        consumer: Some(key("legacy")),
        holder: holder.into(),
        ttl: None,
    };
    let lease = client
        .acquire_lease(acquire("q1"))
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    // Three batches ending on snapshot 5, then two on snapshot 6.
    for (batch, snapshot) in [(0, 5), (1, 5), (2, 5), (3, 6), (4, 6)] {
        let done = client
            .commit_batch(legacy_commit(&lease, batch, snapshot))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(done.outcome(), pb::CommitOutcome::UnchangedLegacyOffset);
        assert!(done.warnings[0].starts_with("LEGACY_OFFSET:"), "{:?}", done.warnings);
    }
    client
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
        })
        .await
        .unwrap();
    // A new lease on the same key logs snapshot 6 again, once.
    let again = client
        .acquire_lease(acquire("q2"))
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    for batch in 0..2 {
        client.commit_batch(legacy_commit(&again, batch, 6)).await.unwrap();
    }
    // The log is written as the calls end; give it a moment.
    let mut logged = 0;
    for _ in 0..50 {
        logged = served.logs().matches(LOGGED).count();
        if logged >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logs = served.logs();
    assert_eq!(
        logs.matches(LOGGED).count(),
        3,
        "one line per (lease, snapshot), logged {logged}:\n{logs}"
    );
}
