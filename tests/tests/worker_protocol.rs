//! SPEC §2–§4 end to end: every lease (L), commit (C) and recovery (R) rule
//! over real gRPC (server on an ephemeral port, generated Rust client), on
//! SQLite and on Postgres.

use std::time::Duration;

use tidemark_core::ConsumerKey;
use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends, range, recovery_request, ttl};
use tidemark_proto::v1 as pb;
use tidemark_store::CallContext;
use tonic::Code;

on_both_backends!(
    l1_acquire_grants_epoch_1_and_default_ttl,
    l2_another_holders_live_lease_is_lease_held_with_holder_and_remaining,
    l3_same_holder_takes_over_at_once_and_fences_its_previous_incarnation,
    l4_ttl_is_clamped_to_the_server_bounds,
    l5_renew_extends_a_live_lease_and_refuses_ended_ones,
    l6_release_is_immediate_idempotent_and_keeps_the_consumer,
    l7_commits_renew_the_lease,
    l8_revoked_lease_is_fenced_and_its_epoch_is_burned,
    epochs_are_never_reused_across_holders,
    c1_commit_from_a_fenced_or_expired_lease_changes_nothing,
    c3_decision_table_over_grpc,
    c4_every_write_refreshes_updated_at,
    c5_retries_late_callbacks_and_conflicts,
    c6_no_regression_under_a_lease_but_a_first_write_may_rewind,
    c7_response_fields,
    r1_precedence_checkpoint_consumer_startup,
    r2_consumer_position_expired_or_ahead,
    r3_startup_options,
    r4_checkpoint_replay,
    e5_full_scan_plan_with_a_lease_pins_the_snapshot,
    responses_carry_the_request_id,
);

fn k(id: &str) -> pb::ConsumerKey {
    key("db.orders", "", id)
}

async fn l1_acquire_grants_epoch_1_and_default_ttl(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let w = Worker::acquire(&client, &k("l1"), "query-1", None).await.unwrap();
    assert_eq!(w.lease.epoch, 1);
    assert_eq!(w.lease.ttl, Some(ttl(Duration::from_secs(30))));
    assert_eq!(w.lease.holder, "query-1");
    assert_eq!(
        w.lease.consumer.as_ref().unwrap().branch,
        "main",
        "an empty branch means main"
    );
    assert!(uuid::Uuid::try_parse(&w.lease.lease_id).is_ok());
}

async fn l2_another_holders_live_lease_is_lease_held_with_holder_and_remaining(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    Worker::acquire(&client, &k("l2"), "query-1", None).await.unwrap();
    let before = server.stored(&k("l2")).await;
    let err = api_error(Worker::acquire(&client, &k("l2"), "query-2", None).await);
    assert_eq!(
        (err.code, err.reason.as_str(), err.domain.as_str()),
        (Code::FailedPrecondition, "LEASE_HELD", "tidemark")
    );
    assert_eq!(err.metadata["holder"], "query-1");
    let remaining: u64 = err.metadata["remaining_ms"].parse().unwrap();
    assert!(remaining > 25_000 && remaining <= 30_000, "{remaining}");
    assert_eq!(
        server.stored(&k("l2")).await,
        before,
        "a refused acquire changes nothing"
    );
}

async fn l3_same_holder_takes_over_at_once_and_fences_its_previous_incarnation(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut first = Worker::acquire(&client, &k("l3"), "query-1", None).await.unwrap();
    first.commit(0, offset(3, 0, false, Some(2))).await.unwrap();
    let mut second = Worker::acquire(&client, &k("l3"), "query-1", None).await.unwrap();
    assert_eq!(second.lease.epoch, 2);
    assert_ne!(second.lease.lease_id, first.lease.lease_id);
    let err = api_error(first.commit(1, offset(3, 1, false, Some(2))).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "LEASE_NOT_HELD")
    );
    assert_eq!(err.metadata["current_epoch"], "2");
    assert_eq!(err.metadata["state"], "superseded");
    second.commit(0, offset(3, 1, false, Some(2))).await.unwrap();
}

