//! The operator calls on leases (SPEC §11 A5): revoking one consumer's
//! lease, or the live leases of a selection, each with a reason.

use std::time::Instant;

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::suggest::Suggestion;
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
        expected: Option<Option<uuid::Uuid>>,
        execute: bool,
    ) -> Result<Planned<Revoked>, StoreError> {
        self.store.revoke_expecting(ctx, key, reason, expected, execute).await
    }

    /// After a revocation that found nothing live: whether tidemark knows
    /// the key (its epoch says it was leased, or it has a consumer), and
    /// if not, what the name most likely meant (a typo must not read as
    /// "no live lease to revoke").
    pub async fn revoked_nothing(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        epoch: i64,
    ) -> (bool, Option<Suggestion>) {
        if epoch > 0 {
            return (true, None);
        }
        match self.store.describe(key, 0).await {
            Ok(_) => (true, None),
            Err(_) => (false, self.suggest_consumer(ctx, key).await),
        }
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
