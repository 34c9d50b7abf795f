//! Consumer expiration (SPEC §5, rule E2).

use std::time::Duration;

use crate::state::{EventKind, HistoryEvent, KeyState, Transition};
use crate::time::Timestamp;

/// E2: a consumer is expired when `updated_at + expiration < now` and no live
/// lease holds it. Without an expiration time (the table option unset)
/// consumers never expire. A key without a consumer is not "expired".
pub fn consumer_expired(state: &KeyState, expiration: Option<Duration>, now: Timestamp) -> bool {
    let (Some(consumer), Some(expiration)) = (state.consumer, expiration) else {
        return false;
    };
    consumer.updated_at.plus(expiration) < now && state.live_lease(now).is_none()
}

/// E3: deletes the consumer if it has expired (idle past `expiration` with
/// no live lease), leaving a history row with its last position. Returns
/// the position it had, or `None` when it was not expired.
pub fn expire(state: Option<&KeyState>, expiration: Option<Duration>, now: Timestamp) -> Transition<Option<i64>> {
    let Some(state) = state.filter(|s| consumer_expired(s, expiration, now)) else {
        return Transition::read_only(None);
    };
    let consumer = state.consumer.expect("an expired consumer exists");
    let mut next = state.clone();
    next.consumer = None;
    let mut event = HistoryEvent::new(EventKind::Expire, Some(consumer.next_snapshot), None);
    event.detail = Some(format!(
        "idle for {} (expiration time {})",
        crate::options::Human(consumer.updated_at.until(now)),
        crate::options::format_duration(expiration.expect("expired implies an expiration"))
    ));
    Transition {
        write: Some(next),
        requires_live_lease: false,
        events: vec![event],
        output: Some(consumer.next_snapshot),
    }
}
