//! The operator calls on consumers (SPEC §11 A1–A6, E2): listings and
//! descriptions with a registered table's lag and mirror file, single and
//! bulk resets (resolved against the table's snapshots, never past its
//! latest), deletes, clears, expiry and history.

use std::time::Instant;

use tidemark_core::admin::{AdminChange, ConsumerSelector, Force};
use tidemark_core::reset::{ResetTarget, TableSnapshots, resolve};
use tidemark_core::{BranchName, ConsumerKey, CoreError, TableName};
use tidemark_store::{
    BulkChange, BulkExpected, CallContext, ConsumerView, Expired, HistoryFilter, HistoryRecord, KeyFilter, Planned,
    StoreError,
};

use crate::app::App;
use crate::registry::{self, MirrorFile};
use crate::tables::{Lag, reset_snapshots};

/// A consumer as an operator sees it: its state, and its lag when its
/// table is registered.
#[derive(Debug, Clone)]
pub struct Consumer {
    /// Its state, options and liveness.
    pub view: ConsumerView,
    /// Its lag, when a latest snapshot of its branch is known.
    pub lag: Option<Lag>,
}

impl Consumer {
    /// Snapshots left to read, up to the latest snapshot known now (as
    /// ListConsumers gives it); without one, up to what the consumer's own
    /// last commit reported.
    pub fn lag_snapshots(&self) -> Option<i64> {
        match &self.lag {
            Some(lag) => lag.snapshots,
            None => self.view.state.lag(),
        }
    }
}

/// One page of consumers.
#[derive(Debug, Clone)]
pub struct ConsumerListing {
    /// The consumers on this page, in key order.
    pub consumers: Vec<Consumer>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<ConsumerKey>,
}

/// One consumer in full.
#[derive(Debug, Clone)]
pub struct Described {
    /// The consumer.
    pub consumer: Consumer,
    /// Its latest history, newest first.
    pub history: Vec<HistoryRecord>,
    /// Its Paimon file, when its table is registered.
    pub mirror: Option<MirrorFile>,
}

