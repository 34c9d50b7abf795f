//! SPEC §2 (L1–L8) and §3 (C1–C7): one test per rule and per decision-table
//! row, on the pure rules with an explicit clock.

use std::time::Duration;

use tidemark_core::commit::{self, CommitBatch, CommitOutcome, Target};
use tidemark_core::lease::{self, LeasePolicy, LeaseRequest};
use tidemark_core::{ConsumerKey, CoreError, EventKind, KeyState, LeaseLoss, Offset, Timestamp};
use uuid::Uuid;

const SEC: i64 = 1_000_000;

fn key() -> ConsumerKey {
    ConsumerKey::parse("db.orders", "", "spark-1", "consumer").unwrap()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000 * SEC + seconds * SEC)
}

fn policy() -> LeasePolicy {
    LeasePolicy::default()
}

fn lease_id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// A key with a fresh 30 s lease granted at t=0 to `holder-a` (epoch 1).
fn leased() -> KeyState {
    lease::acquire(
        None,
        &key(),
        LeaseRequest {
            holder: "holder-a",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(1),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(0),
    )
    .unwrap()
    .write
    .unwrap()
}

/// `holder` takes the key's lease (lease id `n`, default ttl) at `now`.
fn granted(state: &KeyState, holder: &str, n: u128, now: Timestamp) -> KeyState {
    let request = LeaseRequest {
        holder,
        principal: "anonymous",
        ttl: None,
        lease_id: lease_id(n),
        caller: &tidemark_core::Caller::UNKNOWN,
    };
    lease::acquire(Some(state), &key(), request, &policy(), None, now)
        .unwrap()
        .write
        .unwrap()
}

fn off(snapshot_id: i64, index: i64, full: bool, total: Option<i64>) -> Offset {
    Offset {
        snapshot_id,
        index,
        scan_snapshot: full,
        total_splits: total,
    }
}

fn req(state: &KeyState, batch_id: i64, end: Offset) -> CommitBatch {
    let lease = state.lease.as_ref().unwrap();
    CommitBatch {
        lease_id: lease.lease_id,
        epoch: lease.epoch,
        batch_id,
        end: Some(end),
        latest_snapshot: None,
    }
}

/// Applies a commit and returns the new state plus the outcome.
fn apply(state: &KeyState, batch_id: i64, end: Offset, now: Timestamp) -> (KeyState, CommitOutcome) {
    let t = commit::commit(Some(state), &req(state, batch_id, end), now).unwrap();
    let outcome = t.output.outcome;
    (t.write.unwrap(), outcome)
}

fn commit_err(state: &KeyState, batch_id: i64, end: Offset, now: Timestamp) -> CoreError {
    commit::commit(Some(state), &req(state, batch_id, end), now).unwrap_err()
}

// ---------------------------------------------------------------- leases

#[test]
fn l1_acquire_on_a_fresh_key_grants_epoch_1() {
    let t = lease::acquire(
        None,
        &key(),
        LeaseRequest {
            holder: "holder-a",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(1),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(0),
    )
    .unwrap();
    let l = &t.output.lease;
    assert_eq!((l.epoch, l.ttl, l.deadline), (1, Duration::from_secs(30), at(30)));
    assert!(!t.output.takeover);
    assert_eq!(t.events[0].kind, EventKind::LeaseAcquire);
    assert_eq!(t.write.unwrap().epoch, 1);
}

#[test]
fn l1_l2_a_live_lease_of_another_holder_is_refused_with_holder_and_remaining() {
    let state = leased();
    let err = lease::acquire(
        Some(&state),
        &key(),
        LeaseRequest {
            holder: "holder-b",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(10),
    )
    .unwrap_err();
    match &err {
        CoreError::LeaseHeld {
            holder,
            remaining,
            epoch,
            ..
        } => {
            assert_eq!(holder, "holder-a");
            assert_eq!(*remaining, Duration::from_secs(20));
            assert_eq!(*epoch, 1);
        }
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
    assert_eq!(err.reason(), "LEASE_HELD");
    let meta = err.metadata();
    assert!(meta.contains(&("holder", "holder-a".to_owned())));
    assert!(meta.contains(&("remaining_ms", "20000".to_owned())));
}

#[test]
fn l1_after_expiry_another_holder_takes_the_key_with_a_higher_epoch() {
    let state = leased();
    let t = lease::acquire(
        Some(&state),
        &key(),
        LeaseRequest {
            holder: "holder-b",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(30),
    )
    .unwrap();
    assert_eq!(t.output.lease.epoch, 2);
    assert!(t.output.takeover, "the expired lease was never released");
    assert_eq!(t.output.previous_epoch, Some(1));
    assert_eq!(t.events[0].kind, EventKind::LeaseTakeover);
}

#[test]
fn l3_same_holder_takes_over_a_live_lease_with_a_new_epoch_and_fences_the_old_one() {
    let state = leased();
    let t = lease::acquire(
        Some(&state),
        &key(),
        LeaseRequest {
            holder: "holder-a",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(5),
    )
    .unwrap();
    assert_eq!(t.output.lease.epoch, 2);
    assert_ne!(t.output.lease.lease_id, lease_id(1));
    assert!(t.output.takeover);
    let after = t.write.unwrap();
    let err = lease::check_lease(Some(&after), lease_id(1), 1, at(6)).unwrap_err();
    assert!(matches!(
        err,
        CoreError::LeaseNotHeld {
            loss: LeaseLoss::Superseded,
            current_epoch: Some(2),
            ..
        }
    ));
}

#[test]
fn l4_ttl_is_clamped_to_the_policy() {
    let p = policy();
    assert_eq!(p.clamp(None), Duration::from_secs(30));
    assert_eq!(p.clamp(Some(Duration::ZERO)), Duration::from_secs(30));
    assert_eq!(p.clamp(Some(Duration::from_millis(1))), Duration::from_secs(5));
    assert_eq!(p.clamp(Some(Duration::from_secs(3600))), Duration::from_secs(600));
    assert_eq!(p.clamp(Some(Duration::from_secs(42))), Duration::from_secs(42));
    let t = lease::acquire(
        None,
        &key(),
        LeaseRequest {
            holder: "h",
            principal: "anonymous",
            ttl: Some(Duration::from_secs(1)),
            lease_id: lease_id(1),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &p,
        None,
        at(0),
    )
    .unwrap();
    assert_eq!(t.output.lease.deadline, at(5));
}

#[test]
fn l4_policy_rejects_inconsistent_bounds() {
    let bad = LeasePolicy {
        min_ttl: Duration::from_secs(10),
        max_ttl: Duration::from_secs(5),
        default_ttl: Duration::from_secs(7),
    };
    assert!(bad.validate().is_err());
    assert!(policy().validate().is_ok());
}

#[test]
fn l5_renew_extends_a_live_lease() {
    let state = leased();
    let t = lease::renew(Some(&state), lease_id(1), 1, None, &policy(), at(20)).unwrap();
    assert_eq!(t.output, Duration::from_secs(30));
    assert_eq!(t.write.unwrap().lease.unwrap().deadline, at(50));
    let t = lease::renew(
        Some(&state),
        lease_id(1),
        1,
        Some(Duration::from_secs(60)),
        &policy(),
        at(20),
    )
    .unwrap();
    assert_eq!(t.write.unwrap().lease.unwrap().deadline, at(80));
}

#[test]
fn l5_renew_of_an_expired_released_revoked_or_superseded_lease_is_lease_not_held() {
    let state = leased();
    let loss = |s: &KeyState, id: Uuid, epoch: i64, now: Timestamp| match lease::renew(
        Some(s),
        id,
        epoch,
        None,
        &policy(),
        now,
    ) {
        Err(CoreError::LeaseNotHeld { loss, .. }) => loss,
        other => panic!("expected LeaseNotHeld, got {other:?}"),
    };
    assert_eq!(loss(&state, lease_id(1), 1, at(30)), LeaseLoss::Expired);
    let released = lease::release(Some(&state), lease_id(1), 1, at(1)).write.unwrap();
    assert_eq!(loss(&released, lease_id(1), 1, at(2)), LeaseLoss::Released);
    let revoked = lease::revoke(Some(&state), at(1), "test").unwrap().write.unwrap();
    assert_eq!(loss(&revoked, lease_id(1), 1, at(2)), LeaseLoss::Revoked);
    let taken = lease::acquire(
        Some(&state),
        &key(),
        LeaseRequest {
            holder: "holder-a",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(1),
    )
    .unwrap()
    .write
    .unwrap();
    assert_eq!(loss(&taken, lease_id(1), 1, at(2)), LeaseLoss::Superseded);
    assert_eq!(loss(&state, lease_id(1), 7, at(2)), LeaseLoss::EpochMismatch);
    assert!(matches!(
        lease::renew(None, lease_id(9), 1, None, &policy(), at(0)),
        Err(CoreError::LeaseNotHeld {
            loss: LeaseLoss::Unknown,
            current_epoch: None,
            ..
        })
    ));
}

#[test]
fn l6_release_ends_the_lease_at_once_is_idempotent_and_keeps_the_consumer() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(4, 0, false, Some(1)), at(1));
    let t = lease::release(Some(&state), lease_id(1), 1, at(2));
    assert!(t.output);
    assert_eq!(t.events[0].kind, EventKind::LeaseRelease);
    let released = t.write.unwrap();
    assert_eq!(released.next_snapshot(), Some(5), "the consumer record stays");
    assert!(released.live_lease(at(2)).is_none());
    let again = lease::release(Some(&released), lease_id(1), 1, at(3));
    assert!(!again.output);
    assert!(again.write.is_none(), "a second release changes nothing");
    // The key is free at once for another holder.
    let t = lease::acquire(
        Some(&released),
        &key(),
        LeaseRequest {
            holder: "holder-b",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(3),
    )
    .unwrap();
    assert!(!t.output.takeover);
    assert_eq!(t.output.lease.epoch, 2);
}

#[test]
fn l7_a_successful_commit_renews_the_lease() {
    let state = leased();
    let t = commit::commit(Some(&state), &req(&state, 0, off(3, 0, false, Some(2))), at(25)).unwrap();
    assert_eq!(t.output.lease_ttl, Duration::from_secs(30));
    assert_eq!(t.write.unwrap().lease.unwrap().deadline, at(55));
}

#[test]
fn l8_revoke_ends_the_lease_and_burns_an_epoch_that_is_never_reused() {
    let state = leased();
    let t = lease::revoke(Some(&state), at(3), "operator").unwrap();
    assert_eq!(t.output.epoch, 2);
    assert_eq!(t.events[0].kind, EventKind::LeaseRevoke);
    let revoked = t.write.unwrap();
    assert!(revoked.live_lease(at(3)).is_none());
    let next = lease::acquire(
        Some(&revoked),
        &key(),
        LeaseRequest {
            holder: "holder-a",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(4),
    )
    .unwrap();
    assert_eq!(next.output.lease.epoch, 3);
    // Nothing to revoke: no change.
    assert!(lease::revoke(Some(&revoked), at(5), "again").unwrap().write.is_none());
}

// ---------------------------------------------------------------- C1, C2

#[test]
fn c1_a_fenced_or_expired_lease_never_changes_the_consumer() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(3, 0, false, Some(1)), at(1));
    // Expired.
    let err = commit_err(&state, 1, off(4, 0, false, Some(1)), at(31));
    assert!(matches!(
        err,
        CoreError::LeaseNotHeld {
            loss: LeaseLoss::Expired,
            ..
        }
    ));
    // Superseded by a takeover.
    let old = req(&state, 1, off(4, 0, false, Some(1)));
    let taken = lease::acquire(
        Some(&state),
        &key(),
        LeaseRequest {
            holder: "holder-b",
            principal: "anonymous",
            ttl: None,
            lease_id: lease_id(2),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy(),
        None,
        at(40),
    )
    .unwrap()
    .write
    .unwrap();
    let err = commit::commit(Some(&taken), &old, at(41)).unwrap_err();
    assert_eq!(err.reason(), "LEASE_NOT_HELD");
    assert!(err.metadata().contains(&("current_epoch", "2".to_owned())));
}

#[test]
fn c1_lease_check_comes_before_offset_validation() {
    let state = leased();
    let err = commit_err(&state, 0, off(0, -5, false, Some(0)), at(31));
    assert_eq!(err.reason(), "LEASE_NOT_HELD");
}

#[test]
fn c2_invalid_offsets_are_invalid_argument_naming_the_field() {
    let state = leased();
    let cases = [
        (off(0, 0, false, Some(1)), "end.snapshot_id"),
        (off(3, -2, false, Some(1)), "end.index"),
        (off(3, 0, false, Some(0)), "end.total_splits"),
        (off(3, 2, false, Some(2)), "end.index"),
    ];
    for (end, field) in cases {
        match commit_err(&state, 0, end, at(1)) {
            CoreError::InvalidArgument(v) => assert_eq!(v[0].field, field, "{end:?}"),
            other => panic!("expected InvalidArgument for {end:?}, got {other:?}"),
        }
    }
    let mut missing = req(&state, 0, off(1, 0, false, Some(1)));
    missing.end = None;
    assert!(matches!(
        commit::commit(Some(&state), &missing, at(1)),
        Err(CoreError::InvalidArgument(v)) if v[0].field == "end"
    ));
}

/// A batch cannot end past the latest snapshot its own request reports:
/// the pair contradicts itself (issue 34), so it is refused naming
/// `latest_snapshot` and changes nothing. An end at the start of the next
/// snapshot (nothing of it read, as a `latest` startup begins) is latest + 1
/// and stands.
#[test]
fn c2_an_end_past_the_reported_latest_snapshot_is_invalid_argument() {
    let state = leased();
    let contradicting = [
        (off(30, 0, false, Some(1)), 5),  // snapshot 30 read whole, 5 the latest
        (off(30, 0, false, Some(4)), 29), // partway through 30, 29 the latest
        (off(7, -1, true, None), 6),      // a full scan of 7, 6 the latest
        (off(8, -1, false, None), 6),     // the start of 8, 6 the latest
    ];
    for (end, latest) in contradicting {
        let mut request = req(&state, 0, end);
        request.latest_snapshot = Some(latest);
        match commit::commit(Some(&state), &request, at(1)) {
            Err(CoreError::InvalidArgument(v)) => {
                assert_eq!(v[0].field, "latest_snapshot", "{end:?}");
                assert!(
                    v[0].description.contains(&end.snapshot_id.to_string()),
                    "{}",
                    v[0].description
                );
            }
            other => panic!("expected InvalidArgument for {end:?} with latest {latest}, got {other:?}"),
        }
    }
    let consistent = [
        (off(5, 0, false, Some(1)), 5),
        (off(6, -1, false, None), 5),
        (off(5, -1, true, None), 5),
        (off(3, 1, false, Some(4)), 5),
    ];
    for (end, latest) in consistent {
        let mut request = req(&state, 0, end);
        request.latest_snapshot = Some(latest);
        let t = commit::commit(Some(&state), &request, at(1));
        assert!(t.is_ok(), "{end:?} with latest {latest}: {t:?}");
    }
}

// ---------------------------------------------------------------- C3 table

#[test]
fn c3_decision_table_targets() {
    assert_eq!(commit::target(&off(5, 3, true, Some(4))), Target::Next(6));
    assert_eq!(commit::target(&off(5, 3, false, Some(4))), Target::Next(6));
    assert_eq!(commit::target(&off(5, 1, false, Some(4))), Target::Next(5));
    assert_eq!(commit::target(&off(5, -1, false, Some(4))), Target::Next(5));
    assert_eq!(commit::target(&off(5, 1, true, Some(4))), Target::IncompleteFullScan);
    assert_eq!(commit::target(&off(5, -1, true, Some(4))), Target::IncompleteFullScan);
    assert_eq!(commit::target(&off(5, 3, false, None)), Target::LegacyOffset);
    assert_eq!(commit::target(&off(5, 3, true, None)), Target::LegacyOffset);
}

#[test]
fn c3_complete_full_snapshot_creates_the_consumer_at_s_plus_1() {
    let state = leased();
    let (after, outcome) = apply(&state, 0, off(7, 2, true, Some(3)), at(1));
    assert_eq!(outcome, CommitOutcome::Created);
    assert_eq!(after.next_snapshot(), Some(8));
}

#[test]
fn c3_complete_delta_snapshot_advances_to_s_plus_1() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(7, 0, false, Some(3)), at(1));
    assert_eq!(state.next_snapshot(), Some(7));
    let (after, outcome) = apply(&state, 1, off(7, 2, false, Some(3)), at(2));
    assert_eq!(outcome, CommitOutcome::Advanced);
    assert_eq!(after.next_snapshot(), Some(8));
}

#[test]
fn c3_partway_through_delta_creates_refreshes_or_advances_to_s() {
    let state = leased();
    let (state, outcome) = apply(&state, 0, off(9, 0, false, Some(4)), at(1));
    assert_eq!((outcome, state.next_snapshot()), (CommitOutcome::Created, Some(9)));
    let (state, outcome) = apply(&state, 1, off(9, 2, false, Some(4)), at(2));
    assert_eq!((outcome, state.next_snapshot()), (CommitOutcome::Refreshed, Some(9)));
    let (state, outcome) = apply(&state, 2, off(11, 1, false, Some(4)), at(3));
    assert_eq!((outcome, state.next_snapshot()), (CommitOutcome::Advanced, Some(11)));
}

#[test]
fn c3_partway_through_initial_full_scan_writes_nothing_and_creates_no_consumer() {
    let state = leased();
    let t = commit::commit(Some(&state), &req(&state, 0, off(5, 1, true, Some(4))), at(1)).unwrap();
    assert_eq!(t.output.outcome, CommitOutcome::UnchangedIncompleteFullScan);
    assert_eq!(t.output.next_snapshot, None);
    assert!(t.events.is_empty());
    let after = t.write.unwrap();
    assert_eq!(after.consumer, None);
    assert_eq!(after.lease.as_ref().unwrap().full_scan_pin, Some(5), "E5 pin");
    // The last split creates the consumer at latest + 1 and lifts the pin.
    let (after, outcome) = apply(&after, 1, off(5, 3, true, Some(4)), at(2));
    assert_eq!((outcome, after.next_snapshot()), (CommitOutcome::Created, Some(6)));
    assert_eq!(after.lease.unwrap().full_scan_pin, None);
}

#[test]
fn c3_legacy_offset_writes_nothing_and_warns_logging_once_per_snapshot() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(3, 0, false, Some(1)), at(1));
    let t = commit::commit(Some(&state), &req(&state, 1, off(4, 2, false, None)), at(2)).unwrap();
    assert_eq!(t.output.outcome, CommitOutcome::UnchangedLegacyOffset);
    assert_eq!(t.output.next_snapshot, Some(4));
    assert!(t.output.warnings[0].starts_with("LEGACY_OFFSET:"));
    assert!(t.output.first_legacy_offset);
    assert!(t.events.is_empty());
    let after = t.write.unwrap();
    assert_eq!(after.consumer, state.consumer, "consumer unchanged, updated_at too");
    let t = commit::commit(Some(&after), &req(&after, 2, off(4, 3, false, None)), at(3)).unwrap();
    assert!(!t.output.first_legacy_offset, "same snapshot: logged once");
    assert_eq!(t.output.warnings.len(), 1, "but every response warns");
    let after = t.write.unwrap();
    let t = commit::commit(Some(&after), &req(&after, 3, off(5, 0, false, None)), at(4)).unwrap();
    assert!(t.output.first_legacy_offset, "a new snapshot is logged again");
}

#[test]
fn c4_every_write_refreshes_updated_at_even_when_unchanged() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(9, 0, false, Some(4)), at(1));
    let (after, outcome) = apply(&state, 1, off(9, 1, false, Some(4)), at(7));
    assert_eq!(outcome, CommitOutcome::Refreshed);
    let c = after.consumer.unwrap();
    assert_eq!((c.next_snapshot, c.created_at, c.updated_at), (9, at(1), at(7)));
}

// ---------------------------------------------------------------- C5, C6, C7

#[test]
fn c5_retry_and_late_callbacks_are_duplicates_and_change_nothing() {
    let state = leased();
    let (state, _) = apply(&state, 5, off(9, 1, false, Some(4)), at(1));
    for (batch_id, end) in [(5, off(9, 1, false, Some(4))), (3, off(8, 0, false, Some(1)))] {
        let t = commit::commit(Some(&state), &req(&state, batch_id, end), at(2)).unwrap();
        assert_eq!(t.output.outcome, CommitOutcome::Duplicate);
        assert_eq!(t.output.next_snapshot, Some(9));
        assert!(t.events.is_empty());
        let after = t.write.unwrap();
        assert_eq!(after.consumer, state.consumer);
        assert_eq!(
            after.lease.as_ref().unwrap().last_batch,
            state.lease.as_ref().unwrap().last_batch
        );
    }
}

#[test]
fn c5_same_batch_id_with_another_end_is_batch_conflict() {
    let state = leased();
    let (state, _) = apply(&state, 5, off(9, 1, false, Some(4)), at(1));
    let err = commit_err(&state, 5, off(9, 2, false, Some(4)), at(2));
    assert_eq!(err.reason(), "BATCH_CONFLICT");
}

#[test]
fn c5_unchanged_outcomes_are_remembered_as_the_last_batch() {
    let state = leased();
    let (state, outcome) = apply(&state, 0, off(5, 1, true, Some(4)), at(1));
    assert_eq!(outcome, CommitOutcome::UnchangedIncompleteFullScan);
    assert_eq!(
        commit_err(&state, 0, off(5, 2, true, Some(4)), at(2)).reason(),
        "BATCH_CONFLICT"
    );
}

#[test]
fn c5_batch_ids_may_skip() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(3, 0, false, Some(2)), at(1));
    let (state, outcome) = apply(&state, 7, off(3, 1, false, Some(2)), at(2));
    assert_eq!((outcome, state.next_snapshot()), (CommitOutcome::Advanced, Some(4)));
}

