//! Typos never pass silently (issue 55): every command that names a table
//! or a consumer — lag, list, history, describe, revoke, delete, reset,
//! fence, the console's pages — says when tidemark has never seen the name
//! and which known name is spelled nearly the same, with exit code 3;
//! a reset that would create a consumer says so and executes only with
//! `--create` (before, one executed on a typo moved the fence from 52 to
//! 10); GetRetentionFence keeps its answer for an unknown table but marks
//! it (`known: false`).

mod support;

use std::process::Command;

use support::worker::query;
use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;

/// Runs the CLI: (exit code, stdout, stderr).
fn cli(server: &Served, args: &str) -> (i32, String, String) {
    let output = Command::new(BIN)
        .args(args.split_whitespace())
        .args(["--server", &server.url()])
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn fence(server: &Served) -> String {
    let (code, out, err) = cli(server, "fence db.events");
    assert_eq!(code, 0, "{out}{err}");
    out.lines()
        .find(|l| l.starts_with("snapshot"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_names_what_a_typo_most_likely_meant() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(
        &["--sweep-interval", "0s", "--console-listen", "127.0.0.1:0"],
        dir.path(),
    );
    let mut worker = CoordinatorClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());
    query(&mut worker, "db.events", "events-audit", 52, 53, false).await;
    query(&mut worker, "db.events", "events-etl", 61, 62, false).await;
    assert_eq!(fence(&server), "52");

    let table_typo = "tidemark has never seen table db.evnets; did you mean db.events?";
    let consumer_typo = "did you mean events-audit?";
    for (args, says) in [
        ("consumers lag --table db.evnets", table_typo),
        ("consumers list --table db.evnets", table_typo),
        ("history db.evnets", table_typo),
        ("fence db.evnets", table_typo),
        ("fence db.evnets --explain", table_typo),
        ("consumers describe db.evnets events-audit", table_typo),
        ("history db.events events-adit", consumer_typo),
        ("consumers describe db.events events-adit", consumer_typo),
        ("consumers revoke db.events events-adit", consumer_typo),
        ("consumers delete db.events events-adit", consumer_typo),
    ] {
        let (code, out, err) = cli(&server, args);
        assert_eq!(code, 3, "`{args}` exits 3 (not found):\n{out}{err}");
        assert!(err.contains(says), "`{args}` says {says:?}:\n{out}{err}");
    }
    // A name nothing resembles is still unknown, without a guess.
    let (code, _, err) = cli(&server, "consumers lag --table sales.nothing");
    assert_eq!(code, 3);
    assert!(
        err.contains("tidemark has never seen table sales.nothing") && !err.contains("did you mean"),
        "{err}"
    );
    // Known names pass as before.
    for args in [
        "consumers lag --table db.events",
        "history db.events events-audit",
        "fence db.events",
    ] {
        let (code, out, err) = cli(&server, args);
        assert_eq!(code, 0, "`{args}`:\n{out}{err}");
    }

    // A reset that would create a consumer: the plan says so; executing
    // needs --create, and without it nothing moves.
    let (code, plan, err) = cli(&server, "consumers reset db.events events-adit 10");
    assert_eq!(code, 0, "{plan}{err}");
    assert!(
        plan.contains("creates consumer events-adit") && plan.contains(consumer_typo),
        "{plan}"
    );
    let (code, out, err) = cli(&server, "consumers reset db.events events-adit 10 --execute");
    assert_eq!(code, 2, "refused without --create:\n{out}{err}");
    assert!(err.contains("--create"), "{err}");
    assert_eq!(fence(&server), "52", "nothing was created");
    let (code, out, err) = cli(&server, "consumers reset db.events events-new 55 --execute --create");
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = cli(&server, "consumers reset db.events events-audit 53 --execute");
    assert_eq!(code, 0, "an existing consumer needs no --create:\n{out}{err}");

    // The API: GetRetentionFence marks the unknown table, keeps "no fence".
    let mut retention = pb::retention_client::RetentionClient::new(
        Channel::from_shared(server.url()).unwrap().connect().await.unwrap(),
    );
    let fence_of = |table: &str| pb::GetRetentionFenceRequest {
        table: table.into(),
        branch: "main".into(),
        ..Default::default()
    };
    let unknown = retention
        .get_retention_fence(fence_of("db.evnets"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (unknown.snapshot_fence, unknown.known, unknown.did_you_mean.as_str()),
        (None, Some(false), "db.events")
    );
    let known = retention
        .get_retention_fence(fence_of("db.events"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((known.known, known.did_you_mean.as_str()), (Some(true), ""));
    // The reset request says it creates.
    let mut admin =
        pb::admin_client::AdminClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());
    let planned = admin
        .reset_consumer(pb::ResetConsumerRequest {
            consumer: Some(pb::ConsumerKey {
                table: "db.events".into(),
                branch: "main".into(),
                consumer_id: "events-etll".into(),
            }),
            next_snapshot: 5,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((planned.creates, planned.did_you_mean.as_str()), (true, "events-etl"));

    // The console: a mistyped table is a 404 naming the table meant.
    let console = server
        .logs()
        .lines()
        .find_map(|l| {
            l.split("console on ")
                .nth(1)
                .map(|rest| rest.trim().trim_end_matches('/').to_owned())
        })
        .expect("the console's address in the log");
    let host = console.trim_start_matches("http://").to_owned();
    for page in ["/fence?table=db.evnets", "/table?name=db.evnets"] {
        let response = get(&host, page);
        assert!(response.starts_with("HTTP/1.1 404"), "{page}:\n{response}");
        assert!(response.contains("did you mean db.events?"), "{page}:\n{response}");
    }
}

/// A plain HTTP GET (the console answers without credentials on loopback).
fn get(host: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}
