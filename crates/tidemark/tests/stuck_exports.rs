//! A backup pipe that stalls: ExportState streams opened and then not read
//! hold no transaction and no pooled connection (SPEC §8: none is held
//! across a network call), so workers keep getting leases and positions;
//! each stalled stream ends `ABORTED` `EXPORT_STALLED` and releases its
//! slot; more exports than a replica allows are refused at once.

mod support;

use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_testkit::load::{coordinator, key, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tonic_types::StatusExt;

/// Enough keys that one stream's export is many times what HTTP/2 flow
/// control lets through to a client that does not read.
const KEYS: usize = 40_000;

fn seed(dir: &std::path::Path) -> std::path::PathBuf {
    use std::fmt::Write as _;
    let at = "2026-11-20T08:00:00Z";
    let mut text = format!(
        "{{\"format\":\"tidemark-state\",\"version\":1,\"exported_at\":\"{at}\",\"server_version\":\"seed\",\"table\":null}}\n"
    );
    for i in 0..KEYS {
        let _ = writeln!(
            text,
            "{{\"kind\":\"key\",\"table\":\"db.backup\",\"branch\":\"main\",\"consumer_id\":\"c{i:06}\",\"epoch\":1,\
             \"next_snapshot\":{},\"created_at\":\"{at}\",\"updated_at\":\"{at}\",\"latest_snapshot\":900}}",
            i % 700 + 1
        );
    }
    let _ = writeln!(
        text,
        "{{\"kind\":\"end\",\"options\":0,\"registrations\":0,\"keys\":{KEYS}}}"
    );
    let path = dir.join("seed.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

async fn idle_in_transaction(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_that_nobody_reads_hold_nothing_and_end_stalled() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        &[
            "--database-url",
            &db.url,
            "--db-max-connections",
            "3",
            "--export-idle-timeout",
            "3s",
            "--max-concurrent-exports",
            "3",
        ],
        dir.path(),
    );
    let imported = std::process::Command::new(BIN)
        .args(["state", "import"])
        .arg(seed(dir.path()))
        .args(["--execute", "--timeout", "120s", "--server", &served.addr.to_string()])
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    assert!(imported.status.success(), "{imported:?}");

    // Three backups that read one message each and stop.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let mut admin = AdminClient::connect(served.url()).await.unwrap();
        let mut stream = admin
            .export_state(pb::ExportStateRequest::default())
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().expect("the export's first message");
        assert!(!first.lines.is_empty());
        stalled.push((admin, stream));
    }
    let started = Instant::now();
    // A fourth is one more than the replica allows.
    let refused = AdminClient::connect(served.url())
        .await
        .unwrap()
        .export_state(pb::ExportStateRequest::default())
        .await
        .expect_err("a fourth export");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        refused.get_details_error_info().map(|i| i.reason).as_deref(),
        Some("TOO_MANY_EXPORTS")
    );

    // Workers are served meanwhile, from a pool of three.
    let mut worker = coordinator(&served.url(), Duration::from_secs(30));
    for i in 0..5 {
        let lease = worker
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(key(&format!("worker-{i}"))),
                holder: "w".into(),
                ttl: None,
            })
            .await
            .expect("a lease while backups stall")
            .into_inner()
            .lease
            .unwrap();
        worker
            .commit_batch(snapshot_commit(&lease, 0, None))
            .await
            .expect("a commit while backups stall");
        assert!(
            tidemark_testkit::load::position(&served.url(), &format!("worker-{i}"))
                .await
                .is_some(),
            "a position while backups stall"
        );
    }

    // The snapshots were read to their end: no transaction waits on them.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while idle_in_transaction(&pool).await > 0 {
        assert!(Instant::now() < deadline, "an export still holds a transaction open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Past the idle timeout (3 s, with a 2x margin), each stalled stream
    // ends EXPORT_STALLED once its client reads again, with no trailer.
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(started.elapsed())).await;
    for (_admin, mut stream) in stalled {
        let mut lines = 0;
        let ended = loop {
            match stream.message().await {
                Ok(Some(message)) => {
                    assert!(
                        !message.lines.iter().any(|l| l.contains("\"kind\":\"end\"")),
                        "no trailer"
                    );
                    lines += message.lines.len();
                }
                Ok(None) => panic!("the stream ended well after {lines} lines; it should have stalled"),
                Err(status) => break status,
            }
        };
        assert!(lines < KEYS, "{lines} lines reached a client that did not read");
        assert_eq!(ended.code(), tonic::Code::Aborted, "{ended:?}");
        assert_eq!(
            ended.get_details_error_info().map(|i| i.reason).as_deref(),
            Some("EXPORT_STALLED")
        );
    }

    // Every slot was released: an export read as it arrives is whole.
    let mut stream = AdminClient::connect(served.url())
        .await
        .unwrap()
        .export_state(pb::ExportStateRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut keys = 0;
    let mut trailer = false;
    while let Some(message) = stream.message().await.unwrap() {
        keys += message.lines.iter().filter(|l| l.contains("\"kind\":\"key\"")).count();
        trailer |= message.lines.iter().any(|l| l.contains("\"kind\":\"end\""));
    }
    assert_eq!(keys, KEYS + 5);
    assert!(trailer);
    assert_eq!(idle_in_transaction(&pool).await, 0);
}