#[test]
fn c6_position_never_moves_back_under_a_lease_that_wrote() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(9, 3, false, Some(4)), at(1));
    let err = commit_err(&state, 1, off(7, 0, false, Some(4)), at(2));
    assert_eq!(
        err,
        CoreError::PositionRegression {
            current: 10,
            computed: 7
        }
    );
    assert_eq!(err.reason(), "POSITION_REGRESSION");
}

#[test]
fn c6_a_leases_first_write_may_rewind_and_is_recorded() {
    let state = leased();
    let (state, _) = apply(&state, 0, off(20, 0, false, Some(1)), at(1));
    let released = lease::release(Some(&state), lease_id(1), 1, at(2)).write.unwrap();
    let restarted = granted(&released, "holder-b", 2, at(3));
    let t = commit::commit(Some(&restarted), &req(&restarted, 0, off(12, 0, false, Some(3))), at(4)).unwrap();
    assert_eq!(t.output.outcome, CommitOutcome::Rewound);
    assert_eq!(t.output.previous_next_snapshot, Some(21));
    assert_eq!(t.output.next_snapshot, Some(12));
    assert_eq!(t.events[0].kind, EventKind::Rewind);
    assert_eq!((t.events[0].old_next, t.events[0].new_next), (Some(21), Some(12)));
    // After that first write, moving back is a regression again.
    let after = t.write.unwrap();
    assert_eq!(
        commit_err(&after, 1, off(11, 0, false, Some(3)), at(5)).reason(),
        "POSITION_REGRESSION"
    );
}

