//! Executes every command of `docs/operations.md` (and of the runbook, the
//! security guide and README's inline ones) against a live `tidemark
//! serve` (real binary, real grpcurl, the real CLI), on SQLite and on
//! Postgres, and checks each block's output against the example shown under
//! it. Volatile values (ids, times, durations) are compared by shape.
//!
//! `TIDEMARK_DOCS_RECORD=1` prints each block's actual output instead, to
//! refresh the examples.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{BIN, Served};
use tidemark_testkit::postgres::FreshDatabase;

/// A runnable block of the document and the output shown under it.
struct Step {
    line: usize,
    script: String,
    expected: Option<(String, String)>,
}

fn steps(doc: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = doc.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        if line.trim() != "```sh" {
            continue;
        }
        let mut script = String::new();
        for (_, l) in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            script.push_str(l);
            script.push('\n');
        }
        // The output block, if the next non-blank line opens one.
        while lines.peek().is_some_and(|(_, l)| l.trim().is_empty()) {
            lines.next();
        }
        let mut expected = None;
        if let Some((_, l)) = lines.peek()
            && let Some(kind) = l.trim().strip_prefix("```").filter(|k| *k == "json" || *k == "text")
        {
            let kind = kind.to_owned();
            lines.next();
            let mut body = String::new();
            for (_, l) in lines.by_ref() {
                if l.trim() == "```" {
                    break;
                }
                body.push_str(l);
                body.push('\n');
            }
            expected = Some((kind, body));
        }
        steps.push(Step {
            line: n + 1,
            script,
            expected,
        });
    }
    steps
}

fn grpcurl_dir() -> PathBuf {
    let path = std::env::var("GRPCURL").map_or_else(
        |_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/grpcurl"),
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "grpcurl not found at {}: run scripts/test.sh",
        path.display()
    );
    path.parent().unwrap().to_path_buf()
}

/// Replaces values that change from run to run with placeholders.
fn normalize(text: &str) -> String {
    let patterns = [
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "<uuid>",
        ),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "<time>"),
        (r"tdm_[0-9a-f]{64}", "<token>"),
        (r"\b127\.0\.0\.1:\d+\b", "<peer>"),
        (r"\b[0-9a-f]{64}\b", "<sha256>"),
        (r"\b\d+(\.\d+)?(ms|s|m|h|d)\b", "<duration>"),
        (r"<duration> <duration>", "<duration>"),
    ];
    let mut out = text.to_owned();
    for (pattern, replacement) in patterns {
        out = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&out, replacement)
            .into_owned();
    }
    out
}

/// Keys whose values vary between runs; only their presence is checked.
const VOLATILE_KEYS: [&str; 5] = ["id", "requestId", "retryDelay", "idle", "remaining_ms"];

/// Checks that `actual` has everything `expected` shows, equal up to
/// normalization (extra fields in `actual` are fine).
fn json_matches(expected: &serde_json::Value, actual: &serde_json::Value, path: &str) -> Result<(), String> {
    use serde_json::Value;
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                let Some(other) = a.get(key) else {
                    return Err(format!("{path}.{key} missing"));
                };
                if !VOLATILE_KEYS.contains(&key.as_str()) {
                    json_matches(value, other, &format!("{path}.{key}"))?;
                }
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!("{path}: {} items expected, {} found", e.len(), a.len()));
            }
            e.iter()
                .zip(a)
                .enumerate()
                .try_for_each(|(i, (e, a))| json_matches(e, a, &format!("{path}[{i}]")))
        }
        (Value::String(e), Value::String(a)) if normalize(e) == normalize(a) => Ok(()),
        (e, a) if e == a => Ok(()),
        (e, a) => Err(format!("{path}: expected {e}, found {a}")),
    }
}

fn json_values(text: &str) -> Result<Vec<serde_json::Value>, String> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<serde_json::Value>()
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not a stream of JSON values ({e}):\n{text}"))
}

fn text_matches(expected: &str, actual: &str) -> Result<(), String> {
    let lines = |t: &str| -> Vec<String> {
        normalize(t)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .collect()
    };
    let (e, a) = (lines(expected), lines(actual));
    if e == a {
        Ok(())
    } else {
        Err(format!("expected:\n{}\nfound:\n{}", e.join("\n"), a.join("\n")))
    }
}

