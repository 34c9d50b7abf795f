//! The real grpcurl (1.8.6, fetched by scripts/test.sh) against a real
//! server: reflection lists and describes the API with no proto files, error
//! details are readable, and the README's walk-through runs verbatim.

use std::path::PathBuf;
use std::process::{Command, Output};

use tidemark_e2e::{Kind, TestServer, on_both_backends};

on_both_backends!(
    reflection_lists_and_describes_the_api,
    errors_carry_readable_error_info_and_bad_request,
    readme_walkthrough_runs_verbatim,
    plans_read_as_plans_in_grpcurls_json,
);

fn grpcurl() -> PathBuf {
    if let Ok(path) = std::env::var("GRPCURL") {
        return PathBuf::from(path);
    }
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/grpcurl");
    if local.exists() {
        return local;
    }
    panic!("grpcurl not found: run scripts/test.sh (it fetches grpcurl into .tools/) or set GRPCURL");
}

/// Runs `grpcurl -plaintext <flags> <server> <rest>`.
fn run(server: &TestServer, flags: &[&str], rest: &[&str]) -> Output {
    Command::new(grpcurl())
        .arg("-plaintext")
        .args(flags)
        .arg(server.addr.to_string())
        .args(rest)
        .output()
        .expect("run grpcurl")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "grpcurl failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn reflection_lists_and_describes_the_api(kind: Kind) {
    let server = TestServer::start(kind).await;
    let services = stdout(&run(&server, &[], &["list"]));
    for service in ["tidemark.v1.Coordinator", "grpc.health.v1.Health"] {
        assert!(
            services.lines().any(|l| l == service),
            "{service} missing from:\n{services}"
        );
    }
    let methods = stdout(&run(&server, &[], &["list", "tidemark.v1.Coordinator"]));
    for method in [
        "AcquireLease",
        "RenewLease",
        "ReleaseLease",
        "CommitBatch",
        "GetRecoveryPosition",
    ] {
        assert!(
            methods
                .lines()
                .any(|l| l == format!("tidemark.v1.Coordinator.{method}")),
            "{method} missing from:\n{methods}"
        );
    }
    let described = stdout(&run(&server, &[], &["describe", "tidemark.v1.Offset"]));
    for field in ["snapshot_id", "index", "scan_snapshot", "optional int64 total_splits"] {
        assert!(described.contains(field), "{field} missing from:\n{described}");
    }
    assert!(
        described.contains("index == total_splits - 1"),
        "field docs are served:\n{described}"
    );
    let health = stdout(&run(&server, &[], &["describe", "grpc.health.v1.Health"]));
    assert!(health.contains("rpc Check"), "{health}");
    let check = stdout(&run(
        &server,
        &["-d", r#"{"service": "readiness"}"#],
        &["grpc.health.v1.Health/Check"],
    ));
    assert!(check.contains("SERVING"), "{check}");
}

async fn errors_carry_readable_error_info_and_bad_request(kind: Kind) {
    let server = TestServer::start(kind).await;
    let output = run(
        &server,
        &[
            "-format-error",
            "-d",
            r#"{"consumer": {"table": "orders", "consumer_id": ".."}, "holder": "q"}"#,
        ],
        &["tidemark.v1.Coordinator/AcquireLease"],
    );
    assert!(!output.status.success());
    let error: serde_json::Value =
        serde_json::from_slice(&output.stderr).expect("grpcurl -format-error prints the status as JSON");
    assert_eq!(error["code"], 3, "INVALID_ARGUMENT");
    let details = error["details"].as_array().expect("details");
    let info = details
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        .expect("ErrorInfo decoded");
    assert_eq!(
        (info["reason"].as_str(), info["domain"].as_str()),
        (Some("INVALID_ARGUMENT"), Some("tidemark"))
    );
    let bad = details
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.BadRequest")
        .expect("BadRequest decoded");
    let fields: Vec<&str> = bad["fieldViolations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["consumer.table", "consumer.consumer_id"]);
}

async fn readme_walkthrough_runs_verbatim(kind: Kind) {
    let server = TestServer::start(kind).await;
    // "With the server from the first command running": started and ready.
    // Its readiness turns SERVING after the first database ping, which a
    // loaded machine can take longer to answer than the script to start.
    server.wait_until_ready().await;
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README");
    let begin = readme
        .find("<!-- walkthrough:begin -->")
        .expect("walkthrough begin marker");
    let end = readme.find("<!-- walkthrough:end -->").expect("walkthrough end marker");
    let block = &readme[begin..end];
    let script = block
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.rsplit_once("```"))
        .map(|(body, _)| body)
        .expect("a ```sh block inside the walkthrough markers");
    let grpcurl_dir = grpcurl().parent().expect("dir").to_path_buf();
    let path = format!(
        "{}:{}",
        grpcurl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .env("PATH", path)
        .env("TIDEMARK", server.addr.to_string())
        .output()
        .expect("run bash");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "walk-through failed:\n{out}\n{err}");
    let expected_in_order = [
        "tidemark.v1.Coordinator",
        "\"status\": \"SERVING\"",
        "\"leaseId\"",
        "RECOVERY_SOURCE_STARTUP_OPTIONS",
        "COMMIT_OUTCOME_UNCHANGED_INCOMPLETE_FULL_SCAN",
        "COMMIT_OUTCOME_CREATED",
        "\"nextSnapshot\": \"43\"",
        "COMMIT_OUTCOME_REFRESHED",
        "RECOVERY_SOURCE_CONSUMER",
        "\"released\": true",
    ];
    let mut from = 0;
    for needle in expected_in_order {
        let at = out[from..]
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} not found (in order) in:\n{out}"));
        from += at + needle.len();
    }
    assert!(
        err.contains("LEASE_HELD"),
        "step 6 shows the LEASE_HELD details:\n{err}"
    );
    let key = tidemark_e2e::key("db.orders", "main", "orders-etl");
    let (state, history) = server.stored(&key).await;
    assert_eq!(state.unwrap().next_snapshot(), Some(43));
    let kinds: Vec<&str> = history.iter().rev().map(|h| h.event.kind.as_str()).collect();
    assert_eq!(kinds, ["LEASE_ACQUIRE", "CREATE", "REFRESH", "LEASE_RELEASE"]);
}