impl App {
    /// A2: moves one consumer to `next_snapshot` (a plan unless `execute`),
    /// refusing a position past a registered table's latest snapshot + 1.
    pub async fn reset_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        next_snapshot: i64,
        expected: Option<i64>,
        force: Force,
        execute: bool,
    ) -> Result<Planned<AdminChange>, StoreError> {
        self.check_not_ahead_of_table(&key.table, key.branch.as_str(), next_snapshot)
            .await?;
        self.store
            .reset_consumer(ctx, key, next_snapshot, expected, force, execute)
            .await
    }

    /// A reset to past a registered table's latest snapshot + 1 is refused
    /// now, as recovery would refuse the position later
    /// (`POSITION_AHEAD_OF_TABLE`). The latest snapshot last read from the
    /// directory answers first, without waiting; the directory is read now
    /// only when that is unknown or says "ahead" (the table may have grown
    /// since), so resets cost no storage read once a replica has looked.
    /// Where the directory gives no bound (not registered, no snapshot,
    /// unreadable right now) the reset goes ahead.
    async fn check_not_ahead_of_table(&self, table: &TableName, branch: &str, next: i64) -> Result<(), StoreError> {
        if let Some(latest) = self.tables.last_known_latest(table, branch)
            && next <= latest.saturating_add(1)
        {
            return Ok(());
        }
        let Ok(Some(registered)) = self.tables.table(table).await else {
            return Ok(());
        };
        match registered.directory.snapshot_range(branch).await {
            Ok(Some(range)) if next > range.latest.saturating_add(1) => Err(CoreError::ResetAheadOfTable {
                next,
                latest: range.latest,
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// A1: a page of consumers, each with its registered table's lag.
    pub async fn list_consumers(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        page_size: i64,
    ) -> Result<ConsumerListing, StoreError> {
        let page = self.store.list_consumers(filter, after, page_size).await?;
        let mut consumers = Vec::with_capacity(page.consumers.len());
        for view in page.consumers {
            let lag = self.lag(&view, None).await;
            consumers.push(Consumer { view, lag });
        }
        Ok(ConsumerListing {
            consumers,
            next: page.next,
        })
    }

    /// A consumer, its recent history, and for a registered table its lag
    /// (up to the directory's latest snapshot) and its Paimon file.
    /// A key not found is told what it most likely meant (`ctx`'s scope
    /// bounds the suggestion).
    pub async fn describe(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        history_limit: i64,
    ) -> Result<Described, StoreError> {
        let found = self.store.describe(key, history_limit).await;
        let (view, history) = self.suggesting(ctx, key, found).await?;
        let mut described = Described {
            consumer: Consumer { view, lag: None },
            history,
            mirror: None,
        };
        let mut directory_latest = None;
        if let Some(registered) = crate::tables::registration(&self.store, &key.table).await? {
            let view = &described.consumer.view;
            let found = registry::mirror_view(&self.store, &registered, key, view.state.next_snapshot()).await?;
            // A registered table's directory, just read, knows its latest
            // snapshot best.
            directory_latest = found.directory_latest;
            described.mirror = Some(found.file);
        }
        described.consumer.lag = self.lag(&described.consumer.view, directory_latest).await;
        Ok(described)
    }

    async fn lag(&self, view: &ConsumerView, directory_latest: Option<i64>) -> Option<Lag> {
        let next = view.state.consumer.as_ref()?.next_snapshot;
        self.tables.lag(&view.state.key, next, directory_latest, view.now).await
    }

    /// A6: a bulk reset, its target resolved per consumer; a target that
    /// needs the table's snapshots (earliest, latest, a time) reads them
    /// from the registered table's directory, and they come back with the
    /// outcomes.
    #[allow(clippy::too_many_arguments)]
    pub async fn reset_consumers(
        &self,
        ctx: &CallContext,
        table: &TableName,
        branch: &BranchName,
        selector: &ConsumerSelector,
        target: ResetTarget,
        expected: &BulkExpected,
        force: bool,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<(Vec<BulkChange>, Option<TableSnapshots>), StoreError> {
        if let ResetTarget::Snapshot(id) = target {
            self.check_not_ahead_of_table(table, branch.as_str(), id).await?;
        }
        let snapshots = if target.needs_snapshots() {
            let at = match target {
                ResetTarget::Time(ms) => Some(ms),
                _ => None,
            };
            Some(reset_snapshots(&self.store, table, branch.as_str(), at).await?)
        } else {
            None
        };
        let changes = self
            .store
            .reset_consumers(
                ctx,
                table,
                branch,
                selector,
                |current| resolve(target, current, snapshots),
                expected,
                force,
                execute,
                until,
            )
            .await?;
        Ok((changes, snapshots))
    }

    /// A3: deletes one consumer (a plan unless `execute`).
    pub async fn delete_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        expected: Option<i64>,
        force: Force,
        execute: bool,
    ) -> Result<Planned<AdminChange>, StoreError> {
        let deleted = self.store.delete_consumer(ctx, key, expected, force, execute).await;
        self.suggesting(ctx, key, deleted).await
    }

    /// A4: deletes the selected consumers of a table's branch, each or none
    /// as it allows, until `until`.
    #[allow(clippy::too_many_arguments)]
    pub async fn clear_consumers(
        &self,
        ctx: &CallContext,
        table: &TableName,
        branch: &BranchName,
        selector: &ConsumerSelector,
        force: bool,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<Vec<BulkChange>, StoreError> {
        self.store
            .clear_consumers(ctx, table, branch, selector, force, execute, until)
            .await
    }

    /// E2 on request: consumers idle past their expiration, removed when
    /// `execute`.
    pub async fn expire_consumers(
        &self,
        ctx: &CallContext,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
        execute: bool,
    ) -> Result<Vec<Expired>, StoreError> {
        self.store.expire_consumers(ctx, table, branch, limit, execute).await
    }

    /// A page of history, newest first, before the entry `before` (if any).
    pub async fn list_history(
        &self,
        filter: &HistoryFilter,
        before: Option<i64>,
        page_size: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        self.store.list_history(filter, before, page_size).await
    }
}
