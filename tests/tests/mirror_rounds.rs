//! SPEC §9: a consumer file changed from outside is written back and the
//! repair recorded, whichever of the mirror's writers gets to it first. A
//! round (a commit moved the consumer, or its file is due a refresh) that
//! finds someone else's content records it as the keeper would; it never
//! overwrites an outside change silently.

use std::path::Path;
use std::time::{Duration, Instant};

use tidemark_core::lease::LeasePolicy;
use tidemark_e2e::{Kind, TestServer, Worker, eventually, key, offset, on_both_backends};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_server::ServerConfig;

on_both_backends!(a_round_that_finds_an_outside_change_records_the_repair);

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Written whole, as Paimon's own writers do (a temporary file, then a
/// rename), so no reader sees it half written.
fn write_whole(file: &Path, content: &str) {
    let staged = file.with_extension("staged");
    std::fs::write(&staged, content).unwrap();
    std::fs::rename(&staged, file).unwrap();
}

async fn repairs(server: &TestServer) -> Vec<(Option<i64>, Option<i64>)> {
    let answer = AdminClient::new(server.channel().await)
        .describe_consumer(pb::DescribeConsumerRequest {
            consumer: Some(key("db.orders", "main", "etl")),
            history_limit: 100,
        })
        .await
        .unwrap()
        .into_inner();
    let mut repairs: Vec<_> = answer
        .recent_history
        .iter()
        .filter(|h| h.event == "MIRROR_REPAIR")
        .map(|h| (h.old_next_snapshot, h.new_next_snapshot))
        .collect();
    repairs.reverse(); // oldest first
    repairs
}

async fn a_round_that_finds_an_outside_change_records_the_repair(kind: Kind) {
    // Rounds every 50 ms; the keeper passes once at start, then only every
    // 75 s (an eighth of the refresh interval): every write below is a
    // round's, deterministically.
    let config = ServerConfig {
        mirror_interval: Duration::from_millis(50),
        mirror_refresh: Duration::from_secs(600),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(kind, LeasePolicy::default(), config).await;
    let dir = tempfile::tempdir().unwrap();
    tidemark_e2e::paimon_table_dir(dir.path(), 30, 1_000, "");
    server.register_table("db.orders", dir.path()).await;
    let client = server.client().await;
    let mut worker = Worker::acquire(&client, &key("db.orders", "main", "etl"), "q-1", None)
        .await
        .unwrap();
    let file = dir.path().join("consumer/consumer-etl");
    let shows = |n: i64| {
        let file = file.clone();
        move || read(&file).as_deref() == Some(format!(r#"{{"nextSnapshot":{n}}}"#).as_str())
    };
    // tidemark's own writes, one after another: nothing to repair.
    for (batch, snapshot) in [(0, 4), (1, 6)] {
        worker.commit(batch, offset(snapshot, 0, false, Some(1))).await.unwrap();
        eventually("the consumer's file", shows(snapshot + 1)).await;
    }
    assert_eq!(repairs(&server).await, []);

    // Someone rewinds the file (Paimon's reset_consumer), then the query
    // commits: the round writes the new position over it and says so.
    write_whole(&file, r#"{"nextSnapshot":2}"#);
    worker.commit(2, offset(9, 0, false, Some(1))).await.unwrap();
    eventually("the file written back", shows(10)).await;
    // Deleted from outside (Paimon's consumer expiration).
    std::fs::remove_file(&file).unwrap();
    worker.commit(3, offset(11, 0, false, Some(1))).await.unwrap();
    eventually("the file written back", shows(12)).await;
    // Torn.
    std::fs::write(&file, "").unwrap();
    worker.commit(4, offset(13, 0, false, Some(1))).await.unwrap();
    eventually("the file written back", shows(14)).await;
    // A file moved by tidemark itself again: still nothing more to repair.
    worker.commit(5, offset(15, 0, false, Some(1))).await.unwrap();
    eventually("the consumer's file", shows(16)).await;

    // The round writes first and records after: wait for the record.
    let want = vec![(Some(2), Some(10)), (None, Some(12)), (None, Some(14))];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = repairs(&server).await;
        if seen == want {
            break;
        }
        assert!(Instant::now() < deadline, "repairs recorded: {seen:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