/// A plan never reads as done in grpcurl's JSON (which leaves out proto3
/// defaults): every Admin answer that can be a plan shows `"executed":
/// false`, and a revoke plan's lease is `would_revoke`, not `revoked`.
/// Before: `"state": "revoked"` and no `executed` at all, while the lease
/// stayed active.
async fn plans_read_as_plans_in_grpcurls_json(kind: Kind) {
    let server = TestServer::start(kind).await;
    let key = r#"{"table": "db.plans", "branch": "main", "consumer_id": "c1"}"#;
    stdout(&run(
        &server,
        &["-d", &format!(r#"{{"consumer": {key}, "holder": "q", "ttl": "600s"}}"#)],
        &["tidemark.v1.Coordinator/AcquireLease"],
    ));
    let json = |method: &str, body: String| -> serde_json::Value {
        let output = stdout(&run(&server, &["-d", &body], &[&format!("tidemark.v1.Admin/{method}")]));
        serde_json::from_str(&output).unwrap_or_else(|e| panic!("{method}: {e}: {output}"))
    };
    let revoke = json("RevokeLease", format!(r#"{{"consumer": {key}, "reason": "test"}}"#));
    assert_eq!(revoke["executed"], serde_json::Value::Bool(false), "{revoke}");
    assert_eq!(revoke["lease"]["state"], "would_revoke", "{revoke}");
    let plans = [
        ("RevokeLeases", r#"{"table": "db.plans", "reason": "test"}"#.to_owned()),
        (
            "ResetConsumer",
            format!(r#"{{"consumer": {key}, "next_snapshot": 5, "force": true}}"#),
        ),
        ("DeleteConsumer", format!(r#"{{"consumer": {key}, "force": true}}"#)),
        (
            "ResetConsumers",
            r#"{"table": "db.plans", "target": {"snapshot": 3}}"#.to_owned(),
        ),
        ("ClearConsumers", r#"{"table": "db.plans"}"#.to_owned()),
        ("ExpireConsumers", r#"{}"#.to_owned()),
        (
            "SetTableOptions",
            r#"{"table": "db.plans", "options": {"consumer.expiration-time": "1 d"}}"#.to_owned(),
        ),
    ];
    for (method, body) in plans {
        let answer = json(method, body);
        assert_eq!(answer["executed"], serde_json::Value::Bool(false), "{method}: {answer}");
    }
    // Executed, it says so; the lease is revoked.
    let done = json(
        "RevokeLease",
        format!(r#"{{"consumer": {key}, "reason": "test", "execute": true}}"#),
    );
    assert_eq!(done["executed"], serde_json::Value::Bool(true), "{done}");
    assert_eq!(done["lease"]["state"], "revoked", "{done}");
}
