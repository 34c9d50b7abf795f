//! Bad input over gRPC: every invalid field gets INVALID_ARGUMENT with a
//! `BadRequest` violation naming it, and nothing in the database changes.

use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends, range, recovery_request};
use tidemark_proto::v1 as pb;
use tonic::Code;

on_both_backends!(
    acquire_lease_bad_fields,
    renew_and_release_bad_fields,
    commit_batch_bad_fields,
    get_recovery_position_bad_fields,
    every_bad_field_is_reported_at_once,
    list_consumers_bad_prefix,
);

fn good_key() -> pb::ConsumerKey {
    key("db.orders", "main", "consumer-1")
}

/// Asserts `result` is INVALID_ARGUMENT naming `field`, with reason
/// INVALID_ARGUMENT in domain tidemark and a description.
fn assert_invalid<T: std::fmt::Debug>(result: Result<T, tonic::Status>, field: &str, case: &str) {
    let err = api_error(result);
    assert_eq!(err.code, Code::InvalidArgument, "{case}: {err:?}");
    assert_eq!(
        (err.reason.as_str(), err.domain.as_str()),
        ("INVALID_ARGUMENT", "tidemark"),
        "{case}"
    );
    assert!(
        err.fields().contains(&field),
        "{case}: expected a violation of {field}, got {:?}",
        err.fields()
    );
    let description = &err.field_violations.iter().find(|(f, _)| f == field).unwrap().1;
    assert!(!description.is_empty(), "{case}: empty description");
    assert!(
        err.message.contains(field),
        "{case}: the message should name {field}: {}",
        err.message
    );
}

/// A server with one leased, committed consumer, so there is state to
/// (not) change.
async fn prepared(kind: Kind) -> (TestServer, Worker) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &good_key(), "q", None).await.unwrap();
    w.commit(0, offset(4, 0, false, Some(2))).await.unwrap();
    (server, w)
}

async fn acquire_lease_bad_fields(kind: Kind) {
    let (server, _w) = prepared(kind).await;
    let mut client = server.client().await;
    let before = server.fingerprint().await;
    let with_key = |table: &str, branch: &str, id: &str| pb::AcquireLeaseRequest {
        consumer: Some(key(table, branch, id)),
        holder: "q2".into(),
        ttl: None,
    };
    let long_part = "t".repeat(256);
    let cases: Vec<(&str, pb::AcquireLeaseRequest, &str)> = vec![
        (
            "missing consumer",
            pb::AcquireLeaseRequest {
                consumer: None,
                holder: "q".into(),
                ttl: None,
            },
            "consumer",
        ),
        ("empty table", with_key("", "main", "c"), "consumer.table"),
        (
            "table without database",
            with_key("orders", "main", "c"),
            "consumer.table",
        ),
        ("table with two dots", with_key("a.b.c", "main", "c"), "consumer.table"),
        (
            "table with $",
            with_key("db.orders$snapshots", "main", "c"),
            "consumer.table",
        ),
        ("table with /", with_key("db/x.orders", "main", "c"), "consumer.table"),
        (
            "table with control char",
            with_key("db.or\u{7}ders", "main", "c"),
            "consumer.table",
        ),
        (
            "table part too long",
            with_key(&format!("db.{long_part}"), "main", "c"),
            "consumer.table",
        ),
        ("branch with /", with_key("db.orders", "dev/x", "c"), "consumer.branch"),
        (
            "branch too long",
            with_key("db.orders", &"b".repeat(256), "c"),
            "consumer.branch",
        ),
        (
            "empty consumer id",
            with_key("db.orders", "main", ""),
            "consumer.consumer_id",
        ),
        (
            "consumer id ..",
            with_key("db.orders", "main", ".."),
            "consumer.consumer_id",
        ),
        (
            "consumer id .",
            with_key("db.orders", "main", "."),
            "consumer.consumer_id",
        ),
        (
            "consumer id with space",
            with_key("db.orders", "main", "a b"),
            "consumer.consumer_id",
        ),
        (
            "consumer id with /",
            with_key("db.orders", "main", "a/b"),
            "consumer.consumer_id",
        ),
        (
            "consumer id too long",
            with_key("db.orders", "main", &"c".repeat(129)),
            "consumer.consumer_id",
        ),
        (
            "empty holder",
            pb::AcquireLeaseRequest {
                holder: String::new(),
                ..with_key("db.orders", "main", "c")
            },
            "holder",
        ),
        (
            "holder too long",
            pb::AcquireLeaseRequest {
                holder: "h".repeat(257),
                ..with_key("db.orders", "main", "c")
            },
            "holder",
        ),
        (
            "holder with newline",
            pb::AcquireLeaseRequest {
                holder: "a\nb".into(),
                ..with_key("db.orders", "main", "c")
            },
            "holder",
        ),
        (
            "negative ttl",
            pb::AcquireLeaseRequest {
                ttl: Some(prost_types::Duration { seconds: -5, nanos: 0 }),
                ..with_key("db.orders", "main", "c")
            },
            "ttl",
        ),
    ];
    for (case, request, field) in cases {
        assert_invalid(client.acquire_lease(request).await, field, case);
    }
    assert_eq!(
        server.fingerprint().await,
        before,
        "invalid acquires changed the database"
    );
}

