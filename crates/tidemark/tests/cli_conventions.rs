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

/// Runs the CLI against `server` with the token read from `token_file`.
fn cli_with_token_file(server: &str, token_file: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--server", server, "--token-file", token_file])
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap()
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
        &["consumers", "reset", "db.t", "c1", "5", "--execute", "--create"],
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
    let token_file = dir.path().join("operator.token").display().to_string();
    let listed = cli_with_token_file(&server, &token_file, &["consumers", "list", "--table", "db.t"]);
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
    // A server that accepts connections and never answers: only --timeout
    // ends the call.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_address = silent.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    let started = std::time::Instant::now();
    let hurried = cli(
        &silent_address,
        Some(OPERATOR),
        &["consumers", "list", "--table", "db.t", "--timeout", "300ms"],
    );
    assert_eq!(code(&hurried), 5, "{}", text(&hurried));
    assert!(text(&hurried).contains("DEADLINE_EXCEEDED"), "{}", text(&hurried));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "ended by --timeout, not the 5 s connect timeout: {:?}",
        started.elapsed()
    );

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
    let unreadable = cli_with_token_file(&server, "/nonexistent", &["consumers", "list", "--table", "db.t"]);
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

/// Every executed operator change, and only those, lands in the audit log
/// as one JSON line with the principal, the request id and what changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executed_operator_changes_go_to_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    auth_file(dir.path());
    let served = Served::start(&["--auth-file", "auth.toml", "--audit-log", "audit.jsonl"], dir.path());
    let server = served.url().trim_start_matches("http://").to_owned();
    let run = |args: &[&str]| {
        let output = cli(&server, Some(OPERATOR), args);
        (code(&output), text(&output))
    };
    assert_eq!(
        run(&["consumers", "reset", "db.t", "a", "5", "--execute", "--create"]).0,
        0
    );
    assert_eq!(run(&["consumers", "reset", "db.t", "a", "7"]).0, 0, "a plan");
    assert_eq!(
        run(&["consumers", "reset", "db.t", "a", "8", "--expected", "4", "--execute"]).0,
        4,
        "refused"
    );
    assert_eq!(
        run(&["consumers", "reset", "db.t", "a", "9", "--expected", "5", "--execute"]).0,
        0
    );
    let options = run(&["options", "set", "db.t", "consumer.expiration-time=1 d", "--execute"]);
    assert_eq!(options.0, 0, "{}", options.1);
    assert_eq!(run(&["consumers", "delete", "db.t", "a", "--execute"]).0, 0);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let lines = loop {
        let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if lines.len() >= 4 || std::time::Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(lines.len(), 4, "the executed changes only: {lines:#?}");
    for line in &lines {
        assert_eq!(line["principal"], "alice", "{line}");
        assert!(line["request_id"].as_str().is_some_and(|id| !id.is_empty()), "{line}");
        assert_eq!(line["table"], "db.t", "{line}");
        assert_eq!(line["target"], "tidemark::audit", "{line}");
    }
    let moves: Vec<(serde_json::Value, serde_json::Value)> = lines
        .iter()
        .filter(|l| l["consumer_id"] == "a")
        .map(|l| (l["old_next"].clone(), l["new_next"].clone()))
        .collect();
    assert_eq!(
        moves,
        [
            (serde_json::Value::Null, 5.into()),
            (5.into(), 9.into()),
            (9.into(), serde_json::Value::Null)
        ]
    );
    assert!(
        lines.iter().any(|l| l["event"] == "SET_OPTIONS"
            && l["after"]
                .as_str()
                .is_some_and(|a| a.contains("consumer.expiration-time"))),
        "{lines:#?}"
    );
    drop(served);
}

