//! SPEC §9 over gRPC: a registered Paimon table gets its consumers mirrored
//! into its own consumer files (main and branches), deleted consumers'
//! files removed, existing files imported, and bad registrations refused.

use std::path::Path;
use std::time::{Duration, Instant};

use tidemark_core::lease::LeasePolicy;
use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_server::ServerConfig;
use tonic::Code;

on_both_backends!(
    consumers_are_mirrored_into_the_tables_files,
    existing_consumer_files_are_imported,
    registrations_are_validated_planned_and_listed,
    recovery_on_a_registered_table_reads_its_snapshot_range,
    a_table_counts_as_registered_at_once_on_the_replica_that_registered_it,
    a_refused_commit_never_reaches_the_consumer_file,
    a_reset_ahead_of_a_registered_table_is_refused,
    registration_and_recovery_warn_about_a_missing_table_and_a_folded_spelling,
);

async fn server(kind: Kind) -> TestServer {
    let config = ServerConfig {
        mirror_interval: Duration::from_millis(50),
        ..ServerConfig::default()
    };
    TestServer::start_with(kind, LeasePolicy::default(), config).await
}

async fn admin(server: &TestServer) -> AdminClient<tonic::transport::Channel> {
    AdminClient::new(server.channel().await)
}

/// A Paimon-looking table directory with a schema, snapshots 1..=latest,
/// and a branch `dev` (Paimon gives a branch its own schema directory).
fn paimon_table(root: &Path, latest: i64) {
    tidemark_e2e::paimon_table_dir(root, latest, 1, "");
    let branch_schemas = root.join("branch/branch-dev/schema");
    std::fs::create_dir_all(&branch_schemas).unwrap();
    std::fs::copy(root.join("schema/schema-0"), branch_schemas.join("schema-0")).unwrap();
}

async fn register_as(
    admin: &mut AdminClient<tonic::transport::Channel>,
    table: &str,
    location: &Path,
    execute: bool,
) -> pb::RegisterTableResponse {
    admin
        .register_table(pb::RegisterTableRequest {
            table: table.into(),
            location: location.display().to_string(),
            execute,
        })
        .await
        .unwrap()
        .into_inner()
}

/// A server with `db.orders` registered: a table of 9 snapshots with a
/// `dev` branch, in the returned directory.
async fn registered_table(kind: Kind) -> (TestServer, tempfile::TempDir, AdminClient<tonic::transport::Channel>) {
    let server = server(kind).await;
    let dir = tempfile::tempdir().unwrap();
    paimon_table(dir.path(), 9);
    let mut admin = admin(&server).await;
    register(&mut admin, "db.orders", dir.path()).await;
    (server, dir, admin)
}

async fn register(admin: &mut AdminClient<tonic::transport::Channel>, table: &str, location: &Path) {
    register_as(admin, table, location, true).await;
}

async fn import(admin: &mut AdminClient<tonic::transport::Channel>, execute: bool) -> pb::ImportConsumersResponse {
    admin
        .import_consumers(pb::ImportConsumersRequest {
            table: "db.orders".into(),
            execute,
        })
        .await
        .unwrap()
        .into_inner()
}

