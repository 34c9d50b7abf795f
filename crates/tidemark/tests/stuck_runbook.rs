//! docs/runbook.md's "A consumer is stuck" section, followed as written
//! against the two queries an on-call operator meets (issue 55): one
//! SIGKILLed while holding a 10-minute lease (its lease is live and never
//! renewed again) and one hung (its keeper renews, no batch completes, so
//! its lease never expires). The section's first commands must tell the
//! two apart (lease state, caller, renewal), and its fix — revoke, then a
//! forced delete — must free the consumer in both cases; a delete without
//! `--force` is refused while the lease lasts.
//!
//! The server runs under libfaketime (`FAKETIME_LIB`; scripts/test.sh
//! fetches it and the test fails without it), so minutes pass at once.

use std::path::{Path, PathBuf};
use std::process::Command;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::process::ServerProcess;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_tidemark");

fn key() -> Option<pb::ConsumerKey> {
    Some(pb::ConsumerKey {
        table: "db.orders".into(),
        branch: "main".into(),
        consumer_id: "orders-audit".into(),
    })
}

/// The `sh` blocks of the runbook's stuck-consumer section, in order.
fn section_blocks() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/runbook.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("## A consumer is stuck")
        .expect("the runbook's stuck-consumer section");
    let section = &text[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```sh" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            blocks.push(block.iter().map(|l| l.trim()).collect::<Vec<_>>().join("\n"));
        }
    }
    blocks
}

/// Runs `script` with the CLI on PATH against `server`: (exit code, output).
fn sh(script: &str, server: &ServerProcess) -> (i32, String) {
    let bin_dir = Path::new(BIN).parent().unwrap();
    let output = Command::new("bash")
        .args(["-c", &format!("exec 2>&1\n{script}")])
        .env(
            "PATH",
            format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default()),
        )
        .env("TIDEMARK_SERVER", server.url())
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

struct Stepped {
    server: ServerProcess,
    clock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Stepped {
    fn start() -> Self {
        let lib = std::env::var("FAKETIME_LIB").expect(
            "FAKETIME_LIB: libfaketime is needed (scripts/test.sh fetches it; alone: source \
             scripts/lib/tools.sh; ensure_faketime)",
        );
        let dir = tempfile::tempdir().unwrap();
        let clock = dir.path().join("clock");
        std::fs::write(&clock, "+0\n").unwrap();
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
            "--sweep-interval",
            "0s",
            "--database-url",
            &database,
        ]
        .map(String::from)
        .to_vec();
        let server = ServerProcess::start_with_env(Path::new(BIN), &args, &env, dir.path(), "stuck").unwrap();
        Self {
            server,
            clock,
            _dir: dir,
        }
    }

    /// Moves the server's clock to `secs` after the start.
    fn at(&self, secs: u64) {
        std::fs::write(&self.clock, format!("+{secs}\n")).unwrap();
    }

    async fn worker(&self) -> CoordinatorClient<Channel> {
        // The SDK's own connection, so the lease records its user-agent.
        tidemark_client::connect_coordinator(self.server.url()).await.unwrap()
    }
}

/// A query takes orders-audit's lease for `ttl_secs` and commits snapshot 5
/// of a table whose latest is 20: the consumer holds the fence at 6.
async fn start_query(worker: &mut CoordinatorClient<Channel>, ttl_secs: i64) -> pb::Lease {
    let lease = worker
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: key(),
            holder: "q-audit-1".into(),
            ttl: Some(prost_types::Duration {
                seconds: ttl_secs,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    worker
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            batch_id: 0,
            end: Some(pb::Offset {
                snapshot_id: 5,
                index: 0,
                scan_snapshot: false,
                total_splits: Some(1),
            }),
            latest_snapshot: Some(20),
        })
        .await
        .unwrap();
    lease
}

async fn renew(worker: &mut CoordinatorClient<Channel>, lease: &pb::Lease) -> Result<(), tonic::Status> {
    worker
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            ttl: None,
        })
        .await
        .map(|_| ())
}

/// Follows the section: its diagnosis must show `state` and who holds the
/// lease; a delete without --force is refused; its revoke (planned, then
/// executed) fences the query; its forced delete removes the consumer.
async fn follow_the_runbook(
    stepped: &Stepped,
    worker: &mut CoordinatorClient<Channel>,
    lease: &pb::Lease,
    state: &str,
) {
    let blocks = section_blocks();
    assert_eq!(blocks.len(), 3, "diagnose, revoke, delete: {blocks:#?}");
    let server = &stepped.server;

    let (code, diagnosis) = sh(&blocks[0], server);
    assert_eq!(code, 0, "{diagnosis}");
    let rows = diagnosis
        .lines()
        .filter(|l| l.starts_with("db.orders ") || l.starts_with("consumer  orders-audit"));
    assert_eq!(rows.clone().count(), 2, "a lag row and a fence holder:\n{diagnosis}");
    for line in rows {
        // The lag table and the fence's holders both say what the query does.
        assert!(line.contains(state), "{state:?} missing from {line:?} in:\n{diagnosis}");
    }
    assert!(
        diagnosis.contains(&format!("lease state   {state}")),
        "describe names the state:\n{diagnosis}"
    );
    assert!(
        diagnosis.contains("lease caller  127.0.0.1:") && diagnosis.contains("tidemark-rust/"),
        "describe names the peer and the client:\n{diagnosis}"
    );

    // The delete the section offers needs --force while the lease lasts.
    let plain_delete = blocks[2].replace(" --force", "");
    let (code, refused) = sh(&plain_delete, server);
    assert_eq!(code, 4, "{refused}");
    assert!(refused.contains("LEASE_HELD"), "{refused}");
    assert!(!refused.contains("000ms"), "durations in human units:\n{refused}");

    let (code, plan) = sh(&blocks[1], server);
    assert_eq!(code, 0, "{plan}");
    let (_, still) = sh("tidemark consumers describe db.orders orders-audit", server);
    assert!(
        still.contains("lease         active"),
        "a plan changes nothing:\n{still}"
    );
    let (code, revoked) = sh(&format!("{} --execute", blocks[1]), server);
    assert_eq!(code, 0, "{revoked}");
    let fenced = renew(worker, lease).await.unwrap_err();
    assert_eq!(tidemark_client::ApiError::from(fenced).reason, "LEASE_NOT_HELD");

    let (code, deleted) = sh(&format!("{} --execute", blocks[2]), server);
    assert_eq!(code, 0, "{deleted}");
    let (code, gone) = sh("tidemark fence db.orders --explain", server);
    assert_eq!(code, 0, "{gone}");
    assert!(
        !gone.contains("orders-audit"),
        "the consumer no longer holds the fence:\n{gone}"
    );
    let _ = stepped;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runbook_frees_a_consumer_held_by_a_dead_query() {
    let stepped = Stepped::start();
    let mut worker = stepped.worker().await;
    let lease = start_query(&mut worker, 600).await;
    // SIGKILLed: never heard from again. 4m 30s later (a keeper renews every
    // third of the ttl, 3m 20s) its lease has 5m 30s left. The clock moves
    // on in real time: minutes are what is checked.
    stepped.at(270);
    follow_the_runbook(&stepped, &mut worker, &lease, "not renewed for 4m ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runbook_frees_a_consumer_held_by_a_hung_query() {
    let stepped = Stepped::start();
    let mut worker = stepped.worker().await;
    let lease = start_query(&mut worker, 600).await;
    // Its keeper renews every 250 s of a 600 s lease; no batch completes.
    for at in [250, 500, 750] {
        stepped.at(at);
        renew(&mut worker, &lease).await.unwrap();
    }
    follow_the_runbook(&stepped, &mut worker, &lease, "renewing, not committing for 12m ").await;
}