/// A8: `tidemark consumers lag` lists consumers worst first, with the lag in
/// time of registered tables, and the gauge collector exports
/// tidemark_consumer_lag_seconds per branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_lag_lists_the_worst_first_and_the_metric_follows() {
    let dir = tempfile::tempdir().unwrap();
    auth_file(dir.path());
    let table_dir = dir.path().join("lake/db.db/lag");
    let hour_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 3_600_000;
    tidemark_testkit::paimon_table_dir(&table_dir, 10, hour_ago, "");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
    let served = Served::start(
        &[
            "--auth-file",
            "auth.toml",
            "--metrics-listen",
            &metrics,
            "--gauge-interval",
            "200ms",
        ],
        dir.path(),
    );
    let server = served.url().trim_start_matches("http://").to_owned();
    let location = table_dir.display().to_string();
    let registered = cli(
        &server,
        Some(OPERATOR),
        &["tables", "register", "db.lag", &location, "--execute"],
    );
    assert_eq!(code(&registered), 0, "{}", text(&registered));
    for (id, next) in [("middle", 8), ("worst", 3), ("done", 11)] {
        let set = cli(
            &server,
            Some(OPERATOR),
            &[
                "consumers",
                "reset",
                "db.lag",
                id,
                &next.to_string(),
                "--execute",
                "--create",
            ],
        );
        assert_eq!(code(&set), 0, "{}", text(&set));
    }
    let lag = cli(
        &server,
        Some(OPERATOR),
        &["consumers", "lag", "--table", "db.lag", "-o", "json"],
    );
    assert_eq!(code(&lag), 0, "{}", text(&lag));
    let listed: serde_json::Value = serde_json::from_slice(&lag.stdout).unwrap();
    let order: Vec<&str> = listed["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"]["consumerId"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["worst", "middle", "done"]);
    assert_eq!(listed["consumers"][0]["consumer"]["lag"], "8");
    assert!(listed["consumers"][0]["lagTime"].as_str().is_some(), "{listed}");
    let table = cli(&server, Some(OPERATOR), &["consumers", "lag", "--table", "db.lag"]);
    assert!(text(&table).contains("LAG TIME"), "{}", text(&table));

    // The gauge: snapshot 3 has waited about an hour.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let body = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(stream, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
            let mut body = String::new();
            stream.read_to_string(&mut body).unwrap();
            body
        })
        .await
        .unwrap();
        let waited = body
            .lines()
            .find(|l| l.starts_with(r#"tidemark_consumer_lag_seconds{table="db.lag",branch="main"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        if let Some(waited) = waited {
            assert!((3_597.0 - 60.0..3_597.0 + 60.0).contains(&waited), "{waited}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no lag gauge:\n{body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A failing command says what failed, why and what to do, once, on one
/// screen (issue 34): the cause of a failed connection and the flag that
/// fixes it, no backtrace even with `RUST_BACKTRACE=1` (common on Rust
/// machines) unless `--debug`, and a refused field named once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_the_cause_and_the_fix_once_without_a_backtrace() {
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env_remove("TIDEMARK_SERVER")
            .env_remove("TIDEMARK_TOKEN")
            .output()
            .unwrap()
    };
    // Nothing listens: the cause (refused) and the fix (--server).
    let refused = run(&["consumers", "list", "--server", "127.0.0.1:1"]);
    assert_eq!(code(&refused), 5, "{}", text(&refused));
    let said = text(&refused);
    assert!(said.to_lowercase().contains("connection refused"), "{said}");
    assert!(said.contains("--server") && said.contains("TIDEMARK_SERVER"), "{said}");
    assert!(!said.contains("backtrace"), "{said}");
    assert!(said.lines().count() <= 3, "{said}");
    // A name that does not resolve says so.
    let unknown = run(&["consumers", "list", "--server", "no-such-host.invalid:50051"]);
    assert_eq!(code(&unknown), 5, "{}", text(&unknown));
    assert!(text(&unknown).contains("does not resolve"), "{}", text(&unknown));
    // --debug shows the whole chain (and a backtrace when asked for).
    let debug = run(&["consumers", "list", "--server", "127.0.0.1:1", "--debug"]);
    assert_eq!(code(&debug), 5, "{}", text(&debug));
    assert!(text(&debug).contains("backtrace"), "{}", text(&debug));

    // A busy metrics port stops `serve` before the database is touched,
    // naming the flag (it stopped after migrations, without a hint).
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_address = busy.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", &busy_address])
        .current_dir(dir.path())
        .env_remove("TIDEMARK_DATABASE_URL")
        .output()
        .unwrap();
    assert_ne!(code(&serve), 0, "{}", text(&serve));
    assert!(text(&serve).contains("--metrics-listen"), "{}", text(&serve));
    assert!(
        !dir.path().join("tidemark.db").exists(),
        "the database was created before the port was found busy"
    );
    drop(busy);

    // A refused field: its text once.
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&[], dir.path());
    let server = served.url().trim_start_matches("http://").to_owned();
    let invalid = run(&["consumers", "describe", "no table", "c1", "--server", &server]);
    assert_eq!(code(&invalid), 2, "{}", text(&invalid));
    let said = text(&invalid);
    let problem = "must be \"database.table\"";
    assert_eq!(said.matches(problem).count(), 1, "{said}");

    // A consumer never seen: NOT_FOUND (exit 3) for delete and history, as
    // for describe; they answered "executed": true and "(none)".
    for command in [
        &["consumers", "delete", "db.orders", "ghost", "--execute"][..],
        &["consumers", "describe", "db.orders", "ghost"],
        &["history", "db.orders", "ghost"],
    ] {
        let missing = run(&[command, &["--server", &server][..]].concat());
        assert_eq!(code(&missing), 3, "{command:?}: {}", text(&missing));
        assert!(text(&missing).contains("CONSUMER_NOT_FOUND"), "{}", text(&missing));
    }

    // A fence of a table tidemark has never seen: the API still answers
    // "no fence" (expiration jobs ask for every table) and marks it
    // unknown; the CLI says so with the known table spelled nearly the
    // same and exits 3 (issue 34: it printed `-` and `(none)`; issue 55: a
    // typo no longer exits 0).
    let created = run(&[
        "consumers",
        "reset",
        "db.orders",
        "etl",
        "5",
        "--execute",
        "--create",
        "--server",
        &server,
    ]);
    assert_eq!(code(&created), 0, "{}", text(&created));
    for (table, said) in [
        ("db.nope", "tidemark has never seen table db.nope"),
        (
            "DB.Orders",
            "tidemark has never seen table DB.Orders; did you mean db.orders?",
        ),
        (
            "db.ordrs",
            "tidemark has never seen table db.ordrs; did you mean db.orders?",
        ),
    ] {
        for explain in [&["--explain"][..], &[]] {
            let fence = run(&[&["fence", table, "--server", &server][..], explain].concat());
            assert_eq!(code(&fence), 3, "{}", text(&fence));
            assert!(
                String::from_utf8_lossy(&fence.stderr).contains(said),
                "{table}: {}",
                text(&fence)
            );
        }
    }
    let known = run(&["fence", "db.orders", "--explain", "--server", &server]);
    assert_eq!(code(&known), 0, "{}", text(&known));
    assert!(!text(&known).contains("never seen"), "{}", text(&known));
}

