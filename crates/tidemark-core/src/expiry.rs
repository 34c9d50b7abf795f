//! Consumer expiration (SPEC §5, rule E2).

use std::time::Duration;

use crate::state::KeyState;
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
