//! Operator changes to one key (SPEC A2, A4) and consumer expiration (E3).
//!
//! Every change is computed whether or not it will be executed, so a
//! plan-only call reports exactly what an executed one would do, including
//! its refusals.

use std::time::Duration;

use crate::error::CoreError;
use crate::expiry::consumer_expired;
use crate::ids::ConsumerKey;
use crate::lease;
use crate::state::{ConsumerRecord, EventKind, HistoryEvent, KeyState, LeaseRecord, Transition};
use crate::time::Timestamp;

/// What an operator change does to a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminChange {
    /// The position before.
    pub old_next: Option<i64>,
    /// The position after.
    pub new_next: Option<i64>,
    /// The live lease revoked to make the change (`force`).
    pub revoked: Option<LeaseRecord>,
    /// The key's epoch after the change.
    pub epoch: i64,
}

impl AdminChange {
    /// Whether the change does anything.
    pub fn changes_anything(&self) -> bool {
        self.old_next != self.new_next || self.revoked.is_some()
    }
}

/// The compare-and-set precondition of an operator change.
fn check_expected(state: Option<&KeyState>, expected: Option<i64>) -> Result<(), CoreError> {
    let actual = state.and_then(KeyState::next_snapshot);
    match expected {
        Some(expected) if Some(expected) != actual => Err(CoreError::NextSnapshotMismatch { expected, actual }),
        _ => Ok(()),
    }
}

/// A live lease blocks operator changes unless `force` revokes it (the epoch
/// is bumped, so the running query is fenced, never raced).
/// Which live lease a forced change may revoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Force {
    /// None: a live lease refuses the change (`LEASE_HELD`).
    No,
    /// Whichever is live when the change is written.
    AnyLease,
    /// Only this one (the lease a plan or a listing showed); another live
    /// lease refuses the change as if not forced.
    Lease(uuid::Uuid),
}

impl From<bool> for Force {
    fn from(force: bool) -> Self {
        if force { Force::AnyLease } else { Force::No }
    }
}

impl Force {
    /// `force` as a plan executed exactly as planned asks for it: with the
    /// lease the plan saw (`Some(None)`: none was live), a forced change
    /// revokes only that lease, and a lease granted since refuses it.
    pub fn as_planned(force: bool, seen: Option<Option<uuid::Uuid>>) -> Self {
        match (force, seen) {
            (false, _) => Force::No,
            (true, None) => Force::AnyLease,
            (true, Some(None)) => Force::No,
            (true, Some(Some(lease))) => Force::Lease(lease),
        }
    }
}

pub(crate) fn clear_live_lease(
    next: &mut KeyState,
    force: impl Into<Force>,
    now: Timestamp,
    why: &str,
    events: &mut Vec<HistoryEvent>,
) -> Result<Option<LeaseRecord>, CoreError> {
    let Some(live) = next.live_lease(now).cloned() else {
        return Ok(None);
    };
    let forced = match force.into() {
        Force::No => false,
        Force::AnyLease => true,
        Force::Lease(seen) => live.lease_id == seen,
    };
    if !forced {
        return Err(CoreError::LeaseHeld {
            key: Box::new(next.key.clone()),
            holder: live.holder.clone(),
            epoch: live.epoch,
            remaining: live.remaining(now),
            claimant: crate::error::Claimant::Operator,
        });
    }
    let revoked = lease::revoke(Some(next), now, why)?;
    *next = revoked.write.expect("a live lease is revoked");
    events.extend(revoked.events);
    Ok(Some(live))
}

/// A2: sets the consumer's position (creating it if absent), like Paimon's
/// `reset_consumer` with a snapshot.
pub fn reset(
    state: Option<&KeyState>,
    key: &ConsumerKey,
    next_snapshot: i64,
    expected: Option<i64>,
    force: impl Into<Force>,
    now: Timestamp,
) -> Result<Transition<AdminChange>, CoreError> {
    if next_snapshot < 1 {
        return Err(CoreError::invalid(
            "next_snapshot",
            format!("must be >= 1 (got {next_snapshot})"),
        ));
    }
    reset_to(state, key, |_| Ok(next_snapshot), expected, force.into(), now)
}

