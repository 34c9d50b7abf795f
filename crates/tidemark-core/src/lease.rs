//! Leases (SPEC §2, rules L1–L8).

use std::time::Duration;

use uuid::Uuid;

use crate::error::{CoreError, LeaseLoss};
use crate::ids::ConsumerKey;
use crate::state::{Caller, ConsumerRecord, EventKind, HistoryEvent, KeyState, LeaseRecord, LeaseStatus, Transition};
use crate::time::Timestamp;

/// The highest epoch tidemark grants or burns (SPEC §7: epochs never wrap).
/// It stays 2^32 below `i64::MAX`, so every reader that adds to an epoch
/// (a restore's margin, a client's arithmetic) has room.
pub const EPOCH_CEILING: i64 = i64::MAX - (1 << 32);

/// How far a restore raises each imported key's epoch high-water mark: an
/// export is a snapshot, and the exporting server may have granted epochs
/// after it; none of them is granted again after the restore.
pub const RESTORE_EPOCH_MARGIN: i64 = 1 << 20;

/// The epoch after `state`'s high-water mark, or `EPOCH_EXHAUSTED` when it
/// would pass [`EPOCH_CEILING`].
pub fn next_epoch(state: &KeyState) -> Result<i64, CoreError> {
    match state.epoch.checked_add(1) {
        Some(next) if next <= EPOCH_CEILING => Ok(next),
        _ => Err(CoreError::EpochExhausted {
            key: state.key.clone(),
            epoch: state.epoch,
            ceiling: EPOCH_CEILING,
        }),
    }
}

/// The server's lease time bounds (L4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasePolicy {
    /// Shortest ttl granted.
    pub min_ttl: Duration,
    /// Longest ttl granted.
    pub max_ttl: Duration,
    /// Ttl granted when the request names none.
    pub default_ttl: Duration,
}

impl Default for LeasePolicy {
    fn default() -> Self {
        Self {
            min_ttl: Duration::from_secs(5),
            max_ttl: Duration::from_secs(600),
            default_ttl: Duration::from_secs(30),
        }
    }
}

impl LeasePolicy {
    /// Checks `min <= default <= max` and `min > 0`.
    pub fn validate(&self) -> Result<(), String> {
        if self.min_ttl.is_zero() {
            return Err("the minimum lease ttl must be positive".into());
        }
        if !(self.min_ttl <= self.default_ttl && self.default_ttl <= self.max_ttl) {
            return Err(format!(
                "lease ttls must satisfy min <= default <= max (got min {:?}, default {:?}, max {:?})",
                self.min_ttl, self.default_ttl, self.max_ttl
            ));
        }
        Ok(())
    }

    /// L4: the ttl granted for a request; `None` or zero means the default.
    pub fn clamp(&self, requested: Option<Duration>) -> Duration {
        match requested {
            None => self.default_ttl,
            Some(ttl) if ttl.is_zero() => self.default_ttl,
            Some(ttl) => ttl.clamp(self.min_ttl, self.max_ttl),
        }
    }
}

/// What an acquisition granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquired {
    /// The new lease.
    pub lease: LeaseRecord,
    /// The key's consumer record, if any.
    pub consumer: Option<ConsumerRecord>,
    /// Whether an unreleased lease was superseded.
    pub takeover: bool,
    /// The superseded lease's epoch.
    pub previous_epoch: Option<i64>,
    /// The superseded lease's holder.
    pub previous_holder: Option<String>,
}

/// A lease request: who asks, for how long, and the id the new grant gets.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    /// The query's stable identity.
    pub holder: &'a str,
    /// The authenticated principal asking.
    pub principal: &'a str,
    /// Requested ttl (`None`: the default).
    pub ttl: Option<Duration>,
    /// The id of the new grant.
    pub lease_id: Uuid,
    /// Where the request came from.
    pub caller: &'a Caller,
}

