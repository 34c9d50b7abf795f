//! A streaming query as the worker protocol sees it, for tests that need
//! consumers in a given state: take a lease, commit a batch, release.

#![allow(dead_code, reason = "each test binary uses the helpers it needs")]

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;

/// The key of `table`'s consumer `id` on main.
pub(crate) fn key(table: &str, id: &str) -> Option<pb::ConsumerKey> {
    Some(pb::ConsumerKey {
        table: table.into(),
        branch: "main".into(),
        consumer_id: id.into(),
    })
}

/// `holder` takes the lease of `table`'s consumer `id` (`ttl_secs`: the
/// server's default when `None`).
pub(crate) async fn acquire(
    worker: &mut CoordinatorClient<Channel>,
    table: &str,
    id: &str,
    holder: &str,
    ttl_secs: Option<i64>,
) -> pb::Lease {
    worker
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: key(table, id),
            holder: holder.into(),
            ttl: ttl_secs.map(|seconds| prost_types::Duration { seconds, nanos: 0 }),
        })
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap()
}

/// Batch `batch_id` ends at the last split of snapshot `next - 1`, so the
/// consumer's next snapshot becomes `next`; the worker reports `latest`.
pub(crate) async fn commit_to(
    worker: &mut CoordinatorClient<Channel>,
    lease: &pb::Lease,
    batch_id: i64,
    next: i64,
    latest: i64,
) {
    worker
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            batch_id,
            end: Some(pb::Offset {
                snapshot_id: next - 1,
                index: 0,
                scan_snapshot: false,
                total_splits: Some(1),
            }),
            latest_snapshot: Some(latest),
        })
        .await
        .unwrap();
}

/// The query stops and releases its lease.
pub(crate) async fn release(worker: &mut CoordinatorClient<Channel>, lease: &pb::Lease) {
    worker
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
        })
        .await
        .unwrap();
}

/// A query that read `table` up to `next - 1` (reporting `latest`) and
/// stopped (`keep`: still running, its lease live for `ttl_secs`).
pub(crate) async fn query(
    worker: &mut CoordinatorClient<Channel>,
    table: &str,
    id: &str,
    next: i64,
    latest: i64,
    keep: bool,
) -> pb::Lease {
    let lease = acquire(worker, table, id, &format!("q-{id}"), Some(600)).await;
    commit_to(worker, &lease, 0, next, latest).await;
    if !keep {
        release(worker, &lease).await;
    }
    lease
}
