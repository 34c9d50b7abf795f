//! The backup and restore runbook of docs/runbook.md, end to end through
//! the CLI and real servers, at 100,000 consumers on each store: export
//! while serving, lose the database, start on an empty one, import (plan,
//! then execute), and check that every key came back as exported and that
//! no epoch went back (the next lease on a key is above every epoch the
//! lost database issued; a lease it granted is unknown).

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_testkit::load::coordinator;
use tidemark_testkit::postgres::FreshDatabase;

const CONSUMERS: usize = 100_000;
/// Keys with a live lease when the backup is taken.
const LEASED: usize = 20;

fn cli(server: &str, args: &[&str], dir: &Path) -> Output {
    let output = Command::new(BIN)
        .args(args)
        .args(["--server", server, "--timeout", "120s"])
        .current_dir(dir)
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "tidemark {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A fleet written as a state file: a table with options and, per
/// consumer, an epoch and a position that vary.
fn seed_file(path: &Path) {
    use std::fmt::Write as _;
    let at = "2026-11-20T08:00:00.123456Z";
    let mut text = format!(
        "{{\"format\":\"tidemark-state\",\"version\":1,\"exported_at\":\"{at}\",\"server_version\":\"seed\",\
         \"table\":null}}\n{{\"kind\":\"options\",\"table\":\"db.fleet\",\"options\":{{\"consumer.expiration-time\":\"7d\"}}}}\n"
    );
    for i in 0..CONSUMERS {
        let _ = writeln!(
            text,
            "{{\"kind\":\"key\",\"table\":\"db.fleet\",\"branch\":\"main\",\"consumer_id\":\"c{i:06}\",\"epoch\":{},\
             \"next_snapshot\":{},\"created_at\":\"{at}\",\"updated_at\":\"{at}\",\"latest_snapshot\":2000}}",
            i % 5,
            i % 977 + 1
        );
    }
    let _ = writeln!(
        text,
        "{{\"kind\":\"end\",\"options\":1,\"registrations\":0,\"keys\":{CONSUMERS}}}"
    );
    std::fs::write(path, text).unwrap();
}

/// The key lines of an export, by key, parsed.
fn keys_of(path: &Path) -> BTreeMap<String, serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "key")
        .map(|v| (format!("{}/{}/{}", v["table"], v["branch"], v["consumer_id"]), v))
        .collect()
}

fn fleet_key(i: usize) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: "db.fleet".into(),
        branch: "main".into(),
        consumer_id: format!("c{i:06}"),
    }
}

async fn acquire(
    client: &mut tidemark_proto::v1::coordinator_client::CoordinatorClient<tonic::transport::Channel>,
    i: usize,
    holder: &str,
) -> pb::Lease {
    client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(fleet_key(i)),
            holder: holder.to_owned(),
            ttl: None,
        })
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap()
}

