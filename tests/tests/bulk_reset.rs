//! A6 (SPEC §11): ResetConsumers with Kafka's targets on both stores —
//! every target, selection by regex, plan then execute with the plan's
//! positions as preconditions, the refusal of table-dependent targets on an
//! unregistered table, and a forced reset fencing a running holder.

use std::collections::HashMap;

use tidemark_core::lease::LeasePolicy;
use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends, set_consumer};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_proto::v1::reset_target::Target;
use tidemark_server::ServerConfig;
use tonic::Code;
use tonic::transport::Channel;

on_both_backends!(
    every_target_moves_the_selected_consumers,
    plans_preconditions_and_force_hold,
    bulk_revoke_fences_every_selected_holder,
    lag_in_time_for_registered_tables,
    a_bulk_clear_cut_by_the_calls_time_reports_what_it_did_and_what_it_did_not_reach,
);

/// Schema written at this time; snapshot n committed n seconds later.
const CREATED_MS: i64 = 1_800_000_000_000;

async fn setup(kind: Kind) -> (TestServer, AdminClient<Channel>, tempfile::TempDir) {
    let server = TestServer::start_with(kind, LeasePolicy::default(), ServerConfig::default()).await;
    let mut admin = AdminClient::new(server.channel().await);
    let dir = tempfile::tempdir().unwrap();
    tidemark_e2e::paimon_table_dir(dir.path(), 10, CREATED_MS, "");
    admin
        .register_table(pb::RegisterTableRequest {
            table: "db.orders".into(),
            location: dir.path().display().to_string(),
            execute: true,
        })
        .await
        .unwrap();
    for (id, next) in [("etl-a", 4), ("etl-b", 6), ("etl-keep", 5), ("adhoc", 2)] {
        set_consumer(&mut admin, "db.orders", id, next).await;
    }
    (server, admin, dir)
}

fn request(table: &str, including: &str, excluding: &str, target: Target, execute: bool) -> pb::ResetConsumersRequest {
    pb::ResetConsumersRequest {
        table: table.into(),
        branch: String::new(),
        including: including.into(),
        excluding: excluding.into(),
        target: Some(pb::ResetTarget { target: Some(target) }),
        force: false,
        execute,
        expected_next_snapshots: HashMap::new(),
        expected_lease_ids: Default::default(),
    }
}

/// (consumer id, old, new) of every change, sorted.
fn moves(response: &pb::ResetConsumersResponse) -> Vec<(String, Option<i64>, Option<i64>)> {
    let mut moves: Vec<_> = response
        .reset
        .iter()
        .map(|c| {
            (
                c.consumer.clone().unwrap().consumer_id,
                c.old_next_snapshot,
                c.new_next_snapshot,
            )
        })
        .collect();
    moves.sort();
    moves
}

fn m(id: &str, old: i64, new: i64) -> (String, Option<i64>, Option<i64>) {
    (id.to_owned(), Some(old), Some(new))
}

