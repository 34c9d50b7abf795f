//! A database in trouble is not a bug: an operator holding a lock past the
//! statement timeout answers `UNAVAILABLE` with a `STORE_*` reason and
//! `RetryInfo` (never `INTERNAL`), the SDK rides it out, and the server
//! answers normally once the lock is gone. And epochs never wrap: at the
//! ceiling an acquire and a revoke are refused, and an import above it is
//! bad input.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_client::{Client, ClientOptions, RetryPolicy};
use tidemark_core::restore::{EPOCH_CEILING, RESTORE_EPOCH_MARGIN};
use tidemark_proto::v1 as pb;
use tidemark_testkit::load::{coordinator, key, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tonic_types::StatusExt;

fn recovery_request(id: &str) -> pb::GetRecoveryPositionRequest {
    pb::GetRecoveryPositionRequest {
        consumer: Some(key(id)),
        startup: Some(pb::StartupOptions {
            mode: pb::StartupMode::Latest as i32,
            snapshot_id: 0,
        }),
        table: Some(pb::SnapshotRange {
            earliest_snapshot: 1,
            latest_snapshot: 100,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn acquire_request(id: &str, holder: &str) -> pb::AcquireLeaseRequest {
    pb::AcquireLeaseRequest {
        consumer: Some(key(id)),
        holder: holder.into(),
        ttl: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
    }
}

fn reason(status: &tonic::Status) -> Option<String> {
    status.get_details_error_info().map(|i| i.reason)
}

/// An operator's `LOCK TABLE consumer_keys IN ACCESS EXCLUSIVE MODE` held
/// for 6 s against a 1 s statement timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_past_the_statement_timeout_is_retryable_not_internal() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&["--database-url", &db.url, "--db-statement-timeout", "1s"], dir.path());
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    let lease = client
        .acquire_lease(acquire_request("locked", "w"))
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    client.commit_batch(snapshot_commit(&lease, 0, None)).await.unwrap();

    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut operator = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE consumer_keys IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *operator)
        .await
        .unwrap();
    let locked_at = Instant::now();

    // Plain calls (no retries) see the condition as it is.
    let refused = client
        .get_recovery_position(recovery_request("locked"))
        .await
        .expect_err("a read behind the lock");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(reason(&refused).as_deref(), Some("STORE_TIMEOUT"), "{refused:?}");
    assert!(refused.get_details_retry_info().is_some(), "{refused:?}");
    let refused = client
        .commit_batch(snapshot_commit(&lease, 1, None))
        .await
        .expect_err("a commit behind the lock");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(reason(&refused).as_deref(), Some("STORE_TIMEOUT"), "{refused:?}");
    assert!(!refused.message().contains("consumer_keys"), "no SQL text: {refused:?}");

    // The SDK retries by code: a commit sent during the lock is
    // acknowledged once the lock is gone.
    let sdk = Client::connect(&ClientOptions {
        endpoint: served.url(),
        token: None,
        tls: None,
        connect_timeout: None,
        request_timeout: None,
        resolve: None,
    })
    .await
    .unwrap()
    .with_retry(RetryPolicy {
        budget: Duration::from_secs(30),
        ..RetryPolicy::default()
    });
    let retried = tokio::spawn({
        let lease = lease.clone();
        async move { sdk.commit_batch(snapshot_commit(&lease, 1, None)).await }
    });
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(locked_at.elapsed())).await;
    assert!(!retried.is_finished(), "the SDK's commit waited out the lock");
    operator.rollback().await.unwrap();
    let committed = tokio::time::timeout(Duration::from_secs(20), retried)
        .await
        .expect("the SDK's commit finishes after the lock")
        .unwrap()
        .expect("the SDK retried STORE_TIMEOUT until the lock was gone");
    assert_eq!(committed.next_snapshot, Some(3));

    // And the server answers normally.
    let plan = client
        .get_recovery_position(recovery_request("locked"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.start.unwrap().snapshot_id, 3);
    assert!(
        !served.logs().contains("internal error"),
        "no internal error logged:\n{}",
        served.logs()
    );
}

/// A registration that cannot be read is a database in trouble, never "not
/// registered": that would skip the table's identity check, trust the
/// worker's range and record a pin whose file is never written (SPEC §9).
/// An operator's lock on the registrations past the statement timeout
/// answers `UNAVAILABLE STORE_UNAVAILABLE` with `RetryInfo`; once it is gone
/// the plan is made from the table's directory again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_that_cannot_be_read_are_unavailable_never_unregistered() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("lake/db.db/orders");
    tidemark_testkit::paimon_table_dir(&location, 3, 1, "");
    let served = Served::start(&["--database-url", &db.url, "--db-statement-timeout", "1s"], dir.path());
    tidemark_testkit::load::register_table(&served.url(), "db.orders", &location).await;
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    // Registered: the worker's range (1..=100) is replaced by the directory's.
    let plan = client
        .get_recovery_position(recovery_request("reader"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.start.unwrap().snapshot_id, 4, "the directory's latest is 3");

    // Past the cache of registrations, which is then read again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut operator = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE paimon_tables IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *operator)
        .await
        .unwrap();
    let refused = client
        .get_recovery_position(recovery_request("blip"))
        .await
        .expect_err("a plan while the registrations cannot be read");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(reason(&refused).as_deref(), Some("STORE_UNAVAILABLE"), "{refused:?}");
    assert!(refused.get_details_retry_info().is_some(), "{refused:?}");
    assert!(!refused.message().contains("paimon_tables"), "no SQL text: {refused:?}");
    operator.rollback().await.unwrap();

    let plan = client
        .get_recovery_position(recovery_request("blip"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.start.unwrap().snapshot_id, 4, "planned from the directory again");
}

/// A state file with one key of `db.epochs` at `epoch`.
fn state_file(dir: &Path, epoch: i64) -> std::path::PathBuf {
    let at = "2026-11-20T08:00:00Z";
    let text = format!(
        "{{\"format\":\"tidemark-state\",\"version\":1,\"exported_at\":\"{at}\",\"server_version\":\"seed\",\"table\":null}}\n\
         {{\"kind\":\"key\",\"table\":\"db.orders\",\"branch\":\"main\",\"consumer_id\":\"top\",\"epoch\":{epoch},\
         \"next_snapshot\":5,\"created_at\":\"{at}\",\"updated_at\":\"{at}\",\"latest_snapshot\":9}}\n\
         {{\"kind\":\"end\",\"options\":0,\"registrations\":0,\"keys\":1}}\n"
    );
    let path = dir.join(format!("epoch-{epoch}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

fn import(server: &str, file: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["state", "import"])
        .arg(file)
        .args(["--execute", "--server", server])
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap()
}

async fn epochs_never_wrap(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&["--database-url", url], dir.path());
    let server = served.addr.to_string();

    // Above the ceiling (here i64::MAX, which wrapped before): bad input,
    // naming the line, and nothing imported.
    let refused = import(&server, &state_file(dir.path(), i64::MAX));
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("INVALID_ARGUMENT") && stderr.contains("line 2: epoch"),
        "{stderr}"
    );
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    let described = tidemark_proto::v1::admin_client::AdminClient::connect(served.url())
        .await
        .unwrap()
        .describe_consumer(pb::DescribeConsumerRequest {
            consumer: Some(key("top")),
            ..Default::default()
        })
        .await;
    assert!(described.is_err(), "nothing was imported: {described:?}");

    // Two below the ceiling, once the restore margin is added: one lease
    // more is granted, at the ceiling; after it, nothing wraps.
    let imported = import(
        &server,
        &state_file(dir.path(), EPOCH_CEILING - RESTORE_EPOCH_MARGIN - 1),
    );
    assert!(imported.status.success(), "{imported:?}");
    let lease = client
        .acquire_lease(acquire_request("top", "q"))
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    assert_eq!(lease.epoch, EPOCH_CEILING);
    let mut admin = tidemark_proto::v1::admin_client::AdminClient::connect(served.url())
        .await
        .unwrap();
    let refused = admin
        .revoke_lease(pb::RevokeLeaseRequest {
            consumer: Some(key("top")),
            reason: "test".into(),
            execute: true,
            expected_lease_id: None,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
    assert_eq!(reason(&refused).as_deref(), Some("EPOCH_EXHAUSTED"));
    client
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
        })
        .await
        .unwrap();
    let refused = client.acquire_lease(acquire_request("top", "q")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
    assert_eq!(reason(&refused).as_deref(), Some("EPOCH_EXHAUSTED"), "{refused:?}");
    assert!(refused.message().contains("new id"), "{}", refused.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_never_wrap_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    epochs_never_wrap(&format!("sqlite://{}", dir.path().join("t.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_never_wrap_on_postgres() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    epochs_never_wrap(&db.url).await;
}
