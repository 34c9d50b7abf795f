//! tidemark behind PgBouncer (Debian's 1.18, the version platform teams
//! run; CloudNativePG's `Pooler` is PgBouncer): a pooler that refuses
//! unknown startup parameters, and in transaction mode gives a server
//! connection for one transaction at a time. The statement timeout still
//! holds, the gauge collector still moves to another replica, migrations
//! refuse to run without a session, and a refused startup parameter says
//! what to do.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_testkit::load::{coordinator, key, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tidemark_testkit::{PgBouncer, PoolMode};
use tonic_types::StatusExt;

fn database_name(url: &str) -> &str {
    url.rsplit_once('/')
        .map(|(_, name)| name)
        .expect("a database in the URL")
}

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

fn acquire_request(id: &str) -> pb::AcquireLeaseRequest {
    pb::AcquireLeaseRequest {
        consumer: Some(key(id)),
        holder: "w".into(),
        ttl: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
    }
}

/// `tidemark serve` with `args`, expected to stop by itself: (success,
/// what it printed, how long it took).
fn serve_until_it_stops(args: &[&str]) -> (bool, String, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let output = Command::new(BIN)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
        .args(args)
        .current_dir(dir.path())
        .env("TIDEMARK_LOG_FORMAT", "text")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed, started.elapsed())
}

/// Before: "the database is unavailable: database refused the request
/// (08P01)", over and over, and nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_parameter_the_pooler_refuses_is_named_with_the_fix() {
    let db = FreshDatabase::create()
        .await
        .expect("Postgres (scripts/test.sh starts one)");
    let bouncer = PgBouncer::start(PoolMode::Transaction, &db.url);
    let pooled = bouncer.url(database_name(&db.url));
    let (ok, printed, _) = serve_until_it_stops(&[
        "--database-url",
        &pooled,
        "--wait-for-database",
        "2s",
        "--db-pooler",
        "none",
    ]);
    assert!(!ok, "{printed}");
    assert!(printed.contains("refused a startup parameter"), "{printed}");
    assert!(printed.contains("unsupported startup parameter: options"), "{printed}");
    assert!(
        printed.contains("--db-pooler transaction"),
        "the fix is named: {printed}"
    );
    drop(bouncer);
    db.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_through_a_transaction_pooler_are_refused_at_once_and_run_over_the_direct_url() {
    let db = FreshDatabase::create()
        .await
        .expect("Postgres (scripts/test.sh starts one)");
    let bouncer = PgBouncer::start(PoolMode::Transaction, &db.url);
    let pooled = bouncer.url(database_name(&db.url));
    let (ok, printed, took) = serve_until_it_stops(&[
        "--database-url",
        &pooled,
        "--db-pooler",
        "transaction",
        "--wait-for-database",
        "60s",
    ]);
    assert!(!ok, "{printed}");
    assert!(printed.contains("--migrate-database-url"), "{printed}");
    assert!(took < Duration::from_secs(30), "refused at once, not retried: {took:?}");

    // With the direct URL for migrations, it serves through the pooler.
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        &[
            "--database-url",
            &pooled,
            "--db-pooler",
            "transaction",
            "--migrate-database-url",
            &db.url,
        ],
        dir.path(),
    );
    let mut client = coordinator(&served.url(), Duration::from_secs(10));
    let lease = client
        .acquire_lease(acquire_request("migrated"))
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    client.commit_batch(snapshot_commit(&lease, 0, None)).await.unwrap();
    drop(served);
    drop(bouncer);
    db.drop_now().await;
}

