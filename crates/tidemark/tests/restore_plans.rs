//! An import plan an operator can act on (issue 55): each key's fate named
//! as it is (a key the file has without a consumer is `epoch_only`, not
//! "not in file"), a consumer deleted after the export is not re-created
//! from an older backup unless `--restore-deleted` (an empty database is
//! restored whole), the epoch margin explained, refusals as a reason code
//! and a short note, and a summary that adds up to the keys in the file.

mod support;

use std::path::Path;
use std::process::Command;

use support::worker::query;
use support::{BIN, Served};
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;

fn cli(server: &Served, args: &str, dir: &Path) -> String {
    let output = Command::new(BIN)
        .args(args.split_whitespace())
        .args(["--server", &server.url()])
        .current_dir(dir)
        .env_remove("TIDEMARK_TOKEN")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "`{args}`:\n{text}");
    text
}

/// The RESULT and EPOCH columns of `id`'s row in an import plan.
fn row<'a>(plan: &'a str, id: &str) -> &'a str {
    plan.lines()
        .find(|l| l.split_whitespace().nth(2) == Some(id))
        .unwrap_or_else(|| panic!("{id} is listed:\n{plan}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_plan_names_each_fate_explains_epochs_and_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&["--sweep-interval", "0s"], dir.path());
    let mut worker = CoordinatorClient::new(Channel::from_shared(server.url()).unwrap().connect().await.unwrap());
    for (id, end) in [("same", 10), ("held", 10), ("gone", 5), ("moved", 7), ("was", 3)] {
        query(&mut worker, "db.orders", id, end, end, false).await;
    }
    // Deleted before the export: the file keeps its key, epoch only.
    cli(&server, "consumers delete db.orders was --execute", dir.path());
    cli(&server, "state export --file backup.jsonl", dir.path());
    // During the incident, after the export: one deleted, one moved, one
    // held by a running query.
    cli(&server, "consumers delete db.orders gone --execute", dir.path());
    cli(&server, "consumers reset db.orders moved 9 --execute", dir.path());
    query(&mut worker, "db.orders", "held", 12, 12, true).await;

    // Put the moved consumers back where the backup has them.
    let plan = cli(&server, "state import backup.jsonl --replace-existing", dir.path());
    // 5 keys, each counted once.
    assert!(
        plan.contains(
            "5 keys: 0 consumers to create, 1 replaced, 1 already there, 0 kept at another position, \
             1 epoch only, 1 deleted since the export, 1 refused"
        ),
        "{plan}"
    );
    let gone = row(&plan, "gone");
    assert!(gone.contains("deleted_since_export"), "not re-created: {gone}");
    let held = row(&plan, "held");
    assert!(held.contains("refused LEASE_HELD"), "{held}");
    assert!(
        held.len() < 140,
        "a reason code and a short note, not the whole message: {held}"
    );
    assert!(
        !held.contains("0 -> 0"),
        "a refused key's epoch does not read as a change: {held}"
    );
    assert!(row(&plan, "moved").contains("replaced"), "{plan}");

    // --restore-deleted brings the deleted consumer back, and only it.
    let restore = cli(&server, "state import backup.jsonl --restore-deleted", dir.path());
    assert!(row(&restore, "gone").contains("created"), "{restore}");
    assert!(restore.contains("1 consumers to create"), "{restore}");

    // An empty database is restored whole, and the plan says why every
    // epoch is higher than the file's.
    let empty = tempfile::tempdir().unwrap();
    let target = Served::start(&["--sweep-interval", "0s"], empty.path());
    let restored = cli(&target, "state import backup.jsonl", dir.path());
    assert!(
        restored.contains("5 keys: 4 consumers to create") && restored.contains("1 epoch only"),
        "{restored}"
    );
    assert!(row(&restored, "was").contains("epoch_only"), "{restored}");
    assert!(
        restored.contains("1048576") && restored.contains("granted epochs after the export"),
        "the epoch margin is explained:\n{restored}"
    );
}
