//! Readiness means a commit can be made, not merely that the database
//! answers a read: a primary whose commits wait for a synchronous standby
//! that is gone (Patroni's strict mode, or `synchronous_standby_names`
//! naming a standby that died) and a primary put in read-only mode (disk
//! almost full, `default_transaction_read_only`) both answer reads while
//! every commit hangs or fails. A replica that stayed SERVING through either
//! would keep receiving calls it can only fail. And a call that finds the
//! database unavailable makes the replica look again at once, rather than
//! after its readiness interval. Runs on a private Postgres (the settings
//! are server-wide).

mod support;

use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::PgCluster;
use tidemark_testkit::load::{coordinator, key, position, snapshot_commit};
use tidemark_testkit::process::health;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_types::StatusExt;

/// A private primary with tidemark's schema, unless Postgres tests are
/// switched off.
fn migrated_primary() -> Option<PgCluster> {
    if std::env::var("TIDEMARK_SKIP_POSTGRES").is_ok_and(|v| v == "1") {
        return None;
    }
    let primary = PgCluster::start().expect("PostgreSQL binaries are installed");
    let migrated = std::process::Command::new(BIN)
        .args(["migrate", "--database-url", &primary.url()])
        .output()
        .expect("run tidemark migrate");
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    Some(primary)
}

/// `tidemark serve` on `url`, checking readiness every `interval`, once it
/// is ready; its working directory goes with it.
async fn serve_ready(url: &str, interval: &str, more: &[&str]) -> (Served, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--database-url", url, "--readiness-interval", interval, "--no-migrate"];
    let args: Vec<&str> = args.iter().chain(more).copied().collect();
    let served = Served::start(&args, dir.path());
    readiness_becomes(&served, ServingStatus::Serving, Duration::from_secs(10)).await;
    (served, dir)
}

/// Waits (at most `limit`) until `served` reports `want` for readiness;
/// how long that took.
async fn readiness_becomes(served: &Served, want: ServingStatus, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let now = health(served.url(), "readiness").await;
        if now == Some(want) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "readiness still {now:?}, not {want:?}, after {limit:?}; server log:\n{}",
            served.logs()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn lease(client: &mut CoordinatorClient<Channel>, id: &str) -> pb::Lease {
    client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key(id)),
            holder: "w".into(),
            ttl: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
        })
        .await
        .expect("a lease")
        .into_inner()
        .lease
        .expect("granted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_is_not_serving_while_commits_cannot_be_made() {
    let Some(primary) = migrated_primary() else { return };
    // A ping may take 500 ms (the server's floor) after a 200 ms interval:
    // NOT_SERVING is due within 0.7 s; 5 s allows for a loaded machine.
    // A small pool: pings that stall must not take it from the calls that
    // can still be answered.
    let (served, _dir) = serve_ready(
        &primary.url(),
        "200ms",
        &["--db-max-connections", "3", "--db-acquire-timeout", "1s"],
    )
    .await;
    let limit = Duration::from_secs(5);
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    let lease = lease(&mut client, "stalled").await;
    client
        .commit_batch(snapshot_commit(&lease, 0, None))
        .await
        .expect("a commit");

    // Every commit now waits for a standby that is not there; reads answer.
    primary.set("synchronous_standby_names", "gone");
    let took = readiness_becomes(&served, ServingStatus::NotServing, limit).await;
    eprintln!("commits stalled on synchronous replication: NOT_SERVING after {took:?}");
    // By now every session has taken the reloaded setting: a commit waits.
    let mut waiting = client.clone();
    let stalled_commit = {
        let lease = lease.clone();
        tokio::spawn(async move { waiting.commit_batch(snapshot_commit(&lease, 1, None)).await })
    };
    // Reads need no standby: through several readiness intervals of
    // stalled pings, a recovery position is still answered.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!stalled_commit.is_finished(), "the commit did not wait for the standby");
    assert!(position(&served.url(), "stalled").await.is_some());
    // The standby requirement dropped: the waiting commit is acknowledged,
    // and the replica is ready again.
    primary.set("synchronous_standby_names", "");
    let acknowledged = tokio::time::timeout(limit, stalled_commit)
        .await
        .expect("the stalled commit finishes")
        .unwrap();
    acknowledged.expect("the stalled commit is acknowledged");
    readiness_becomes(&served, ServingStatus::Serving, limit).await;

    // A primary in read-only mode answers reads and refuses every write.
    primary.set("default_transaction_read_only", "on");
    let took = readiness_becomes(&served, ServingStatus::NotServing, limit).await;
    eprintln!("primary read-only: NOT_SERVING after {took:?}");
    let refused = client
        .commit_batch(snapshot_commit(&lease, 2, None))
        .await
        .expect_err("a commit on a read-only primary");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(
        refused.get_details_error_info().map(|i| i.reason).as_deref(),
        Some("STORE_UNAVAILABLE")
    );
    primary.set("default_transaction_read_only", "off");
    readiness_becomes(&served, ServingStatus::Serving, limit).await;
    client
        .commit_batch(snapshot_commit(&lease, 2, None))
        .await
        .expect("a commit once writable again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_finds_the_database_unavailable_rechecks_readiness_at_once() {
    let Some(primary) = migrated_primary() else { return };
    // A readiness interval far longer than the test: only the failed call
    // can make the replica look again in time.
    let (served, _dir) = serve_ready(&primary.url(), "120s", &[]).await;
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    let lease = lease(&mut client, "read-only").await;

    primary.set("default_transaction_read_only", "on");
    let refused = client
        .commit_batch(snapshot_commit(&lease, 0, None))
        .await
        .expect_err("a commit on a read-only primary");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    // A ping may take 5 s at this interval (the server's ceiling); 10 s is
    // still a twelfth of the interval.
    let took = readiness_becomes(&served, ServingStatus::NotServing, Duration::from_secs(10)).await;
    eprintln!("NOT_SERVING {took:?} after the failed call");
}

/// A hardened database where PUBLIC may not execute
/// `pg_logical_emit_message` (the probe's WAL write): the replica is still
/// ready, still sees read-only mode, and says once what it cannot see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_works_for_a_role_that_may_not_emit_wal_messages() {
    let Some(primary) = migrated_primary() else { return };
    primary.sql(
        "CREATE ROLE worker LOGIN;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO worker;
         GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO worker;
         REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC;
         REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;",
    );
    let url = format!("postgres://worker@127.0.0.1:{}/postgres", primary.port());
    let (served, _dir) = serve_ready(&url, "200ms", &[]).await;
    let limit = Duration::from_secs(5);
    let mut client = coordinator(&served.url(), Duration::from_secs(30));
    let lease = lease(&mut client, "hardened").await;
    client
        .commit_batch(snapshot_commit(&lease, 0, None))
        .await
        .expect("a commit");
    primary.set("default_transaction_read_only", "on");
    readiness_becomes(&served, ServingStatus::NotServing, limit).await;
    primary.set("default_transaction_read_only", "off");
    readiness_becomes(&served, ServingStatus::Serving, limit).await;
    let logs = served.logs();
    assert_eq!(
        logs.matches("may not execute pg_logical_emit_message").count(),
        1,
        "the missing privilege is said once:\n{logs}"
    );
}

