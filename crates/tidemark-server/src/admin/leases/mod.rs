//! The operator calls on leases, one file per call.

pub(super) mod revoke;
pub(super) mod revoke_many;

use tidemark_core::validate::Violations;

/// Longest revoke reason kept in history.
const MAX_REASON: usize = 512;

/// A revoke's reason is free text kept in history and printed in tables:
/// bounded, and without control characters (Postgres cannot store a NUL
/// in text at all; a line break or an escape would garble what prints it).
pub(super) fn check_reason(v: &mut Violations, reason: &str) {
    let len = reason.chars().count();
    if len > MAX_REASON {
        v.add("reason", format!("must be at most {MAX_REASON} characters (got {len})"));
    }
    if reason.chars().any(char::is_control) {
        v.add("reason", "must not contain control characters");
    }
}