/// L1–L4: grants the key's lease to `request.holder`.
///
/// Succeeds when no lease is live, or when the live lease is the holder's own
/// and was acquired with the same credentials (a restarted query takes over
/// at once, L3). The new epoch is the key's
/// high-water mark + 1, so epochs are never reused. A consumer that has
/// expired (E2) is deleted first, so the new lease never revives it.
pub fn acquire(
    state: Option<&KeyState>,
    key: &ConsumerKey,
    request: LeaseRequest<'_>,
    policy: &LeasePolicy,
    expiration: Option<Duration>,
    now: Timestamp,
) -> Result<Transition<Acquired>, CoreError> {
    let LeaseRequest {
        holder,
        principal,
        ttl: requested_ttl,
        lease_id: new_lease_id,
        caller,
    } = request;
    let mut next = state.cloned().unwrap_or_else(|| KeyState::new(key.clone()));
    // A takeover needs the same holder *and* the same credentials: knowing a
    // query's holder string is not enough to steal its lease.
    if let Some(live) = next.live_lease(now)
        && (live.holder != holder || live.principal != principal)
    {
        return Err(CoreError::LeaseHeld {
            key: Box::new(key.clone()),
            holder: live.holder.clone(),
            epoch: live.epoch,
            remaining: live.remaining(now),
            claimant: crate::error::Claimant::Query,
        });
    }
    let mut events = Vec::new();
    let expired = crate::expiry::expire(Some(&next), expiration, now);
    if let Some(expired_state) = expired.write {
        next = expired_state;
        events.extend(expired.events);
    }
    let previous = next.lease.as_ref().filter(|l| l.status == LeaseStatus::Active);
    let takeover = previous.is_some();
    let previous_epoch = previous.map(|l| l.epoch);
    let previous_holder = previous.map(|l| l.holder.clone());

    let ttl = policy.clamp(requested_ttl);
    next.epoch = next_epoch(&next)?;
    let lease = LeaseRecord {
        lease_id: new_lease_id,
        holder: holder.to_owned(),
        principal: principal.to_owned(),
        epoch: next.epoch,
        ttl,
        acquired_at: now,
        deadline: now.plus(ttl),
        status: LeaseStatus::Active,
        last_batch: None,
        wrote_consumer: false,
        legacy_warned_snapshot: None,
        full_scan_pin: None,
        caller: caller.clone(),
        committed_at: None,
    };
    next.lease = Some(lease.clone());

    let kind = if takeover {
        EventKind::LeaseTakeover
    } else {
        EventKind::LeaseAcquire
    };
    let mut event = HistoryEvent::new(kind, next.next_snapshot(), next.next_snapshot()).with_lease(&lease);
    if let (Some(epoch), Some(holder)) = (previous_epoch, &previous_holder) {
        event.detail = Some(format!("superseded epoch {epoch} held by {holder:?}"));
    }
    events.push(event);
    let output = Acquired {
        lease,
        consumer: next.consumer,
        takeover,
        previous_epoch,
        previous_holder,
    };
    Ok(Transition {
        write: Some(next),
        requires_live_lease: false,
        events,
        output,
    })
}

/// C1/L5: the key's live lease, if it is the presented `(lease_id, epoch)`.
///
/// `state` is the state of the key the lease was granted on (`None` when the
/// lease id is unknown).
pub fn check_lease(
    state: Option<&KeyState>,
    lease_id: Uuid,
    epoch: i64,
    now: Timestamp,
) -> Result<&LeaseRecord, CoreError> {
    let not_held = |loss: LeaseLoss| CoreError::LeaseNotHeld {
        lease_id,
        loss,
        current_epoch: state.map(|s| s.epoch),
    };
    let Some(state) = state else {
        return Err(not_held(LeaseLoss::Unknown));
    };
    let Some(lease) = state.lease.as_ref().filter(|l| l.lease_id == lease_id) else {
        return Err(not_held(LeaseLoss::Superseded));
    };
    if lease.epoch != epoch && !crate::mutant!("lease_ignores_epoch") {
        return Err(not_held(LeaseLoss::EpochMismatch));
    }
    match lease.status {
        LeaseStatus::Released => Err(not_held(LeaseLoss::Released)),
        LeaseStatus::Revoked => Err(not_held(LeaseLoss::Revoked)),
        LeaseStatus::Active if now >= lease.deadline && !crate::mutant!("lease_ignores_expiry") => {
            Err(not_held(LeaseLoss::Expired))
        }
        LeaseStatus::Active => Ok(lease),
    }
}