async fn runbook(database: impl Fn() -> String, lose: impl Fn()) {
    let dir = tempfile::tempdir().unwrap();
    let url = database();
    let source = Served::start(&["--database-url", &url], dir.path());
    let server = source.addr.to_string();
    seed_file(&dir.path().join("seed.jsonl"));
    cli(&server, &["state", "import", "seed.jsonl", "--execute"], dir.path());
    // Queries at work: live leases (epochs above the seed's) with commits.
    let mut client = coordinator(&source.url(), Duration::from_secs(30));
    let mut zombies = Vec::new();
    for i in 0..LEASED {
        let lease = acquire(&mut client, i * 997, &format!("query-{i}")).await;
        client
            .commit_batch(pb::CommitBatchRequest {
                lease_id: lease.lease_id.clone(),
                epoch: lease.epoch,
                batch_id: 1,
                end: Some(pb::Offset {
                    snapshot_id: 1500,
                    index: 0,
                    scan_snapshot: false,
                    total_splits: Some(1),
                }),
                latest_snapshot: None,
            })
            .await
            .unwrap();
        zombies.push(lease);
    }

    // Runbook: the backup, while serving.
    let started = Instant::now();
    cli(&server, &["state", "export", "--file", "backup.jsonl"], dir.path());
    let export_time = started.elapsed();
    let backup = keys_of(&dir.path().join("backup.jsonl"));
    assert_eq!(backup.len(), CONSUMERS);
    // The source goes on granting after the backup: a lease on a key that
    // had none, taken once the backup was written.
    const LATE: usize = 5;
    let late = acquire(&mut client, LATE, "late-query").await;

    // The database is lost; a new, empty one takes its place.
    drop(source);
    lose();
    let target = Served::start(&["--database-url", &url], dir.path());
    let server = target.addr.to_string();
    let plan = cli(&server, &["state", "import", "backup.jsonl"], dir.path());
    let plan = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(plan.starts_with("PLAN ONLY"), "{plan}");
    assert!(
        plan.contains(&format!("{CONSUMERS} keys: {CONSUMERS} consumers to create")),
        "{plan}"
    );
    let started = Instant::now();
    let done = cli(&server, &["state", "import", "backup.jsonl", "--execute"], dir.path());
    let import_time = started.elapsed();
    let done = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(
        done.contains(&format!(
            "{CONSUMERS} consumers created, 0 replaced, 0 already there, 0 kept at another position, 0 epoch only, \
             0 deleted since the export, 0 refused; {CONSUMERS} epochs raised; {CONSUMERS} keys written"
        )),
        "{done}"
    );
    eprintln!(
        "restore runbook at {CONSUMERS} consumers: export {:.2} s, import {:.2} s ({:.0} keys/s)",
        export_time.as_secs_f64(),
        import_time.as_secs_f64(),
        CONSUMERS as f64 / import_time.as_secs_f64()
    );

    // Every key as exported, times included; each epoch raised by the
    // restore margin, so no epoch the source granted after the backup is
    // granted again.
    cli(&server, &["state", "export", "--file", "restored.jsonl"], dir.path());
    let restored = keys_of(&dir.path().join("restored.jsonl"));
    let mut expected = backup.clone();
    for line in expected.values_mut() {
        let epoch = line["epoch"].as_i64().unwrap();
        line["epoch"] = (epoch + tidemark_core::restore::RESTORE_EPOCH_MARGIN).into();
    }
    assert_eq!(restored, expected);

    // No epoch goes back: a lease the lost database granted is unknown, and
    // the next lease on its key is above it.
    let mut client = coordinator(&target.url(), Duration::from_secs(30));
    for (i, zombie) in zombies.iter().enumerate() {
        let refused = client
            .renew_lease(pb::RenewLeaseRequest {
                lease_id: zombie.lease_id.clone(),
                epoch: zombie.epoch,
                ttl: None,
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
        let lease = acquire(&mut client, i * 997, &format!("query-{i}-again")).await;
        assert!(lease.epoch > zombie.epoch, "{} <= {}", lease.epoch, zombie.epoch);
    }
    for (key, line) in &restored {
        assert!(line["epoch"].as_i64() >= backup[key]["epoch"].as_i64(), "{key}");
    }
    let after = acquire(&mut client, LATE, "late-query-again").await;
    assert!(
        after.epoch > late.epoch,
        "epoch {} granted after the restore was already granted by the source after its backup ({})",
        after.epoch,
        late.epoch
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_runbook_on_sqlite_at_100k_consumers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidemark.db");
    let url = format!("sqlite://{}", file.display());
    runbook(
        || url.clone(),
        || {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_runbook_on_postgres_at_100k_consumers() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let url = db.url.clone();
    let admin = tidemark_testkit::postgres_url().unwrap();
    let name = url.rsplit('/').next().unwrap().to_owned();
    runbook(
        || url.clone(),
        || {
            // Drop the database and create it again, empty.
            let admin = admin.clone();
            let name = name.clone();
            std::thread::spawn(move || {
                tokio::runtime::Runtime::new().unwrap().block_on(async {
                    let pool = sqlx::PgPool::connect(&admin).await.unwrap();
                    for statement in [
                        format!("DROP DATABASE {name} WITH (FORCE)"),
                        format!("CREATE DATABASE {name}"),
                    ] {
                        sqlx::query(sqlx::AssertSqlSafe(statement))
                            .execute(&pool)
                            .await
                            .unwrap();
                    }
                    pool.close().await;
                });
            })
            .join()
            .unwrap();
        },
    )
    .await;
    db.drop_now().await;
}
