use std::time::Duration;

use super::*;

fn table() -> (tempfile::TempDir, PaimonTable) {
    let dir = tempfile::tempdir().unwrap();
    let table = PaimonTable::open(dir.path().to_str().unwrap()).unwrap();
    (dir, table)
}

#[tokio::test]
async fn consumer_files_are_where_paimon_looks_and_in_its_format() {
    let (dir, table) = table();
    std::fs::create_dir_all(dir.path().join("branch/branch-b1")).unwrap();
    table.write_consumer("main", "q1", 42).await.unwrap();
    table.write_consumer("b1", "q2", 7).await.unwrap();
    let main = std::fs::read_to_string(dir.path().join("consumer/consumer-q1")).unwrap();
    assert_eq!(main, r#"{"nextSnapshot":42}"#);
    let branch = std::fs::read_to_string(dir.path().join("branch/branch-b1/consumer/consumer-q2")).unwrap();
    assert_eq!(branch, r#"{"nextSnapshot":7}"#);
    assert_eq!(table.read_consumer("main", "q1").await.unwrap(), Some(42));
    table.write_consumer("main", "q1", 43).await.unwrap();
    assert_eq!(table.read_consumer("main", "q1").await.unwrap(), Some(43));
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("consumer"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["consumer-q1"]);
    table.delete_consumer("main", "q1").await.unwrap();
    table.delete_consumer("main", "q1").await.unwrap();
    assert_eq!(table.read_consumer("main", "q1").await.unwrap(), None);
}

#[tokio::test]
async fn listing_finds_every_branch_and_reports_bad_files() {
    let (dir, table) = table();
    std::fs::create_dir_all(dir.path().join("branch/branch-dev")).unwrap();
    table.write_consumer("main", "a", 3).await.unwrap();
    table.write_consumer("dev", "b", 5).await.unwrap();
    std::fs::write(dir.path().join("consumer/consumer-broken"), "{nope").unwrap();
    std::fs::write(dir.path().join("consumer/.consumer-hidden.tmp"), "{}").unwrap();
    let found = table.list_consumers().await.unwrap();
    let summary: Vec<_> = found
        .iter()
        .map(|f| (f.branch.as_str(), f.consumer_id.as_str(), f.next_snapshot.is_ok()))
        .collect();
    assert_eq!(
        summary,
        [("dev", "b", true), ("main", "a", true), ("main", "broken", false)]
    );
}

fn snapshot_dir(dir: &std::path::Path, ids: std::ops::RangeInclusive<i64>, hints: Option<(i64, i64)>) {
    let snapshots = dir.join("snapshot");
    std::fs::create_dir_all(&snapshots).unwrap();
    for id in ids {
        std::fs::write(snapshots.join(format!("snapshot-{id}")), "{}").unwrap();
    }
    if let Some((earliest, latest)) = hints {
        std::fs::write(snapshots.join("EARLIEST"), earliest.to_string()).unwrap();
        std::fs::write(snapshots.join("LATEST"), latest.to_string()).unwrap();
    }
}

#[tokio::test]
async fn snapshot_range_follows_hints_and_corrects_stale_ones() {
    let (dir, table) = table();
    assert_eq!(table.snapshot_range("main").await.unwrap(), None);
    snapshot_dir(dir.path(), 3..=9, Some((3, 9)));
    let range = |e, l| Some(SnapshotRange { earliest: e, latest: l });
    assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 9));
    // Stale hints: newer snapshots committed, older ones expired.
    snapshot_dir(dir.path(), 10..=12, Some((1, 8)));
    assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 12));
    // No hints: listed.
    std::fs::remove_file(dir.path().join("snapshot/LATEST")).unwrap();
    std::fs::remove_file(dir.path().join("snapshot/EARLIEST")).unwrap();
    assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 12));
    // A hint pointing at nothing: listed.
    std::fs::write(dir.path().join("snapshot/LATEST"), "99").unwrap();
    assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 12));
    // Branches have their own directory.
    snapshot_dir(&dir.path().join("branch/branch-dev"), 1..=2, None);
    assert_eq!(table.snapshot_range("dev").await.unwrap(), range(1, 2));
}