/// L5: extends a live lease by its ttl (or by a new, clamped ttl). Returns
/// the time left.
pub fn renew(
    state: Option<&KeyState>,
    lease_id: Uuid,
    epoch: i64,
    requested_ttl: Option<Duration>,
    policy: &LeasePolicy,
    now: Timestamp,
) -> Result<Transition<Duration>, CoreError> {
    let lease = check_lease(state, lease_id, epoch, now)?;
    let ttl = match requested_ttl {
        Some(_) => policy.clamp(requested_ttl),
        None => lease.ttl,
    };
    let mut next = state.expect("check_lease found the state").clone();
    let lease = next.lease.as_mut().expect("check_lease found the lease");
    lease.ttl = ttl;
    lease.deadline = now.plus(ttl);
    Ok(Transition {
        write: Some(next),
        requires_live_lease: true,
        events: Vec::new(),
        output: ttl,
    })
}

/// L6: ends a live lease at once. Idempotent: a lease that is not live (or not
/// this key's) is left alone and the answer is `false`.
pub fn release(state: Option<&KeyState>, lease_id: Uuid, epoch: i64, now: Timestamp) -> Transition<bool> {
    if check_lease(state, lease_id, epoch, now).is_err() {
        return Transition::read_only(false);
    }
    let mut next = state.expect("check_lease found the state").clone();
    let lease = next.lease.as_mut().expect("check_lease found the lease");
    lease.status = LeaseStatus::Released;
    lease.deadline = now;
    lease.full_scan_pin = None;
    let event = HistoryEvent::new(EventKind::LeaseRelease, next.next_snapshot(), next.next_snapshot())
        .with_lease(next.lease.as_ref().expect("just set"));
    Transition {
        write: Some(next),
        requires_live_lease: true,
        events: vec![event],
        output: true,
    }
}

/// What a revocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    /// The revoked lease, when one was live.
    pub lease: Option<LeaseRecord>,
    /// The key's epoch after the revocation.
    pub epoch: i64,
}

/// A4 in bulk: revokes the key's live lease only if it is `seen` (the one
/// the listing showed); a lease that ended or was replaced since is left
/// alone, as if none were live.
pub fn revoke_seen(
    state: Option<&KeyState>,
    now: Timestamp,
    reason: &str,
    seen: Uuid,
) -> Result<Transition<Revoked>, CoreError> {
    match state.and_then(|s| s.live_lease(now)) {
        Some(live) if live.lease_id == seen => revoke(state, now, reason),
        _ => Ok(Transition::read_only(Revoked {
            lease: None,
            epoch: state.map_or(0, |s| s.epoch),
        })),
    }
}

/// A4 executed as planned: revokes the key's live lease only if it is
/// `expected` (the lease the plan saw; `None`: none was live). A lease
/// granted since (or gone) refuses the change with `LEASE_MISMATCH`.
pub fn revoke_expecting(
    state: Option<&KeyState>,
    key: &ConsumerKey,
    now: Timestamp,
    reason: &str,
    expected: Option<Uuid>,
) -> Result<Transition<Revoked>, CoreError> {
    let live = state.and_then(|s| s.live_lease(now)).map(|l| l.lease_id);
    if live != expected {
        return Err(CoreError::LeaseMismatch {
            key: Box::new(key.clone()),
            expected,
            actual: live,
        });
    }
    revoke(state, now, reason)
}

/// L8: ends the key's live lease and burns an epoch, so the running query is
/// fenced. A key with no live lease is left alone; one whose epochs are
/// used up is refused (`EPOCH_EXHAUSTED`), since a revocation that burns no
/// epoch would not fence the running query.
pub fn revoke(state: Option<&KeyState>, now: Timestamp, reason: &str) -> Result<Transition<Revoked>, CoreError> {
    let Some(state) = state else {
        return Ok(Transition::read_only(Revoked { lease: None, epoch: 0 }));
    };
    if state.live_lease(now).is_none() {
        return Ok(Transition::read_only(Revoked {
            lease: None,
            epoch: state.epoch,
        }));
    }
    let mut next = state.clone();
    next.epoch = next_epoch(&next)?;
    let lease = next.lease.as_mut().expect("live lease");
    lease.status = LeaseStatus::Revoked;
    lease.deadline = now;
    lease.full_scan_pin = None;
    let lease = lease.clone();
    let mut event =
        HistoryEvent::new(EventKind::LeaseRevoke, next.next_snapshot(), next.next_snapshot()).with_lease(&lease);
    event.detail = Some(reason.to_owned());
    Ok(Transition {
        output: Revoked {
            lease: Some(lease),
            epoch: next.epoch,
        },
        write: Some(next),
        requires_live_lease: false,
        events: vec![event],
    })
}
