//! tidemark given a standby instead of a primary, as after a failover a
//! balancer that has not caught up (or a replica's address given by
//! mistake) would: migrations never run there, `serve` waits rather than
//! starting on a read-only database, and becomes ready once the standby is
//! promoted. Runs on a private primary and a streaming standby of it.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::PgCluster;
use tidemark_testkit::process::health;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_types::StatusExt;

fn acquire(consumer_id: &str) -> pb::AcquireLeaseRequest {
    pb::AcquireLeaseRequest {
        consumer: Some(pb::ConsumerKey {
            table: "db.t".into(),
            branch: "main".into(),
            consumer_id: consumer_id.into(),
        }),
        holder: "w".into(),
        ttl: Some(prost_types::Duration { seconds: 30, nanos: 0 }),
    }
}

fn migrate(url: &str) -> std::process::Output {
    Command::new(BIN)
        .args(["migrate", "--database-url", url, "--wait-for-database", "0s"])
        .output()
        .expect("run tidemark migrate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_is_never_migrated_nor_served_until_promoted() {
    if std::env::var("TIDEMARK_SKIP_POSTGRES").is_ok_and(|v| v == "1") {
        return;
    }
    let primary = PgCluster::start().expect("PostgreSQL binaries are installed");
    let migrated = migrate(&primary.url());
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let standby = PgCluster::standby_of(&primary);

    // Everything is applied already, so a migrator that did not look would
    // report success on a read-only server.
    let refused = migrate(&standby.url());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "migrate succeeded on a standby: {stderr}");
    assert!(stderr.contains("standby in recovery"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    // Told not to migrate, serve starts on the standby, but is not ready,
    // and a write fails retryably (UNAVAILABLE), never INTERNAL.
    {
        let on_standby = Served::start(
            &[
                "--database-url",
                &standby.url(),
                "--no-migrate",
                "--readiness-interval",
                "200ms",
            ],
            dir.path(),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            health(on_standby.url(), "readiness").await,
            Some(ServingStatus::NotServing)
        );
        let mut client = CoordinatorClient::connect(on_standby.url()).await.unwrap();
        let refused = client
            .acquire_lease(acquire("on-the-standby"))
            .await
            .expect_err("a write on a standby");
        assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
        assert_eq!(
            refused.get_details_error_info().map(|i| i.reason).as_deref(),
            Some("STORE_UNAVAILABLE")
        );
    }

    // serve waits for a primary (it migrates first), saying why.
    let url = standby.url();
    let path = dir.path().to_path_buf();
    let started = Instant::now();
    let server = std::thread::spawn(move || {
        Served::start(
            &[
                "--database-url",
                &url,
                "--wait-for-database",
                "60s",
                "--readiness-interval",
                "200ms",
            ],
            &path,
        )
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!server.is_finished(), "serve started on a standby");
    standby.promote();
    let served = server.join().expect("serve started after the promotion");
    assert!(started.elapsed() >= Duration::from_secs(3));
    let logs = served.logs();
    assert!(
        logs.contains("standby in recovery"),
        "no word of the standby in:\n{logs}"
    );

    // Promoted: ready, and it takes writes.
    let limit = Instant::now() + Duration::from_secs(10);
    while health(served.url(), "readiness").await != Some(ServingStatus::Serving) {
        assert!(Instant::now() < limit, "not ready after the promotion");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut worker = CoordinatorClient::connect(served.url()).await.unwrap();
    let granted = worker
        .acquire_lease(acquire("after-promotion"))
        .await
        .expect("a write on the promoted standby");
    assert!(granted.into_inner().lease.is_some());
}
