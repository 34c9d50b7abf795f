//! Resets an operator can trust (issue 55): an absurd target is refused
//! (registered table) or warned about (unregistered: tidemark knows the
//! highest snapshot any consumer reported) with the valid range; a bulk
//! change that skipped a selected consumer exits 4 like the single form,
//! and its plan shows where the skipped consumer would have gone; a plan
//! exported to CSV (`--export`) is executed from the file (`--from-file`)
//! comparing-and-setting each row's old position.

mod support;

use std::path::Path;
use std::process::Command;

use support::worker::query;
use support::{BIN, Served};
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;

/// Runs the CLI in `dir`: (exit code, stdout and stderr).
fn cli(server: &Served, args: &[&str], dir: &Path) -> (i32, String) {
    let output = Command::new(BIN)
        .args(args)
        .args(["--server", &server.url()])
        .current_dir(dir)
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

fn position(server: &Served, table: &str, id: &str, dir: &Path) -> String {
    let (code, out) = cli(server, &["consumers", "describe", table, id], dir);
    assert_eq!(code, 0, "{out}");
    out.lines()
        .find_map(|l| l.strip_prefix("next snapshot "))
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_refuse_absurd_targets_exit_on_skips_and_round_trip_a_csv_plan() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("warehouse/db.db/orders");
    tidemark_testkit::paimon_table_dir(&location, 48, 1, "");
    let server = Served::start(&["--sweep-interval", "0s"], dir.path());
    let d = dir.path();
    let (code, out) = cli(
        &server,
        &[
            "tables",
            "register",
            "db.orders",
            &location.display().to_string(),
            "--execute",
        ],
        d,
    );
    assert_eq!(code, 0, "{out}");
    let mut worker = CoordinatorClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());
    query(&mut worker, "db.orders", "orders-etl", 31, 32, false).await;
    query(&mut worker, "db.orders", "orders-audit", 20, 21, true).await; // its query runs
    query(&mut worker, "db.events", "events-audit", 52, 53, false).await;
    query(&mut worker, "db.events", "events-etl", 61, 62, false).await; // reports latest 62

    // A registered table: refused, with the real reason and the range.
    let (code, out) = cli(
        &server,
        &["consumers", "reset", "db.orders", "orders-etl", "999999999"],
        d,
    );
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains("POSITION_AHEAD_OF_TABLE") && out.contains("latest snapshot 48") && out.contains("--to-latest"),
        "{out}"
    );
    assert!(
        !out.contains("may have been recreated"),
        "a typo is not a recreated table:\n{out}"
    );
    // An unregistered table: planned, with a warning naming what tidemark knows.
    let (code, out) = cli(
        &server,
        &["consumers", "reset", "db.events", "events-audit", "999999999999"],
        d,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning") && out.contains("62") && out.contains("not registered"),
        "{out}"
    );
    // Relative targets still need a registered table (SPEC A6).
    let (code, out) = cli(
        &server,
        &["consumers", "reset", "db.events", "--including", ".*", "--to-latest"],
        d,
    );
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("TABLE_NOT_REGISTERED"), "{out}");

    // A bulk reset that skips a leased consumer: the plan shows where it
    // would have gone, and plan and execution exit 4 as the single form.
    let bulk = [
        "consumers",
        "reset",
        "db.orders",
        "--including",
        "orders-.*",
        "--to-earliest",
    ];
    let (code, plan) = cli(&server, &bulk, d);
    assert_eq!(code, 4, "{plan}");
    let skipped = plan
        .lines()
        .find(|l| l.starts_with("orders-audit"))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(
        skipped.contains("LEASE_HELD") && skipped.contains("20") && skipped.contains(" 1 "),
        "the skipped consumer's old and would-be position: {skipped}"
    );
    let (code, done) = cli(&server, &[&bulk[..], &["--execute"]].concat(), d);
    assert_eq!(code, 4, "{done}");
    assert_eq!(position(&server, "db.orders", "orders-etl", d), "1");
    assert_eq!(position(&server, "db.orders", "orders-audit", d), "20");

    // A plan to CSV, and back: each row compares-and-sets its old position.
    let (code, out) = cli(
        &server,
        &[
            "consumers",
            "reset",
            "db.events",
            "--including",
            "events-.*",
            "--to-snapshot",
            "40",
            "--export",
            "plan.csv",
        ],
        d,
    );
    assert_eq!(code, 0, "{out}");
    let csv = std::fs::read_to_string(d.join("plan.csv")).unwrap();
    assert_eq!(
        csv,
        "table,branch,consumer_id,old_next_snapshot,new_next_snapshot\n\
         db.events,main,events-audit,52,40\n\
         db.events,main,events-etl,61,40\n"
    );
    assert_eq!(
        position(&server, "db.events", "events-audit", d),
        "52",
        "--export never executes"
    );
    // Someone moves events-etl meanwhile.
    let (code, out) = cli(
        &server,
        &["consumers", "reset", "db.events", "events-etl", "70", "--execute"],
        d,
    );
    assert_eq!(code, 0, "{out}");
    let (code, plan) = cli(&server, &["consumers", "reset", "--from-file", "plan.csv"], d);
    assert_eq!(code, 4, "the plan shows the row that no longer holds:\n{plan}");
    assert_eq!(
        position(&server, "db.events", "events-audit", d),
        "52",
        "a plan changes nothing"
    );
    let (code, done) = cli(
        &server,
        &["consumers", "reset", "--from-file", "plan.csv", "--execute"],
        d,
    );
    assert_eq!(code, 4, "{done}");
    assert!(done.contains("NEXT_SNAPSHOT_MISMATCH"), "{done}");
    assert_eq!(position(&server, "db.events", "events-audit", d), "40");
    assert_eq!(
        position(&server, "db.events", "events-etl", d),
        "70",
        "moved since the plan: refused"
    );

    // An operator's reason goes to the change's history row.
    let reset = [
        "consumers",
        "reset",
        "db.events",
        "events-etl",
        "65",
        "--reason",
        "INC-42 replay",
        "--execute",
    ];
    let (code, out) = cli(&server, &reset, d);
    assert_eq!(code, 0, "{out}");
    let (code, out) = cli(&server, &["history", "db.events", "events-etl", "--page-size", "1"], d);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("RESET") && out.contains("INC-42 replay"), "{out}");
    let delete = [
        "consumers",
        "delete",
        "db.events",
        "events-etl",
        "--reason",
        "bad\u{7}",
        "--execute",
    ];
    let (code, out) = cli(&server, &delete, d);
    assert_eq!(code, 2, "a control character is refused, naming the field:\n{out}");
    assert!(out.contains("reason"), "{out}");
    assert_eq!(position(&server, "db.events", "events-etl", d), "65", "nothing changed");
}
