//! Simulated workers for the multi-process tests: each owns one consumer,
//! commits one micro-batch after another through a list of replicas, and
//! fails over to the next replica when one stops answering.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::Code;
use tonic::transport::Channel;

/// The key worker `id` owns.
pub fn key(id: &str) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: "db.orders".into(),
        branch: "main".into(),
        consumer_id: id.into(),
    }
}

/// A lazily connected client that gives up on a call after `timeout`, so a
/// hang shows up as DEADLINE_EXCEEDED instead of a stuck test.
pub fn coordinator(url: &str, timeout: Duration) -> CoordinatorClient<Channel> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect_timeout(Duration::from_millis(500))
        .timeout(timeout)
        .connect_lazy();
    CoordinatorClient::new(channel)
}

/// Whether a failed call means "this replica is gone" (the worker should try
/// another) rather than an answer from tidemark.
pub fn is_transport_failure(status: &tonic::Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::Unknown | Code::Cancelled)
        && !status.metadata().contains_key("x-request-id")
}

/// What one worker saw.
#[derive(Debug, Default, Clone)]
pub struct WorkerReport {
    /// The highest next_snapshot acknowledged to this worker.
    pub acked_next_snapshot: Option<i64>,
    /// Acknowledged commits, by the index of the replica that answered.
    pub acked_by_replica: BTreeMap<usize, u64>,
    /// Failed calls, by gRPC code name.
    pub failures: BTreeMap<String, u64>,
    /// Failures that were not the replica or the database being away.
    pub unexpected: Vec<String>,
    /// Every commit attempt.
    pub attempts: Vec<Attempt>,
}

/// One commit attempt.
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    /// When it was sent.
    pub at: Instant,
    /// How long the answer took.
    pub latency: Duration,
    /// Whether it was acknowledged.
    pub ok: bool,
    /// The index of the replica it went to.
    pub replica: usize,
}

/// Takes the lease on worker `id`'s key for `holder` (the default TTL).
pub async fn acquire(client: &mut CoordinatorClient<Channel>, id: &str, holder: &str) -> pb::Lease {
    let request = pb::AcquireLeaseRequest {
        consumer: Some(key(id)),
        holder: holder.into(),
        ttl: None,
    };
    client
        .acquire_lease(request)
        .await
        .expect("acquire")
        .into_inner()
        .lease
        .expect("a lease")
}

/// Registers the Paimon table `table` at `location` through the admin API.
pub async fn register_table(url: &str, table: &str, location: &std::path::Path) {
    tidemark_proto::v1::admin_client::AdminClient::connect(url.to_owned())
        .await
        .unwrap()
        .register_table(pb::RegisterTableRequest {
            table: table.into(),
            location: location.display().to_string(),
            execute: true,
        })
        .await
        .unwrap();
}

/// Batch `batch` of a lease, ending snapshot `batch + 1` (its one split).
pub fn snapshot_commit(lease: &pb::Lease, batch: i64, latest_snapshot: Option<i64>) -> pb::CommitBatchRequest {
    pb::CommitBatchRequest {
        lease_id: lease.lease_id.clone(),
        epoch: lease.epoch,
        batch_id: batch,
        end: Some(pb::Offset {
            snapshot_id: batch + 1,
            index: 0,
            scan_snapshot: false,
            total_splits: Some(1),
        }),
        latest_snapshot,
    }
}

/// A worker committing batch after batch until `stop`. Each commit ends a
/// snapshot (index 0 of 1 split), so every ack moves next_snapshot by one.
pub async fn run_worker(
    id: String,
    urls: Vec<String>,
    first_replica: usize,
    stop: Arc<AtomicBool>,
    tolerate: fn(&tonic::Status) -> bool,
) -> WorkerReport {
    let clients: Vec<_> = urls.iter().map(|u| coordinator(u, Duration::from_secs(15))).collect();
    let mut replica = first_replica % clients.len();
    let mut report = WorkerReport::default();
    // Acquire (failing over like the commits do).
    let lease = loop {
        let mut client = clients[replica].clone();
        match client
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(key(&id)),
                holder: format!("worker-{id}"),
                ttl: Some(tidemark_proto::prost_types::Duration { seconds: 120, nanos: 0 }),
            })
            .await
        {
            Ok(response) => break response.into_inner().lease.unwrap(),
            Err(status) if tolerate(&status) => {
                replica = (replica + 1) % clients.len();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("acquire for {id} failed: {status:?}"),
        }
    };
    let mut batch: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let request = snapshot_commit(&lease, batch, Some(batch + 1));
        let started = Instant::now();
        let mut client = clients[replica].clone();
        match client.commit_batch(request).await {
            Ok(response) => {
                report.attempts.push(Attempt {
                    at: started,
                    latency: started.elapsed(),
                    ok: true,
                    replica,
                });
                let response = response.into_inner();
                report.acked_next_snapshot = response.next_snapshot;
                *report.acked_by_replica.entry(replica).or_default() += 1;
                batch += 1;
            }
            Err(status) => {
                report.attempts.push(Attempt {
                    at: started,
                    latency: started.elapsed(),
                    ok: false,
                    replica,
                });
                *report.failures.entry(format!("{:?}", status.code())).or_default() += 1;
                if !tolerate(&status) {
                    report.unexpected.push(format!("{status:?}"));
                    return report;
                }
                // The same batch again, elsewhere: a repeat is harmless
                // (DUPLICATE) if the lost attempt did land.
                if is_transport_failure(&status) {
                    replica = (replica + 1) % clients.len();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    report
}

/// The consumer's next_snapshot as the database has it, read through `url`.
pub async fn position(url: &str, id: &str) -> Option<i64> {
    let mut client = coordinator(url, Duration::from_secs(10));
    let plan = client
        .get_recovery_position(pb::GetRecoveryPositionRequest {
            consumer: Some(key(id)),
            startup: Some(pb::StartupOptions {
                mode: pb::StartupMode::Latest as i32,
                snapshot_id: 0,
            }),
            table: Some(pb::SnapshotRange {
                earliest_snapshot: 1,
                latest_snapshot: 1_000_000,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    (plan.source() == pb::RecoverySource::Consumer).then(|| plan.start.unwrap().snapshot_id)
}