/// Waits until `path` holds `want` (None: absent).
async fn wait_for_file(path: &Path, want: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = std::fs::read_to_string(path).ok();
        if now.as_deref() == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} holds {now:?}, expected {want:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn consumers_are_mirrored_into_the_tables_files(kind: Kind) {
    let (server, dir, mut admin) = registered_table(kind).await;
    let client = server.client().await;

    let mut main = Worker::acquire(&client, &key("db.orders", "main", "q1"), "a", None)
        .await
        .unwrap();
    main.commit(0, offset(4, 0, false, Some(1))).await.unwrap();
    let mut branch = Worker::acquire(&client, &key("db.orders", "dev", "q2"), "b", None)
        .await
        .unwrap();
    branch.commit(0, offset(7, 1, false, Some(3))).await.unwrap();
    let main_file = dir.path().join("consumer/consumer-q1");
    let branch_file = dir.path().join("branch/branch-dev/consumer/consumer-q2");
    wait_for_file(&main_file, Some(r#"{"nextSnapshot":5}"#)).await;
    wait_for_file(&branch_file, Some(r#"{"nextSnapshot":7}"#)).await;

    // The lag counts to the latest snapshot in the table's directory (9),
    // though the worker reported none.
    let committed = main.commit(1, offset(6, 0, false, Some(1))).await.unwrap();
    assert_eq!(committed.lag, Some(3), "{committed:?}");
    wait_for_file(&main_file, Some(r#"{"nextSnapshot":7}"#)).await;
    // The mirror writes the file first, then records it: wait (bounded) for
    // the record, which follows the file by a statement.
    let deadline = Instant::now() + Duration::from_secs(10);
    let described = loop {
        let described = admin
            .describe_consumer(pb::DescribeConsumerRequest {
                consumer: Some(key("db.orders", "main", "q1")),
                history_limit: 1,
            })
            .await
            .unwrap()
            .into_inner();
        let recorded = described.mirror.as_ref().and_then(|m| m.mirrored_next_snapshot);
        if recorded == Some(7) || Instant::now() > deadline {
            break described;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let consumer = described.info.as_ref().unwrap().consumer.as_ref().unwrap();
    assert_eq!(
        (consumer.latest_snapshot, consumer.lag),
        (Some(9), Some(3)),
        "from the directory"
    );
    let mirror = described.mirror.expect("a registered table shows its mirror");
    assert!(mirror.in_sync, "{mirror:?}");
    assert_eq!(mirror.mirrored_next_snapshot, Some(7));
    assert!(mirror.path.ends_with("/consumer/consumer-q1"), "{}", mirror.path);
    assert_eq!(mirror.failures, 0);

    // A deleted consumer's file goes too.
    main.release().await.unwrap();
    admin
        .delete_consumer(pb::DeleteConsumerRequest {
            consumer: Some(key("db.orders", "main", "q1")),
            execute: true,
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for_file(&main_file, None).await;
    // Unregistered tables are left alone.
    admin
        .unregister_table(pb::UnregisterTableRequest {
            table: "db.orders".into(),
            execute: true,
        })
        .await
        .unwrap();
    branch.commit(1, offset(8, 2, false, Some(3))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(std::fs::read_to_string(&branch_file).unwrap(), r#"{"nextSnapshot":7}"#);
}

async fn existing_consumer_files_are_imported(kind: Kind) {
    let server = server(kind).await;
    let dir = tempfile::tempdir().unwrap();
    paimon_table(dir.path(), 20);
    let consumers = dir.path().join("consumer");
    std::fs::create_dir_all(&consumers).unwrap();
    std::fs::write(consumers.join("consumer-etl"), r#"{"nextSnapshot":12}"#).unwrap();
    std::fs::write(consumers.join("consumer-bad id"), r#"{"nextSnapshot":3}"#).unwrap();
    std::fs::write(consumers.join("consumer-torn"), r#"{"next"#).unwrap();
    let dev = dir.path().join("branch/branch-dev/consumer");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("consumer-etl"), r#"{"nextSnapshot":4}"#).unwrap();
    let mut admin = admin(&server).await;
    // Not registered yet.
    let err = api_error(
        admin
            .import_consumers(pb::ImportConsumersRequest {
                table: "db.orders".into(),
                execute: false,
            })
            .await,
    );
    assert_eq!(err.code, Code::InvalidArgument);
    assert!(err.fields().contains(&"table"));
    register(&mut admin, "db.orders", dir.path()).await;
    let before = server.fingerprint().await;
    let plan = import(&mut admin, false).await;
    assert_eq!(server.fingerprint().await, before, "a plan changes nothing");
    let imported: Vec<_> = plan
        .imported
        .iter()
        .map(|i| (i.consumer.as_ref().unwrap().branch.as_str(), i.next_snapshot))
        .collect();
    assert_eq!(imported, [("dev", 4), ("main", 12)]);
    let mut skipped: Vec<_> = plan
        .skipped
        .iter()
        .map(|s| (s.consumer_id.as_str(), s.reason.as_str()))
        .collect();
    skipped.sort();
    assert_eq!(skipped, [("bad id", "INVALID_ID"), ("torn", "UNREADABLE")]);

    let done = import(&mut admin, true).await;
    assert_eq!(done.executed, Some(true));
    let described = admin
        .describe_consumer(pb::DescribeConsumerRequest {
            consumer: Some(key("db.orders", "main", "etl")),
            history_limit: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(described.info.unwrap().consumer.unwrap().next_snapshot, 12);
    // Importing again: tidemark's consumers win.
    let again = import(&mut admin, true).await;
    assert!(again.imported.is_empty());
    assert_eq!(again.skipped.iter().filter(|s| s.reason == "EXISTS").count(), 2);
}

async fn registrations_are_validated_planned_and_listed(kind: Kind) {
    let server = server(kind).await;
    let dir = tempfile::tempdir().unwrap();
    paimon_table(dir.path(), 3);
    let mut admin = admin(&server).await;
    let before = server.fingerprint().await;
    for (location, case) in [
        ("relative/dir", "relative"),
        ("", "empty"),
        ("hdfs://nn/t", "unsupported scheme"),
    ] {
        let err = api_error(
            admin
                .register_table(pb::RegisterTableRequest {
                    table: "db.orders".into(),
                    location: location.into(),
                    execute: true,
                })
                .await,
        );
        assert_eq!(err.code, Code::InvalidArgument, "{case}");
        assert!(err.fields().contains(&"location"), "{case}: {err:?}");
    }
    let err = api_error(
        admin
            .register_table(pb::RegisterTableRequest {
                table: "not a table".into(),
                location: dir.path().display().to_string(),
                execute: true,
            })
            .await,
    );
    assert!(err.fields().contains(&"table"), "{err:?}");
    // A plan reads the table (its snapshot range) and changes nothing.
    let plan = register_as(&mut admin, "db.orders", dir.path(), false).await;
    assert_eq!((plan.earliest_snapshot, plan.latest_snapshot), (Some(1), Some(3)));
    assert!(plan.executed == Some(false) && plan.probe_error.is_empty());
    assert_eq!(server.fingerprint().await, before);
    let listed = admin.list_tables(pb::ListTablesRequest {}).await.unwrap().into_inner();
    assert!(listed.tables.is_empty());
    register(&mut admin, "db.orders", dir.path()).await;
    let listed = admin.list_tables(pb::ListTablesRequest {}).await.unwrap().into_inner();
    assert_eq!(listed.tables.len(), 1);
    assert_eq!(listed.tables[0].location, dir.path().display().to_string());
    // Moving it reports where it was.
    let other = tempfile::tempdir().unwrap();
    let moved = register_as(&mut admin, "db.orders", other.path(), true).await;
    assert_eq!(moved.previous_location, dir.path().display().to_string());
    assert_eq!(moved.latest_snapshot, None);
}

async fn recovery_on_a_registered_table_reads_its_snapshot_range(kind: Kind) {
    let server = server(kind).await;
    let dir = tempfile::tempdir().unwrap();
    paimon_table(dir.path(), 9);
    // Snapshots 1 and 2 expired (the EARLIEST hint is stale).
    std::fs::remove_file(dir.path().join("snapshot/snapshot-1")).unwrap();
    std::fs::remove_file(dir.path().join("snapshot/snapshot-2")).unwrap();
    let mut admin = admin(&server).await;
    register(&mut admin, "db.orders", dir.path()).await;
    let mut client = server.client().await;
    let request = pb::GetRecoveryPositionRequest {
        consumer: Some(key("db.orders", "main", "fresh")),
        startup: Some(pb::StartupOptions {
            mode: pb::StartupMode::LatestFull.into(),
            snapshot_id: 0,
        }),
        // What a worker with a stale view reports.
        table: Some(pb::SnapshotRange {
            earliest_snapshot: 1,
            latest_snapshot: 5,
            earliest_changelog: None,
            changelog_decoupled: false,
        }),
        ..Default::default()
    };
    let answer = client
        .get_recovery_position(request.clone())
        .await
        .unwrap()
        .into_inner();
    let start = answer.start.unwrap();
    assert_eq!(
        (start.snapshot_id, start.scan_snapshot),
        (9, true),
        "a full scan of the real latest"
    );
    assert!(
        answer
            .warnings
            .iter()
            .any(|w| w.starts_with("TABLE_RANGE_FROM_STORAGE") && w.contains("3\u{2013}9")),
        "{:?}",
        answer.warnings
    );
    // An unregistered table plans with what the worker saw.
    let mut other = request;
    other.consumer = Some(key("db.other", "main", "fresh"));
    let answer = client.get_recovery_position(other).await.unwrap().into_inner();
    assert_eq!(answer.start.unwrap().snapshot_id, 5);
    assert!(answer.warnings.iter().all(|w| !w.starts_with("TABLE_RANGE")));
}

/// SPEC §9 on one replica: a recovery right after RegisterTable plans with
/// the table's directory, even when a call just before had read the
/// registrations (into the replica's short-lived cache) without it. Before
/// one application owned the cache, the worker service kept its own copy
/// and trusted the worker's range for up to five seconds.
async fn a_table_counts_as_registered_at_once_on_the_replica_that_registered_it(kind: Kind) {
    let server = server(kind).await;
    let dir = tempfile::tempdir().unwrap();
    paimon_table(dir.path(), 9);
    let mut client = server.client().await;
    let request = |table: &str| pb::GetRecoveryPositionRequest {
        consumer: Some(key(table, "main", "fresh")),
        startup: Some(pb::StartupOptions {
            mode: pb::StartupMode::LatestFull.into(),
            snapshot_id: 0,
        }),
        // What a worker with a stale view reports.
        table: Some(pb::SnapshotRange {
            earliest_snapshot: 1,
            latest_snapshot: 5,
            earliest_changelog: None,
            changelog_decoupled: false,
        }),
        ..Default::default()
    };
    // Reads the registrations (none yet) into the cache.
    let before = client
        .get_recovery_position(request("db.orders"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        before.start.unwrap().snapshot_id,
        5,
        "not registered yet: the worker's range"
    );
    let mut admin = admin(&server).await;
    register(&mut admin, "db.orders", dir.path()).await;
    let after = client
        .get_recovery_position(request("db.orders"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        after.start.unwrap().snapshot_id,
        9,
        "registered: the directory's range, at once ({:?})",
        after.warnings
    );
}

/// SPEC §9: the file never shows a position the database does not hold. A
/// commit refused (a regression under the lease, a fenced zombie) leaves
/// the file as it was, at every moment, not only once the keeper has put
/// it back.
async fn a_refused_commit_never_reaches_the_consumer_file(kind: Kind) {
    let (server, dir, _admin) = registered_table(kind).await;
    let client = server.client().await;
    let mut zombie = Worker::acquire(&client, &key("db.orders", "main", "q"), "a", None)
        .await
        .unwrap();
    zombie.commit(0, offset(4, 0, false, Some(1))).await.unwrap();
    let file = dir.path().join("consumer/consumer-q");
    const AT_FIVE: &str = r#"{"nextSnapshot":5}"#;
    wait_for_file(&file, Some(AT_FIVE)).await;
    let unchanged = |what: &str| {
        let file = file.clone();
        let what = what.to_owned();
        async move {
            // At once and for a while after: never another position.
            let until = Instant::now() + Duration::from_millis(300);
            while Instant::now() < until {
                let shown = std::fs::read_to_string(&file).ok();
                assert_eq!(shown.as_deref(), Some(AT_FIVE), "{what}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };

    let regression = zombie.commit(1, offset(2, 0, false, Some(1))).await;
    assert_eq!(api_error(regression).reason, "POSITION_REGRESSION");
    unchanged("after a commit refused as a regression").await;

    // The same query restarts (a takeover) and the old incarnation, now a
    // zombie, commits further: refused, and the file does not move.
    let _restarted = Worker::acquire(&client, &key("db.orders", "main", "q"), "a", None)
        .await
        .unwrap();
    let fenced = zombie.commit(2, offset(8, 0, false, Some(1))).await;
    assert_eq!(api_error(fenced).reason, "LEASE_NOT_HELD");
    unchanged("after a fenced zombie's commit").await;
}

/// With an allow-list, a registration outside it is refused before anything
/// reads the location (PERMISSION_DENIED, LOCATION_NOT_ALLOWED) and changes
/// nothing; one inside it (however spelled) registers.
#[tokio::test]
async fn a_registration_outside_the_allowed_locations_is_refused() {
    let lake = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let inside = lake.path().join("db.db/orders");
    paimon_table(&inside, 3);
    paimon_table(outside.path(), 3);
    let config = ServerConfig {
        allowed_table_locations: Some(
            tidemark_paimon::LocationAllowList::new(&[lake.path().display().to_string()]).unwrap(),
        ),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Kind::Sqlite, LeasePolicy::default(), config).await;
    let mut admin = admin(&server).await;
    let before = server.fingerprint().await;
    let escape = format!("{}/db.db/../../{}", lake.path().display(), outside.path().display());
    let sibling = format!("{}-other", lake.path().display());
    // A path that climbs out with `..` is bad input before it is anything
    // else.
    let err = api_error(
        admin
            .register_table(pb::RegisterTableRequest {
                table: "db.orders".into(),
                location: escape,
                execute: true,
            })
            .await,
    );
    assert_eq!(err.code, Code::InvalidArgument);
    assert!(err.fields().contains(&"location"), "{err:?}");
    for location in [outside.path().display().to_string(), sibling, "/etc".to_owned()] {
        let err = api_error(
            admin
                .register_table(pb::RegisterTableRequest {
                    table: "db.orders".into(),
                    location: location.clone(),
                    execute: true,
                })
                .await,
        );
        assert_eq!(
            (err.code, err.reason.as_str()),
            (Code::PermissionDenied, "LOCATION_NOT_ALLOWED"),
            "{location}: {err:?}"
        );
    }
    assert_eq!(server.fingerprint().await, before, "refusals change nothing");
    let registered = register_as(&mut admin, "db.orders", &inside, true).await;
    assert_eq!(registered.executed, Some(true));
    let file_url = format!("file://{}", inside.display());
    admin
        .register_table(pb::RegisterTableRequest {
            table: "db.orders".into(),
            location: file_url,
            execute: false,
        })
        .await
        .expect("the same place spelled as a file:// URL is inside too");
}

/// Issue 34: ResetConsumer planned any position. Past a registered table's
/// latest snapshot + 1 it is POSITION_AHEAD_OF_TABLE (as recovery would
/// refuse it later), plan and execute alike, one consumer or a bulk
/// snapshot target, and nothing changes; latest + 1 (skip everything)
/// stands; and a table that grew since the server last looked is read
/// again before a reset is refused.
async fn a_reset_ahead_of_a_registered_table_is_refused(kind: Kind) {
    let (server, dir, mut admin) = registered_table(kind).await;
    let reset = |next_snapshot: i64, execute: bool| pb::ResetConsumerRequest {
        consumer: Some(key("db.orders", "main", "audit")),
        next_snapshot,
        execute,
        ..Default::default()
    };
    let before = server.fingerprint().await;
    for execute in [false, true] {
        let ahead = api_error(admin.reset_consumer(reset(11, execute)).await);
        assert_eq!(
            (ahead.code, ahead.reason.as_str()),
            (Code::FailedPrecondition, "POSITION_AHEAD_OF_TABLE"),
            "{ahead:?}"
        );
        assert!(ahead.message.contains("latest snapshot 9"), "{}", ahead.message);
        let bulk = api_error(
            admin
                .reset_consumers(pb::ResetConsumersRequest {
                    table: "db.orders".into(),
                    target: Some(pb::ResetTarget {
                        target: Some(pb::reset_target::Target::Snapshot(11)),
                    }),
                    execute,
                    ..Default::default()
                })
                .await,
        );
        assert_eq!(bulk.reason, "POSITION_AHEAD_OF_TABLE", "{bulk:?}");
    }
    assert_eq!(server.fingerprint().await, before, "a refused reset changed nothing");
    let skip_all = admin.reset_consumer(reset(10, true)).await.unwrap().into_inner();
    assert_eq!(skip_all.change.unwrap().new_next_snapshot, Some(10));
    // The table grows to 12 snapshots: 13 is right at once, whatever the
    // server read a moment ago.
    tidemark_e2e::paimon_table_dir(dir.path(), 12, 1, "");
    let grown = admin.reset_consumer(reset(13, true)).await.unwrap().into_inner();
    assert_eq!(grown.change.unwrap().new_next_snapshot, Some(13));
    let unregistered = pb::ResetConsumerRequest {
        consumer: Some(key("db.unregistered", "main", "audit")),
        next_snapshot: 1_000,
        ..Default::default()
    };
    admin
        .reset_consumer(unregistered)
        .await
        .expect("an unregistered table has no bound but the id ceiling");
}

/// Issue 34: registering a location with no Paimon table said "no snapshot
/// yet", and `DB.Orders` was another key than `db.orders` without a word.
/// Now the plan and the registration warn (TABLE_LOCATION_EMPTY, which the
/// CLI refuses without --allow-missing), and a name a Hive-backed catalog
/// would fold is warned about in RegisterTable's and GetRecoveryPosition's
/// answers, naming the folded spelling.
async fn registration_and_recovery_warn_about_a_missing_table_and_a_folded_spelling(kind: Kind) {
    let server = server(kind).await;
    let mut admin = admin(&server).await;
    let empty = tempfile::tempdir().unwrap();
    let missing = empty.path().join("db.db/typo");
    for execute in [false, true] {
        let answer = register_as(&mut admin, "db.typo", &missing, execute).await;
        assert!(
            answer
                .warnings
                .iter()
                .any(|w| w.starts_with("TABLE_LOCATION_EMPTY:") && w.contains("no Paimon table")),
            "{:?}",
            answer.warnings
        );
    }
    let table = tempfile::tempdir().unwrap();
    paimon_table(table.path(), 3);
    let fine = register_as(&mut admin, "db.orders", table.path(), false).await;
    assert!(fine.warnings.is_empty(), "{:?}", fine.warnings);
    let folded = register_as(&mut admin, "DB.Orders", table.path(), false).await;
    assert_eq!(folded.warnings.len(), 1, "{:?}", folded.warnings);
    assert!(
        folded.warnings[0].starts_with("TABLE_NAME_SPELLING:") && folded.warnings[0].contains("\"db.orders\""),
        "{}",
        folded.warnings[0]
    );
    let mut client = server.client().await;
    for (table, warned) in [("db.orders", false), ("DB.Orders", true), (" db.orders", true)] {
        let answer = client
            .get_recovery_position(pb::GetRecoveryPositionRequest {
                consumer: Some(key(table, "main", "q")),
                table: Some(pb::SnapshotRange {
                    earliest_snapshot: 1,
                    latest_snapshot: 3,
                    earliest_changelog: None,
                    changelog_decoupled: false,
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let spelling = answer.warnings.iter().find(|w| w.starts_with("TABLE_NAME_SPELLING:"));
        assert_eq!(spelling.is_some(), warned, "{table:?}: {:?}", answer.warnings);
        if let Some(spelling) = spelling {
            assert!(spelling.contains("\"db.orders\""), "{spelling}");
        }
    }
}