async fn positions(admin: &mut AdminClient<Channel>) -> HashMap<String, i64> {
    let listed = admin
        .list_consumers(pb::ListConsumersRequest {
            table: "db.orders".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    listed
        .consumers
        .into_iter()
        .map(|c| (c.key.unwrap().consumer_id, c.consumer.map_or(0, |r| r.next_snapshot)))
        .collect()
}

async fn every_target_moves_the_selected_consumers(kind: Kind) {
    let (server, mut admin, _dir) = setup(kind).await;
    // A plan changes nothing and says what would move.
    let before = server.fingerprint().await;
    let plan = admin
        .reset_consumers(request("db.orders", "etl-.*", "etl-keep", Target::Latest(true), false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.executed, Some(false));
    assert_eq!(moves(&plan), [m("etl-a", 4, 11), m("etl-b", 6, 11)]);
    assert_eq!((plan.earliest_snapshot, plan.latest_snapshot), (Some(1), Some(10)));
    assert_eq!(server.fingerprint().await, before, "a plan changes nothing");

    let cases = [
        // --to-latest: past the latest snapshot.
        (
            "etl-.*",
            "etl-keep",
            Target::Latest(true),
            vec![m("etl-a", 4, 11), m("etl-b", 6, 11)],
        ),
        // --to-earliest, everything but etl-keep.
        (
            "",
            "etl-keep",
            Target::Earliest(true),
            vec![m("adhoc", 2, 1), m("etl-a", 11, 1), m("etl-b", 11, 1)],
        ),
        // --shift-by, clamped to [earliest, latest + 1].
        ("etl-a", "", Target::ShiftBy(3), vec![m("etl-a", 1, 4)]),
        ("etl-a", "", Target::ShiftBy(-10), vec![m("etl-a", 4, 1)]),
        ("etl-b", "", Target::ShiftBy(100), vec![m("etl-b", 1, 11)]),
        // --to-datetime: snapshot 5 was committed before 5.5 s, 6 after.
        (
            "etl-a",
            "",
            Target::Time(prost_types::Timestamp {
                seconds: (CREATED_MS + 5_500) / 1000,
                nanos: 500_000_000,
            }),
            vec![m("etl-a", 1, 6)],
        ),
        // Before every snapshot: the earliest; after all: latest + 1.
        (
            "adhoc",
            "",
            Target::Time(prost_types::Timestamp { seconds: 1, nanos: 0 }),
            vec![m("adhoc", 1, 1)],
        ),
        (
            "adhoc",
            "",
            Target::Time(prost_types::Timestamp {
                seconds: CREATED_MS / 1000 + 3600,
                nanos: 0,
            }),
            vec![m("adhoc", 1, 11)],
        ),
        // --to-snapshot.
        ("etl-keep", "", Target::Snapshot(7), vec![m("etl-keep", 5, 7)]),
    ];
    for (including, excluding, target, want) in cases {
        let done = admin
            .reset_consumers(request("db.orders", including, excluding, target, true))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(done.executed, Some(true));
        assert_eq!(moves(&done), want, "{target:?}");
    }
    let now = positions(&mut admin).await;
    assert_eq!(
        now,
        HashMap::from([
            ("etl-a".into(), 6),
            ("etl-b".into(), 11),
            ("etl-keep".into(), 7),
            ("adhoc".into(), 11)
        ])
    );

    // Unregistered: --to-snapshot works, targets needing snapshots do not.
    set_consumer(&mut admin, "db.unregistered", "x", 3).await;
    let done = admin
        .reset_consumers(request("db.unregistered", "", "", Target::Snapshot(9), true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(moves(&done), [m("x", 3, 9)]);
    let before = server.fingerprint().await;
    for target in [
        Target::Earliest(true),
        Target::Latest(true),
        Target::ShiftBy(1),
        Target::Time(prost_types::Timestamp { seconds: 1, nanos: 0 }),
    ] {
        let err = api_error(
            admin
                .reset_consumers(request("db.unregistered", "", "", target, true))
                .await,
        );
        assert_eq!(
            (err.code, err.reason.as_str()),
            (Code::FailedPrecondition, "TABLE_NOT_REGISTERED"),
            "{target:?}"
        );
    }
    assert_eq!(server.fingerprint().await, before);
    // Bad input names its field.
    let mut bad = request("db.orders", "", "", Target::Snapshot(0), true);
    let err = api_error(admin.reset_consumers(bad.clone()).await);
    assert!(err.fields().contains(&"target.snapshot"), "{err:?}");
    bad.target = None;
    let err = api_error(admin.reset_consumers(bad).await);
    assert!(err.fields().contains(&"target"), "{err:?}");
}

async fn plans_preconditions_and_force_hold(kind: Kind) {
    let (server, mut admin, _dir) = setup(kind).await;
    // Execution against a plan: a consumer that moved since is skipped
    // (NEXT_SNAPSHOT_MISMATCH), one the plan did not show is skipped
    // (NOT_IN_PLAN).
    let mut guarded = request("db.orders", "etl-.*", "", Target::Snapshot(8), true);
    guarded.expected_next_snapshots = HashMap::from([("etl-a".into(), 4), ("etl-b".into(), 99)]);
    let done = admin.reset_consumers(guarded).await.unwrap().into_inner();
    assert_eq!(moves(&done), [m("etl-a", 4, 8)]);
    let mut skipped: Vec<(String, String)> = done
        .skipped
        .iter()
        .map(|s| (s.consumer_id.clone(), s.reason.clone()))
        .collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            ("etl-b".to_owned(), "NEXT_SNAPSHOT_MISMATCH".to_owned()),
            ("etl-keep".to_owned(), "NOT_IN_PLAN".to_owned())
        ]
    );

    // A live lease: skipped without force; with force, fenced.
    let client = server.client().await;
    let mut worker = Worker::acquire(&client, &key("db.orders", "main", "etl-b"), "query-b", None)
        .await
        .unwrap();
    let done = admin
        .reset_consumers(request("db.orders", "etl-b", "", Target::Earliest(true), true))
        .await
        .unwrap()
        .into_inner();
    assert!(done.reset.is_empty());
    assert_eq!(done.skipped[0].reason, "LEASE_HELD");
    let mut forced = request("db.orders", "etl-b", "", Target::Earliest(true), true);
    forced.force = true;
    let done = admin.reset_consumers(forced).await.unwrap().into_inner();
    assert_eq!(moves(&done), [m("etl-b", 6, 1)]);
    assert!(done.reset[0].revoked_lease.is_some(), "the live lease was revoked");
    let refused = worker.commit(0, offset(9, 0, false, Some(1))).await.unwrap_err();
    assert_eq!(tidemark_client::ApiError::from(refused).reason, "LEASE_NOT_HELD");
    assert_eq!(
        positions(&mut admin).await["etl-b"],
        1,
        "the fenced commit changed nothing"
    );
}

async fn bulk_revoke_fences_every_selected_holder(kind: Kind) {
    let (server, mut admin, _dir) = setup(kind).await;
    let client = server.client().await;
    let mut workers = Vec::new();
    for (table, id) in [
        ("db.orders", "etl-a"),
        ("db.orders", "etl-b"),
        ("db.orders", "adhoc"),
        ("db.other", "x"),
    ] {
        workers.push((
            id,
            Worker::acquire(&client, &key(table, "main", id), &format!("q-{id}"), None)
                .await
                .unwrap(),
        ));
    }
    let revoke = |table: &str, including: &str, execute: bool| pb::RevokeLeasesRequest {
        table: table.into(),
        branch: String::new(),
        including: including.into(),
        excluding: String::new(),
        reason: "restore from backup".into(),
        execute,
    };
    let ids = |r: &pb::RevokeLeasesResponse| {
        let mut ids: Vec<String> = r
            .revoked
            .iter()
            .map(|e| e.consumer.clone().unwrap().consumer_id)
            .collect();
        ids.sort();
        ids
    };
    // A plan changes nothing.
    let before = server.fingerprint().await;
    let plan = admin
        .revoke_leases(revoke("db.orders", "etl-.*", false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&plan), ["etl-a", "etl-b"]);
    assert_eq!(plan.executed, Some(false));
    assert_eq!(server.fingerprint().await, before);
    // One table, selected ids.
    let done = admin
        .revoke_leases(revoke("db.orders", "etl-.*", true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&done), ["etl-a", "etl-b"]);
    assert!(
        done.revoked
            .iter()
            .all(|e| e.lease.as_ref().unwrap().state == "revoked" && e.epoch == 2)
    );
    // Every table: the rest (already revoked ones are not live any more).
    let rest = admin.revoke_leases(revoke("", "", true)).await.unwrap().into_inner();
    assert_eq!(ids(&rest), ["adhoc", "x"]);
    for (id, mut worker) in workers {
        let refused = worker.commit(0, offset(9, 0, false, Some(1))).await.unwrap_err();
        assert_eq!(
            tidemark_client::ApiError::from(refused).reason,
            "LEASE_NOT_HELD",
            "{id}"
        );
    }
    let err = api_error(admin.revoke_leases(revoke("not a table", "", true)).await);
    assert!(err.fields().contains(&"table"), "{err:?}");
}

/// A8: for a registered table, list and describe report how long the
/// oldest unconsumed snapshot has waited, beside the lag in snapshots.
async fn lag_in_time_for_registered_tables(kind: Kind) {
    let (_server, mut admin, _dir) = setup(kind).await;
    let hour_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 3_600_000;
    let lagging = tempfile::tempdir().unwrap();
    // Snapshot n committed n seconds after an hour ago.
    tidemark_e2e::paimon_table_dir(lagging.path(), 10, hour_ago, "");
    admin
        .register_table(pb::RegisterTableRequest {
            table: "db.lagging".into(),
            location: lagging.path().display().to_string(),
            execute: true,
        })
        .await
        .unwrap();
    set_consumer(&mut admin, "db.lagging", "behind", 4).await;
    set_consumer(&mut admin, "db.lagging", "current", 11).await;
    set_consumer(&mut admin, "db.unregistered", "elsewhere", 4).await;
    let listed = admin
        .list_consumers(pb::ListConsumersRequest::default())
        .await
        .unwrap()
        .into_inner();
    let by_id: HashMap<String, pb::ConsumerInfo> = listed
        .consumers
        .into_iter()
        .map(|c| (c.key.clone().unwrap().consumer_id, c))
        .collect();
    let behind = &by_id["behind"];
    let record = behind.consumer.as_ref().unwrap();
    assert_eq!((record.latest_snapshot, record.lag), (Some(10), Some(7)));
    let waited = behind.lag_time.as_ref().expect("lag in time").seconds;
    // Snapshot 4 was committed an hour ago less 4 s.
    assert!((3_596 - 60..=3_596 + 60).contains(&waited), "waited {waited} s");
    let current = &by_id["current"];
    assert_eq!(current.consumer.as_ref().unwrap().lag, Some(0));
    assert_eq!(
        current.lag_time.as_ref().map(|d| d.seconds),
        Some(0),
        "nothing left to read"
    );
    assert_eq!(by_id["elsewhere"].lag_time, None, "unregistered: unknown");
    let described = admin
        .describe_consumer(pb::DescribeConsumerRequest {
            consumer: Some(key("db.lagging", "main", "behind")),
            history_limit: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let info = described.info.unwrap();
    assert_eq!(info.consumer.unwrap().lag, Some(7));
    let waited = info.lag_time.expect("lag in time").seconds;
    assert!((3_596 - 60..=3_596 + 60).contains(&waited), "waited {waited} s");
}

/// A bulk operation larger than its call's time: before, the call ended
/// `DEADLINE_EXCEEDED` with part of the consumers cleared and no word of
/// which. Now it stops applying before the call's limit (here the client's
/// 400 ms `grpc-timeout`) and answers with what it cleared and, as
/// `NOT_REACHED`, what it left unchanged; the two add up to the selection
/// and match the database.
async fn a_bulk_clear_cut_by_the_calls_time_reports_what_it_did_and_what_it_did_not_reach(kind: Kind) {
    let server = TestServer::start_with(kind, LeasePolicy::default(), ServerConfig::default()).await;
    let mut admin = AdminClient::new(server.channel().await);
    let ctx = tidemark_store::CallContext::internal("setup");
    const MANY: usize = 3000;
    for i in 0..MANY {
        let key = tidemark_core::ConsumerKey::parse("db.bulk", "main", &format!("c{i:05}"), "").unwrap();
        server
            .store
            .reset_consumer(&ctx, &key, 3, None, false, true)
            .await
            .unwrap();
    }
    let mut request = tonic::Request::new(pb::ClearConsumersRequest {
        table: "db.bulk".into(),
        branch: String::new(),
        including: String::new(),
        excluding: String::new(),
        force: false,
        execute: true,
    });
    request.set_timeout(std::time::Duration::from_millis(400));
    let answer = admin
        .clear_consumers(request)
        .await
        .expect("an answer, not DEADLINE_EXCEEDED")
        .into_inner();
    let not_reached: Vec<&pb::SkippedConsumer> = answer.skipped.iter().filter(|s| s.reason == "NOT_REACHED").collect();
    assert_eq!(answer.skipped.len(), not_reached.len(), "{:?}", answer.skipped.first());
    assert!(
        !not_reached.is_empty(),
        "3000 consumers cleared within 400 ms: make the test larger"
    );
    assert_eq!(answer.cleared.len() + not_reached.len(), MANY);
    // The answer matches the database: the cleared are gone, the rest kept.
    let mut left: Vec<String> = Vec::new();
    let mut token = String::new();
    loop {
        let page = admin
            .list_consumers(pb::ListConsumersRequest {
                table: "db.bulk".into(),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        left.extend(
            page.consumers
                .iter()
                .filter(|c| c.consumer.is_some())
                .map(|c| c.key.as_ref().unwrap().consumer_id.clone()),
        );
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    left.sort();
    let mut reported: Vec<String> = not_reached.iter().map(|s| s.consumer_id.clone()).collect();
    reported.sort();
    assert_eq!(left, reported);
}
