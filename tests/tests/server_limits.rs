//! The server's tower layers, on Postgres where a row lock can hold an RPC
//! in flight: the request timeout cancels a stuck call, the global in-flight
//! limit sheds excess calls at once with RESOURCE_EXHAUSTED (no queueing), and
//! readiness follows the database.

use std::time::Duration;

use tidemark_e2e::{Kind, TestServer, Worker, key, offset, test_policy};
use tidemark_proto::v1 as pb;
use tidemark_server::ServerConfig;
use tonic::Code;

/// Starts a commit that blocks on a row lock held by another connection.
async fn blocked_commit(
    server: &TestServer,
    id: &str,
) -> Option<(
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<Result<pb::CommitBatchResponse, tonic::Status>>,
)> {
    let pool = server.postgres_pool().await?;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &key("db.t", "", id), "q", None).await.unwrap();
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM consumer_keys FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let commit = tokio::spawn(async move { w.commit(0, offset(3, 0, false, Some(1))).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!commit.is_finished(), "the commit is blocked on the row lock");
    Some((lock, commit))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_cancels_a_stuck_call() {
    if tidemark_e2e::postgres_skipped() {
        return;
    }
    let config = ServerConfig {
        request_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Kind::Postgres, test_policy(), config).await;
    let (lock, commit) = blocked_commit(&server, "timeout").await.unwrap();
    let started = std::time::Instant::now();
    let status = commit.await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(tidemark_client::ApiError::from(status).reason, "TIMEOUT");
    assert!(started.elapsed() < Duration::from_secs(2));
    lock.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_in_flight_limit_are_shed_at_once() {
    if tidemark_e2e::postgres_skipped() {
        return;
    }
    let config = ServerConfig {
        max_in_flight: 1,
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Kind::Postgres, test_policy(), config).await;
    let (lock, commit) = blocked_commit(&server, "shed").await.unwrap();
    let mut client = server.client().await;
    let started = std::time::Instant::now();
    let status = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "", "other")),
            holder: "q".into(),
            ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "shed at once, not queued"
    );
    lock.rollback().await.unwrap();
    commit
        .await
        .unwrap()
        .expect("the blocked commit completes once the lock is gone");
    // And the server takes calls again.
    client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "", "other")),
            holder: "q".into(),
            ttl: None,
        })
        .await
        .unwrap();
}

/// One principal's calls beyond its share are refused at once
/// (RESOURCE_EXHAUSTED, PRINCIPAL_LIMIT) while another principal's calls go
/// through; the share frees when its calls finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_beyond_its_share_is_refused_while_others_go_through() {
    use tidemark_client::CoordinatorClient;
    use tidemark_e2e::channel_with_token;
    use tidemark_e2e::credentials::entry;
    if tidemark_e2e::postgres_skipped() {
        return;
    }
    let auth = tidemark_server::auth::AuthConfig::parse(
        &(entry("runaway", "tdm_runaway", &["worker"], &[]) + &entry("calm", "tdm_calm", &["worker"], &[])),
        "test",
    )
    .unwrap();
    let config = ServerConfig {
        max_in_flight: 16,
        max_in_flight_per_principal: 1,
        auth: tidemark_server::auth::SharedAuth::new(auth),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Kind::Postgres, test_policy(), config).await;
    let pool = server.postgres_pool().await.unwrap();
    let runaway = CoordinatorClient::new(channel_with_token(&server.url(), Some("tdm_runaway")).await);
    let calm = CoordinatorClient::new(channel_with_token(&server.url(), Some("tdm_calm")).await);
    let acquire = |mut client: CoordinatorClient<tidemark_client::AuthChannel>, id: &'static str| async move {
        client
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(key("db.t", "", id)),
                holder: "q".into(),
                ttl: None,
            })
            .await
    };
    let lease = acquire(runaway.clone(), "runaway-1")
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    // The runaway's commit blocks on a row lock: its one slot is taken.
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM consumer_keys FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut committing = runaway.clone();
    let blocked = tokio::spawn(async move {
        committing
            .commit_batch(pb::CommitBatchRequest {
                lease_id: lease.lease_id,
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(offset(3, 0, false, Some(1))),
                latest_snapshot: None,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!blocked.is_finished(), "blocked on the row lock");

    let started = std::time::Instant::now();
    let refused = acquire(runaway.clone(), "runaway-2").await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(tidemark_client::ApiError::from(refused).reason, "PRINCIPAL_LIMIT");
    assert!(started.elapsed() < Duration::from_millis(500), "refused at once");
    acquire(calm.clone(), "calm-1")
        .await
        .expect("another principal's call goes through");

    lock.rollback().await.unwrap();
    blocked.await.unwrap().expect("the blocked commit completes");
    acquire(runaway, "runaway-2").await.expect("the share is free again");
}