async fn renew_and_release_bad_fields(kind: Kind) {
    let (server, w) = prepared(kind).await;
    let mut client = server.client().await;
    let before = server.fingerprint().await;
    let renew = |lease_id: &str, epoch: i64, ttl: Option<prost_types::Duration>| pb::RenewLeaseRequest {
        lease_id: lease_id.into(),
        epoch,
        ttl,
    };
    let id = w.lease.lease_id.as_str();
    let cases = [
        ("empty lease id", renew("", 1, None), "lease_id"),
        ("lease id not a uuid", renew("lease-1", 1, None), "lease_id"),
        ("zero epoch", renew(id, 0, None), "epoch"),
        ("negative epoch", renew(id, -3, None), "epoch"),
        (
            "negative ttl",
            renew(id, 1, Some(prost_types::Duration { seconds: 0, nanos: -1 })),
            "ttl",
        ),
    ];
    for (case, request, field) in cases {
        assert_invalid(client.renew_lease(request).await, field, case);
    }
    let release = |lease_id: &str, epoch: i64| pb::ReleaseLeaseRequest {
        lease_id: lease_id.into(),
        epoch,
    };
    let cases = [
        ("empty lease id", release("", 1), "lease_id"),
        ("lease id not a uuid", release("0000", 1), "lease_id"),
        ("zero epoch", release(id, 0), "epoch"),
    ];
    for (case, request, field) in cases {
        assert_invalid(client.release_lease(request).await, field, case);
    }
    assert_eq!(server.fingerprint().await, before);
}

async fn commit_batch_bad_fields(kind: Kind) {
    let (server, w) = prepared(kind).await;
    let mut client = server.client().await;
    let before = server.fingerprint().await;
    let base = pb::CommitBatchRequest {
        lease_id: w.lease.lease_id.clone(),
        epoch: w.lease.epoch,
        batch_id: 1,
        end: Some(offset(5, 0, false, Some(2))),
        latest_snapshot: None,
    };
    let with_end = |end: Option<pb::Offset>| pb::CommitBatchRequest { end, ..base.clone() };
    let cases = [
        (
            "lease id not a uuid",
            pb::CommitBatchRequest {
                lease_id: "x".into(),
                ..base.clone()
            },
            "lease_id",
        ),
        (
            "zero epoch",
            pb::CommitBatchRequest {
                epoch: 0,
                ..base.clone()
            },
            "epoch",
        ),
        (
            "negative batch id",
            pb::CommitBatchRequest {
                batch_id: -1,
                ..base.clone()
            },
            "batch_id",
        ),
        (
            "negative latest snapshot",
            pb::CommitBatchRequest {
                latest_snapshot: Some(-1),
                ..base.clone()
            },
            "latest_snapshot",
        ),
        (
            // Issue 34: an end at snapshot 30 reported with 5 as the latest
            // answered CREATED with lag 0.
            "an end past the latest snapshot it reports",
            pb::CommitBatchRequest {
                end: Some(offset(30, 0, false, Some(1))),
                latest_snapshot: Some(5),
                ..base.clone()
            },
            "latest_snapshot",
        ),
        ("missing end", with_end(None), "end"),
        (
            "zero snapshot id",
            with_end(Some(offset(0, 0, false, Some(2)))),
            "end.snapshot_id",
        ),
        (
            "negative snapshot id",
            with_end(Some(offset(-5, 0, false, Some(2)))),
            "end.snapshot_id",
        ),
        (
            "index below -1",
            with_end(Some(offset(5, -2, false, Some(2)))),
            "end.index",
        ),
        (
            "zero total splits",
            with_end(Some(offset(5, 0, false, Some(0)))),
            "end.total_splits",
        ),
        (
            "negative total splits",
            with_end(Some(offset(5, 0, false, Some(-4)))),
            "end.total_splits",
        ),
        (
            "index equal to total splits",
            with_end(Some(offset(5, 2, false, Some(2)))),
            "end.index",
        ),
        (
            "index beyond total splits",
            with_end(Some(offset(5, 9, true, Some(2)))),
            "end.index",
        ),
    ];
    for (case, request, field) in cases {
        assert_invalid(client.commit_batch(request).await, field, case);
    }
    assert_eq!(
        server.fingerprint().await,
        before,
        "invalid commits changed the database"
    );
}

