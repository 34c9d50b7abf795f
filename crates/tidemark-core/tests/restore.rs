//! SPEC §11 A7: the rules of importing a key from a state export, on the
//! pure decision with an explicit clock. The stores' conformance suites and
//! the end-to-end restore test check the same through a database.

use proptest::prelude::*;
use tidemark_core::lease::{self, LeasePolicy, LeaseRequest};
use tidemark_core::restore::{self, ConsumerOutcome, ExportedKey, ImportPolicy};
use tidemark_core::{ConsumerKey, ConsumerRecord, CoreError, EventKind, KeyState, Timestamp};
use uuid::Uuid;

const SEC: i64 = 1_000_000;

fn key() -> ConsumerKey {
    ConsumerKey::parse("db.orders", "", "etl", "consumer").unwrap()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000 * SEC + seconds * SEC)
}

fn record(next: i64, created: i64, updated: i64) -> ConsumerRecord {
    ConsumerRecord {
        next_snapshot: next,
        created_at: at(created),
        updated_at: at(updated),
    }
}

fn target(next: Option<i64>, epoch: i64) -> KeyState {
    KeyState {
        epoch,
        consumer: next.map(|n| record(n, -500, -50)),
        ..KeyState::new(key())
    }
}

fn exported(next: Option<i64>, epoch: i64) -> ExportedKey {
    ExportedKey {
        key: key(),
        epoch,
        consumer: next.map(|n| record(n, -1000, -100)),
        latest_snapshot: Some(40),
    }
}