fn run_document(served: &Served) {
    let env = [("T", served.addr.to_string()), ("TIDEMARK_SERVER", served.url())];
    // A directory of its own: the SQLite and Postgres runs go at once, and
    // both write batches.jsonl (seen: one's rename removed the other's file).
    let cwd = tempfile::tempdir().unwrap();
    run_doc("operations.md", 20, cwd.path(), &env);
}

/// Runs every `sh` block of `docs/<name>` in `cwd` with `env`, checking each
/// against the output block under it.
fn run_doc(name: &str, min_steps: usize, cwd: &Path, env: &[(&str, String)]) {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(name);
    let doc = std::fs::read_to_string(&doc_path).unwrap_or_else(|e| panic!("docs/{name}: {e}"));
    let steps = steps(&doc);
    assert!(steps.len() >= min_steps, "docs/{name} has its commands");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_tidemark"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}:{}",
        grpcurl_dir().display(),
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let record = std::env::var("TIDEMARK_DOCS_RECORD").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    for step in steps {
        let output = Command::new("bash")
            .args(["-c", &format!("exec 2>&1\n{}", step.script)])
            .current_dir(cwd)
            .env("PATH", &path)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("RUST_BACKTRACE")
            .env_remove("TIDEMARK_TOKEN")
            .output()
            .expect("bash");
        let actual = String::from_utf8_lossy(&output.stdout).into_owned();
        if record {
            eprintln!("---- line {} ----\n{actual}", step.line);
            continue;
        }
        let Some((kind, expected)) = &step.expected else {
            if !output.status.success() {
                failures.push(format!(
                    "docs/{name} line {}: failed without an expected output:\n{actual}",
                    step.line
                ));
            }
            continue;
        };
        let verdict = match kind.as_str() {
            "json" => json_values(expected).and_then(|e| {
                let a = json_values(&actual)?;
                if e.len() != a.len() {
                    return Err(format!("{} outputs expected, {} found:\n{actual}", e.len(), a.len()));
                }
                e.iter().zip(&a).try_for_each(|(e, a)| json_matches(e, a, "$"))
            }),
            _ => text_matches(expected, &actual),
        };
        if let Err(why) = verdict {
            failures.push(format!("docs/{name} line {}: {why}\n--- actual:\n{actual}", step.line));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_cookbook_runs_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&["--sweep-interval", "0s", "--metrics-listen", "off"], dir.path());
    tokio::task::spawn_blocking(move || run_document(&served))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_cookbook_runs_on_postgres() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        &[
            "--database-url",
            &db.url,
            "--sweep-interval",
            "0s",
            "--metrics-listen",
            "off",
        ],
        dir.path(),
    );
    tokio::task::spawn_blocking(move || run_document(&served))
        .await
        .unwrap();
    db.drop_now().await;
}

#[test]
fn normalization_keeps_what_matters() {
    assert_eq!(
        normalize("idle 4m 12s, lease 01a22929-5a55-76cc-ad6d-755694405957"),
        "idle <duration>, lease <uuid>"
    );
    assert!(
        json_matches(
            &serde_json::json!({"a": "29.9s", "b": [1, 2]}),
            &serde_json::json!({"a": "12.000001s", "b": [1, 2], "extra": true}),
            "$"
        )
        .is_ok()
    );
    assert!(json_matches(&serde_json::json!({"b": [1]}), &serde_json::json!({"b": [2]}), "$").is_err());
    assert!(text_matches("A  B\nx  1s", "A B\nx 9m 3s").is_ok());
}