#[test]
fn c7_response_carries_outcome_position_ttl_lag_and_history_with_batch() {
    let state = leased();
    let mut r = req(&state, 4, off(9, 3, false, Some(4)));
    r.latest_snapshot = Some(12);
    let t = commit::commit(Some(&state), &r, at(10)).unwrap();
    assert_eq!(t.output.outcome, CommitOutcome::Created);
    assert_eq!(t.output.next_snapshot, Some(10));
    assert_eq!(t.output.previous_next_snapshot, None);
    assert_eq!(t.output.lease_ttl, Duration::from_secs(30));
    assert_eq!(t.output.lag, Some(3));
    let e = &t.events[0];
    assert_eq!((e.kind, e.batch_id, e.epoch), (EventKind::Create, Some(4), Some(1)));
    assert_eq!(e.lease_id, Some(lease_id(1)));
}

// ------------------------------------------------------- names and history

#[test]
fn c3_every_write_is_recorded_with_its_own_event_and_outcome() {
    let state = leased();
    let (created, outcome) = apply(&state, 0, off(4, 0, false, Some(2)), at(1));
    assert_eq!(outcome, CommitOutcome::Created);
    let cases = [
        (
            1,
            off(4, 1, false, Some(2)),
            CommitOutcome::Advanced,
            EventKind::Advance,
        ),
        (
            2,
            off(5, 0, false, Some(2)),
            CommitOutcome::Refreshed,
            EventKind::Refresh,
        ),
    ];
    let mut current = created;
    for (batch, end, want, kind) in cases {
        let t = commit::commit(Some(&current), &req(&current, batch, end), at(2)).unwrap();
        assert_eq!(t.output.outcome, want);
        assert_eq!(t.events.len(), 1);
        assert_eq!(t.events[0].kind, kind);
        let detail = t.events[0].detail.clone().unwrap();
        assert!(detail.starts_with(want.as_str()), "{detail}");
        current = t.write.unwrap();
    }
    // A new lease's first write may move back: REWIND.
    let taken = granted(&current, "holder-a", 2, at(3));
    let t = commit::commit(Some(&taken), &req(&taken, 0, off(2, 0, false, Some(1))), at(4)).unwrap();
    assert_eq!(t.output.outcome, CommitOutcome::Rewound);
    assert_eq!(t.events[0].kind, EventKind::Rewind);
}