async fn l4_ttl_is_clamped_to_the_server_bounds(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let cases = [
        (Some(Duration::from_millis(1)), Duration::from_millis(100)),
        (Some(Duration::from_secs(3600)), Duration::from_secs(60)),
        (Some(Duration::from_secs(7)), Duration::from_secs(7)),
        (None, Duration::from_secs(30)),
    ];
    for (i, (requested, granted)) in cases.into_iter().enumerate() {
        let w = Worker::acquire(&client, &k(&format!("l4-{i}")), "q", requested)
            .await
            .unwrap();
        assert_eq!(w.lease.ttl, Some(ttl(granted)), "{requested:?}");
    }
}

async fn l5_renew_extends_a_live_lease_and_refuses_ended_ones(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("l5"), "q", Some(Duration::from_millis(400)))
        .await
        .unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let renewed = w.renew().await.unwrap();
        assert_eq!(renewed.ttl, Some(ttl(Duration::from_millis(400))));
    }
    // Expired.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let err = api_error(w.renew().await);
    assert_eq!(
        (err.reason.as_str(), err.metadata["state"].as_str()),
        ("LEASE_NOT_HELD", "expired")
    );
    assert_eq!(err.metadata["current_epoch"], "1");
    // Released.
    let mut w = Worker::acquire(&client, &k("l5"), "q", None).await.unwrap();
    w.release().await.unwrap();
    let err = api_error(w.renew().await);
    assert_eq!(
        (err.reason.as_str(), err.metadata["state"].as_str()),
        ("LEASE_NOT_HELD", "released")
    );
    // Superseded.
    let mut old = Worker::acquire(&client, &k("l5"), "q", None).await.unwrap();
    Worker::acquire(&client, &k("l5"), "q", None).await.unwrap();
    let err = api_error(old.renew().await);
    assert_eq!(
        (err.reason.as_str(), err.metadata["state"].as_str()),
        ("LEASE_NOT_HELD", "superseded")
    );
    assert_eq!(err.metadata["current_epoch"], "4");
}

async fn l6_release_is_immediate_idempotent_and_keeps_the_consumer(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("l6"), "q1", None).await.unwrap();
    w.commit(0, offset(5, 0, false, Some(1))).await.unwrap();
    assert!(w.release().await.unwrap());
    assert!(!w.release().await.unwrap(), "second release is a no-op");
    let other = Worker::acquire(&client, &k("l6"), "q2", None).await.unwrap();
    assert_eq!(other.lease.epoch, 2, "the key is free at once");
    let (state, _) = server.stored(&k("l6")).await;
    assert_eq!(state.unwrap().next_snapshot(), Some(6), "the consumer record stays");
}

async fn l7_commits_renew_the_lease(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("l7"), "q", Some(Duration::from_millis(400)))
        .await
        .unwrap();
    for batch in 0..5 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let c = w.commit(batch, offset(10 + batch, 0, false, Some(2))).await.unwrap();
        assert_eq!(c.lease_ttl, Some(ttl(Duration::from_millis(400))));
    }
    // 750 ms after acquiring, the lease is still live thanks to the commits.
    w.renew().await.unwrap();
}

async fn l8_revoked_lease_is_fenced_and_its_epoch_is_burned(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("l8"), "q", None).await.unwrap();
    w.commit(0, offset(2, 0, false, Some(1))).await.unwrap();
    let domain_key = ConsumerKey::parse("db.orders", "", "l8", "").unwrap();
    let revoked = server
        .store
        .revoke(&CallContext::internal("op"), &domain_key, "operator", true)
        .await
        .map(|planned| planned.change)
        .unwrap();
    assert_eq!(revoked.epoch, 2);
    let before = server.stored(&k("l8")).await;
    let err = api_error(w.commit(1, offset(3, 0, false, Some(1))).await);
    assert_eq!(
        (err.reason.as_str(), err.metadata["state"].as_str()),
        ("LEASE_NOT_HELD", "revoked")
    );
    assert_eq!(server.stored(&k("l8")).await, before);
    let next = Worker::acquire(&client, &k("l8"), "q", None).await.unwrap();
    assert_eq!(next.lease.epoch, 3, "epoch 2 was burned by the revoke");
}

async fn epochs_are_never_reused_across_holders(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut seen = Vec::new();
    for i in 0..6 {
        let mut w = Worker::acquire(&client, &k("epochs"), &format!("q{}", i % 2), None)
            .await
            .unwrap();
        seen.push(w.lease.epoch);
        w.release().await.unwrap();
    }
    assert_eq!(seen, [1, 2, 3, 4, 5, 6]);
}