fn leased(state: &KeyState) -> KeyState {
    lease::acquire(
        Some(state),
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

/// How far a restore raises the file's epochs.
const M: i64 = restore::RESTORE_EPOCH_MARGIN;

const PLAIN: ImportPolicy = ImportPolicy {
    replace_existing: false,
    force: false,
    restore_deleted: false,
};

#[test]
fn a_key_the_target_lacks_is_created_as_the_file_has_it_times_included() {
    let t = restore::import(None, &exported(Some(12), 5), PLAIN, at(0)).unwrap();
    let written = t.write.unwrap();
    assert_eq!(written.epoch, 5 + M, "raised by the restore margin");
    assert_eq!(
        written.consumer,
        Some(record(12, -1000, -100)),
        "the file's times, not now"
    );
    assert_eq!(written.latest_snapshot, Some(40));
    assert!(written.lease.is_none());
    assert_eq!(t.output.consumer, ConsumerOutcome::Created);
    assert_eq!((t.output.old_epoch, t.output.new_epoch), (0, 5 + M));
    assert_eq!(t.events.iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::Create]);
}

#[test]
fn an_epoch_only_key_keeps_its_high_water_mark_and_an_empty_one_writes_nothing() {
    let t = restore::import(None, &exported(None, 3), PLAIN, at(0)).unwrap();
    let written = t.write.unwrap();
    assert_eq!((written.epoch, written.consumer), (3 + M, None));
    assert_eq!(t.output.consumer, ConsumerOutcome::EpochOnly);
    let empty = restore::import(None, &exported(None, 0), PLAIN, at(0)).unwrap();
    assert!(empty.write.is_none());
}

#[test]
fn an_epoch_is_never_lowered() {
    let t = restore::import(Some(&target(Some(12), 9)), &exported(Some(12), 4), PLAIN, at(0)).unwrap();
    assert!(t.write.is_none(), "same position, higher epoch: nothing to write");
    assert_eq!(
        t.output.new_epoch, 9,
        "a target past the file's epoch keeps its own, unraised"
    );
    let t = restore::import(Some(&target(Some(12), 2)), &exported(Some(12), 7), PLAIN, at(0)).unwrap();
    let written = t.write.unwrap();
    assert_eq!(written.epoch, 7 + M);
    assert_eq!(
        written.consumer,
        Some(record(12, -500, -50)),
        "a raise alone keeps the consumer"
    );
    assert_eq!(t.output.consumer, ConsumerOutcome::Same);
}

#[test]
fn an_existing_consumer_elsewhere_is_kept_unless_told_and_then_moved_like_a_reset() {
    let t = restore::import(Some(&target(Some(30), 1)), &exported(Some(12), 1), PLAIN, at(0)).unwrap();
    assert!(t.write.is_none());
    assert_eq!(t.output.consumer, ConsumerOutcome::Kept);
    assert_eq!((t.output.old_next, t.output.new_next), (Some(30), Some(30)));
    assert!(!t.output.changes_anything());

    let told = ImportPolicy {
        replace_existing: true,
        ..PLAIN
    };
    let t = restore::import(Some(&target(Some(30), 1)), &exported(Some(12), 1), told, at(7)).unwrap();
    let written = t.write.unwrap();
    assert_eq!(written.consumer, Some(record(12, -500, 7)), "created kept, stamped now");
    assert_eq!(t.output.consumer, ConsumerOutcome::Replaced);
    assert_eq!(t.events[0].kind, EventKind::Reset);
    assert_eq!((t.events[0].old_next, t.events[0].new_next), (Some(30), Some(12)));
}

#[test]
fn a_file_without_the_consumer_never_deletes_the_targets() {
    let told = ImportPolicy {
        replace_existing: true,
        force: true,
        restore_deleted: false,
    };
    let t = restore::import(Some(&target(Some(30), 1)), &exported(None, 6), told, at(0)).unwrap();
    let written = t.write.unwrap();
    assert_eq!(written.next_snapshot(), Some(30));
    assert_eq!(written.epoch, 6 + M);
    assert_eq!(t.output.consumer, ConsumerOutcome::EpochOnly);
}

#[test]
fn a_live_lease_refuses_a_change_unless_forced_and_force_fences_it() {
    let live = leased(&target(Some(30), 4));
    assert_eq!(live.epoch, 5);
    let err = restore::import(Some(&live), &exported(Some(12), 1), PLAIN.with_replace(), at(1)).unwrap_err();
    assert!(matches!(err, CoreError::LeaseHeld { .. }), "{err:?}");
    let err = restore::import(Some(&live), &exported(Some(30), 9), PLAIN, at(1)).unwrap_err();
    assert!(
        matches!(err, CoreError::LeaseHeld { .. }),
        "an epoch raise is a change too"
    );
    // Nothing to change: the live lease is no obstacle.
    let t = restore::import(Some(&live), &exported(Some(30), 2), PLAIN, at(1)).unwrap();
    assert!(t.write.is_none());

    let forced = ImportPolicy {
        replace_existing: true,
        force: true,
        restore_deleted: false,
    };
    let t = restore::import(Some(&live), &exported(Some(12), 1), forced, at(1)).unwrap();
    let written = t.write.unwrap();
    assert_eq!(written.epoch, 6, "the revocation burned an epoch");
    assert!(written.live_lease(at(1)).is_none());
    assert_eq!(t.output.revoked.as_ref().map(|l| l.epoch), Some(5));
    assert_eq!(
        t.events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::LeaseRevoke, EventKind::Reset]
    );
    // A file epoch above the burned one wins.
    let t = restore::import(Some(&live), &exported(Some(30), 20), forced, at(1)).unwrap();
    assert_eq!(t.write.unwrap().epoch, 20 + M);
}

/// A restore of an older export never grants again an epoch the exporting
/// server granted after it: the file's epoch is raised by the margin, the
/// same file imported twice changes nothing the second time, and the
/// ceiling is never passed.
#[test]
fn a_restore_leaves_room_for_epochs_granted_after_the_export() {
    let restored = restore::import(None, &exported(Some(12), 40), PLAIN, at(0)).unwrap();
    let state = restored.write.unwrap();
    assert_eq!(state.epoch, 40 + M);
    let again = restore::import(Some(&state), &exported(Some(12), 40), PLAIN, at(1)).unwrap();
    assert!(again.write.is_none(), "importing the same file again changes nothing");
    let top = restore::import(None, &exported(Some(12), restore::EPOCH_CEILING - 5), PLAIN, at(0)).unwrap();
    assert_eq!(top.write.unwrap().epoch, restore::EPOCH_CEILING);
}

