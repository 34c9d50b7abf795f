//! SPEC §1: one reading of the database clock both checks a write and
//! stamps it. A transition is decided at the time its state was read (or,
//! on the one-round-trip path, at an estimate of the database clock), and
//! the write lands a little later (a slow link, a row lock or the SQLite
//! writer waited for). The times the transition stamped — a deadline, a
//! refresh, a creation, a grant — are moved to the reading taken at the
//! write, so a lease lasts its whole ttl from when its renewal landed, as
//! the answer told the client. Postgres does this in the statement (see
//! [`KeyRow::assignments_restamped`](crate::row::KeyRow)); SQLite and the
//! replica's remembered state here.

use tidemark_core::{KeyState, Timestamp};

/// `state` with every time it changed from `before` moved from `decided`
/// to `written` (the clock reading at the write). Times it kept are kept.
pub(crate) fn restamp(state: &KeyState, before: Option<&KeyState>, decided: Timestamp, written: Timestamp) -> KeyState {
    let delta = written.as_micros() - decided.as_micros();
    let mut state = state.clone();
    if delta == 0 {
        return state;
    }
    let moved = |t: &mut Timestamp, old: Option<Timestamp>| {
        if old != Some(*t) {
            *t = Timestamp::from_micros(t.as_micros().saturating_add(delta));
        }
    };
    if let Some(consumer) = state.consumer.as_mut() {
        let old = before.and_then(|b| b.consumer.as_ref());
        moved(&mut consumer.created_at, old.map(|c| c.created_at));
        moved(&mut consumer.updated_at, old.map(|c| c.updated_at));
    }
    if let Some(lease) = state.lease.as_mut() {
        let old = before.and_then(|b| b.lease.as_ref());
        moved(&mut lease.acquired_at, old.map(|l| l.acquired_at));
        moved(&mut lease.deadline, old.map(|l| l.deadline));
        if let Some(committed_at) = lease.committed_at.as_mut() {
            moved(committed_at, old.and_then(|l| l.committed_at));
        }
    }
    state
}
