//! SPEC A2 (reset and delete a consumer, with expectations and `force`),
//! the import of a Paimon consumer file, and E2 as operators see it
//! (liveness): on the pure rules with an explicit clock. The stores'
//! conformance suites check the same through a database; these pin the
//! rules themselves (cargo-mutants over this crate showed they relied on
//! the stores' tests alone).

use std::time::Duration;

use tidemark_core::admin::{self, AdminChange, Imported};
use tidemark_core::lease::{self, LeasePolicy, LeaseRequest};
use tidemark_core::{ConsumerKey, ConsumerRecord, CoreError, EventKind, KeyState, Timestamp};
use uuid::Uuid;

const SEC: i64 = 1_000_000;

fn key() -> ConsumerKey {
    ConsumerKey::parse("db.orders", "", "etl", "consumer").unwrap()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000 * SEC + seconds * SEC)
}

/// A consumer at `next`, written at t=0, with no lease.
fn consumer(next: i64) -> KeyState {
    KeyState {
        consumer: Some(ConsumerRecord {
            next_snapshot: next,
            created_at: at(-100),
            updated_at: at(0),
        }),
        ..KeyState::new(key())
    }
}

/// The same with a 30 s lease granted at t=0 (epoch 1).
fn leased(next: i64) -> KeyState {
    lease::acquire(
        Some(&consumer(next)),
        &key(),
        LeaseRequest {
            holder: "query",
            principal: "anonymous",
            ttl: None,
            lease_id: Uuid::from_u128(1),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &LeasePolicy::default(),
        None,
        at(0),
    )
    .unwrap()
    .write
    .unwrap()
}

fn kinds(events: &[tidemark_core::HistoryEvent]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

#[test]
fn a2_reset_sets_the_position_and_keeps_when_it_was_created() {
    let t = admin::reset(Some(&consumer(10)), &key(), 4, None, false, at(5)).unwrap();
    let written = t.write.unwrap();
    let record = written.consumer.unwrap();
    assert_eq!(record.next_snapshot, 4);
    assert_eq!((record.created_at, record.updated_at), (at(-100), at(5)));
    assert_eq!(
        t.output,
        AdminChange {
            old_next: Some(10),
            new_next: Some(4),
            revoked: None,
            epoch: 0,
        }
    );
    assert!(t.output.changes_anything());
    assert_eq!(kinds(&t.events), [EventKind::Reset]);
    assert!(!t.requires_live_lease);
}

#[test]
fn a2_reset_creates_an_absent_consumer_and_snapshot_one_is_valid() {
    let t = admin::reset(None, &key(), 1, None, false, at(5)).unwrap();
    let record = t.write.unwrap().consumer.unwrap();
    assert_eq!(
        (record.next_snapshot, record.created_at, record.updated_at),
        (1, at(5), at(5))
    );
    assert_eq!(t.output.old_next, None);
    for bad in [0, -1] {
        let err = admin::reset(None, &key(), bad, None, false, at(5)).unwrap_err();
        assert!(matches!(err, CoreError::InvalidArgument(_)), "{bad}: {err:?}");
    }
}

#[test]
fn a2_a_reset_to_the_same_position_changes_nothing_visible() {
    let t = admin::reset(Some(&consumer(10)), &key(), 10, None, false, at(5)).unwrap();
    assert!(!t.output.changes_anything(), "{:?}", t.output);
}

#[test]
fn a2_expectations_are_compared_and_set() {
    let state = consumer(10);
    let err = admin::reset(Some(&state), &key(), 4, Some(9), false, at(5)).unwrap_err();
    assert!(
        matches!(
            err,
            CoreError::NextSnapshotMismatch {
                expected: 9,
                actual: Some(10)
            }
        ),
        "{err:?}"
    );
    assert!(admin::reset(Some(&state), &key(), 4, Some(10), false, at(5)).is_ok());
    let err = admin::delete(None, &key(), Some(3), false, at(5), EventKind::Delete).unwrap_err();
    assert!(
        matches!(err, CoreError::NextSnapshotMismatch { actual: None, .. }),
        "{err:?}"
    );
    assert!(admin::delete(Some(&state), &key(), Some(10), false, at(5), EventKind::Delete).is_ok());
}

#[test]
fn a2_a_live_lease_blocks_unless_forced_and_force_revokes_it() {
    let state = leased(10);
    for err in [
        admin::reset(Some(&state), &key(), 4, None, false, at(5)).unwrap_err(),
        admin::delete(Some(&state), &key(), None, false, at(5), EventKind::Delete).unwrap_err(),
    ] {
        assert!(matches!(err, CoreError::LeaseHeld { epoch: 1, .. }), "{err:?}");
        // An operator is told the way out, not the worker's rule (issue 34).
        let message = err.to_string();
        assert!(message.contains("force") && message.contains("revoke"), "{message}");
        assert!(!message.contains("concurrent queries"), "{message}");
    }
    let t = admin::reset(Some(&state), &key(), 4, None, true, at(5)).unwrap();
    let revoked = t.output.revoked.clone().expect("the live lease is revoked");
    assert_eq!(revoked.epoch, 1);
    assert!(
        t.output.epoch > 1,
        "the epoch is bumped, fencing the query: {:?}",
        t.output
    );
    assert!(t.output.changes_anything());
    assert_eq!(kinds(&t.events), [EventKind::LeaseRevoke, EventKind::Reset]);
    let written = t.write.unwrap();
    assert!(written.live_lease(at(5)).is_none());

    // Expired by then: nothing to revoke, nothing blocks.
    let t = admin::reset(Some(&state), &key(), 4, None, false, at(31)).unwrap();
    assert_eq!(t.output.revoked, None);
    assert_eq!(kinds(&t.events), [EventKind::Reset]);
}

#[test]
fn a2_delete_removes_the_consumer_and_keeps_the_epoch() {
    let t = admin::delete(Some(&leased(10)), &key(), None, true, at(5), EventKind::Delete).unwrap();
    assert_eq!(t.output.old_next, Some(10));
    assert_eq!(t.output.new_next, None);
    assert!(t.output.changes_anything());
    let written = t.write.unwrap();
    assert_eq!(written.consumer, None);
    assert_eq!(written.epoch, t.output.epoch);
    assert_eq!(kinds(&t.events), [EventKind::LeaseRevoke, EventKind::Delete]);

    // Nothing to delete: nothing written, nothing changed.
    let t = admin::delete(
        Some(&KeyState::new(key())),
        &key(),
        None,
        false,
        at(5),
        EventKind::Delete,
    )
    .unwrap();
    assert!(t.write.is_none());
    assert!(!t.output.changes_anything());
    // A key never seen: NOT_FOUND, so a typo does not look like a delete
    // (issue 34: it answered "executed": true).
    let err = admin::delete(None, &key(), None, false, at(5), EventKind::Delete).unwrap_err();
    assert_eq!(err.reason(), "CONSUMER_NOT_FOUND", "{err:?}");
}

#[test]
fn import_creates_only_when_there_is_no_consumer() {
    let t = admin::import(None, &key(), 7, at(5)).unwrap();
    assert_eq!(t.output, Imported::Created);
    assert_eq!(t.write.unwrap().consumer.unwrap().next_snapshot, 7);
    assert!(
        t.events
            .iter()
            .all(|e| e.detail.as_deref().is_some_and(|d| d.contains("imported")))
    );
    let t = admin::import(Some(&consumer(10)), &key(), 7, at(5)).unwrap();
    assert_eq!(t.output, Imported::Exists { next_snapshot: 10 });
    assert!(t.write.is_none());
    let err = admin::import(
        Some(&leased(10))
            .map(|s| KeyState {
                consumer: None,
                ..s.clone()
            })
            .as_ref(),
        &key(),
        7,
        at(5),
    )
    .unwrap_err();
    assert!(matches!(err, CoreError::LeaseHeld { .. }), "{err:?}");
}

#[test]
fn e2_liveness_as_operators_see_it() {
    let hour = Duration::from_secs(3600);
    // No consumer: nothing to say.
    assert_eq!(admin::liveness(&KeyState::new(key()), Some(hour), at(5)), None);
    // No expiration time: never expires.
    let l = admin::liveness(&consumer(10), None, at(5)).unwrap();
    assert_eq!((l.idle, l.expired, l.expires_in), (Duration::from_secs(5), false, None));
    // Idle, unleased: expires an hour after its last write.
    let l = admin::liveness(&consumer(10), Some(hour), at(600)).unwrap();
    assert_eq!((l.expired, l.expires_in), (false, Some(Duration::from_secs(3000))));
    // Leased: a live lease keeps it, so no countdown.
    let l = admin::liveness(&leased(10), Some(hour), at(5)).unwrap();
    assert_eq!((l.expired, l.expires_in), (false, None));
    // Past it: expired, no countdown.
    let l = admin::liveness(&consumer(10), Some(hour), at(3601)).unwrap();
    assert_eq!((l.expired, l.expires_in), (true, None));
}

#[test]
fn a6_a_bulk_resets_target_is_taken_from_the_position_it_compares() {
    let t = admin::reset_to(
        Some(&consumer(20)),
        &key(),
        |p| Ok(p.unwrap() + 5),
        None,
        admin::Force::No,
        at(5),
    )
    .unwrap();
    assert_eq!(t.output.new_next, Some(25));
    assert_eq!(t.output.old_next, Some(20));
    // The expectation is checked before the target is computed.
    let err = admin::reset_to(
        Some(&consumer(20)),
        &key(),
        |_| Ok(3),
        Some(10),
        admin::Force::No,
        at(5),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CoreError::NextSnapshotMismatch {
                expected: 10,
                actual: Some(20)
            }
        ),
        "{err:?}"
    );
    // A target below 1 is bad input naming the field.
    let err = admin::reset_to(
        Some(&consumer(2)),
        &key(),
        |p| Ok(p.unwrap() - 5),
        None,
        admin::Force::No,
        at(5),
    )
    .unwrap_err();
    assert!(matches!(err, CoreError::InvalidArgument { .. }), "{err:?}");
}

#[test]
fn a6_force_naming_a_lease_revokes_only_that_one() {
    let listed = Uuid::from_u128(1);
    let forced = admin::reset_to(
        Some(&leased(10)),
        &key(),
        |_| Ok(4),
        None,
        admin::Force::Lease(listed),
        at(5),
    )
    .unwrap();
    assert_eq!(forced.output.revoked.map(|l| l.lease_id), Some(listed));
    // A lease granted since the listing refuses, as without force.
    let other = admin::reset_to(
        Some(&leased(10)),
        &key(),
        |_| Ok(4),
        None,
        admin::Force::Lease(Uuid::from_u128(2)),
        at(5),
    )
    .unwrap_err();
    assert!(matches!(other, CoreError::LeaseHeld { .. }), "{other:?}");
    assert_eq!(admin::Force::from(true), admin::Force::AnyLease);
    assert_eq!(admin::Force::from(false), admin::Force::No);
}

#[test]
fn a4_a_bulk_revoke_revokes_only_the_lease_it_listed() {
    let state = leased(10);
    let listed = lease::revoke_seen(Some(&state), at(5), "maintenance", Uuid::from_u128(1)).unwrap();
    assert_eq!(listed.output.lease.map(|l| l.lease_id), Some(Uuid::from_u128(1)));
    assert!(listed.write.is_some());
    // Replaced since the listing: left alone, nothing written.
    let replaced = lease::revoke_seen(Some(&state), at(5), "maintenance", Uuid::from_u128(2)).unwrap();
    assert!(replaced.output.lease.is_none() && replaced.write.is_none());
    assert_eq!(replaced.output.epoch, state.epoch);
    // Ended since the listing: the same.
    let ended = lease::revoke_seen(Some(&state), at(60), "maintenance", Uuid::from_u128(1)).unwrap();
    assert!(ended.write.is_none());
    let absent = lease::revoke_seen(None, at(5), "maintenance", Uuid::from_u128(1)).unwrap();
    assert!(absent.write.is_none());
}