#[test]
fn compact_refresh_history_skips_repeated_ends_and_keeps_every_move() {
    use commit::RefreshHistory;
    let state = leased();
    let (mut current, _) = apply(&state, 0, off(4, 0, false, Some(1)), at(1));
    let mut recorded = Vec::new();
    // An idle stream: the same end again and again, then a move, then
    // another idle run at the new end.
    let ends = [
        off(4, 0, false, Some(1)),
        off(4, 0, false, Some(1)),
        off(4, 0, false, Some(1)),
        off(6, 0, false, Some(1)),
        off(6, 0, false, Some(1)),
        off(6, 0, false, Some(1)),
    ];
    for (batch, end) in (1..).zip(ends) {
        let t = commit::commit_with(
            Some(&current),
            &req(&current, batch, end),
            at(1 + batch),
            RefreshHistory::Compact,
        )
        .unwrap();
        recorded.extend(t.events.iter().map(|e| (batch, e.kind)));
        let written = t.write.unwrap();
        // The consumer is written (updated_at moves) whether or not the
        // refresh is recorded.
        assert_eq!(written.consumer.unwrap().updated_at, at(1 + batch));
        current = written;
    }
    assert_eq!(
        recorded,
        [(4, EventKind::Advance)],
        "a refresh repeating the previous batch's end is not recorded: the row of the batch that set the position \
         stands for it"
    );
    // In full, every one is.
    let (mut current, _) = apply(&state, 0, off(4, 0, false, Some(1)), at(1));
    let mut count = 0;
    for (batch, end) in (1..).zip(ends) {
        let t = commit::commit_with(
            Some(&current),
            &req(&current, batch, end),
            at(1 + batch),
            RefreshHistory::Full,
        )
        .unwrap();
        count += t.events.len();
        current = t.write.unwrap();
    }
    assert_eq!(count, ends.len());
}