/// A6, one key of a bulk reset: the position is `target` of the position
/// the change compares against (the key as loaded for the write, not as a
/// listing showed it), and `force` revokes only the lease it names.
pub fn reset_to(
    state: Option<&KeyState>,
    key: &ConsumerKey,
    target: impl FnOnce(Option<i64>) -> Result<i64, CoreError>,
    expected: Option<i64>,
    force: Force,
    now: Timestamp,
) -> Result<Transition<AdminChange>, CoreError> {
    check_expected(state, expected)?;
    let next_snapshot = target(state.and_then(KeyState::next_snapshot))?;
    if next_snapshot < 1 {
        return Err(CoreError::invalid(
            "next_snapshot",
            format!("must be >= 1 (got {next_snapshot})"),
        ));
    }
    let mut next = state.cloned().unwrap_or_else(|| KeyState::new(key.clone()));
    let mut events = Vec::new();
    let revoked = clear_live_lease(&mut next, force, now, "forced by a consumer reset", &mut events)?;
    let old_next = next.next_snapshot();
    next.consumer = Some(ConsumerRecord {
        next_snapshot,
        created_at: next.consumer.map_or(now, |c| c.created_at),
        updated_at: now,
    });
    events.push(HistoryEvent::new(EventKind::Reset, old_next, Some(next_snapshot)));
    let output = AdminChange {
        old_next,
        new_next: Some(next_snapshot),
        revoked,
        epoch: next.epoch,
    };
    Ok(Transition {
        write: Some(next),
        requires_live_lease: false,
        events,
        output,
    })
}

/// What importing a consumer from a Paimon consumer file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// The consumer was created at the file's position.
    Created,
    /// tidemark already had the consumer (at this position); it wins.
    Exists {
        /// tidemark's position.
        next_snapshot: i64,
    },
}

/// Creates a consumer from an imported Paimon file, only while the key has
/// none: decided on the state the write compares against, so a consumer
/// created meanwhile (a first commit, another import) is never overwritten.
/// A live lease refuses (`LEASE_HELD`) like any operator change.
pub fn import(
    state: Option<&KeyState>,
    key: &ConsumerKey,
    next_snapshot: i64,
    now: Timestamp,
) -> Result<Transition<Imported>, CoreError> {
    if let Some(existing) = state.and_then(KeyState::next_snapshot) {
        return Ok(Transition::read_only(Imported::Exists {
            next_snapshot: existing,
        }));
    }
    let mut transition = reset(state, key, next_snapshot, None, false, now)?;
    for event in &mut transition.events {
        event.detail = Some("imported from the table's Paimon consumer file".to_owned());
    }
    Ok(transition.map(|_| Imported::Created))
}

/// A2: deletes the consumer record (Paimon's `reset_consumer` without a
/// snapshot). The key keeps its epoch high-water mark. A key tidemark has
/// never seen is `CONSUMER_NOT_FOUND` (a typo must not look like a delete,
/// as Kafka's tool says a group does not exist); deleting a consumer that
/// is gone from a known key (deleted already, or never created under a
/// lease) changes nothing.
pub fn delete(
    state: Option<&KeyState>,
    key: &ConsumerKey,
    expected: Option<i64>,
    force: impl Into<Force>,
    now: Timestamp,
    kind: EventKind,
) -> Result<Transition<AdminChange>, CoreError> {
    check_expected(state, expected)?;
    if state.is_none() {
        return Err(CoreError::ConsumerNotFound {
            key: key.clone(),
            suggestion: None,
        });
    }
    let Some(state) = state.filter(|s| s.consumer.is_some()) else {
        return Ok(Transition::read_only(AdminChange {
            old_next: None,
            new_next: None,
            revoked: None,
            epoch: state.map_or(0, |s| s.epoch),
        }));
    };
    let mut next = state.clone();
    let mut events = Vec::new();
    let revoked = clear_live_lease(&mut next, force, now, "forced by a consumer delete", &mut events)?;
    let old_next = next.next_snapshot();
    next.consumer = None;
    events.push(HistoryEvent::new(kind, old_next, None));
    let output = AdminChange {
        old_next,
        new_next: None,
        revoked,
        epoch: next.epoch,
    };
    Ok(Transition {
        write: Some(next),
        requires_live_lease: false,
        events,
        output,
    })
}

