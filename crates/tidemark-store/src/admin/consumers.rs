//! Operator calls on one consumer: describe, list, reset, import, delete,
//! revoke.

use tidemark_core::admin::{self, AdminChange};
use tidemark_core::lease;
use tidemark_core::{BranchName, ConsumerKey, CoreError, EventKind, Revoked, TableName};
use tracing::Instrument;

use super::{ConsumerView, Planned};
use crate::backend::{CallContext, FindKey, HistoryRecord, KeyFilter, MAX_PAGE};
use crate::error::StoreError;
use crate::store::Store;

/// One page of a consumer listing.
#[derive(Debug, Clone)]
pub struct ConsumerPage {
    /// The keys on this page.
    pub consumers: Vec<ConsumerView>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<ConsumerKey>,
}

impl Store {
    /// Whether tidemark has seen `table` (a key, a registration or options).
    pub async fn table_known(&self, table: &TableName) -> Result<bool, StoreError> {
        self.backend()
            .table_known(table)
            .instrument(self.statement("table known"))
            .await
    }

    /// Up to `limit` table names tidemark has seen, by name.
    pub async fn known_tables(&self, limit: i64) -> Result<Vec<String>, StoreError> {
        self.backend()
            .known_tables(limit)
            .instrument(self.statement("known tables"))
            .await
    }

    /// The highest latest snapshot any worker of the branch reported.
    pub async fn reported_latest(&self, table: &TableName, branch: &BranchName) -> Result<Option<i64>, StoreError> {
        self.backend()
            .reported_latest(table, branch)
            .instrument(self.statement("reported latest"))
            .await
    }

    /// A1: a key's state, options and idle/expiry times, with its recent
    /// history. NOT_FOUND when the key has neither a consumer nor a lease.
    pub async fn describe(
        &self,
        key: &ConsumerKey,
        history: i64,
    ) -> Result<(ConsumerView, Vec<HistoryRecord>), StoreError> {
        // One snapshot for the row and its history (SPEC §8).
        let (loaded, recent) = self
            .backend()
            .load_with_history(key, history)
            .instrument(self.statement("load with history"))
            .await?;
        let Some(state) = loaded.state.filter(|s| s.consumer.is_some() || s.lease.is_some()) else {
            return Err(CoreError::ConsumerNotFound {
                key: key.clone(),
                suggestion: None,
            }
            .into());
        };
        Ok((ConsumerView::new(state, loaded.options, loaded.now), recent))
    }

    /// A1: keys with a consumer or a live lease, in key order.
    pub async fn list_consumers(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        page_size: i64,
    ) -> Result<ConsumerPage, StoreError> {
        let page_size = page_size.clamp(1, MAX_PAGE);
        // One extra row says whether there is a next page.
        let listed = self
            .backend()
            .list_keys(filter, after, page_size + 1)
            .instrument(self.statement("list keys"))
            .await?;
        let now = listed.now;
        let mut consumers: Vec<ConsumerView> = listed
            .rows
            .into_iter()
            .map(|(state, options)| ConsumerView::new(state, options, now))
            .collect();
        let next = if consumers.len() > usize::try_from(page_size).unwrap_or(usize::MAX) {
            consumers.pop();
            consumers.last().map(|c| c.state.key.clone())
        } else {
            None
        };
        Ok(ConsumerPage { consumers, next })
    }

    /// A2: sets a consumer's position (plan-only unless `execute`).
    pub async fn reset_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        next_snapshot: i64,
        expected: Option<i64>,
        force: impl Into<admin::Force>,
        execute: bool,
    ) -> Result<Planned<AdminChange>, StoreError> {
        let force = force.into();
        self.plan_or_apply(execute, FindKey::Key(key), ctx, |loaded| {
            admin::reset(loaded.state.as_ref(), key, next_snapshot, expected, force, loaded.now)
        })
        .await
    }

    /// SPEC §9: creates a consumer from a Paimon consumer file, only if the
    /// key still has none (compare-and-set: a consumer created meanwhile
    /// wins, and the answer says so).
    pub async fn import_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        next_snapshot: i64,
    ) -> Result<admin::Imported, StoreError> {
        self.apply(FindKey::Key(key), ctx, |loaded| {
            admin::import(loaded.state.as_ref(), key, next_snapshot, loaded.now)
        })
        .await
    }

    /// A2: deletes a consumer (plan-only unless `execute`).
    pub async fn delete_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        expected: Option<i64>,
        force: impl Into<admin::Force>,
        execute: bool,
    ) -> Result<Planned<AdminChange>, StoreError> {
        let force = force.into();
        self.plan_or_apply(execute, FindKey::Key(key), ctx, |loaded| {
            admin::delete(
                loaded.state.as_ref(),
                key,
                expected,
                force,
                loaded.now,
                EventKind::Delete,
            )
        })
        .await
    }

    /// L8/A4: revokes a key's live lease and burns an epoch (plan-only
    /// unless `execute`).
    pub async fn revoke(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        reason: &str,
        execute: bool,
    ) -> Result<Planned<Revoked>, StoreError> {
        self.revoke_expecting(ctx, key, reason, None, execute).await
    }

    /// A4 executed as planned: with `expected` (the lease the plan saw;
    /// `Some(None)`: none), a lease granted since refuses the revocation
    /// (`LEASE_MISMATCH`).
    pub async fn revoke_expecting(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        reason: &str,
        expected: Option<Option<uuid::Uuid>>,
        execute: bool,
    ) -> Result<Planned<Revoked>, StoreError> {
        self.plan_or_apply(execute, FindKey::Key(key), ctx, |loaded| match expected {
            None => lease::revoke(loaded.state.as_ref(), loaded.now, reason),
            Some(lease) => lease::revoke_expecting(loaded.state.as_ref(), key, loaded.now, reason, lease),
        })
        .await
    }
}
