//! The real `tidemark` binary: start-up, defaults, refusal to serve
//! unauthenticated beyond loopback, migrations from several processes at
//! once, and a graceful drain on SIGTERM that finishes in-flight RPCs.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_testkit::postgres::FreshDatabase;
use tidemark_testkit::process::health;

use tidemark_proto::v1 as pb;

use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic_health::pb::health_check_response::ServingStatus;

fn key(id: &str) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: "db.orders".into(),
        branch: "main".into(),
        consumer_id: id.into(),
    }
}

async fn acquire(url: String, id: &str) -> pb::Lease {
    let mut client = CoordinatorClient::connect(url).await.expect("connect");
    tidemark_testkit::load::acquire(&mut client, id, "cli-test").await
}

/// Commits batch 0 of `lease`, ending with snapshot `snapshot_id` complete.
async fn commit_first_batch(
    client: &mut CoordinatorClient<tonic::transport::Channel>,
    lease: &pb::Lease,
    snapshot_id: i64,
    latest_snapshot: Option<i64>,
) -> Result<tonic::Response<pb::CommitBatchResponse>, tonic::Status> {
    client
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            batch_id: 0,
            end: Some(pb::Offset {
                snapshot_id,
                index: 0,
                scan_snapshot: false,
                total_splits: Some(1),
            }),
            latest_snapshot,
        })
        .await
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
    // Ready once the readiness tracker's first ping has answered, which a
    // loaded machine may run after the first call.
    let limit = Instant::now() + Duration::from_secs(10);
    while health(served.url(), "readiness").await != Some(ServingStatus::Serving) {
        assert!(Instant::now() < limit, "not ready on the default SQLite file");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
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
    let (ok, took) = served.wait_exit(Duration::from_secs(10)).await;
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
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--insecure-no-auth",
            "--metrics-listen",
            "off",
        ])
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
    let embedded = i64::try_from(tidemark_store::postgres::MIGRATOR.iter().count()).unwrap();
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
        commit_first_batch(&mut client, &lease, 9, None).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    served.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!commit.is_finished(), "the commit is still blocked in the database");
    blocker.rollback().await.unwrap();
    let response = commit.await.unwrap().expect("the in-flight commit succeeds");
    assert_eq!(response.into_inner().next_snapshot, Some(10));
    let (ok, _) = served.wait_exit(Duration::from_secs(10)).await;
    assert!(ok, "{}", served.logs());
    pool.close().await;
    db.drop_now().await;
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn admin(url: String) -> tidemark_proto::v1::admin_client::AdminClient<tonic::transport::Channel> {
    tidemark_proto::v1::admin_client::AdminClient::connect(url)
        .await
        .expect("connect")
}