/// The timing of a consumer as an operator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Time since the last write or refresh.
    pub idle: Duration,
    /// Whether it has expired (and no longer fences).
    pub expired: bool,
    /// Time left before it expires; `None` when it never expires (no
    /// expiration time, or a live lease holds it) or already expired.
    pub expires_in: Option<Duration>,
}

/// E2 as seen by operators: idle time and time to expiry of a consumer.
pub fn liveness(state: &KeyState, expiration: Option<Duration>, now: Timestamp) -> Option<Liveness> {
    let consumer = state.consumer?;
    let expired = consumer_expired(state, expiration, now);
    let leased = state.live_lease(now).is_some();
    let expires_in = match expiration {
        Some(e) if !expired && !leased => Some(now.until(consumer.updated_at.plus(e))),
        _ => None,
    };
    Some(Liveness {
        idle: consumer.updated_at.until(now),
        expired,
        expires_in,
    })
}

/// Longest accepted selector pattern, in bytes.
pub const MAX_PATTERN_LEN: usize = 1024;
/// Compiled-size limit of a selector pattern (the regex engine is
/// linear-time; this bounds its memory).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// A3: which consumer ids `ClearConsumers` affects. Patterns use full-match
/// semantics (like Java's `Pattern.matches`, Paimon's `clear_consumers`);
/// an empty `including` means all ids, an empty `excluding` excludes none.
#[derive(Debug, Clone)]
pub struct ConsumerSelector {
    including: regex::Regex,
    excluding: Option<regex::Regex>,
}

impl ConsumerSelector {
    /// Compiles the two patterns, naming the bad one (`including`
    /// or `excluding`).
    pub fn parse(including: &str, excluding: &str) -> Result<Self, Vec<crate::validate::FieldViolation>> {
        let mut v = crate::validate::Violations::new();
        let including = if including.is_empty() { ".*" } else { including };
        let including = compile(including, "including").map_err(|e| v.extend(vec![e])).ok();
        let excluding = if excluding.is_empty() {
            Some(None)
        } else {
            compile(excluding, "excluding")
                .map(Some)
                .map_err(|e| v.extend(vec![e]))
                .ok()
        };
        match (including, excluding) {
            (Some(including), Some(excluding)) => Ok(Self { including, excluding }),
            _ => Err(v.into_vec()),
        }
    }

    /// Whether `consumer_id` is selected.
    pub fn matches(&self, consumer_id: &str) -> bool {
        self.including.is_match(consumer_id) && !self.excluding.as_ref().is_some_and(|e| e.is_match(consumer_id))
    }
}

fn compile(pattern: &str, field: &str) -> Result<regex::Regex, crate::validate::FieldViolation> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(crate::validate::FieldViolation::new(
            field,
            format!(
                "the pattern is {} bytes; at most {MAX_PATTERN_LEN} are allowed",
                pattern.len()
            ),
        ));
    }
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| crate::validate::FieldViolation::new(field, format!("not a valid regular expression: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_use_full_match() {
        let s = ConsumerSelector::parse("etl-.*", "").unwrap();
        assert!(s.matches("etl-1"));
        assert!(!s.matches("old-etl-1"), "full match, not a search");
        let prefix_only = ConsumerSelector::parse("etl", "").unwrap();
        assert!(!prefix_only.matches("etl-1"), "not a prefix match either");
    }

    #[test]
    fn including_defaults_to_all_and_excluding_alone_works() {
        let s = ConsumerSelector::parse("", "keep.*").unwrap();
        assert!(s.matches("anything"));
        assert!(!s.matches("keep-me"));
        assert!(ConsumerSelector::parse("", "").unwrap().matches("x"));
    }

    #[test]
    fn bad_or_huge_patterns_are_rejected_by_field() {
        let err = ConsumerSelector::parse("(", "a{99999}{99999}").unwrap_err();
        let fields: Vec<_> = err.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["including", "excluding"]);
        let long = "a".repeat(MAX_PATTERN_LEN + 1);
        assert!(ConsumerSelector::parse(&long, "").is_err());
        let longest = "a".repeat(MAX_PATTERN_LEN);
        assert!(ConsumerSelector::parse(&longest, &longest).is_ok());
    }
}