async fn get_recovery_position_bad_fields(kind: Kind) {
    let (server, w) = prepared(kind).await;
    let mut client = server.client().await;
    let before = server.fingerprint().await;
    let base = recovery_request(&good_key(), range(1, 9));
    let startup = |mode: i32, snapshot_id: i64| pb::GetRecoveryPositionRequest {
        startup: Some(pb::StartupOptions { mode, snapshot_id }),
        ..base.clone()
    };
    let with_range = |earliest: i64, latest: i64, changelog: Option<i64>| pb::GetRecoveryPositionRequest {
        table: Some(pb::SnapshotRange {
            earliest_snapshot: earliest,
            latest_snapshot: latest,
            earliest_changelog: changelog,
            changelog_decoupled: true,
        }),
        ..base.clone()
    };
    let with_checkpoint = |start: Option<pb::Offset>, end: Option<pb::Offset>| pb::GetRecoveryPositionRequest {
        checkpoint: Some(pb::LoggedBatch { start, end }),
        ..base.clone()
    };
    let cases = [
        (
            "bad consumer id",
            pb::GetRecoveryPositionRequest {
                consumer: Some(key("db.orders", "main", "bad id")),
                ..base.clone()
            },
            "consumer.consumer_id",
        ),
        (
            "missing table range",
            pb::GetRecoveryPositionRequest {
                table: None,
                ..base.clone()
            },
            "table",
        ),
        ("negative latest", with_range(0, -1, None), "table.latest_snapshot"),
        (
            "earliest after latest",
            with_range(10, 9, None),
            "table.earliest_snapshot",
        ),
        ("negative earliest", with_range(-1, 9, None), "table.earliest_snapshot"),
        (
            "zero earliest changelog",
            with_range(1, 9, Some(0)),
            "table.earliest_changelog",
        ),
        (
            "from-snapshot without id",
            startup(pb::StartupMode::FromSnapshot.into(), 0),
            "startup.snapshot_id",
        ),
        (
            "from-snapshot-full negative id",
            startup(pb::StartupMode::FromSnapshotFull.into(), -2),
            "startup.snapshot_id",
        ),
        (
            "latest with an id",
            startup(pb::StartupMode::Latest.into(), 3),
            "startup.snapshot_id",
        ),
        ("unknown mode", startup(99, 0), "startup.mode"),
        (
            "unknown on_expired",
            pb::GetRecoveryPositionRequest {
                on_expired: 7,
                ..base.clone()
            },
            "on_expired",
        ),
        (
            "checkpoint without start",
            with_checkpoint(None, Some(offset(3, 0, false, Some(1)))),
            "checkpoint.start",
        ),
        (
            "checkpoint without end",
            with_checkpoint(Some(offset(3, 0, false, Some(1))), None),
            "checkpoint.end",
        ),
        (
            "checkpoint start snapshot 0",
            with_checkpoint(Some(offset(0, 0, false, Some(1))), Some(offset(3, 0, false, Some(1)))),
            "checkpoint.start.snapshot_id",
        ),
        (
            "checkpoint end index beyond total",
            with_checkpoint(Some(offset(3, 0, false, Some(1))), Some(offset(4, 5, false, Some(2)))),
            "checkpoint.end.index",
        ),
        (
            "lease id not a uuid",
            pb::GetRecoveryPositionRequest {
                lease_id: Some("nope".into()),
                ..base.clone()
            },
            "lease_id",
        ),
    ];
    for (case, request, field) in cases {
        assert_invalid(client.get_recovery_position(request).await, field, case);
    }
    // A valid recovery with the lease still works and the lease is untouched
    // by the rejected ones.
    let mut ok = base.clone();
    ok.lease_id = Some(w.lease.lease_id.clone());
    ok.startup = Some(pb::StartupOptions {
        mode: pb::StartupMode::Latest.into(),
        snapshot_id: 0,
    });
    client.get_recovery_position(ok).await.unwrap();
    assert_eq!(
        server.fingerprint().await,
        before,
        "invalid recovery requests changed the database"
    );
}

async fn every_bad_field_is_reported_at_once(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let err = api_error(
        client
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(key("nodot", "bad/branch", "..")),
                holder: String::new(),
                ttl: Some(prost_types::Duration { seconds: -1, nanos: 0 }),
            })
            .await,
    );
    assert_eq!(
        err.fields(),
        [
            "consumer.table",
            "consumer.branch",
            "consumer.consumer_id",
            "holder",
            "ttl"
        ]
    );
}

/// A prefix of consumer ids can only hold what ids hold (found by fuzzing
/// the Postgres store: a NUL byte reached the database, which refused it,
/// and the answer was INTERNAL).
async fn list_consumers_bad_prefix(kind: Kind) {
    let (server, _w) = prepared(kind).await;
    let mut admin = tidemark_proto::v1::admin_client::AdminClient::new(server.channel().await);
    let before = server.fingerprint().await;
    for prefix in ["a\0b", "consumer 1", "c/1", "é"] {
        let answer = admin
            .list_consumers(pb::ListConsumersRequest {
                consumer_id_prefix: prefix.into(),
                ..Default::default()
            })
            .await;
        assert_invalid(answer, "consumer_id_prefix", &format!("{prefix:?}"));
    }
    let listed = admin
        .list_consumers(pb::ListConsumersRequest {
            consumer_id_prefix: "consumer-".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.consumers.len(), 1);
    assert_eq!(server.fingerprint().await, before);
}