async fn c1_commit_from_a_fenced_or_expired_lease_changes_nothing(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("c1"), "q", Some(Duration::from_millis(200)))
        .await
        .unwrap();
    w.commit(0, offset(4, 0, false, Some(3))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = server.stored(&k("c1")).await;
    let err = api_error(w.commit(1, offset(4, 2, false, Some(3))).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "LEASE_NOT_HELD")
    );
    // Even an invalid offset is refused for the lease first (C1 before C2).
    let err = api_error(w.commit(2, offset(0, -3, false, Some(0))).await);
    assert_eq!(err.reason, "LEASE_NOT_HELD");
    assert_eq!(server.stored(&k("c1")).await, before);
}

async fn c3_decision_table_over_grpc(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("c3"), "q", None).await.unwrap();
    let outcome = |c: &pb::CommitBatchResponse| (c.outcome(), c.next_snapshot);
    use pb::CommitOutcome as O;
    // Partway through the initial full scan of snapshot 7: nothing written.
    let c = w.commit(0, offset(7, 1, true, Some(3))).await.unwrap();
    assert_eq!(outcome(&c), (O::UnchangedIncompleteFullScan, None));
    assert!(server.stored(&k("c3")).await.0.unwrap().consumer.is_none());
    // Complete full snapshot 7: 8, created.
    let c = w.commit(1, offset(7, 2, true, Some(3))).await.unwrap();
    assert_eq!(outcome(&c), (O::Created, Some(8)));
    // Partway through delta 8: stays at 8 (refreshed).
    let c = w.commit(2, offset(8, 0, false, Some(2))).await.unwrap();
    assert_eq!(outcome(&c), (O::Refreshed, Some(8)));
    // Complete delta 8: 9.
    let c = w.commit(3, offset(8, 1, false, Some(2))).await.unwrap();
    assert_eq!(outcome(&c), (O::Advanced, Some(9)));
    // Partway through delta 12 (snapshots 9-11 complete on the way): 12.
    let c = w.commit(4, offset(12, -1, false, Some(4))).await.unwrap();
    assert_eq!(outcome(&c), (O::Advanced, Some(12)));
    // No total_splits: unchanged, with a warning.
    let c = w.commit(5, offset(13, 0, false, None)).await.unwrap();
    assert_eq!(outcome(&c), (O::UnchangedLegacyOffset, Some(12)));
    assert!(c.warnings[0].starts_with("LEGACY_OFFSET:"), "{:?}", c.warnings);
    // Partway through delta S on a fresh key: created at S.
    let mut w2 = Worker::acquire(&client, &k("c3-delta"), "q", None).await.unwrap();
    let c = w2.commit(0, offset(5, 1, false, Some(3))).await.unwrap();
    assert_eq!(outcome(&c), (O::Created, Some(5)));
}

async fn c4_every_write_refreshes_updated_at(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("c4"), "q", None).await.unwrap();
    w.commit(0, offset(5, 0, false, Some(3))).await.unwrap();
    let first = server.stored(&k("c4")).await.0.unwrap().consumer.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let c = w.commit(1, offset(5, 1, false, Some(3))).await.unwrap();
    assert_eq!(c.outcome(), pb::CommitOutcome::Refreshed);
    let second = server.stored(&k("c4")).await.0.unwrap().consumer.unwrap();
    assert_eq!(second.next_snapshot, first.next_snapshot);
    assert!(second.updated_at > first.updated_at);
    assert_eq!(second.created_at, first.created_at);
}

