//! A plan executed exactly as planned (issue 55, the console's confirm and
//! the CLI's): besides the planned positions (`expected_next_snapshot(s)`)
//! a change names the lease its plan saw (`expected_lease_id(s)`; empty:
//! none live), so a forced reset, delete or revoke never fences a query
//! that took the consumer over after the plan — the change is refused, not
//! applied to a consumer that changed.

mod support;

use support::{Served, worker};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;

fn key(id: &str) -> Option<pb::ConsumerKey> {
    worker::key("db.orders", id)
}

async fn lease(worker: &mut CoordinatorClient<Channel>, id: &str, holder: &str) -> pb::Lease {
    worker::acquire(worker, "db.orders", id, holder, Some(600)).await
}

fn reason(status: &tonic::Status) -> String {
    tidemark_client::ApiError::from(status.clone()).reason
}

/// The lease that holds `id` now, and its position.
async fn described(admin: &mut AdminClient<Channel>, id: &str) -> (String, Option<i64>) {
    let info = admin
        .describe_consumer(pb::DescribeConsumerRequest {
            consumer: key(id),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    let live = info.lease.filter(|l| l.state == "active").map(|l| l.lease_id);
    (live.unwrap_or_default(), info.consumer.map(|c| c.next_snapshot))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_names_the_lease_its_plan_saw_and_a_new_one_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&["--sweep-interval", "0s"], dir.path());
    let channel = Channel::from_shared(server.url()).unwrap().connect().await.unwrap();
    let mut worker = CoordinatorClient::new(channel.clone());
    let mut admin = AdminClient::new(channel);

    // The plan sees q1's lease; then q1 stops and q2 takes the consumer.
    let first = lease(&mut worker, "c", "q1").await;
    worker::commit_to(&mut worker, &first, 10, 10, 10).await;
    let planned_lease = first.lease_id.clone();
    worker::release(&mut worker, &first).await;
    let second = lease(&mut worker, "c", "q2").await;

    let reset = |expected_lease_id: Option<String>| pb::ResetConsumerRequest {
        consumer: key("c"),
        next_snapshot: 5,
        expected_next_snapshot: Some(10),
        force: true,
        execute: true,
        expected_lease_id,
        reason: String::new(),
    };
    let refused = admin
        .reset_consumer(reset(Some(planned_lease.clone())))
        .await
        .unwrap_err();
    assert_eq!(reason(&refused), "LEASE_HELD", "{refused:?}");
    assert_eq!(
        described(&mut admin, "c").await,
        (second.lease_id.clone(), Some(10)),
        "q2 still runs"
    );
    // "No lease expected" refuses too while one is live.
    let refused = admin.reset_consumer(reset(Some(String::new()))).await.unwrap_err();
    assert_eq!(reason(&refused), "LEASE_HELD");
    let refused = admin
        .delete_consumer(pb::DeleteConsumerRequest {
            consumer: key("c"),
            force: true,
            execute: true,
            expected_lease_id: Some(planned_lease.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&refused), "LEASE_HELD");
    let revoke = |expected_lease_id: Option<String>| pb::RevokeLeaseRequest {
        consumer: key("c"),
        reason: "paged".into(),
        execute: true,
        expected_lease_id,
    };
    let refused = admin
        .revoke_lease(revoke(Some(planned_lease.clone())))
        .await
        .unwrap_err();
    assert_eq!(reason(&refused), "LEASE_MISMATCH", "{refused:?}");
    assert_eq!(described(&mut admin, "c").await.0, second.lease_id);
    let bulk = |lease: &str, at: i64| pb::ResetConsumersRequest {
        table: "db.orders".into(),
        branch: "main".into(),
        including: "c".into(),
        target: Some(pb::ResetTarget {
            target: Some(pb::reset_target::Target::Snapshot(3)),
        }),
        force: true,
        execute: true,
        expected_next_snapshots: [("c".to_owned(), at)].into(),
        expected_lease_ids: [("c".to_owned(), lease.to_owned())].into(),
        ..Default::default()
    };
    let skipped = admin
        .reset_consumers(bulk(&planned_lease, 10))
        .await
        .unwrap()
        .into_inner();
    assert!(skipped.reset.is_empty(), "{skipped:?}");
    assert_eq!(skipped.skipped[0].reason, "LEASE_HELD", "{skipped:?}");
    assert_eq!(described(&mut admin, "c").await, (second.lease_id.clone(), Some(10)));

    // The lease the plan saw is the live one: the change goes through.
    admin
        .reset_consumer(reset(Some(second.lease_id.clone())))
        .await
        .unwrap();
    assert_eq!(
        described(&mut admin, "c").await,
        (String::new(), Some(5)),
        "q2 fenced, reset"
    );
    let third = lease(&mut worker, "c", "q3").await;
    let revoked = admin
        .revoke_lease(revoke(Some(third.lease_id.clone())))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(revoked.lease.map(|l| l.lease_id), Some(third.lease_id.clone()));
    let fourth = lease(&mut worker, "c", "q4").await;
    let done = admin
        .reset_consumers(bulk(&fourth.lease_id, 5))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.reset.len(), 1, "{done:?}");

    // A lease id that is not one is INVALID_ARGUMENT naming the field.
    let bad = admin.reset_consumer(reset(Some("nope".into()))).await.unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(bad.message().contains("expected_lease_id"), "{bad:?}");
}
