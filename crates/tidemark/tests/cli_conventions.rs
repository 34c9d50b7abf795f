//! The operator CLI's conventions (SPEC §11): every exit code, `--server
//! host:port` as grpcurl takes it, `--token-file`, a per-call `--timeout`,
//! `tidemark version` naming the client's and the server's versions, and
//! shell completions.

mod support;

use std::process::{Command, Output};

use support::{BIN, Served};
use tidemark_server::auth::{hash_token, hex};

const OPERATOR: &str = "tdm_conventions_operator";
const VIEWER: &str = "tdm_conventions_viewer";

fn auth_file(dir: &std::path::Path) {
    let entry = |name: &str, token: &str, role: &str| {
        format!(
            "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\nroles = [\"{role}\"]\n",
            hex(&hash_token(token))
        )
    };
    std::fs::write(
        dir.join("auth.toml"),
        entry("alice", OPERATOR, "operator") + &entry("dashboards", VIEWER, "viewer"),
    )
    .unwrap();
    std::fs::write(dir.join("operator.token"), format!("{OPERATOR}\n")).unwrap();
}

/// Runs the CLI against `server` (host:port) with `token`.
fn cli(server: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--server", server])
        .env_remove("TIDEMARK_TOKEN");
    if let Some(token) = token {
        command.args(["--token", token]);
    }
    command.output().unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_server_addresses_token_files_timeouts_versions_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    auth_file(dir.path());
    let served = Served::start(&["--auth-file", "auth.toml"], dir.path());
    // host:port, as grpcurl takes it.
    let server = served.url().trim_start_matches("http://").to_owned();

    // 0: success; a plan is a success too, and says it is one.
    let created = cli(
        &server,
        Some(OPERATOR),
        &["consumers", "reset", "db.t", "c1", "5", "--execute"],
    );
    assert_eq!(code(&created), 0, "{}", text(&created));
    let plan = cli(
        &server,
        Some(OPERATOR),
        &["consumers", "reset", "db.t", "c1", "7", "-o", "json"],
    );
    assert_eq!(code(&plan), 0, "{}", text(&plan));
    assert!(text(&plan).contains("\"executed\": false"), "{}", text(&plan));

    // --token-file instead of --token.
    let path = dir.path().join("operator.token");
    let listed = Command::new(BIN)
        .args([
            "consumers",
            "list",
            "--table",
            "db.t",
            "--server",
            &server,
            "--token-file",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(code(&listed), 0, "{}", text(&listed));
    assert!(text(&listed).contains("c1"), "{}", text(&listed));

    // 2: bad usage (clap) and INVALID_ARGUMENT (the server).
    assert_eq!(code(&cli(&server, Some(OPERATOR), &["consumers", "reset"])), 2);
    let invalid = cli(&server, Some(OPERATOR), &["consumers", "describe", "no table", "c1"]);
    assert_eq!(code(&invalid), 2, "{}", text(&invalid));

    // 3: not found.
    let missing = cli(&server, Some(OPERATOR), &["consumers", "describe", "db.t", "nobody"]);
    assert_eq!(code(&missing), 3, "{}", text(&missing));

    // 4: refused by a precondition (the expected position differs).
    let stale = cli(
        &server,
        Some(OPERATOR),
        &["consumers", "reset", "db.t", "c1", "9", "--expected", "4", "--execute"],
    );
    assert_eq!(code(&stale), 4, "{}", text(&stale));

    // 5: unavailable (nothing listens there), and a call over its --timeout.
    let nowhere = cli("127.0.0.1:1", Some(OPERATOR), &["consumers", "list", "--table", "db.t"]);
    assert_eq!(code(&nowhere), 5, "{}", text(&nowhere));
    let hurried = cli(
        &server,
        Some(OPERATOR),
        &["consumers", "list", "--table", "db.t", "--timeout", "1us"],
    );
    assert_eq!(code(&hurried), 5, "{}", text(&hurried));

    // 6: unauthenticated, and permission denied.
    assert_eq!(
        code(&cli(
            &server,
            Some("tdm_wrong"),
            &["consumers", "list", "--table", "db.t"]
        )),
        6
    );
    let viewer = cli(
        &server,
        Some(VIEWER),
        &["consumers", "reset", "db.t", "c1", "3", "--execute"],
    );
    assert_eq!(code(&viewer), 6, "{}", text(&viewer));

    // 1: anything else (an unreadable token file).
    let unreadable = Command::new(BIN)
        .args([
            "consumers",
            "list",
            "--table",
            "db.t",
            "--server",
            &server,
            "--token-file",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&unreadable), 1, "{}", text(&unreadable));

    // version: the client's and the server's.
    let version = cli(&server, None, &["version"]);
    assert_eq!(code(&version), 0, "{}", text(&version));
    let shown = text(&version);
    let expected = env!("CARGO_PKG_VERSION");
    assert!(shown.contains(&format!("client: tidemark {expected}")), "{shown}");
    assert!(shown.contains(&format!("server: tidemark {expected}")), "{shown}");

    // completions.
    let bash = Command::new(BIN).args(["completions", "bash"]).output().unwrap();
    assert_eq!(code(&bash), 0);
    let script = String::from_utf8_lossy(&bash.stdout);
    assert!(script.contains("_tidemark") && script.contains("consumers"), "{script}");
}
