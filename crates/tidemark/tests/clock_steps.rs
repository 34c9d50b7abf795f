//! The SQLite store judges time by the server's own clock (SPEC §1: for
//! SQLite, the server's clock read inside the write transaction). A host
//! whose clock is stepped (an NTP step, a VM resumed from a snapshot) moves
//! every lease with it: stepped forward, live leases expire and may be
//! taken over; stepped back, they last longer (docs/reliability.md). What
//! must hold whatever the clock does: epochs fence (a holder that lost its
//! lease to a takeover is refused from then on, even once the clock is
//! back), the current holder keeps working, and the server keeps serving.
//!
//! The server runs under libfaketime (`FAKETIME_LIB`, which scripts/test.sh
//! fetches; the test fails without it), its offset read from a file, with
//! monotonic time left true as an NTP step leaves it.

use std::path::Path;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::process::ServerProcess;
use tonic::Code;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_tidemark");

fn consumer() -> Option<pb::ConsumerKey> {
    Some(pb::ConsumerKey {
        table: "db.orders".into(),
        branch: "main".into(),
        consumer_id: "stepped".into(),
    })
}

fn reason(status: &tonic::Status) -> String {
    tidemark_client::ApiError::from(status.clone()).reason
}

async fn acquire(client: &mut CoordinatorClient<Channel>, holder: &str) -> Result<pb::Lease, tonic::Status> {
    let answer = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: consumer(),
            holder: holder.into(),
            ttl: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
        })
        .await?;
    Ok(answer.into_inner().lease.expect("a lease"))
}

async fn commit(client: &mut CoordinatorClient<Channel>, lease: &pb::Lease, batch: i64) -> Result<(), tonic::Status> {
    client
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            batch_id: batch,
            end: Some(pb::Offset {
                snapshot_id: 10 + batch,
                index: 0,
                scan_snapshot: false,
                total_splits: Some(1),
            }),
            latest_snapshot: None,
        })
        .await
        .map(|_| ())
}

/// Steps the server's clock to `offset` (libfaketime's format, seconds).
fn step(file: &Path, offset: &str) {
    std::fs::write(file, format!("{offset}\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stepped_clock_moves_leases_but_never_breaks_fencing() {
    let lib = std::env::var("FAKETIME_LIB").expect(
        "FAKETIME_LIB: libfaketime is needed (scripts/test.sh fetches it; alone: source scripts/lib/tools.sh; \
         ensure_faketime)",
    );
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    step(&clock, "+0");
    let env: Vec<(String, String)> = [
        ("LD_PRELOAD", lib.as_str()),
        ("FAKETIME_TIMESTAMP_FILE", &clock.display().to_string()),
        ("FAKETIME_NO_CACHE", "1"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let database = format!("sqlite://{}", dir.path().join("tidemark.db").display());
    let args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--database-url",
        &database,
    ]
    .map(String::from)
    .to_vec();
    let server = ServerProcess::start_with_env(Path::new(BIN), &args, &env, dir.path(), "stepped").unwrap();
    let mut client = CoordinatorClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());

    let first = acquire(&mut client, "query-1").await.unwrap();
    commit(&mut client, &first, 0).await.unwrap();
    let held = acquire(&mut client, "query-2").await.unwrap_err();
    assert_eq!(reason(&held), "LEASE_HELD");

    // Stepped two hours forward: the 60 s lease has expired by the server's
    // clock, and another query takes the consumer over.
    step(&clock, "+7200");
    let second = acquire(&mut client, "query-2").await.unwrap();
    assert_eq!(second.epoch, first.epoch + 1);
    let fenced = commit(&mut client, &first, 1).await.unwrap_err();
    assert_eq!(
        (fenced.code(), reason(&fenced).as_str()),
        (Code::FailedPrecondition, "LEASE_NOT_HELD")
    );
    commit(&mut client, &second, 0).await.unwrap();

    // Stepped back past where it started: the new holder's lease lasts
    // longer (by the server's clock) but the first stays fenced, and a
    // third query is refused while the second holds the consumer.
    step(&clock, "-7200");
    let fenced = commit(&mut client, &first, 2).await.unwrap_err();
    assert_eq!(reason(&fenced), "LEASE_NOT_HELD");
    let renewed = client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: first.lease_id.clone(),
            epoch: first.epoch,
            ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&renewed), "LEASE_NOT_HELD");
    commit(&mut client, &second, 1).await.unwrap();
    let held = acquire(&mut client, "query-3").await.unwrap_err();
    assert_eq!(reason(&held), "LEASE_HELD");

    // Back to true time, two hours on from its last renewal: the second
    // holder's lease has expired too. Its query acquires again (a new
    // epoch) and resumes where it last committed.
    step(&clock, "+0");
    let expired = commit(&mut client, &second, 2).await.unwrap_err();
    assert_eq!(reason(&expired), "LEASE_NOT_HELD");
    let third = acquire(&mut client, "query-2").await.unwrap();
    assert_eq!(third.epoch, second.epoch + 1);
    let position = client
        .get_recovery_position(pb::GetRecoveryPositionRequest {
            consumer: consumer(),
            lease_id: Some(third.lease_id.clone()),
            table: Some(pb::SnapshotRange {
                earliest_snapshot: 1,
                latest_snapshot: 100,
                earliest_changelog: None,
                changelog_decoupled: false,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(position.start.unwrap().snapshot_id, 12);
}
