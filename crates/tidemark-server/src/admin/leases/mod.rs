//! The operator calls on leases, one file per call.

pub(super) mod revoke;
pub(super) mod revoke_many;
