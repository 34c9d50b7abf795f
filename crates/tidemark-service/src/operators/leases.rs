//! The operator calls on leases (SPEC §11 A5): revoking one consumer's
//! lease, or the live leases of a selection, each with a reason.

use std::time::Instant;

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::{ConsumerKey, Revoked};
use tidemark_store::{CallContext, KeyFilter, Planned, StoreError};

use crate::app::App;

impl App {
    /// RevokeLease: ends `key`'s lease (a plan unless `execute`).
    pub async fn revoke_lease(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        reason: &str,
        execute: bool,
    ) -> Result<Planned<Revoked>, StoreError> {
        let planned = self.store.revoke(ctx, key, reason, execute).await?;
        if planned.change.lease.is_none() {
            // Nothing was live: a key with neither consumer nor lease is a
            // name tidemark does not know (a typo must not read as "no live
            // lease to revoke").
            let found = self.store.describe(key, 0).await.map(|_| ());
            self.suggesting(ctx, key, found).await?;
        }
        Ok(planned)
    }

    /// RevokeLeases: ends the selected live leases under `filter` until
    /// `until`; the keys revoked, and those not reached in time.
    pub async fn revoke_leases(
        &self,
        ctx: &CallContext,
        filter: &KeyFilter,
        selector: &ConsumerSelector,
        reason: &str,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<(Vec<(ConsumerKey, Revoked)>, Vec<ConsumerKey>), StoreError> {
        self.store
            .revoke_leases(ctx, filter, selector, reason, execute, until)
            .await
    }
}