#[tokio::test]
async fn concurrent_readers_never_see_a_torn_file() {
    let (dir, table) = table();
    table.write_consumer("main", "q", 1).await.unwrap();
    let path = dir.path().join("consumer/consumer-q");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let text = std::fs::read_to_string(&path).expect("the file is always there");
                let parsed: serde_json::Value = serde_json::from_str(&text).expect("never torn");
                assert!(parsed["nextSnapshot"].as_i64().unwrap() >= 1);
                reads += 1;
            }
            reads
        })
    };
    for n in 2..2000 {
        table.write_consumer("main", "q", n).await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

#[test]
fn locations_are_checked() {
    assert!(PaimonTable::open("relative/path").is_err());
    assert!(PaimonTable::open("").is_err());
    assert!(PaimonTable::open("hdfs://nn/warehouse/t").is_err());
    assert!(PaimonTable::open("/warehouse/db.db/t").is_ok());
    assert!(PaimonTable::open("file:///warehouse/db.db/t").is_ok());
}

#[test]
fn consumer_files_are_named_in_full() {
    let local = PaimonTable::open("file:///warehouse/db.db/t/").unwrap();
    assert_eq!(
        local.consumer_location("main", "q"),
        "/warehouse/db.db/t/consumer/consumer-q"
    );
    let s3 = PaimonTable::open("s3://bucket/warehouse/db.db/t").unwrap();
    assert_eq!(
        s3.consumer_location("dev", "q"),
        "s3://bucket/warehouse/db.db/t/branch/branch-dev/consumer/consumer-q"
    );
}

#[tokio::test]
async fn writes_never_create_a_dropped_branch_or_table() {
    let (dir, table) = table();
    table.write_consumer("dev", "q", 3).await.unwrap_err();
    assert!(!dir.path().join("branch").exists(), "no branch directory created");
    std::fs::create_dir_all(dir.path().join("branch/branch-dev")).unwrap();
    table.write_consumer("dev", "q", 3).await.unwrap();
    std::fs::remove_dir_all(dir.path().join("branch/branch-dev")).unwrap();
    let err = table.write_consumer("dev", "q", 4).await.unwrap_err();
    assert!(matches!(err, PaimonError::Missing { .. }), "{err}");
    assert!(!dir.path().join("branch/branch-dev").exists());
    let gone = PaimonTable::open(dir.path().join("no-such-table").to_str().unwrap()).unwrap();
    assert!(matches!(
        gone.write_consumer("main", "q", 1).await.unwrap_err(),
        PaimonError::Missing { .. }
    ));
    assert!(!dir.path().join("no-such-table").exists());
}

#[tokio::test]
async fn file_states_and_listing_with_times() {
    let (dir, table) = table();
    assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Missing);
    table.write_consumer("main", "q", 9).await.unwrap();
    assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Position(9));
    std::fs::write(dir.path().join("consumer/consumer-q"), "").unwrap();
    assert!(matches!(
        table.consumer_file("main", "q").await.unwrap(),
        FileState::Unreadable(_)
    ));
    let listed = table.list_consumer_files("main").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].consumer_id.as_str(), listed[0].size), ("q", 0));
    assert!(listed[0].modified.elapsed().unwrap() < Duration::from_secs(60));
    assert!(table.list_consumer_files("dev").await.unwrap().is_empty());
    // A touch moves the time, not the content.
    table.write_consumer("main", "q", 9).await.unwrap();
    let before = table.stat_consumer("main", "q").await.unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let touched = table
        .touch_consumer("main", "q", 9, &before, None)
        .await
        .unwrap()
        .unwrap();
    assert!(touched.modified > before.modified);
    assert_eq!(touched.size, before.size);
    assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Position(9));
    assert_eq!(
        table.touch_consumer("main", "gone", 1, &before, None).await.unwrap(),
        None
    );
    // A file replaced from outside since the caller looked (Paimon's
    // reset_consumer between a listing and the touch) is left alone: not
    // touched, so it is not kept alive, and not reported as the caller's.
    let seen = table.stat_consumer("main", "q").await.unwrap().unwrap();
    let staged = dir.path().join("consumer/.staged");
    std::fs::write(&staged, r#"{"nextSnapshot":99}"#).unwrap();
    std::fs::rename(&staged, dir.path().join("consumer/consumer-q")).unwrap();
    let outside = table.stat_consumer("main", "q").await.unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(table.touch_consumer("main", "q", 9, &seen, None).await.unwrap(), None);
    assert_eq!(table.stat_consumer("main", "q").await.unwrap().unwrap(), outside);
    assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Position(99));
    // Pin files keep their `~` on disk, in listings and in reads.
    let pin = pin_consumer_id(&uuid::Uuid::new_v4());
    table.write_consumer("main", &pin, 4).await.unwrap();
    assert!(dir.path().join(format!("consumer/consumer-{pin}")).exists());
    let ids: Vec<_> = table
        .list_consumer_files("main")
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.consumer_id)
        .collect();
    assert!(ids.contains(&pin), "{ids:?}");
    assert_eq!(table.consumer_file("main", &pin).await.unwrap(), FileState::Position(4));
    table.delete_consumer("main", &pin).await.unwrap();
    assert!(!dir.path().join(format!("consumer/consumer-{pin}")).exists());
}

