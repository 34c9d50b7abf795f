//! The scenarios of `seed/streaming-recovery.md`, end to end over gRPC on
//! SQLite and Postgres, played the way a Spark-like worker would.

use std::time::Duration;

use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends, range, recovery_request};
use tidemark_proto::v1 as pb;
use tonic::Code;

on_both_backends!(
    initial_full_scan_creates_no_consumer_until_its_last_split_commits,
    batch_ending_partway_through_a_delta_keeps_the_snapshot_and_recovery_replays_it,
    legacy_offset_changes_nothing_and_warns,
    second_query_is_refused_then_takes_over_after_expiry_and_fences_the_first,
    late_commit_for_an_older_batch_is_a_no_op,
    ignore_progress_starts_from_the_startup_options,
    logged_batch_mixing_scan_kinds_in_one_snapshot_fails,
);

fn k(id: &str) -> pb::ConsumerKey {
    key("warehouse.events", "", id)
}

/// "the default latest-full mode first reads the full snapshot and creates the
/// Consumer only after that snapshot is completely committed"
async fn initial_full_scan_creates_no_consumer_until_its_last_split_commits(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("full-scan");
    let mut w = Worker::acquire(&client, &key, "query-a", None).await.unwrap();
    let mut plan_req = recovery_request(&key, range(1, 7));
    plan_req.lease_id = Some(w.lease.lease_id.clone());
    let plan = client.get_recovery_position(plan_req).await.unwrap().into_inner();
    assert_eq!(
        plan.start,
        Some(offset(7, -1, true, None)),
        "latest-full: a full scan of latest"
    );

    for (batch, index) in [(0, 1), (1, 3)] {
        let c = w.commit(batch, offset(7, index, true, Some(5))).await.unwrap();
        assert_eq!(c.outcome(), pb::CommitOutcome::UnchangedIncompleteFullScan);
        assert_eq!(c.next_snapshot, None);
        assert!(
            server.stored(&key).await.0.unwrap().consumer.is_none(),
            "no consumer yet"
        );
    }
    // A restart without a checkpoint now repeats the full scan (no consumer).
    let plan = client
        .get_recovery_position(recovery_request(&key, range(1, 7)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.source(), pb::RecoverySource::StartupOptions);

    let c = w.commit(2, offset(7, 4, true, Some(5))).await.unwrap();
    assert_eq!(
        (c.outcome(), c.next_snapshot),
        (pb::CommitOutcome::Created, Some(8)),
        "latest + 1"
    );
    let plan = client
        .get_recovery_position(recovery_request(&key, range(1, 9)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (plan.source(), plan.start),
        (pb::RecoverySource::Consumer, Some(offset(8, -1, false, None)))
    );
}

/// "When a micro-batch ends partway through a delta snapshot, the Consumer may
/// be created or refreshed at that snapshot so that the whole snapshot remains
/// protected and can be replayed."
async fn batch_ending_partway_through_a_delta_keeps_the_snapshot_and_recovery_replays_it(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("partial-delta");
    let mut w = Worker::acquire(&client, &key, "query-a", None).await.unwrap();
    let c = w.commit(0, offset(11, 1, false, Some(4))).await.unwrap();
    assert_eq!(
        (c.outcome(), c.next_snapshot),
        (pb::CommitOutcome::Created, Some(11)),
        "created at S"
    );
    let c = w.commit(1, offset(11, 2, false, Some(4))).await.unwrap();
    assert_eq!(
        (c.outcome(), c.next_snapshot),
        (pb::CommitOutcome::Refreshed, Some(11)),
        "refreshed at S"
    );
    let c = w.commit(2, offset(12, 1, false, Some(6))).await.unwrap();
    assert_eq!(
        (c.outcome(), c.next_snapshot),
        (pb::CommitOutcome::Advanced, Some(12)),
        "never past S"
    );
    // The query dies; a new one without a checkpoint resumes at 12, a delta.
    drop(w);
    let plan = client
        .get_recovery_position(recovery_request(&key, range(5, 14)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.source(), pb::RecoverySource::Consumer);
    assert_eq!(plan.start, Some(offset(12, -1, false, None)));
}

/// "Offsets restored from an older Spark checkpoint do not contain snapshot
/// completion metadata. Spark logs a warning and leaves the Consumer
/// unchanged."
async fn legacy_offset_changes_nothing_and_warns(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let key = k("legacy");
    let mut w = Worker::acquire(&client, &key, "query-a", None).await.unwrap();
    w.commit(0, offset(3, 0, false, Some(1))).await.unwrap();
    let before = server.stored(&key).await;
    let c = w.commit(1, offset(4, 5, false, None)).await.unwrap();
    assert_eq!(
        (c.outcome(), c.next_snapshot),
        (pb::CommitOutcome::UnchangedLegacyOffset, Some(4))
    );
    assert_eq!(c.warnings.len(), 1);
    assert!(c.warnings[0].contains("total_splits"), "{}", c.warnings[0]);
    let (state, history) = server.stored(&key).await;
    assert_eq!(
        state.as_ref().unwrap().consumer,
        before.0.unwrap().consumer,
        "position and updated_at unchanged"
    );
    assert_eq!(history, before.1, "no history row: nothing changed");
}

/// "Use one active Spark query for each (table, branch, consumer-id)
/// combination" — enforced: a second query is refused while the first lease
/// is live, takes over once it expires, and the first query is then fenced.
async fn second_query_is_refused_then_takes_over_after_expiry_and_fences_the_first(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let key = k("ownership");
    let mut first = Worker::acquire(&client, &key, "query-a", Some(Duration::from_millis(300)))
        .await
        .unwrap();
    first.commit(0, offset(20, 0, false, Some(2))).await.unwrap();

    let err = api_error(Worker::acquire(&client, &key, "query-b", None).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "LEASE_HELD")
    );
    assert_eq!(err.metadata["holder"], "query-a");

    // query-a stalls past its ttl; query-b takes over.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut second = Worker::acquire(&client, &key, "query-b", None).await.unwrap();
    assert!(second.lease.epoch > first.lease.epoch);

    // query-a wakes up: its commit is rejected and changes nothing.
    let before = server.stored(&key).await;
    let err = api_error(first.commit(1, offset(25, 0, false, Some(2))).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "LEASE_NOT_HELD")
    );
    assert_eq!(server.stored(&key).await, before);
    let err = api_error(first.renew().await);
    assert_eq!(err.reason, "LEASE_NOT_HELD");

    let c = second.commit(0, offset(21, 0, false, Some(2))).await.unwrap();
    assert_eq!(c.next_snapshot, Some(21));
}

/// "Spark can invoke the source commit callback while constructing a later
/// micro-batch" — a late callback for an older batch is a no-op.
async fn late_commit_for_an_older_batch_is_a_no_op(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let key = k("late");
    let mut w = Worker::acquire(&client, &key, "query-a", None).await.unwrap();
    w.commit(4, offset(9, 1, false, Some(2))).await.unwrap();
    let before = server.stored(&key).await;
    let c = w.commit(3, offset(8, 0, false, Some(2))).await.unwrap();
    assert_eq!((c.outcome(), c.next_snapshot), (pb::CommitOutcome::Duplicate, Some(10)));
    let (state, history) = server.stored(&key).await;
    assert_eq!(state.unwrap().consumer, before.0.unwrap().consumer);
    assert_eq!(history, before.1);
}

/// "If the Consumer already exists, its next snapshot takes precedence over
/// startup options and is read incrementally, unless consumer.ignore-progress
/// is enabled."
async fn ignore_progress_starts_from_the_startup_options(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("ignore");
    let mut w = Worker::acquire(&client, &key, "query-a", None).await.unwrap();
    w.commit(0, offset(5, 0, false, Some(1))).await.unwrap();
    w.release().await.unwrap();
    let mut req = recovery_request(&key, range(1, 9));
    req.ignore_progress = true;
    req.startup = Some(pb::StartupOptions {
        mode: pb::StartupMode::Latest.into(),
        snapshot_id: 0,
    });
    let plan = client.get_recovery_position(req).await.unwrap().into_inner();
    assert_eq!(plan.source(), pb::RecoverySource::StartupOptions);
    assert_eq!(plan.start, Some(offset(10, -1, false, None)));
    assert_eq!(
        plan.consumer.map(|c| c.next_snapshot),
        Some(6),
        "the consumer is still reported"
    );
}

/// "When expired data would force recovery of a logged Spark batch to switch
/// between a full and an incremental scan, Paimon fails the query instead of
/// combining the two plans."
async fn logged_batch_mixing_scan_kinds_in_one_snapshot_fails(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("mix");
    let mut req = recovery_request(&key, range(1, 9));
    req.checkpoint = Some(pb::LoggedBatch {
        start: Some(offset(6, 2, true, Some(5))),
        end: Some(offset(6, 4, false, Some(5))),
    });
    let err = api_error(client.get_recovery_position(req).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "REPLAY_SCAN_MISMATCH")
    );
    assert!(
        err.message.contains("new query with a new checkpoint"),
        "{}",
        err.message
    );
}
