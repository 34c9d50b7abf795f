//! Input that is not even a valid request: malformed protobuf on the wire,
//! wrong wire types, invalid UTF-8, unknown fields, and numbers at the edge
//! of their type. Each gets INVALID_ARGUMENT with ErrorInfo (reason
//! INVALID_ARGUMENT, domain tidemark), never INTERNAL, and the database is
//! unchanged afterwards.

use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends};
use tidemark_proto::v1 as pb;
use tidemark_testkit::raw::call_raw;
use tonic::Code;

on_both_backends!(
    malformed_protobuf_is_invalid_argument_and_changes_nothing,
    numbers_at_the_edge_of_their_type_are_refused_cleanly,
);

const METHODS: [&str; 6] = [
    "/tidemark.v1.Coordinator/AcquireLease",
    "/tidemark.v1.Coordinator/CommitBatch",
    "/tidemark.v1.Coordinator/ReleaseLease",
    "/tidemark.v1.Coordinator/GetRecoveryPosition",
    "/tidemark.v1.Admin/ResetConsumer",
    "/tidemark.v1.Retention/GetRetentionFence",
];

async fn malformed_protobuf_is_invalid_argument_and_changes_nothing(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &key("db.orders", "main", "c1"), "q", None)
        .await
        .unwrap();
    w.commit(0, offset(4, 0, false, Some(1))).await.unwrap();
    let before = server.fingerprint().await;
    let channel = server.channel().await;
    let cases: [(&str, Vec<u8>); 6] = [
        ("a length beyond the end", vec![0x0a, 0x05, b'a']),
        ("a truncated varint", vec![0x10, 0xff]),
        ("field number 0", vec![0x00, 0x01]),
        ("a group (deprecated wire type 3)", vec![0x0b, 0x0c]),
        ("invalid UTF-8 in field 1", vec![0x0a, 0x02, 0xff, 0xfe]),
        (
            "a varint of eleven bytes",
            [vec![0x10], vec![0xff; 10], vec![0x01]].concat(),
        ),
    ];
    for method in METHODS {
        for (case, bytes) in &cases {
            let err = api_error(call_raw(&channel, method, bytes.clone()).await);
            assert_eq!(err.code, Code::InvalidArgument, "{method}, {case}: {err:?}");
            assert_eq!(
                (err.reason.as_str(), err.domain.as_str()),
                ("INVALID_ARGUMENT", "tidemark"),
                "{method}, {case}"
            );
            assert!(
                err.message.contains("not a valid protobuf message"),
                "{method}, {case}: {}",
                err.message
            );
        }
        // Only unknown fields: a valid message with every field unset, so
        // the first required field is named.
        let err = api_error(call_raw(&channel, method, vec![0xf8, 0x06, 0x01]).await);
        assert_eq!(
            err.code,
            Code::InvalidArgument,
            "{method}, unknown fields only: {err:?}"
        );
        assert!(!err.fields().is_empty(), "{method}: {err:?}");
    }
    assert_eq!(
        server.fingerprint().await,
        before,
        "malformed requests changed the database"
    );
    // The lease still works.
    w.commit(1, offset(5, 0, false, Some(1))).await.unwrap();
}

async fn numbers_at_the_edge_of_their_type_are_refused_cleanly(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let mut w = Worker::acquire(&client, &key("db.orders", "main", "c1"), "q", None)
        .await
        .unwrap();
    w.commit(0, offset(4, 0, false, Some(1))).await.unwrap();
    let before = server.fingerprint().await;
    let commit = |batch_id: i64, end: pb::Offset| pb::CommitBatchRequest {
        lease_id: w.lease.lease_id.clone(),
        epoch: w.lease.epoch,
        batch_id,
        end: Some(end),
        latest_snapshot: None,
    };
    let edge = |snapshot_id: i64, index: i64, total: Option<i64>| pb::Offset {
        snapshot_id,
        index,
        scan_snapshot: false,
        total_splits: total,
    };
    let cases = [
        (
            "the last snapshot id completed",
            commit(1, edge(i64::MAX, 0, Some(1))),
            "end.snapshot_id",
        ),
        ("index at i64::MAX", commit(1, edge(5, i64::MAX, Some(3))), "end.index"),
        (
            "total_splits at i64::MIN",
            commit(1, edge(5, 0, Some(i64::MIN))),
            "end.total_splits",
        ),
        (
            "negative snapshot id",
            commit(1, edge(i64::MIN, 0, Some(1))),
            "end.snapshot_id",
        ),
        ("negative batch id", commit(i64::MIN, edge(5, 0, Some(1))), "batch_id"),
        (
            "epoch at i64::MIN",
            pb::CommitBatchRequest {
                epoch: i64::MIN,
                ..commit(1, edge(5, 0, Some(1)))
            },
            "epoch",
        ),
    ];
    for (case, request, field) in cases {
        let err = api_error(client.commit_batch(request).await);
        assert_eq!(err.code, Code::InvalidArgument, "{case}: {err:?}");
        assert!(err.fields().contains(&field), "{case}: {:?}", err.fields());
    }
    let ttls = [
        ("ttl seconds at i64::MAX", i64::MAX, 0),
        ("negative ttl", -5, 0),
        ("nanos out of range", 1, 2_000_000_000),
        ("negative nanos", 1, -1),
    ];
    for (case, seconds, nanos) in ttls {
        let err = api_error(
            client
                .renew_lease(pb::RenewLeaseRequest {
                    lease_id: w.lease.lease_id.clone(),
                    epoch: w.lease.epoch,
                    ttl: Some(prost_types::Duration { seconds, nanos }),
                })
                .await,
        );
        assert_eq!(err.code, Code::InvalidArgument, "{case}: {err:?}");
        assert!(err.fields().contains(&"ttl"), "{case}: {:?}", err.fields());
    }
    assert_eq!(
        server.fingerprint().await,
        before,
        "refused requests changed the database"
    );
    w.commit(1, offset(5, 0, false, Some(1))).await.unwrap();
}
