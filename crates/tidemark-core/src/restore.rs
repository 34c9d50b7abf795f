//! SPEC §11 A7: importing a key from an export of tidemark's own state.
//!
//! The rules, decided per key against what the target already holds:
//! - an epoch high-water mark is never lowered: the key keeps the higher of
//!   its own and the file's;
//! - where the target knows an earlier epoch than the file (a restore: the
//!   key is missing or below the file's epoch), the file's epoch is
//!   raised by [`RESTORE_EPOCH_MARGIN`] (capped at [`EPOCH_CEILING`]), so no
//!   epoch the exporting server granted after the export is granted again.
//!   A target at or past the file's epoch keeps its own: its history is
//!   the file's or later;
//! - a consumer the target lacks is created as the file has it (position
//!   and times); one it has at the file's position is left as it is; one at
//!   another position is moved only when told (`replace_existing`), else it
//!   is kept and reported;
//! - nothing is ever deleted: a key the file shows without a consumer keeps
//!   the target's (`epoch_only`: the file has only the key's epoch);
//! - a consumer deleted since the export is not re-created unless told
//!   (`restore_deleted`): the target knows the key at the file's epoch or
//!   later (it is the file's own lineage, often the exporting server) and
//!   has no consumer, so an operator removed it (or it expired) after the
//!   export, and an older backup must not bring it back. A target that
//!   lacks the key, or knows only an earlier epoch (a restore into another
//!   or an empty database), gets it created;
//! - a key with a live lease refuses any change (`LEASE_HELD`) unless
//!   `force`, which revokes the lease (an epoch is burned, so the running
//!   query is fenced).

use crate::admin::clear_live_lease;
use crate::error::CoreError;
use crate::ids::ConsumerKey;
use crate::state::{ConsumerRecord, EventKind, HistoryEvent, KeyState, LeaseRecord, Transition};
use crate::time::Timestamp;

pub use crate::lease::{EPOCH_CEILING, RESTORE_EPOCH_MARGIN};

/// The epoch high-water mark a restore gives a key the file records at
/// `exported`: raised by the margin, never past the ceiling.
pub fn restored_epoch(exported: i64) -> i64 {
    exported.saturating_add(RESTORE_EPOCH_MARGIN).min(EPOCH_CEILING)
}

/// One key as an export records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedKey {
    /// The key.
    pub key: ConsumerKey,
    /// Its epoch high-water mark.
    pub epoch: i64,
    /// Its consumer, if it had one.
    pub consumer: Option<ConsumerRecord>,
    /// The latest snapshot a worker last reported (for lag).
    pub latest_snapshot: Option<i64>,
}

impl ExportedKey {
    /// What an export records of `state` (leases are not exported: a lease
    /// names a running query of the source, which the target never saw).
    pub fn of(state: &KeyState) -> Self {
        Self {
            key: state.key.clone(),
            epoch: state.epoch,
            consumer: state.consumer,
            latest_snapshot: state.latest_snapshot,
        }
    }
}

/// How an import treats what the target already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportPolicy {
    /// Move consumers the target has at another position to the file's.
    pub replace_existing: bool,
    /// Revoke live leases on keys the import changes.
    pub force: bool,
    /// Re-create consumers deleted since the export.
    pub restore_deleted: bool,
}

/// What an import does to a key's consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerOutcome {
    /// The file has only the key's epoch (its consumer was deleted or
    /// never created before the export); the target's consumer, if any, is
    /// left alone.
    EpochOnly,
    /// The file has a consumer the target deleted (or expired) since the
    /// export; not re-created (`restore_deleted` re-creates it).
    DeletedSinceExport,
    /// Created at the file's position.
    Created,
    /// Already at the file's position.
    Same,
    /// Moved to the file's position (`replace_existing`).
    Replaced,
    /// At another position in the target, and kept there.
    Kept,
}

impl ConsumerOutcome {
    /// Stable name, in import reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerOutcome::EpochOnly => "epoch_only",
            ConsumerOutcome::DeletedSinceExport => "deleted_since_export",
            ConsumerOutcome::Created => "created",
            ConsumerOutcome::Same => "same",
            ConsumerOutcome::Replaced => "replaced",
            ConsumerOutcome::Kept => "kept",
        }
    }
}

/// What importing one key does (or would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyImport {
    /// The consumer's fate.
    pub consumer: ConsumerOutcome,
    /// The target's position before, and after.
    pub old_next: Option<i64>,
    /// See `old_next`.
    pub new_next: Option<i64>,
    /// The key's epoch high-water mark before (0: the target lacked the
    /// key), and after.
    pub old_epoch: i64,
    /// See `old_epoch`.
    pub new_epoch: i64,
    /// The live lease revoked to make the change (`force`).
    pub revoked: Option<LeaseRecord>,
}

