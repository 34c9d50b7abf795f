//! Every lag is current and the same everywhere (issue 55): ListConsumers
//! (`consumers lag`), DescribeConsumer, ExplainRetention (`fence
//! --explain`) and GetRetentionFence count a consumer's lag to the latest
//! snapshot known now — a registered table's directory as last read, and
//! for any table the highest snapshot a worker of the branch reported —
//! not to what the consumer's own last commit reported. Before, a stopped
//! consumer holding the fence read `LAG 0` in `fence --explain` while
//! `consumers lag` said 12.

mod support;

use std::path::Path;
use std::process::Command;

use support::worker::query;
use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;

fn cli_json(server: &Served, args: &[&str]) -> serde_json::Value {
    let output = Command::new(BIN)
        .args(args)
        .args(["--server", &server.url(), "-o", "json"])
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The lag of `id` as each surface reports it: (consumers lag, describe,
/// fence --explain, GetRetentionFence).
async fn lags(server: &Served, table: &str, id: &str) -> [Option<i64>; 4] {
    let as_int = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64());
    let listed = cli_json(server, &["consumers", "lag", "--table", table]);
    let listed = listed["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"]["consumerId"] == id)
        .map(|c| as_int(&c["consumer"]["lag"]))
        .unwrap();
    let described = cli_json(server, &["consumers", "describe", table, id]);
    let described = as_int(&described["info"]["consumer"]["lag"]);
    let explained = cli_json(server, &["fence", table, "--explain"]);
    let explained = explained["holders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["consumerId"] == id)
        .map(|h| as_int(&h["lag"]))
        .unwrap();
    let mut retention = tidemark_proto::v1::retention_client::RetentionClient::new(
        Channel::from_shared(server.url()).unwrap().connect().await.unwrap(),
    );
    let fence = retention
        .get_retention_fence(pb::GetRetentionFenceRequest {
            table: table.into(),
            branch: "main".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let fenced = fence
        .snapshot_fence_holders
        .iter()
        .find(|h| h.consumer_id == id)
        .and_then(|h| h.lag);
    [listed, described, explained, fenced]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unregistered_tables_lag_counts_to_the_highest_snapshot_reported() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&["--sweep-interval", "0s"], dir.path());
    let mut worker = CoordinatorClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());
    // events-audit stopped at snapshot 5 when the table's latest was 7;
    // events-etl has since read up to 16 of 18.
    query(&mut worker, "db.events", "events-audit", 6, 7, true).await;
    query(&mut worker, "db.events", "events-etl", 17, 18, true).await;
    // Next 6, latest 18: 13 snapshots left, everywhere.
    assert_eq!(lags(&server, "db.events", "events-audit").await, [Some(13); 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_tables_lag_counts_to_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("warehouse/db.db/orders");
    tidemark_testkit::paimon_table_dir(&location, 48, 1, "");
    let server = Served::start(&["--sweep-interval", "0s"], dir.path());
    let registered = Command::new(BIN)
        .args(["tables", "register", "db.orders"])
        .arg(Path::new(&location))
        .args(["--execute", "--server", &server.url()])
        .output()
        .unwrap();
    assert!(
        registered.status.success(),
        "{}",
        String::from_utf8_lossy(&registered.stderr)
    );
    let mut worker = CoordinatorClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());
    // The worker last reported 31; the directory holds 48.
    query(&mut worker, "db.orders", "orders-audit", 31, 31, true).await;
    // Next 31, latest 48: 18 left, everywhere.
    assert_eq!(lags(&server, "db.orders", "orders-audit").await, [Some(18); 4]);
}