#[test]
fn stable_names_of_outcomes_and_lease_losses() {
    let names: Vec<_> = CommitOutcome::ALL.iter().map(|o| o.as_str()).collect();
    assert_eq!(
        names,
        [
            "CREATED",
            "ADVANCED",
            "REFRESHED",
            "REWOUND",
            "UNCHANGED_INCOMPLETE_FULL_SCAN",
            "UNCHANGED_LEGACY_OFFSET",
            "DUPLICATE"
        ]
    );
    let losses = [
        (LeaseLoss::Expired, "expired"),
        (LeaseLoss::Released, "released"),
        (LeaseLoss::Revoked, "revoked"),
        (LeaseLoss::Superseded, "superseded"),
        (LeaseLoss::EpochMismatch, "epoch_mismatch"),
        (LeaseLoss::Unknown, "unknown"),
    ];
    for (loss, name) in losses {
        assert_eq!((loss.as_str(), loss.to_string()), (name, name.to_owned()));
    }
}

#[test]
fn e5_a_full_scan_pin_ends_once_a_commit_passes_its_snapshot() {
    let state = leased();
    // Partway through the initial full scan of snapshot 9: pinned.
    let (pinned, _) = apply(&state, 0, off(9, 0, true, Some(3)), at(1));
    assert_eq!(pinned.lease.as_ref().unwrap().full_scan_pin, Some(9));
    // A commit still inside the scan keeps the pin.
    let (still, _) = apply(&pinned, 1, off(9, 1, true, Some(3)), at(2));
    assert_eq!(still.lease.as_ref().unwrap().full_scan_pin, Some(9));
    // A later snapshot (the scan is over): the pin goes.
    let (past, _) = apply(&still, 2, off(10, 0, false, Some(2)), at(3));
    assert_eq!(past.lease.as_ref().unwrap().full_scan_pin, None);
}