/// tidemark's backends on `primary` (`application_name` is `tidemark`).
async fn tidemark_backends(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tidemark'")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Commits stalled on a synchronous standby that is gone, for many times
/// `--readiness-abandon-after`, on a server with few connections, three
/// replicas at once: every abandoned probe's backend is terminated, so
/// tidemark's backends stay within the pool plus three per replica however
/// long the stall lasts, and reads that need no standby keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_readiness_probes_leave_no_backend_behind() {
    let Some(mut primary) = migrated_primary() else { return };
    primary.sql("ALTER SYSTEM SET max_connections = 40");
    primary.stop(tidemark_testkit::StopMode::Fast);
    primary.start_again();
    const POOL: i64 = 3;
    let more = ["--db-max-connections", "3", "--readiness-abandon-after", "1s"];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(serve_ready(&primary.url(), "200ms", &more).await);
    }
    let mut client = coordinator(&replicas[0].0.url(), Duration::from_secs(30));
    let lease = lease(&mut client, "abandon").await;
    client
        .commit_batch(snapshot_commit(&lease, 0, None))
        .await
        .expect("a commit");
    let watcher = sqlx::PgPool::connect(&primary.url()).await.unwrap();

    primary.set("synchronous_standby_names", "gone");
    for (served, _) in &replicas {
        readiness_becomes(served, ServingStatus::NotServing, Duration::from_secs(5)).await;
    }
    // Eight abandon periods: without termination, each replica would leave
    // a stuck backend behind every second.
    let bound = 3 * (POOL + 3);
    let mut most = 0;
    let stall = Instant::now();
    while stall.elapsed() < Duration::from_secs(8) {
        most = most.max(tidemark_backends(&watcher).await);
        for (served, _) in &replicas {
            assert!(
                position(&served.url(), "abandon").await.is_some(),
                "a read during the stall"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("most tidemark backends during an 8 s stall, 3 replicas: {most} (bound {bound})");
    assert!(most <= bound, "{most} tidemark backends, more than {bound}");
    assert!(
        replicas[0]
            .0
            .logs()
            .contains("terminated the abandoned readiness backend"),
        "{}",
        replicas[0].0.logs()
    );
    primary.set("synchronous_standby_names", "");
    for (served, _) in &replicas {
        readiness_becomes(served, ServingStatus::Serving, Duration::from_secs(10)).await;
    }
}