/// A command's help leads with its own flags; the connection and global
/// flags have headings of their own, and the exit codes are printed under
/// every command (issue 34: 12 global flags mixed with the 5 that matter,
/// exit codes only in docs/operations.md).
#[test]
fn help_groups_the_flags_and_prints_the_exit_codes() {
    for command in [&["consumers", "list"][..], &["fence"], &["tables", "register"], &[]] {
        let help = Command::new(BIN).args(command).arg("--help").output().unwrap();
        assert_eq!(code(&help), 0, "{}", text(&help));
        let shown = text(&help);
        assert!(shown.contains("Exit codes:\n  0  success"), "{command:?}:\n{shown}");
        assert!(shown.contains("  3  NOT_FOUND"), "{command:?}:\n{shown}");
        if command.is_empty() {
            continue;
        }
        let own = shown.split("\nConnection:").next().unwrap();
        assert!(shown.contains("\nConnection:\n"), "{command:?}:\n{shown}");
        assert!(shown.contains("\nGlobal:\n"), "{command:?}:\n{shown}");
        for global in ["--server", "--token", "--tls-ca", "--log-format", "--audit-log"] {
            assert!(
                !own.contains(global),
                "{command:?}: {global} among the command's own flags:\n{own}"
            );
        }
    }
}

/// With TIDEMARK_SERVER (or TIDEMARK_TOKEN, TIDEMARK_TIMEOUT) set, a usage
/// error printed `Usage: tidemark consumers describe --server <SERVER>
/// <TABLE> ...`, as if --server were required (issue 34).
#[test]
fn usage_lines_name_no_option_an_environment_variable_set() {
    let usage = Command::new(BIN)
        .args(["consumers", "describe"])
        .env("TIDEMARK_SERVER", "127.0.0.1:1")
        .env("TIDEMARK_TOKEN", "x")
        .env("TIDEMARK_TIMEOUT", "5s")
        .output()
        .unwrap();
    assert_eq!(code(&usage), 2, "{}", text(&usage));
    let said = text(&usage);
    assert!(said.contains("<CONSUMER_ID>"), "still says what is missing: {said}");
    let line = said.lines().find(|l| l.starts_with("Usage: ")).expect("a usage line");
    assert_eq!(
        line, "Usage: tidemark consumers describe <TABLE> <CONSUMER_ID>",
        "{said}"
    );
}

