//! A minimal worker: take a consumer's lease, keep it alive, ask where to
//! start, commit a few micro-batches, and release the lease.
//!
//!     cargo run -p tidemark-client --example worker -- http://127.0.0.1:50051
//!
//! With credentials, set TIDEMARK_TOKEN (and use https:// with TIDEMARK_TLS_CA
//! for TLS).

#![allow(clippy::print_stdout)]

use std::time::Duration;

use tidemark_client::{Client, ClientOptions, ClientTls, LeaseState};
use tidemark_proto::v1 as pb;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoint = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:50051".into());
    let tls = std::env::var("TIDEMARK_TLS_CA").ok().map(|ca| ClientTls {
        ca_pem: std::fs::read(ca).ok(),
        ..Default::default()
    });
    let client = Client::connect(&ClientOptions {
        endpoint,
        token: std::env::var("TIDEMARK_TOKEN").ok(),
        tls,
        ..Default::default()
    })
    .await?;
    let consumer = pb::ConsumerKey {
        table: "db.orders".into(),
        branch: "main".into(),
        consumer_id: "example-worker".into(),
    };

    // 1. The lease: one query per consumer; the holder is the query's
    //    stable identity (e.g. its Spark query id).
    let acquired = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(consumer.clone()),
            holder: "example-query".into(),
            ttl: Some(tidemark_client::duration_to_pb(Duration::from_secs(15))),
        })
        .await?;
    let lease = acquired.lease.expect("a granted lease");
    println!("lease epoch {} (takeover: {})", lease.epoch, acquired.takeover);
    let keeper = client.keep_lease(lease.clone());

    // 2. Where to start (no engine checkpoint here).
    let plan = client
        .get_recovery_position(pb::GetRecoveryPositionRequest {
            consumer: Some(consumer),
            table: Some(pb::SnapshotRange {
                earliest_snapshot: 1,
                latest_snapshot: 10,
                ..Default::default()
            }),
            lease_id: Some(lease.lease_id.clone()),
            ..Default::default()
        })
        .await?;
    let start = plan.start.unwrap_or_default();
    println!("start at snapshot {} ({:?})", start.snapshot_id, plan.source());

    // 3. Commit micro-batches as the engine completes them; stop at once if
    //    the lease is lost (another query took over, or an operator revoked).
    for (batch_id, snapshot) in (0..3).zip(start.snapshot_id..) {
        if let LeaseState::Lost(why) = &*keeper.watch().borrow() {
            return Err(format!("lease lost, stopping: {why}").into());
        }
        let done = client
            .commit_batch(pb::CommitBatchRequest {
                lease_id: lease.lease_id.clone(),
                epoch: lease.epoch,
                batch_id,
                end: Some(pb::Offset {
                    snapshot_id: snapshot,
                    index: 0,
                    scan_snapshot: start.scan_snapshot && batch_id == 0,
                    total_splits: Some(1),
                }),
                latest_snapshot: Some(10),
            })
            .await?;
        println!(
            "batch {batch_id}: {:?}, next snapshot {:?}",
            done.outcome(),
            done.next_snapshot
        );
    }

    // 4. Stop: release the lease so another query can start at once.
    println!("released: {}", keeper.release().await?);
    Ok(())
}