async fn c5_retries_late_callbacks_and_conflicts(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("c5"), "q", None).await.unwrap();
    w.commit(10, offset(6, 1, false, Some(2))).await.unwrap();
    let before = server.stored(&k("c5")).await;
    let retry = w.commit(10, offset(6, 1, false, Some(2))).await.unwrap();
    assert_eq!(
        (retry.outcome(), retry.next_snapshot),
        (pb::CommitOutcome::Duplicate, Some(7))
    );
    let late = w.commit(8, offset(5, 0, false, Some(2))).await.unwrap();
    assert_eq!(
        (late.outcome(), late.next_snapshot),
        (pb::CommitOutcome::Duplicate, Some(7))
    );
    let (state, history) = server.stored(&k("c5")).await;
    assert_eq!(
        state.unwrap().consumer,
        before.0.unwrap().consumer,
        "duplicates write no position"
    );
    assert_eq!(history, before.1, "duplicates write no history");
    let err = api_error(w.commit(10, offset(6, 0, false, Some(2))).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "BATCH_CONFLICT")
    );
    // Ids may skip.
    let c = w.commit(15, offset(9, 0, false, Some(2))).await.unwrap();
    assert_eq!(c.next_snapshot, Some(9));
}

async fn c6_no_regression_under_a_lease_but_a_first_write_may_rewind(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client().await;
    let mut w = Worker::acquire(&client, &k("c6"), "q1", None).await.unwrap();
    w.commit(0, offset(30, 0, false, Some(1))).await.unwrap();
    let before = server.stored(&k("c6")).await;
    let err = api_error(w.commit(1, offset(20, 0, false, Some(5))).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "POSITION_REGRESSION")
    );
    assert_eq!(server.stored(&k("c6")).await, before);
    w.release().await.unwrap();
    // A new query restored an older checkpoint: its first write rewinds.
    let mut w2 = Worker::acquire(&client, &k("c6"), "q2", None).await.unwrap();
    let c = w2.commit(0, offset(20, 0, false, Some(5))).await.unwrap();
    assert_eq!(
        (c.outcome(), c.previous_next_snapshot, c.next_snapshot),
        (pb::CommitOutcome::Rewound, Some(31), Some(20))
    );
    let (_, history) = server.stored(&k("c6")).await;
    let rewind = &history[0];
    assert_eq!(rewind.event.kind.as_str(), "REWIND");
    assert_eq!(
        (rewind.event.old_next, rewind.event.new_next, rewind.event.epoch),
        (Some(31), Some(20), Some(2))
    );
}