/// `tables register` of a location with no Paimon table said "no snapshot
/// yet" and registered it; a table name with upper case or whitespace was
/// another key without a word (issue 34). Now the plan warns, execute
/// refuses (exit 4) unless --allow-missing, and every command that names a
/// table says on stderr which spelling a catalog would use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_location_and_a_folded_table_name_speak_up() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&[], dir.path());
    let server = served.url().trim_start_matches("http://").to_owned();
    let run = |args: &[&str]| cli(&server, None, args);
    let missing = dir.path().join("warehouse/db.db/typo").display().to_string();

    let plan = run(&["tables", "register", "db.typo", &missing]);
    assert_eq!(code(&plan), 0, "{}", text(&plan));
    let stderr = String::from_utf8_lossy(&plan.stderr);
    assert!(
        stderr.contains("warning: TABLE_LOCATION_EMPTY: there is no Paimon table at"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&plan.stdout).contains("no Paimon table there"),
        "{}",
        text(&plan)
    );

    let refused = run(&["tables", "register", "db.typo", &missing, "--execute"]);
    assert_eq!(code(&refused), 4, "{}", text(&refused));
    assert!(text(&refused).contains("not registered"), "{}", text(&refused));
    assert!(text(&refused).contains("--allow-missing"), "{}", text(&refused));
    let listed = run(&["tables", "list", "--output", "json"]);
    assert!(
        !text(&listed).contains("db.typo"),
        "refused, yet registered: {}",
        text(&listed)
    );

    let allowed = run(&[
        "tables",
        "register",
        "db.typo",
        &missing,
        "--execute",
        "--allow-missing",
    ]);
    assert_eq!(code(&allowed), 0, "{}", text(&allowed));
    let listed = run(&["tables", "list", "--output", "json"]);
    assert!(text(&listed).contains("db.typo"), "{}", text(&listed));

    // A real table registers at once, with no warning.
    let table = dir.path().join("warehouse/db.db/orders");
    tidemark_testkit::paimon_table_dir(&table, 3, 1, "");
    let table = table.display().to_string();
    let registered = run(&["tables", "register", "db.orders", &table, "--execute"]);
    assert_eq!(code(&registered), 0, "{}", text(&registered));
    assert!(!text(&registered).contains("warning"), "{}", text(&registered));

    for command in [
        &["consumers", "reset", "DB.Orders", "etl", "2", "--output", "json"][..],
        &["consumers", "lag", "--table", " db.orders"],
        &["fence", "DB.Orders"],
        &["history", "Db.orders"],
    ] {
        let said = run(command);
        let stderr = String::from_utf8_lossy(&said.stderr);
        assert_eq!(
            stderr.matches("warning: TABLE_NAME_SPELLING").count(),
            1,
            "{command:?}: {}",
            text(&said)
        );
        assert!(stderr.contains("most likely \"db.orders\""), "{command:?}: {stderr}");
    }
    let quiet = run(&["fence", "db.orders"]);
    assert!(!text(&quiet).contains("TABLE_NAME_SPELLING"), "{}", text(&quiet));
}

/// The CLI pointed at the console's or the metrics' port (both HTTP/1.1)
/// says which port it reached and which one is gRPC, with exit code 5 (no
/// gRPC server reached). Before: `Error: CANCELLED: operation was
/// canceled` and `Error: UNKNOWN: transport error`, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_port_is_named_as_such_with_the_grpc_port_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let console = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let _served = Served::start(
        &["--console-listen", &console, "--metrics-listen", &metrics],
        dir.path(),
    );
    for (address, what) in [(&console, "console"), (&metrics, "metrics")] {
        let output = cli(address, None, &["consumers", "list", "--table", "db.t"]);
        let said = text(&output);
        assert_eq!(code(&output), 5, "{what}: {said}");
        assert!(
            said.contains("answers HTTP/1.1, not gRPC") && said.contains(what) && said.contains("--listen"),
            "{what}: {said}"
        );
    }
}
