//! The Admin and Retention services over real gRPC on both backends: plans
//! change nothing, executed changes do, refusals carry their codes and
//! reasons, and bad input names its field and changes nothing.

use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_proto::v1::retention_client::RetentionClient;
use tonic::Code;
use tonic::transport::Channel;

on_both_backends!(
    plans_change_nothing_and_executed_changes_do,
    force_fences_the_running_query,
    expected_next_snapshot_is_a_compare_and_set,
    describe_of_an_unknown_consumer_is_not_found,
    list_consumers_pages_with_tokens,
    fences_and_explanations_over_grpc,
    admin_and_retention_bad_fields,
);

async fn clients(server: &TestServer) -> (AdminClient<Channel>, RetentionClient<Channel>) {
    let channel = server.channel().await;
    (AdminClient::new(channel.clone()), RetentionClient::new(channel))
}

fn k(id: &str) -> pb::ConsumerKey {
    key("db.t", "main", id)
}

async fn reset(admin: &mut AdminClient<Channel>, id: &str, next: i64, execute: bool) -> pb::ResetConsumerResponse {
    admin
        .reset_consumer(pb::ResetConsumerRequest {
            consumer: Some(k(id)),
            next_snapshot: next,
            execute,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn plans_change_nothing_and_executed_changes_do(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, _) = clients(&server).await;
    reset(&mut admin, "a", 5, true).await;
    let before = server.fingerprint().await;
    let plan = reset(&mut admin, "a", 9, false).await;
    assert_eq!(plan.executed, Some(false));
    assert_eq!(plan.change.unwrap().new_next_snapshot, Some(9));
    let delete_plan = admin
        .delete_consumer(pb::DeleteConsumerRequest {
            consumer: Some(k("a")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(delete_plan.executed, Some(false));
    let clear_plan = admin
        .clear_consumers(pb::ClearConsumersRequest {
            table: "db.t".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(clear_plan.cleared.len(), 1);
    admin
        .set_table_options(pb::SetTableOptionsRequest {
            table: "db.t".into(),
            options: [("consumer.expiration-time".to_owned(), "1 min".to_owned())].into(),
            ..Default::default()
        })
        .await
        .unwrap();
    admin
        .revoke_lease(pb::RevokeLeaseRequest {
            consumer: Some(k("a")),
            ..Default::default()
        })
        .await
        .unwrap();
    admin
        .expire_consumers(pb::ExpireConsumersRequest::default())
        .await
        .unwrap();
    assert_eq!(server.fingerprint().await, before, "plans wrote something");

    let done = reset(&mut admin, "a", 9, true).await;
    assert_eq!(done.executed, Some(true));
    let (state, history) = server.stored(&k("a")).await;
    assert_eq!(state.unwrap().next_snapshot(), Some(9));
    assert_eq!(history[0].event.kind.as_str(), "RESET");
}

async fn force_fences_the_running_query(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, _) = clients(&server).await;
    let client = server.client().await;
    let mut worker = Worker::acquire(&client, &k("f"), "query-1", None).await.unwrap();
    worker.commit(0, offset(20, 0, false, Some(2))).await.unwrap();
    let err = api_error(
        admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(k("f")),
                next_snapshot: 10,
                execute: true,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "LEASE_HELD")
    );
    assert_eq!(err.metadata["holder"], "query-1");
    let forced = admin
        .reset_consumer(pb::ResetConsumerRequest {
            consumer: Some(k("f")),
            next_snapshot: 10,
            force: true,
            execute: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let change = forced.change.unwrap();
    assert_eq!(change.revoked_lease.unwrap().holder, "query-1");
    assert_eq!(change.epoch, 2);
    let err = api_error(worker.commit(1, offset(25, 0, false, Some(2))).await);
    assert_eq!(
        (err.reason.as_str(), err.metadata["state"].as_str()),
        ("LEASE_NOT_HELD", "revoked")
    );
    assert_eq!(server.stored(&k("f")).await.0.unwrap().next_snapshot(), Some(10));
}

async fn expected_next_snapshot_is_a_compare_and_set(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, _) = clients(&server).await;
    reset(&mut admin, "c", 5, true).await;
    let before = server.fingerprint().await;
    let err = api_error(
        admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(k("c")),
                next_snapshot: 3,
                expected_next_snapshot: Some(4),
                execute: true,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "NEXT_SNAPSHOT_MISMATCH")
    );
    assert_eq!(err.metadata["next_snapshot"], "5");
    assert_eq!(server.fingerprint().await, before);
    let err = api_error(
        admin
            .delete_consumer(pb::DeleteConsumerRequest {
                consumer: Some(k("missing")),
                expected_next_snapshot: Some(4),
                execute: true,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(err.reason, "NEXT_SNAPSHOT_MISMATCH");
}

async fn describe_of_an_unknown_consumer_is_not_found(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, _) = clients(&server).await;
    let err = api_error(
        admin
            .describe_consumer(pb::DescribeConsumerRequest {
                consumer: Some(k("nobody")),
                history_limit: 0,
            })
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (Code::NotFound, "CONSUMER_NOT_FOUND"));
}

async fn list_consumers_pages_with_tokens(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, _) = clients(&server).await;
    for i in 0..5 {
        reset(&mut admin, &format!("p{i}"), 3, true).await;
    }
    let mut token = String::new();
    let mut seen = Vec::new();
    loop {
        let page = admin
            .list_consumers(pb::ListConsumersRequest {
                page_size: 2,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        seen.extend(page.consumers.iter().map(|c| c.key.clone().unwrap().consumer_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
}

async fn fences_and_explanations_over_grpc(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, mut retention) = clients(&server).await;
    reset(&mut admin, "slow", 4, true).await;
    reset(&mut admin, "fast", 9, true).await;
    let fence = retention
        .get_retention_fence(pb::GetRetentionFenceRequest {
            table: "db.t".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((fence.snapshot_fence, fence.changelog_fence), (Some(4), Some(4)));
    assert_eq!(fence.snapshot_fence_holders[0].consumer_id, "slow");
    let other_branch = retention
        .get_retention_fence(pb::GetRetentionFenceRequest {
            table: "db.t".into(),
            branch: "dev".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(other_branch.snapshot_fence, None);
    let explained = retention
        .explain_retention(pb::ExplainRetentionRequest {
            table: "db.t".into(),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(explained.holders.len(), 1);
    assert!(explained.truncated);
}

async fn admin_and_retention_bad_fields(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (mut admin, mut retention) = clients(&server).await;
    reset(&mut admin, "x", 5, true).await;
    let before = server.fingerprint().await;
    let check = |result: Result<(), tonic::Status>, field: &str, case: &str| {
        let err = api_error(result);
        assert_eq!(err.code, Code::InvalidArgument, "{case}");
        assert!(err.fields().contains(&field), "{case}: {:?}", err.fields());
    };
    let bad_key = key("nodot", "main", "x");
    check(
        retention
            .get_retention_fence(pb::GetRetentionFenceRequest {
                table: "nodot".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "table",
        "fence table",
    );
    // Issue 34: a position past the snapshot-id ceiling was planned.
    check(
        admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(key("db.t", "main", "x")),
                next_snapshot: i64::MAX,
                ..Default::default()
            })
            .await
            .map(drop),
        "next_snapshot",
        "a position past the id ceiling",
    );
    check(
        retention
            .explain_retention(pb::ExplainRetentionRequest {
                table: "db.t".into(),
                branch: "a/b".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "branch",
        "explain branch",
    );
    check(
        retention
            .explain_retention(pb::ExplainRetentionRequest {
                table: "db.t".into(),
                limit: 5000,
                ..Default::default()
            })
            .await
            .map(drop),
        "limit",
        "explain limit",
    );
    check(
        admin
            .list_consumers(pb::ListConsumersRequest {
                page_token: "zz".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "page_token",
        "list token",
    );
    check(
        admin
            .list_consumers(pb::ListConsumersRequest {
                page_size: -1,
                ..Default::default()
            })
            .await
            .map(drop),
        "page_size",
        "list size",
    );
    check(
        admin
            .describe_consumer(pb::DescribeConsumerRequest {
                consumer: Some(bad_key.clone()),
                history_limit: 0,
            })
            .await
            .map(drop),
        "consumer.table",
        "describe key",
    );
    check(
        admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(k("x")),
                next_snapshot: 0,
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "next_snapshot",
        "reset zero",
    );
    check(
        admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(k("x")),
                next_snapshot: 3,
                expected_next_snapshot: Some(-1),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "expected_next_snapshot",
        "reset expected",
    );
    check(
        admin
            .delete_consumer(pb::DeleteConsumerRequest {
                consumer: None,
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "consumer",
        "delete without key",
    );
    check(
        admin
            .clear_consumers(pb::ClearConsumersRequest {
                table: "db.t".into(),
                including: "(".into(),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "including",
        "clear bad regex",
    );
    check(
        admin
            .clear_consumers(pb::ClearConsumersRequest {
                table: "db.t".into(),
                excluding: "a".repeat(2000),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "excluding",
        "clear huge regex",
    );
    check(
        admin
            .revoke_lease(pb::RevokeLeaseRequest {
                consumer: Some(k("x")),
                reason: "r".repeat(600),
                execute: true,
                expected_lease_id: None,
            })
            .await
            .map(drop),
        "reason",
        "revoke reason",
    );
    // Postgres cannot store a NUL in text: it must be refused as input,
    // not fail the write (found by the fuzzer: INTERNAL on Postgres).
    for (reason, case) in [("\0", "revoke reason NUL"), ("paged at 3am\u{7}", "revoke reason bell")] {
        check(
            admin
                .revoke_lease(pb::RevokeLeaseRequest {
                    consumer: Some(k("x")),
                    reason: reason.into(),
                    execute: true,
                    expected_lease_id: None,
                })
                .await
                .map(drop),
            "reason",
            case,
        );
    }
    check(
        admin
            .revoke_leases(pb::RevokeLeasesRequest {
                table: "db.t".into(),
                reason: "bulk\0".into(),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "reason",
        "bulk revoke reason NUL",
    );
    check(
        admin
            .list_history(pb::ListHistoryRequest {
                table: String::new(),
                ..Default::default()
            })
            .await
            .map(drop),
        "table",
        "history without table",
    );
    check(
        admin
            .list_history(pb::ListHistoryRequest {
                table: "db.t".into(),
                page_token: "-3".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "page_token",
        "history token",
    );
    check(
        admin
            .set_table_options(pb::SetTableOptionsRequest {
                table: "db.t".into(),
                options: [("consumer.expiration-time".to_owned(), "soon".to_owned())].into(),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "options[consumer.expiration-time]",
        "bad duration",
    );
    check(
        admin
            .set_table_options(pb::SetTableOptionsRequest {
                table: "db.t".into(),
                unset: vec!["consumer.nope".into()],
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "unset[0]",
        "unknown unset",
    );
    check(
        admin
            .get_table_options(pb::GetTableOptionsRequest { table: "x".into() })
            .await
            .map(drop),
        "table",
        "options table",
    );
    check(
        admin
            .expire_consumers(pb::ExpireConsumersRequest {
                limit: -4,
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        "limit",
        "expire limit",
    );
    assert_eq!(
        server.fingerprint().await,
        before,
        "invalid admin calls changed the database"
    );
}