/// An operator's lock held past --db-statement-timeout, behind PgBouncer in
/// each mode: the timeout holds (no session setting survives a transaction
/// pooler, and PgBouncer refuses it as a startup parameter), calls answer
/// `UNAVAILABLE` `STORE_TIMEOUT`, and the server answers normally after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_timeout_holds_behind_the_pooler_in_both_modes() {
    for mode in [PoolMode::Session, PoolMode::Transaction] {
        let db = FreshDatabase::create()
            .await
            .expect("Postgres (scripts/test.sh starts one)");
        let bouncer = PgBouncer::start(mode, &db.url);
        let pooled = bouncer.url(database_name(&db.url));
        let dir = tempfile::tempdir().unwrap();
        let served = Served::start(
            &[
                "--database-url",
                &pooled,
                "--db-pooler",
                mode.as_str(),
                "--migrate-database-url",
                &db.url,
                "--db-statement-timeout",
                "1s",
                "--request-timeout",
                "20s",
            ],
            dir.path(),
        );
        let mut client = coordinator(&served.url(), Duration::from_secs(30));
        let lease = client
            .acquire_lease(acquire_request("locked"))
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
        let asked = Instant::now();
        let refused = client
            .get_recovery_position(recovery_request("locked"))
            .await
            .expect_err("a read behind the lock");
        let waited = asked.elapsed();
        assert_eq!(refused.code(), tonic::Code::Unavailable, "{mode:?}: {refused:?}");
        assert_eq!(
            refused.get_details_error_info().map(|i| i.reason).as_deref(),
            Some("STORE_TIMEOUT"),
            "{mode:?}: {refused:?}"
        );
        // 1 s timeout; 2x margin and a retry inside the server.
        assert!(waited < Duration::from_secs(8), "{mode:?}: waited {waited:?}");
        operator.rollback().await.unwrap();
        let answered = client
            .get_recovery_position(recovery_request("locked"))
            .await
            .unwrap()
            .into_inner();
        assert!(answered.consumer.is_some(), "{mode:?}: {answered:?}");
        pool.close().await;
        drop(served);
        drop(bouncer);
        db.drop_now().await;
    }
}

/// The gauge collector's claim behind a transaction pooler is a row lease
/// (a session advisory lock would be released, or held by whichever client
/// the server connection serves next): one replica collects, and when it
/// dies the other takes over within three gauge intervals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_transaction_pooler_one_replica_collects_and_another_takes_over() {
    let db = FreshDatabase::create()
        .await
        .expect("Postgres (scripts/test.sh starts one)");
    let bouncer = PgBouncer::start(PoolMode::Transaction, &db.url);
    let pooled = bouncer.url(database_name(&db.url));
    let dir = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port()];
    let mut replicas: Vec<Served> = ports
        .iter()
        .map(|port| {
            Served::start(
                &[
                    "--database-url",
                    &pooled,
                    "--db-pooler",
                    "transaction",
                    "--migrate-database-url",
                    &db.url,
                    "--metrics-listen",
                    &format!("127.0.0.1:{port}"),
                    "--gauge-interval",
                    "300ms",
                    "--sweep-interval",
                    "0s",
                ],
                dir.path(),
            )
        })
        .collect();
    let collecting = |bodies: &[String]| -> Vec<usize> {
        bodies
            .iter()
            .enumerate()
            .filter(|(_, b)| b.lines().any(|l| l.trim() == "tidemark_gauge_collector 1"))
            .map(|(i, _)| i)
            .collect()
    };
    // Several rounds: always exactly one.
    let mut collector = None;
    for _ in 0..10 {
        let bodies = scrape_all(&ports).await;
        let now = collecting(&bodies);
        if now.len() == 1 {
            assert!(
                collector.is_none_or(|c| c == now[0]),
                "the role stays put while its holder lives"
            );
            collector = Some(now[0]);
        } else {
            assert!(now.len() < 2, "two collectors at once: {now:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let collector = collector.expect("a collector within 3 s");
    replicas[collector].signal("KILL");
    let survivor = 1 - collector;
    let deadline = Instant::now() + Duration::from_secs(10); // lease 0.9 s, 10x margin
    loop {
        let bodies = scrape_all(&ports[survivor..=survivor]).await;
        if collecting(&bodies) == [0] {
            break;
        }
        assert!(Instant::now() < deadline, "the survivor did not take over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(replicas.remove(0));
    drop(replicas);
    drop(bouncer);
    db.drop_now().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn scrape_all(ports: &[u16]) -> Vec<String> {
    let mut bodies = Vec::new();
    for port in ports {
        let body = async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", *port)).await.ok()?;
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await
                .ok()?;
            let mut text = String::new();
            stream.read_to_string(&mut text).await.ok()?;
            Some(text)
        };
        bodies.push(body.await.unwrap_or_default());
    }
    bodies
}