trait WithReplace {
    fn with_replace(self) -> Self;
}

impl WithReplace for ImportPolicy {
    fn with_replace(self) -> Self {
        ImportPolicy {
            replace_existing: true,
            ..self
        }
    }
}

proptest! {
    /// Whatever the target and the file hold, an import never lowers an
    /// epoch, never loses a consumer, and moves one only when told.
    #[test]
    fn import_never_lowers_epochs_nor_drops_consumers(
        mine_next in proptest::option::of(1i64..50),
        mine_epoch in 0i64..20,
        theirs_next in proptest::option::of(1i64..50),
        theirs_epoch in 0i64..20,
        absent in any::<bool>(),
        replace_existing in any::<bool>(),
        restore_deleted in any::<bool>(),
    ) {
        let mine = target(mine_next, mine_epoch);
        let state = (!absent).then_some(&mine);
        let policy = ImportPolicy { replace_existing, force: false, restore_deleted };
        let t = restore::import(state, &exported(theirs_next, theirs_epoch), policy, at(0)).unwrap();
        let before = state.cloned();
        let after = t.write.clone().or(before.clone());
        let epoch_after = after.as_ref().map_or(0, |s| s.epoch);
        prop_assert!(epoch_after >= theirs_epoch.max(before.as_ref().map_or(0, |s| s.epoch)));
        prop_assert_eq!(t.output.new_epoch, epoch_after);
        let next_before = before.as_ref().and_then(KeyState::next_snapshot);
        let next_after = after.as_ref().and_then(KeyState::next_snapshot);
        if next_before.is_some() {
            prop_assert!(next_after.is_some(), "a consumer was dropped");
        }
        if next_before.is_some() && next_before != next_after {
            prop_assert!(replace_existing, "moved without being told");
            prop_assert_eq!(next_after, theirs_next);
        }
        // A missing consumer comes from the file, unless the target deleted
        // it since the export (it knows the key at the file's epoch or
        // later) and was not told to restore it.
        let deleted_since = state.is_some_and(|s| s.epoch >= theirs_epoch) && !restore_deleted;
        if next_before.is_none() && theirs_next.is_some() {
            let expected = if deleted_since { None } else { theirs_next };
            prop_assert_eq!(next_after, expected);
        }
        prop_assert_eq!(t.output.changes_anything(), t.write.is_some());
    }
}

#[test]
fn a_consumer_deleted_since_the_export_is_not_recreated_unless_told() {
    // The target knows the key at the file's epoch and has no consumer:
    // deleted after the export.
    let deleted = target(None, 4);
    let t = restore::import(Some(&deleted), &exported(Some(12), 4), PLAIN, at(0)).unwrap();
    assert!(t.write.is_none(), "nothing written");
    assert_eq!(t.output.consumer, ConsumerOutcome::DeletedSinceExport);
    assert_eq!(ConsumerOutcome::DeletedSinceExport.as_str(), "deleted_since_export");
    let told = ImportPolicy {
        restore_deleted: true,
        ..PLAIN
    };
    let t = restore::import(Some(&deleted), &exported(Some(12), 4), told, at(0)).unwrap();
    assert_eq!(t.output.consumer, ConsumerOutcome::Created);
    assert_eq!(t.write.unwrap().next_snapshot(), Some(12));
    // A target that knows only an earlier epoch is another lineage (a
    // restore): the consumer is created.
    let t = restore::import(Some(&target(None, 2)), &exported(Some(12), 4), PLAIN, at(0)).unwrap();
    assert_eq!(t.output.consumer, ConsumerOutcome::Created);
}