/// SPEC §7: epochs never wrap. The last epoch below the ceiling is granted;
/// at the ceiling an acquire and a revoke are refused with
/// `EPOCH_EXHAUSTED`, and the state is not changed.
#[test]
fn epochs_stop_at_the_ceiling_instead_of_wrapping() {
    let ceiling = lease::EPOCH_CEILING;
    assert_eq!(ceiling, i64::MAX - (1 << 32));
    let mut below = KeyState::new(key());
    below.epoch = ceiling - 1;
    let top = granted(&below, "holder-a", 2, at(10));
    assert_eq!(top.epoch, ceiling, "the last epoch is granted");

    let request = LeaseRequest {
        holder: "holder-a",
        principal: "anonymous",
        ttl: None,
        lease_id: lease_id(3),
        caller: &tidemark_core::Caller::UNKNOWN,
    };
    let refused = lease::acquire(Some(&top), &key(), request, &policy(), None, at(20)).unwrap_err();
    assert!(
        matches!(refused, CoreError::EpochExhausted { epoch, .. } if epoch == ceiling),
        "{refused:?}"
    );
    assert_eq!(refused.reason(), "EPOCH_EXHAUSTED");
    let refused = lease::revoke(Some(&top), at(11), "operator").unwrap_err();
    assert_eq!(refused.reason(), "EPOCH_EXHAUSTED");

    // A state already past the ceiling (or at i64::MAX) never wraps either.
    let mut max = KeyState::new(key());
    max.epoch = i64::MAX;
    assert_eq!(lease::next_epoch(&max).unwrap_err().reason(), "EPOCH_EXHAUSTED");
}