impl KeyImport {
    /// Whether the import writes the key.
    pub fn changes_anything(&self) -> bool {
        self.old_next != self.new_next || self.old_epoch != self.new_epoch || self.revoked.is_some()
    }
}

/// Imports `exported` into a target whose state of the key is `state`, at
/// `now` (the database clock). The times of a created consumer are the
/// file's; a replaced one is stamped `now`, like an operator reset.
pub fn import(
    state: Option<&KeyState>,
    exported: &ExportedKey,
    policy: ImportPolicy,
    now: Timestamp,
) -> Result<Transition<KeyImport>, CoreError> {
    let old_next = state.and_then(KeyState::next_snapshot);
    let old_epoch = state.map_or(0, |s| s.epoch);
    // The target knows the key at the file's epoch or later: the file is
    // its own past, not another lineage's.
    let same_lineage = state.is_some_and(|s| s.epoch >= exported.epoch);
    let consumer = match (state.and_then(|s| s.consumer), exported.consumer) {
        (_, None) => ConsumerOutcome::EpochOnly,
        (None, Some(_)) if same_lineage && !policy.restore_deleted => ConsumerOutcome::DeletedSinceExport,
        (None, Some(_)) => ConsumerOutcome::Created,
        (Some(mine), Some(theirs)) if mine.next_snapshot == theirs.next_snapshot => ConsumerOutcome::Same,
        (Some(_), Some(_)) if policy.replace_existing => ConsumerOutcome::Replaced,
        (Some(_), Some(_)) => ConsumerOutcome::Kept,
    };
    let moves = matches!(consumer, ConsumerOutcome::Created | ConsumerOutcome::Replaced);
    // A key the file records with nothing (never leased, no consumer) has
    // no epoch to protect.
    // A target at the file's epoch has the same history (often it is the
    // exporting server itself): nothing to leave room for.
    let restoring =
        (state.is_none() || old_epoch < exported.epoch) && (exported.epoch > 0 || exported.consumer.is_some());
    let file_epoch = if restoring {
        restored_epoch(exported.epoch)
    } else {
        exported.epoch
    };
    let raises = file_epoch > old_epoch;
    let unchanged = KeyImport {
        consumer,
        old_next,
        new_next: old_next,
        old_epoch,
        new_epoch: old_epoch,
        revoked: None,
    };
    if !moves && !raises {
        return Ok(Transition::read_only(unchanged));
    }
    let mut next = state.cloned().unwrap_or_else(|| KeyState::new(exported.key.clone()));
    let mut events = Vec::new();
    let revoked = clear_live_lease(&mut next, policy.force, now, "forced by a state import", &mut events)?;
    next.epoch = next.epoch.max(file_epoch);
    if next.latest_snapshot.is_none() {
        next.latest_snapshot = exported.latest_snapshot;
    }
    let (kind, detail) = match (consumer, exported.consumer) {
        (ConsumerOutcome::Created, Some(theirs)) => {
            next.consumer = Some(theirs);
            (EventKind::Create, "imported from a tidemark state export")
        }
        (ConsumerOutcome::Replaced, Some(theirs)) => {
            next.consumer = Some(ConsumerRecord {
                next_snapshot: theirs.next_snapshot,
                created_at: next.consumer.map_or(now, |c| c.created_at),
                updated_at: now,
            });
            (EventKind::Reset, "moved by a tidemark state import")
        }
        _ => (
            EventKind::Reset,
            "epoch high-water mark raised by a tidemark state import",
        ),
    };
    let mut event = HistoryEvent::new(kind, old_next, next.next_snapshot());
    event.epoch = Some(next.epoch);
    event.detail = Some(format!("{detail} (epoch {old_epoch} -> {})", next.epoch));
    events.push(event);
    let output = KeyImport {
        new_next: next.next_snapshot(),
        new_epoch: next.epoch,
        revoked,
        ..unchanged
    };
    Ok(Transition {
        write: Some(next),
        requires_live_lease: false,
        events,
        output,
    })
}

#[cfg(test)]
mod ceiling_tests {
    use super::*;

    #[test]
    fn a_restore_raises_epochs_by_the_margin_and_never_past_the_ceiling() {
        assert_eq!(restored_epoch(0), RESTORE_EPOCH_MARGIN);
        assert_eq!(restored_epoch(7), 7 + RESTORE_EPOCH_MARGIN);
        assert_eq!(restored_epoch(EPOCH_CEILING - 1), EPOCH_CEILING);
        assert_eq!(restored_epoch(EPOCH_CEILING), EPOCH_CEILING);
        assert_eq!(restored_epoch(i64::MAX), EPOCH_CEILING);
    }
}