async fn c7_response_fields(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let w = Worker::acquire(&client, &k("c7"), "q", None).await.unwrap();
    let c = client
        .commit_batch(pb::CommitBatchRequest {
            lease_id: w.lease.lease_id.clone(),
            epoch: w.lease.epoch,
            batch_id: 3,
            end: Some(offset(9, 3, false, Some(4))),
            latest_snapshot: Some(14),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(c.outcome(), pb::CommitOutcome::Created);
    assert_eq!(c.next_snapshot, Some(10));
    assert_eq!(c.previous_next_snapshot, None);
    assert_eq!(c.lease_ttl, Some(ttl(Duration::from_secs(30))));
    assert_eq!(c.lag, Some(5));
    assert!(c.warnings.is_empty());
    let (_, history) = server.stored(&k("c7")).await;
    let h = &history[0];
    assert_eq!(
        (h.event.kind.as_str(), h.event.batch_id, h.event.epoch),
        ("CREATE", Some(3), Some(1))
    );
    assert_eq!(h.principal, "anonymous");
    assert!(!h.request_id.is_empty());
}

async fn r1_precedence_checkpoint_consumer_startup(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("r1");
    // No consumer: startup options.
    let plan = client
        .get_recovery_position(recovery_request(&key, range(1, 10)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.source(), pb::RecoverySource::StartupOptions);
    assert_eq!(plan.start, Some(offset(10, -1, true, None)));
    assert!(plan.consumer.is_none());
    // A consumer wins and is read incrementally, whatever the startup mode.
    let mut w = Worker::acquire(&client, &key, "q", None).await.unwrap();
    w.commit(0, offset(6, 0, false, Some(2))).await.unwrap();
    let mut req = recovery_request(&key, range(1, 10));
    req.startup = Some(pb::StartupOptions {
        mode: pb::StartupMode::FromSnapshotFull.into(),
        snapshot_id: 2,
    });
    let plan = client.get_recovery_position(req.clone()).await.unwrap().into_inner();
    assert_eq!(plan.source(), pb::RecoverySource::Consumer);
    assert_eq!(plan.start, Some(offset(6, -1, false, None)));
    assert_eq!(plan.consumer.as_ref().unwrap().next_snapshot, 6);
    assert_eq!(plan.consumer.as_ref().unwrap().lag, Some(5));
    // ignore_progress: the startup options again.
    req.ignore_progress = true;
    let plan = client.get_recovery_position(req.clone()).await.unwrap().into_inner();
    assert_eq!(
        (plan.source(), plan.start),
        (pb::RecoverySource::StartupOptions, Some(offset(2, -1, true, None)))
    );
    // A checkpoint wins over everything.
    req.ignore_progress = false;
    req.checkpoint = Some(pb::LoggedBatch {
        start: Some(offset(8, 0, false, Some(3))),
        end: Some(offset(8, 2, false, Some(3))),
    });
    let plan = client.get_recovery_position(req).await.unwrap().into_inner();
    assert_eq!(
        (plan.source(), plan.start),
        (pb::RecoverySource::Checkpoint, Some(offset(8, 0, false, Some(3))))
    );
}

async fn r2_consumer_position_expired_or_ahead(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("r2");
    let mut w = Worker::acquire(&client, &key, "q", None).await.unwrap();
    w.commit(0, offset(4, 0, false, Some(2))).await.unwrap();
    // Snapshot 4 expired: DATA_LOSS rather than Paimon's silent clamp.
    let err = api_error(client.get_recovery_position(recovery_request(&key, range(6, 10))).await);
    assert_eq!((err.code, err.reason.as_str()), (Code::DataLoss, "POSITION_EXPIRED"));
    assert_eq!(
        (
            err.metadata["next_snapshot"].as_str(),
            err.metadata["earliest_snapshot"].as_str()
        ),
        ("4", "6")
    );
    // Unless clamping is asked for; then the plan says what was skipped.
    let mut req = recovery_request(&key, range(6, 10));
    req.on_expired = pb::OnExpired::ClampToEarliest.into();
    let plan = client.get_recovery_position(req).await.unwrap().into_inner();
    assert_eq!(plan.start, Some(offset(6, -1, false, None)));
    assert_eq!(plan.skipped, Some(pb::SnapshotInterval { first: 4, last: 5 }));
    assert!(!plan.warnings.is_empty());
    // A decoupled changelog keeps snapshot 4 readable incrementally.
    let mut table = range(6, 10);
    table.earliest_changelog = Some(3);
    table.changelog_decoupled = true;
    let plan = client
        .get_recovery_position(recovery_request(&key, table))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.start, Some(offset(4, -1, false, None)));
    // Beyond latest + 1: the table may have been recreated.
    let err = api_error(client.get_recovery_position(recovery_request(&key, range(1, 2))).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "POSITION_AHEAD_OF_TABLE")
    );
    // latest + 1 is fine (caught up).
    let plan = client
        .get_recovery_position(recovery_request(&key, range(1, 3)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.start, Some(offset(4, -1, false, None)));
}

async fn r3_startup_options(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("r3");
    let plan_for = |mode: pb::StartupMode, snapshot_id: i64, table: pb::SnapshotRange| {
        let mut req = recovery_request(&key, table);
        req.startup = Some(pb::StartupOptions {
            mode: mode.into(),
            snapshot_id,
        });
        req
    };
    let start = |r: pb::GetRecoveryPositionResponse| r.start.unwrap();
    use pb::StartupMode as M;
    let cases = [
        (M::LatestFull, 0, range(2, 9), offset(9, -1, true, None)),
        (M::LatestFull, 0, range(0, 0), offset(1, -1, false, None)),
        (M::Latest, 0, range(2, 9), offset(10, -1, false, None)),
        (M::FromSnapshot, 5, range(2, 9), offset(5, -1, false, None)),
        (M::FromSnapshotFull, 5, range(2, 9), offset(5, -1, true, None)),
        (M::FromSnapshotFull, 1, range(2, 9), offset(2, -1, true, None)),
    ];
    for (mode, id, table, expected) in cases {
        let plan = client
            .get_recovery_position(plan_for(mode, id, table))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(plan.source(), pb::RecoverySource::StartupOptions);
        assert_eq!(start(plan), expected, "{mode:?} {id}");
    }
    let err = api_error(
        client
            .get_recovery_position(plan_for(M::FromSnapshot, 1, range(2, 9)))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (Code::DataLoss, "POSITION_EXPIRED"));
}

async fn r4_checkpoint_replay(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("r4");
    let with_checkpoint = |table: pb::SnapshotRange, start: pb::Offset, end: pb::Offset| {
        let mut req = recovery_request(&key, table);
        req.checkpoint = Some(pb::LoggedBatch {
            start: Some(start),
            end: Some(end),
        });
        req
    };
    // Readable: replayed exactly.
    let plan = client
        .get_recovery_position(with_checkpoint(
            range(5, 9),
            offset(5, 1, false, Some(4)),
            offset(6, 0, false, Some(2)),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (plan.source(), plan.start),
        (pb::RecoverySource::Checkpoint, Some(offset(5, 1, false, Some(4))))
    );
    // Start complete in 4: resume at 5, readable.
    let plan = client
        .get_recovery_position(with_checkpoint(
            range(5, 9),
            offset(4, 1, false, Some(2)),
            offset(5, 0, false, Some(2)),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plan.source(), pb::RecoverySource::Checkpoint);
    // Expired start, no consumer: the latest-full fallback would be a full
    // scan of the end's snapshot, read as a delta in the log.
    let err = api_error(
        client
            .get_recovery_position(with_checkpoint(
                range(6, 8),
                offset(5, 0, false, Some(2)),
                offset(8, 0, false, Some(2)),
            ))
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "REPLAY_SCAN_MISMATCH")
    );
    // Expired start, fallback after the logged end.
    let err = api_error(
        client
            .get_recovery_position(with_checkpoint(
                range(6, 9),
                offset(3, 0, false, Some(2)),
                offset(4, 1, false, Some(2)),
            ))
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::FailedPrecondition, "REPLAY_RANGE_EXPIRED")
    );
    // Expired start, fallback to the consumer before the end: a warning.
    let mut w = Worker::acquire(&client, &key, "q", None).await.unwrap();
    w.commit(0, offset(6, 0, false, Some(2))).await.unwrap();
    let plan = client
        .get_recovery_position(with_checkpoint(
            range(6, 9),
            offset(5, 0, false, Some(2)),
            offset(7, 0, false, Some(2)),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (plan.source(), plan.start),
        (pb::RecoverySource::Consumer, Some(offset(6, -1, false, None)))
    );
    assert!(
        plan.warnings.iter().any(|w| w.starts_with("CHECKPOINT_EXPIRED:")),
        "{:?}",
        plan.warnings
    );
}

async fn e5_full_scan_plan_with_a_lease_pins_the_snapshot(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let key = k("e5");
    let mut w = Worker::acquire(&client, &key, "q", None).await.unwrap();
    let mut req = recovery_request(&key, range(1, 12));
    req.lease_id = Some(w.lease.lease_id.clone());
    let plan = client.get_recovery_position(req).await.unwrap().into_inner();
    assert!(plan.pinned);
    assert_eq!(plan.start, Some(offset(12, -1, true, None)));
    let lease = server.stored(&key).await.0.unwrap().lease.unwrap();
    assert_eq!(lease.full_scan_pin, Some(12));
    w.commit(0, offset(12, 1, true, Some(2))).await.unwrap();
    let lease = server.stored(&key).await.0.unwrap().lease.unwrap();
    assert_eq!(lease.full_scan_pin, None, "the scan completed");
}

async fn responses_carry_the_request_id(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut client = server.client().await;
    let mut request = tonic::Request::new(pb::AcquireLeaseRequest {
        consumer: Some(k("rid")),
        holder: "q".into(),
        ttl: None,
    });
    request
        .metadata_mut()
        .insert("x-request-id", "trace-42".parse().unwrap());
    let response = client.acquire_lease(request).await.unwrap();
    assert_eq!(response.metadata().get("x-request-id").unwrap(), "trace-42");
    let (_, history) = server.stored(&k("rid")).await;
    assert_eq!(history[0].request_id, "trace-42");
    let mut request = tonic::Request::new(pb::AcquireLeaseRequest {
        consumer: Some(k("rid")),
        holder: "other".into(),
        ttl: None,
    });
    request
        .metadata_mut()
        .insert("x-request-id", "trace-43".parse().unwrap());
    let status = client.acquire_lease(request).await.unwrap_err();
    assert_eq!(status.metadata().get("x-request-id").unwrap(), "trace-43");
}