#[tokio::test]
async fn identity_is_the_first_schema_and_options_come_from_the_latest() {
    let (dir, table) = table();
    assert_eq!(table.identity().await.unwrap(), None);
    assert!(!table.branch_exists("main").await.unwrap());
    let schemas = dir.path().join("schema");
    std::fs::create_dir_all(&schemas).unwrap();
    std::fs::write(schemas.join("schema-0"), r#"{"id":0,"options":{},"timeMillis":1}"#).unwrap();
    let first = table.identity().await.unwrap().unwrap();
    assert!(first.starts_with("schema-0:"), "{first}");
    assert!(table.branch_exists("main").await.unwrap());
    assert_eq!(table.consumer_expiration().await.unwrap(), None);
    std::fs::write(
        schemas.join("schema-1"),
        r#"{"id":1,"options":{"consumer.expiration-time":"1 h"},"timeMillis":2}"#,
    )
    .unwrap();
    assert_eq!(table.identity().await.unwrap().unwrap(), first, "later schemas keep it");
    assert_eq!(
        table.consumer_expiration().await.unwrap(),
        Some(Duration::from_secs(3600))
    );
    // A branch reads its own latest schema (altered on its own), and
    // main's when it has none.
    assert_eq!(
        table.branch_consumer_expiration("dev").await.unwrap(),
        Some(Duration::from_secs(3600))
    );
    let dev = dir.path().join("branch/branch-dev/schema");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("schema-1"), r#"{"id":1,"options":{},"timeMillis":2}"#).unwrap();
    assert_eq!(table.branch_consumer_expiration("dev").await.unwrap(), None);
    std::fs::write(
        dev.join("schema-2"),
        r#"{"id":2,"options":{"consumer.expiration-time":"2 min"},"timeMillis":4}"#,
    )
    .unwrap();
    assert_eq!(
        table.branch_consumer_expiration("dev").await.unwrap(),
        Some(Duration::from_secs(120))
    );
    std::fs::write(dev.join("schema-3"), "{not json").unwrap();
    let err = table.branch_consumer_expiration("dev").await.unwrap_err().to_string();
    assert!(err.contains("branch/branch-dev/schema/schema-3"), "{err}");
    // Recreated: same name and place, another first schema.
    std::fs::write(schemas.join("schema-0"), r#"{"id":0,"options":{},"timeMillis":3}"#).unwrap();
    assert_ne!(table.identity().await.unwrap().unwrap(), first);
}

#[test]
fn paimon_durations_and_pin_ids() {
    for (text, secs) in [
        ("1 d", 86_400),
        ("30min", 1800),
        ("10 s", 10),
        ("2h", 7200),
        ("90 seconds", 90),
    ] {
        assert_eq!(
            parse_paimon_duration(text).unwrap(),
            Duration::from_secs(secs),
            "{text}"
        );
    }
    assert_eq!(parse_paimon_duration("500").unwrap(), Duration::from_millis(500));
    assert!(parse_paimon_duration("1 fortnight").is_err());
    assert!(parse_paimon_duration("soon").is_err());
    let lease = uuid::Uuid::new_v4();
    let id = pin_consumer_id(&lease);
    assert!(id.starts_with("tidemark~pin~"));
    assert_eq!(pinned_lease(&id), Some(lease));
    assert_eq!(pinned_lease("orders-etl"), None);
}

#[test]
fn locations_are_compared_canonically_and_by_segment() {
    use crate::{LocationAllowList, canonical_location};
    assert_eq!(canonical_location("/data//lake/").unwrap(), "file:///data/lake");
    assert_eq!(canonical_location("file:///data/lake").unwrap(), "file:///data/lake");
    assert_eq!(canonical_location("s3a://bucket/wh/").unwrap(), "s3://bucket/wh");
    assert!(canonical_location("/data/lake/../etc").is_err());
    assert!(canonical_location("relative/path").is_err());
    assert!(canonical_location("gs://bucket/x").is_err());
    let list = LocationAllowList::new(&["/data/lake", "s3://warehouse/prod/"]).unwrap();
    for allowed in [
        "/data/lake",
        "/data/lake/db.db/t",
        "file:///data/lake/x",
        "s3://warehouse/prod/db.db/t",
        "s3a://warehouse/prod/t",
    ] {
        assert!(list.allows(allowed), "{allowed}");
    }
    for refused in [
        "/data/lake2",
        "/data",
        "/etc/passwd",
        "/data/lake/../../etc",
        "s3://warehouse/production",
        "s3://other/prod/t",
        "relative",
    ] {
        assert!(!list.allows(refused), "{refused}");
    }
    assert!(LocationAllowList::new::<&str>(&[]).is_err());
}

/// A symbolic link under an allowed prefix does not lead out of it; links
/// inside it, and paths not created yet, are judged where they really go.
#[test]
fn the_allow_list_follows_symbolic_links() {
    let lake = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(lake.path().join("db.db")).unwrap();
    std::os::unix::fs::symlink(outside.path(), lake.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(lake.path().join("db.db"), lake.path().join("alias")).unwrap();
    let list = LocationAllowList::new(&[lake.path().display().to_string()]).unwrap();
    let at = |rest: &str| format!("{}/{rest}", lake.path().display());
    assert!(list.allows(&at("db.db/t")));
    assert!(list.allows(&at("not-yet/created/t")));
    assert!(list.allows(&at("alias/t")), "a link that stays inside");
    assert!(!list.allows(&at("escape")), "a link out of the lake");
    assert!(!list.allows(&at("escape/db.db/t")), "below a link out of the lake");
}