/// Two server processes on one Postgres, each sweeping every 200 ms: every
/// expired consumer is deleted exactly once (one EXPIRE history row each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sweeping_servers_expire_each_consumer_once() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--database-url",
        &db.url,
        "--sweep-interval",
        "200ms",
        "--metrics-listen",
        "off",
    ];
    let a = Served::start(&args, dir.path());
    let b = Served::start(&args, dir.path());
    let mut client = admin(a.url()).await;
    client
        .set_table_options(pb::SetTableOptionsRequest {
            table: "db.sweep".into(),
            options: [("consumer.expiration-time".to_owned(), "1 s".to_owned())].into(),
            unset: vec![],
            execute: true,
        })
        .await
        .unwrap();
    const CONSUMERS: usize = 40;
    for i in 0..CONSUMERS {
        set_position(&mut client, "db.sweep", &format!("c{i}"), 5).await;
    }
    // Wait until both sweepers have had several chances.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut listed = usize::MAX;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let page = client
            .list_consumers(pb::ListConsumersRequest {
                table: "db.sweep".into(),
                page_size: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        listed = page.consumers.len();
        if listed == 0 {
            break;
        }
    }
    assert_eq!(listed, 0, "the sweepers expired every consumer");
    tokio::time::sleep(Duration::from_millis(600)).await; // a few more sweeps
    let history = client
        .list_history(pb::ListHistoryRequest {
            table: "db.sweep".into(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut expired: Vec<String> = history
        .entries
        .iter()
        .filter(|h| h.event == "EXPIRE")
        .map(|h| h.consumer.clone().unwrap().consumer_id)
        .collect();
    expired.sort();
    let before = expired.len();
    expired.dedup();
    assert_eq!(
        (before, expired.len()),
        (CONSUMERS, CONSUMERS),
        "each consumer expired exactly once"
    );
    assert!(
        history
            .entries
            .iter()
            .filter(|h| h.event == "EXPIRE")
            .all(|h| h.principal == "sweeper")
    );
    let swept_by_both = a.logs().contains("consumer expired") && b.logs().contains("consumer expired");
    eprintln!("both replicas expired some consumers: {swept_by_both}");
    drop((a, b));
    db.drop_now().await;
}

/// A backlog of expired consumers six times a sweep's cap drains in
/// capped sweeps that follow each other, not one cap per interval: every
/// expired row below a fence costs each fence read until it is swept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_backlog_drains_in_back_to_back_capped_sweeps() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    const INTERVAL: Duration = Duration::from_secs(4);
    const CAP: usize = 10;
    let served = Served::start(
        &[
            "--database-url",
            &db.url,
            "--sweep-interval",
            "4s",
            "--sweep-limit",
            &CAP.to_string(),
            "--metrics-listen",
            "off",
        ],
        dir.path(),
    );
    let mut client = admin(served.url()).await;
    client
        .set_table_options(pb::SetTableOptionsRequest {
            table: "db.backlog".into(),
            options: [("consumer.expiration-time".to_owned(), "1 s".to_owned())].into(),
            unset: vec![],
            execute: true,
        })
        .await
        .unwrap();
    const CONSUMERS: usize = 6 * CAP;
    for i in 0..CONSUMERS {
        set_position(&mut client, "db.backlog", &format!("c{i:02}"), 5).await;
    }
    let written = Instant::now();
    // The first sweep comes within an interval and its jitter (1 s) of the
    // server's start, the five after it within a pause each; one cap per
    // interval would take six intervals. Twice the expected bound:
    let bound = 2 * (INTERVAL + Duration::from_secs(1) + 5 * Duration::from_millis(250) + Duration::from_secs(1));
    let mut left = CONSUMERS;
    while written.elapsed() < bound {
        tokio::time::sleep(Duration::from_millis(200)).await;
        left = client
            .list_consumers(pb::ListConsumersRequest {
                table: "db.backlog".into(),
                page_size: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .consumers
            .len();
        if left == 0 {
            break;
        }
    }
    eprintln!("backlog of {CONSUMERS} drained to {left} in {:?}", written.elapsed());
    assert_eq!(left, 0, "the backlog drained within {bound:?}");
    // The cap held: sweeps that reached it said so.
    let logs = served.logs();
    assert!(logs.contains("sweep reached its cap"), "{logs}");
    drop(served);
    db.drop_now().await;
}

async fn set_position(
    client: &mut tidemark_proto::v1::admin_client::AdminClient<tonic::transport::Channel>,
    table: &str,
    consumer_id: &str,
    next_snapshot: i64,
) {
    client
        .reset_consumer(pb::ResetConsumerRequest {
            consumer: Some(pb::ConsumerKey {
                table: table.into(),
                branch: "main".into(),
                consumer_id: consumer_id.into(),
            }),
            next_snapshot,
            execute: true,
            ..Default::default()
        })
        .await
        .unwrap();
}

/// The Prometheus endpoint serves the SPEC's metrics.
#[tokio::test]
async fn metrics_endpoint_exports_rpc_commit_lease_and_fence_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let served = Served::start(&["--metrics-listen", &metrics, "--gauge-interval", "200ms"], dir.path());
    let lease = acquire(served.url(), "m").await;
    let mut coordinator = CoordinatorClient::connect(served.url()).await.unwrap();
    commit_first_batch(&mut coordinator, &lease, 3, Some(10)).await.unwrap();
    let _ = coordinator
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("m")),
            holder: "someone-else".into(),
            ttl: None,
        })
        .await
        .unwrap_err();
    let expected = [
        r#"tidemark_rpc_requests_total{service="Coordinator",method="CommitBatch",code="OK"} 1"#,
        r#"tidemark_rpc_requests_total{service="Coordinator",method="AcquireLease",code="FAILED_PRECONDITION"} 1"#,
        r#"tidemark_errors_total{method="AcquireLease",code="FAILED_PRECONDITION",reason="LEASE_HELD"} 1"#,
        r#"tidemark_commits_total{outcome="CREATED"} 1"#,
        "tidemark_lease_conflicts_total 1",
        r#"tidemark_lease_acquisitions_total{kind="acquire"} 1"#,
        // Computed by the gauge collector, per table and branch.
        r#"tidemark_consumer_lag_snapshots{table="db.orders",branch="main"} 7"#,
        r#"tidemark_consumers{table="db.orders",branch="main"} 1"#,
        r#"tidemark_retention_fence{table="db.orders",branch="main",kind="snapshot"} 4"#,
        r#"tidemark_retention_fence_lag_snapshots{table="db.orders",branch="main"} 7"#,
        "tidemark_leases_live 1",
        "tidemark_gauge_collector 1",
        "tidemark_database_ready 1",
        r#"tidemark_build_info{version=""#,
        r#"tidemark_db_pool_connections{state="open"}"#,
        "tidemark_db_pool_max_connections 5",
        "tidemark_history_rows ",
        "tidemark_history_oldest_age_seconds ",
        "tidemark_rpc_duration_seconds_bucket",
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let body = scrape(port).await;
        let missing: Vec<_> = expected.iter().filter(|line| !body.contains(*line)).collect();
        if missing.is_empty() {
            assert!(
                !body.contains("consumer_id="),
                "no per-consumer series unless asked:\n{body}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{missing:?} missing from:\n{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Prometheus text a metrics port serves now.
async fn scrape(port: u16) -> String {
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).unwrap();
        body
    })
    .await
    .unwrap()
}

/// `tidemark tables`: register (plan, then execute), list, import a
/// consumer file, and the mirror writes the file back from tidemark.
#[tokio::test]
async fn tables_register_list_and_import_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let table_dir = dir.path().join("warehouse/db.db/orders");
    std::fs::create_dir_all(table_dir.join("snapshot")).unwrap();
    for id in 1..=3 {
        std::fs::write(table_dir.join(format!("snapshot/snapshot-{id}")), "{}").unwrap();
    }
    std::fs::create_dir_all(table_dir.join("consumer")).unwrap();
    std::fs::write(table_dir.join("consumer/consumer-etl"), r#"{"nextSnapshot":2}"#).unwrap();
    let served = Served::start(&["--mirror-interval", "50ms"], dir.path());
    let cli = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .args(["--server", &served.url()])
            .output()
            .expect("run the CLI");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let location = table_dir.display().to_string();
    let plan = cli(&["tables", "register", "db.orders", &location]);
    assert!(plan.contains("PLAN") && plan.contains("snapshots 1\u{2013}3"), "{plan}");
    assert!(!cli(&["tables", "list"]).contains("db.orders"));
    cli(&["tables", "register", "db.orders", &location, "--execute"]);
    assert!(cli(&["tables", "list"]).contains(&location));
    let imported = cli(&["tables", "import", "db.orders", "--execute"]);
    assert!(imported.contains("etl") && imported.contains("imported"), "{imported}");
    // tidemark now owns the consumer: a commit moves the file.
    let lease = acquire(served.url(), "etl").await;
    let mut client = CoordinatorClient::connect(served.url()).await.unwrap();
    commit_first_batch(&mut client, &lease, 3, None).await.unwrap();
    let file = table_dir.join("consumer/consumer-etl");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&file).unwrap() != r#"{"nextSnapshot":4}"# {
        assert!(Instant::now() < deadline, "the mirror did not write the file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SPEC §9: a server SIGKILLed in the middle of a query's full scan leaves
/// the scan's pin file behind; another replica deletes it once the query's
/// lease has lapsed, so it cannot hold Paimon's expiration back for good.
#[tokio::test]
async fn a_pin_file_left_by_a_killed_server_goes_once_its_lease_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let table_dir = dir.path().join("warehouse/db.db/orders");
    std::fs::create_dir_all(table_dir.join("schema")).unwrap();
    std::fs::write(
        table_dir.join("schema/schema-0"),
        r#"{"id":0,"options":{},"timeMillis":1}"#,
    )
    .unwrap();
    std::fs::create_dir_all(table_dir.join("snapshot")).unwrap();
    for id in 1..=3 {
        std::fs::write(table_dir.join(format!("snapshot/snapshot-{id}")), "{}").unwrap();
    }
    let args = [
        "--mirror-interval",
        "100ms",
        "--mirror-refresh",
        "2s",
        "--min-lease-ttl",
        "1s",
    ];
    let mut first = Served::start(&args, dir.path());
    tidemark_testkit::load::register_table(&first.url(), "db.orders", &table_dir).await;
    let mut client = CoordinatorClient::connect(first.url()).await.unwrap();
    let acquired = Instant::now();
    let lease = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("scan")),
            holder: "q".into(),
            ttl: Some(prost_types::Duration { seconds: 6, nanos: 0 }),
        })
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    let plan = client
        .get_recovery_position(pb::GetRecoveryPositionRequest {
            consumer: Some(key("scan")),
            startup: Some(pb::StartupOptions {
                mode: pb::StartupMode::LatestFull.into(),
                snapshot_id: 0,
            }),
            table: Some(pb::SnapshotRange {
                earliest_snapshot: 1,
                latest_snapshot: 3,
                earliest_changelog: None,
                changelog_decoupled: false,
            }),
            lease_id: Some(lease.lease_id.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(plan.pinned);
    let pin = table_dir.join(format!("consumer/consumer-tidemark~pin~{}", lease.lease_id));
    assert_eq!(std::fs::read_to_string(&pin).unwrap(), r#"{"nextSnapshot":3}"#);
    first.signal("KILL");
    first.wait_exit(Duration::from_secs(5)).await;
    assert!(pin.exists(), "a killed server deletes nothing");

    // Another replica on the same database: the pin holds while the lease
    // lives, and goes once it has lapsed (6 s ttl; twice that allowed).
    let _second = Served::start(&args, dir.path());
    tokio::time::sleep(Duration::from_millis(500)).await;
    if acquired.elapsed() < Duration::from_secs(4) {
        assert!(pin.exists(), "the lease is still live: its pin file stays");
    }
    let deadline = acquired + Duration::from_secs(12);
    while pin.exists() {
        assert!(Instant::now() < deadline, "the lapsed lease's pin file is still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The code a call to acquire a fresh consumer gets with `token`.
async fn code_with_token(url: &str, token: &str) -> tonic::Code {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    let mut client = CoordinatorClient::with_interceptor(channel, move |mut request: tonic::Request<()>| {
        request.metadata_mut().insert("authorization", bearer.clone());
        Ok(request)
    });
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key(&format!("hup-{n}"))),
            holder: "q".into(),
            ttl: None,
        })
        .await
    {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test]
async fn sighup_reloads_the_credentials_file() {
    use tidemark_server::auth::{hash_token, hex};
    let dir = tempfile::tempdir().unwrap();
    let entry = |name: &str, token: &str| {
        format!(
            "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\nroles = [\"worker\"]\n",
            hex(&hash_token(token))
        )
    };
    let file = dir.path().join("auth.toml");
    std::fs::write(&file, entry("old", "tdm_old")).unwrap();
    // No polling: only SIGHUP reloads.
    let served = Served::start(&["--auth-file", "auth.toml", "--reload-interval", "0s"], dir.path());
    let url = served.url();
    assert_eq!(code_with_token(&url, "tdm_old").await, tonic::Code::Ok);
    std::fs::write(&file, entry("new", "tdm_new")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        code_with_token(&url, "tdm_old").await,
        tonic::Code::Ok,
        "nothing changes before the signal"
    );
    served.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while code_with_token(&url, "tdm_old").await != tonic::Code::Unauthenticated {
        assert!(Instant::now() < deadline, "SIGHUP did not reload:\n{}", served.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(code_with_token(&url, "tdm_new").await, tonic::Code::Ok);
    assert!(served.logs().contains("credentials reloaded"), "{}", served.logs());
}