/// Writes a CA, a server certificate for localhost and a client certificate
/// (CN spark-etl) into `dir`, generated now.
fn write_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "tidemark docs CA");
    let ca_key = KeyPair::generate().unwrap();
    std::fs::write(dir.join("ca.pem"), ca.self_signed(&ca_key).unwrap().pem()).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    for (file, names, cn) in [
        (
            "server",
            vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
            "tidemark",
        ),
        ("client", vec!["spark-etl".to_owned()], "spark-etl"),
    ] {
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{file}-key.pem")), key.serialize_pem()).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_doc_runs_with_tokens_and_tls() {
    use tidemark_server::auth::{hash_token, hex};
    let dir = tempfile::tempdir().unwrap();
    write_pki(dir.path());
    let token = "tdm_docs_operator_token";
    let worker = "tdm_docs_worker_token";
    let tokens = format!(
        "[[token]]\nname = \"alice\"\nsha256 = \"{}\"\nroles = [\"operator\"]\n\n\
         [[token]]\nname = \"spark-etl\"\nsha256 = \"{}\"\nroles = [\"worker\"]\ntables = [\"db.*\"]\n",
        hex(&hash_token(token)),
        hex(&hash_token(worker))
    );
    std::fs::write(dir.path().join("auth.toml"), &tokens).unwrap();
    let mtls =
        format!("{tokens}\n[[certificate]]\ncommon_name = \"spark-*\"\nroles = [\"worker\"]\ntables = [\"db.*\"]\n");
    std::fs::write(dir.path().join("mtls.toml"), mtls).unwrap();
    let tls = Served::start(
        &[
            "--auth-file",
            "auth.toml",
            "--tls-cert",
            "server.pem",
            "--tls-key",
            "server-key.pem",
            "--health-listen",
            "127.0.0.1:0",
            "--sweep-interval",
            "0s",
        ],
        dir.path(),
    );
    let mtls = Served::start(
        &[
            "--auth-file",
            "mtls.toml",
            "--tls-cert",
            "server.pem",
            "--tls-key",
            "server-key.pem",
            "--tls-client-ca",
            "ca.pem",
            "--sweep-interval",
            "0s",
        ],
        dir.path(),
    );
    let env = [
        ("PORT", tls.addr.port().to_string()),
        ("HEALTH_PORT", tls.health_addr.expect("health port").port().to_string()),
        ("MTLS_PORT", mtls.addr.port().to_string()),
        ("TOKEN", token.to_owned()),
        ("WORKER_TOKEN", worker.to_owned()),
    ];
    let cwd = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || run_doc("security.md", 7, &cwd, &env))
        .await
        .unwrap();
    drop((tls, mtls));
}

/// The block of `docs/<doc>` under the heading `heading`: the state the
/// operator docs start from, made by their own commands.
fn block_under(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repository().join("docs").join(doc)).expect("doc");
    let at = text
        .find(heading)
        .unwrap_or_else(|| panic!("docs/{doc} has no {heading:?}"));
    steps(&text[at..])
        .into_iter()
        .next()
        .expect("a block under the heading")
        .script
}

