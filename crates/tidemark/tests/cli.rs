//! The real `tidemark` binary: start-up, defaults, refusal to serve
//! unauthenticated beyond loopback, migrations from several processes at
//! once, and a graceful drain on SIGTERM that finishes in-flight RPCs.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{BIN, FreshDatabase, Served};

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn key(id: &str) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: "db.orders".into(),
        branch: "main".into(),
        consumer_id: id.into(),
    }
}

async fn acquire(url: String, id: &str) -> pb::Lease {
    let mut client = CoordinatorClient::connect(url).await.expect("connect");
    client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key(id)),
            holder: "cli-test".into(),
            ttl: None,
        })
        .await
        .expect("acquire")
        .into_inner()
        .lease
        .expect("lease")
}

async fn health(url: String, service: &str) -> Option<ServingStatus> {
    let channel = tonic::transport::Endpoint::from_shared(url)
        .ok()?
        .connect()
        .await
        .ok()?;
    let mut client = HealthClient::new(channel);
    let response = client
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .ok()?;
    Some(response.into_inner().status())
}

#[tokio::test]
async fn serves_on_an_sqlite_file_in_the_working_directory_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&[], dir.path());
    let lease = acquire(served.url(), "default-db").await;
    assert_eq!(lease.epoch, 1);
    assert!(
        dir.path().join("tidemark.db").exists(),
        "the default database is ./tidemark.db"
    );
    assert_eq!(health(served.url(), "readiness").await, Some(ServingStatus::Serving));
    assert_eq!(health(served.url(), "").await, Some(ServingStatus::Serving));
}

#[tokio::test]
async fn sigterm_turns_health_not_serving_drains_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut served = Served::start(&["--shutdown-drain", "800ms"], dir.path());
    acquire(served.url(), "drain").await;
    served.signal("TERM");
    // During the drain the server still answers, but says NOT_SERVING.
    let mut saw_not_serving = false;
    let deadline = Instant::now() + Duration::from_millis(600);
    while Instant::now() < deadline {
        if health(served.url(), "tidemark.v1.Coordinator").await == Some(ServingStatus::NotServing) {
            saw_not_serving = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_not_serving, "health never went NOT_SERVING:\n{}", served.logs());
    let (ok, took) = served.wait(Duration::from_secs(10)).await;
    assert!(ok, "exit status:\n{}", served.logs());
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(served.logs().contains("SIGTERM received"));
}

#[test]
fn refuses_a_non_loopback_address_without_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--insecure-no-auth"), "{stderr}");
    assert!(
        !dir.path().join("tidemark.db").exists(),
        "refused before touching the database"
    );
}

#[tokio::test]
async fn serves_a_non_loopback_address_when_told_explicitly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0", "--insecure-no-auth"])
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let warned = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("WITHOUT authentication"))
    });
    std::thread::sleep(Duration::from_millis(500));
    let _ = child.kill();
    let _ = child.wait();
    assert!(warned.join().unwrap(), "a loud warning is logged");
}

#[test]
fn rejects_inconsistent_lease_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BIN)
        .args(["serve", "--min-lease-ttl", "1m", "--max-lease-ttl", "10s"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("min <= default <= max"));
}

#[tokio::test]
async fn migrate_from_several_processes_at_once_on_postgres() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let children: Vec<Child> = (0..4)
        .map(|_| {
            Command::new(BIN)
                .args(["migrate", "--database-url", &db.url])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    let embedded = i64::try_from(tidemark_store::postgres::MIGRATOR.migrations.len()).unwrap();
    assert_eq!(applied, embedded, "each migration applied exactly once");
    // serve --no-migrate then works on the migrated database.
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&["--database-url", &db.url, "--no-migrate"], dir.path());
    assert_eq!(acquire(served.url(), "pg").await.epoch, 1);
    drop(served);
    db.drop_now().await;
}

/// SIGTERM while a commit is blocked in the database: the commit still
/// completes successfully and the process then exits cleanly.
#[tokio::test]
async fn in_flight_rpcs_finish_during_shutdown() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut served = Served::start(&["--database-url", &db.url], dir.path());
    let lease = acquire(served.url(), "inflight").await;

    // Hold the key's row lock from another connection so the commit blocks.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM consumer_keys WHERE consumer_id = 'inflight' FOR UPDATE")
        .execute(&mut *blocker)
        .await
        .unwrap();

    let url = served.url();
    let commit = tokio::spawn(async move {
        let mut client = CoordinatorClient::connect(url).await.unwrap();
        client
            .commit_batch(pb::CommitBatchRequest {
                lease_id: lease.lease_id,
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(pb::Offset {
                    snapshot_id: 9,
                    index: 0,
                    scan_snapshot: false,
                    total_splits: Some(1),
                }),
                latest_snapshot: None,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    served.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!commit.is_finished(), "the commit is still blocked in the database");
    blocker.rollback().await.unwrap();
    let response = commit.await.unwrap().expect("the in-flight commit succeeds");
    assert_eq!(response.into_inner().next_snapshot, Some(10));
    let (ok, _) = served.wait(Duration::from_secs(10)).await;
    assert!(ok, "{}", served.logs());
    pool.close().await;
    db.drop_now().await;
}