#[test]
fn a_commits_lag_counts_to_the_directorys_latest_or_the_workers_newer_report() {
    use tidemark_core::RefreshHistory;
    let state = leased();
    let lag_of = |latest_reported: Option<i64>, directory: Option<i64>| {
        let mut request = req(&state, 0, off(4, 0, false, Some(1)));
        request.latest_snapshot = latest_reported;
        commit::commit_knowing(Some(&state), &request, at(1), RefreshHistory::Full, directory)
            .unwrap()
            .output
            .lag
    };
    // The position is 5 after the commit.
    assert_eq!(
        lag_of(Some(6), None),
        Some(2),
        "no directory: up to the worker's report"
    );
    assert_eq!(lag_of(None, None), None, "nothing known: no lag");
    assert_eq!(
        lag_of(Some(6), Some(9)),
        Some(5),
        "a registered table: up to its directory's latest"
    );
    assert_eq!(
        lag_of(Some(9), Some(7)),
        Some(5),
        "a newer report than the directory's last read counts"
    );
    assert_eq!(lag_of(None, Some(7)), Some(3));
    // A retry of the same batch reports the same lag.
    let committed = commit::commit_knowing(
        Some(&state),
        &req(&state, 0, off(4, 0, false, Some(1))),
        at(1),
        RefreshHistory::Full,
        Some(9),
    )
    .unwrap()
    .write
    .unwrap();
    let retried = commit::commit_knowing(
        Some(&committed),
        &req(&committed, 0, off(4, 0, false, Some(1))),
        at(2),
        RefreshHistory::Full,
        Some(9),
    )
    .unwrap();
    assert_eq!(retried.output.outcome, CommitOutcome::Duplicate);
    assert_eq!(retried.output.lag, Some(5));
}