/// Every inline command (`` `tidemark …` ``) of a document, as written.
fn inline_commands(doc: &str) -> Vec<(usize, String)> {
    let command = regex::Regex::new(r"`(tidemark [^`]+)`").unwrap();
    doc.lines()
        .enumerate()
        .flat_map(|(n, line)| {
            command
                .captures_iter(line)
                .map(move |c| (n + 1, c[1].to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// An inline command with its placeholders filled in for the docs' example
/// state (table `db.orders`, consumer `orders-audit`, the served SQLite
/// database in the working directory).
fn runnable(command: &str) -> String {
    let replacements = [
        ("postgres://…", "sqlite://runbook-second.db"),
        ("--listen …", "--listen 127.0.0.1:0 --metrics-listen off"),
        ("--table T ", "--table db.orders "),
        ("<table>", "db.orders"),
        ("<t>", "db.orders"),
        ("<id>", "orders-audit"),
        ("<branch>", "main"),
        ("<snapshot>", "44"),
        ("<location>", "\"$PWD/warehouse/db.db/orders\""),
        ("--database-url …", "--database-url sqlite://tidemark.db"),
        ("…", "*"),
    ];
    let mut runnable = command.to_owned();
    if runnable == "tidemark serve" {
        // As written it takes the default ports, which parallel tests share.
        runnable.push_str(" --listen 127.0.0.1:0 --metrics-listen off");
    }
    for (placeholder, value) in replacements {
        runnable = runnable.replace(placeholder, value);
    }
    runnable
}

/// docs/runbook.md, as an operator paged at 3 a.m. follows it, and every
/// `tidemark …` command README and the runbook name inline: each runs
/// against a live server holding the docs' example state and succeeds
/// (`tidemark serve` is still serving after three seconds), so a command
/// the CLI no longer takes as written fails here (issue 34: the runbook's
/// `consumers list <table>` exited 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runbook_and_readme_commands_run_as_written() {
    let dir = tempfile::tempdir().unwrap();
    // The table the runbook registers, as Paimon lays it out (registering
    // a location with no table is refused without --allow-missing).
    tidemark_testkit::paimon_table_dir(&dir.path().join("warehouse/db.db/orders"), 100, 1, "");
    let served = Served::start(&["--sweep-interval", "0s"], dir.path());
    let env = [("T", served.addr.to_string()), ("TIDEMARK_SERVER", served.url())];
    let cwd = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let path = format!(
            "{}:{}:{}",
            grpcurl_dir().display(),
            Path::new(BIN).parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let sh = |script: &str| {
            Command::new("bash")
                .args(["-c", &format!("exec 2>&1\n{script}")])
                .current_dir(&cwd)
                .env("PATH", &path)
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .env_remove("RUST_BACKTRACE")
                .env_remove("TIDEMARK_TOKEN")
                .env_remove("TIDEMARK_DATABASE_URL")
                .output()
                .expect("bash")
        };
        let seeded = sh(&block_under("operations.md", "## Some state to look at"));
        assert!(seeded.status.success(), "{}", String::from_utf8_lossy(&seeded.stdout));
        run_doc("runbook.md", 2, &cwd, &env);
        let mut failures = Vec::new();
        let mut ran = 0;
        for doc in ["docs/runbook.md", "README.md"] {
            let text = std::fs::read_to_string(repository().join(doc)).unwrap();
            for (line, command) in inline_commands(&text) {
                let script = runnable(&command);
                let serving = (command == "tidemark serve" || command.starts_with("tidemark serve "))
                    && !command.contains("--help");
                let script = if serving { format!("timeout 3 {script}") } else { script };
                let output = sh(&script);
                let code = output.status.code();
                let ok = if serving { code == Some(124) } else { code == Some(0) };
                ran += 1;
                if !ok {
                    failures.push(format!(
                        "{doc} line {line}: `{command}` (run as `{script}`) exited {code:?}:\n{}",
                        String::from_utf8_lossy(&output.stdout)
                    ));
                }
            }
        }
        assert!(ran >= 15, "the documents name their commands ({ran} found)");
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    })
    .await
    .unwrap();
    drop(served);
}

/// The operator documents list every state a lost lease can be in
/// (issue 34: `epoch_mismatch` was missing from both).
#[test]
fn docs_list_every_lease_loss_state() {
    for doc in ["docs/grpcurl.md", "docs/runbook.md"] {
        let text = std::fs::read_to_string(repository().join(doc)).unwrap();
        for state in tidemark_core::LeaseLoss::ALL {
            assert!(
                text.contains(&format!("`{}`", state.as_str())),
                "{doc} does not list the lease state `{}`",
                state.as_str()
            );
        }
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README starts with one line saying what tidemark is, then the two
/// commands; its flag table lists every `tidemark serve` flag; it links only
/// to files in the repository.
#[test]
fn readme_is_short_on_top_lists_every_flag_and_links_only_inside_the_repository() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    assert_eq!(lines[0], "# tidemark");
    assert!(
        lines[2].starts_with("tidemark is "),
        "one line saying what it is: {}",
        lines[2]
    );
    let commands: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == "```sh")
        .map(|(n, _)| n)
        .take(2)
        .collect();
    assert_eq!(lines[commands[0] + 1], "cargo run --release -p tidemark -- serve");
    assert_eq!(lines[commands[1] + 1], "scripts/test.sh");
    assert!(commands[1] < 20, "the two commands come first, before the what and why");

    let help = Command::new(BIN).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', '<']).next())
        .filter(|f| *f != "help")
        .collect();
    assert!(flags.len() > 30, "{flags:?}");
    for flag in flags {
        assert!(
            readme.contains(&format!("`--{flag}`")),
            "the README's flag table lacks --{flag}"
        );
    }

    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    for found in link.captures_iter(&readme) {
        let target = &found[1];
        assert!(
            !target.contains("://"),
            "the README links outside the repository: {target}"
        );
        let path = target.split('#').next().unwrap();
        assert!(
            path.is_empty() || repository().join(path).exists(),
            "the README links to a missing file: {target}"
        );
    }
}
