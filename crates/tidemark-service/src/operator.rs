//! The operator calls with more than the store in them (SPEC §9, §11):
//! listings and descriptions with a registered table's lag and mirror
//! file, registration with its probe and allow-list, importing a table's
//! consumer files, and bulk resets resolved against the table's snapshots.

use std::collections::HashMap;
use std::time::Instant;

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::reset::{ResetTarget, TableSnapshots, resolve};
use tidemark_core::{BranchName, ConsumerKey, CoreError, TableName};
use tidemark_paimon::{PaimonTable, SnapshotRange};
use tidemark_store::{BulkChange, CallContext, ConsumerView, HistoryRecord, KeyFilter, RegisteredTable, StoreError};

use crate::app::App;
use crate::registry::{self, ImportOutcome, MirrorFile};
use crate::tables::{Lag, reset_snapshots};

/// A consumer as an operator sees it: its state, and its lag when its
/// table is registered.
#[derive(Debug, Clone)]
pub struct Consumer {
    /// Its state, options and liveness.
    pub view: ConsumerView,
    /// Its lag, when its table is registered.
    pub lag: Option<Lag>,
}

impl Consumer {
    /// Snapshots left to read: up to a registered table's latest snapshot,
    /// else up to the latest a worker last reported (as ListConsumers
    /// gives it).
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

/// What RegisterTable did (or, in a plan, would do).
#[derive(Debug, Clone)]
pub struct Registration {
    /// The registration as it stands (or would stand).
    pub table: RegisteredTable,
    /// The location it replaced, if it moved.
    pub previous_location: Option<String>,
    /// The main branch's snapshots in the directory, if any.
    pub range: Option<SnapshotRange>,
    /// Why the range could not be read ("" when it was).
    pub probe_error: String,
    /// What an operator should know.
    pub warnings: Vec<String>,
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
        force: bool,
        execute: bool,
    ) -> Result<tidemark_store::Planned<tidemark_core::admin::AdminChange>, StoreError> {
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
            Ok(Some(range)) if next > range.latest.saturating_add(1) => Err(CoreError::PositionAheadOfTable {
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
    pub async fn describe(&self, key: &ConsumerKey, history_limit: i64) -> Result<Described, StoreError> {
        let (view, history) = self.store.describe(key, history_limit).await?;
        let mut described = Described {
            consumer: Consumer { view, lag: None },
            history,
            mirror: None,
        };
        if let Some(registered) = registry::registration(&self.store, &key.table).await? {
            let view = &described.consumer.view;
            let found = registry::mirror_view(&self.store, &registered, key, view.state.next_snapshot()).await?;
            // A registered table's latest snapshot comes from its
            // directory, not from what the last worker reported.
            if found.directory_latest.is_some() {
                described.consumer.lag = self.lag(view, found.directory_latest).await;
            }
            described.mirror = Some(found.file);
        }
        Ok(described)
    }

    async fn lag(&self, view: &ConsumerView, directory_latest: Option<i64>) -> Option<Lag> {
        let next = view.state.consumer.as_ref()?.next_snapshot;
        self.tables.lag(&view.state.key, next, directory_latest, view.now).await
    }

    /// RegisterTable (SPEC §9): the location checked against the allow-list
    /// before anything reads it, then probed (range, identity, Paimon's own
    /// consumer expiration); recorded and audited when `execute`.
    pub async fn register(
        &self,
        ctx: &CallContext,
        table: &TableName,
        location: &PaimonTable,
        execute: bool,
    ) -> Result<Registration, StoreError> {
        self.check_location(&ctx.principal, location.location())?;
        let previous = registry::registration(&self.store, table).await?;
        let mut probe = registry::probe(table, location, self.mirror_refresh).await;
        probe.warnings.splice(0..0, table.spelling_warning());
        if execute {
            self.store
                .paimon()
                .register_table(table, location.location(), probe.identity.as_deref(), ctx)
                .await?;
            self.tables.forget_registrations();
            let before = previous.as_ref().map(|p| p.location.as_str()).unwrap_or_default();
            tidemark_store::audit::table_change(ctx, table.as_str(), "REGISTER", before, location.location());
        }
        let registered = match registry::registration(&self.store, table).await? {
            Some(now) if execute => now,
            _ => RegisteredTable {
                table: table.clone(),
                location: location.location().to_owned(),
                registered_at: tidemark_core::Timestamp::from_micros(0),
                registered_by: ctx.principal.clone(),
                identity: probe.identity,
            },
        };
        Ok(Registration {
            table: registered,
            previous_location: previous.map(|p| p.location).filter(|l| l != location.location()),
            range: probe.range,
            probe_error: probe.error,
            warnings: probe.warnings,
        })
    }

    /// UnregisterTable: whether the table was registered (audited when
    /// `execute` removed it).
    pub async fn unregister(&self, ctx: &CallContext, table: &TableName, execute: bool) -> Result<bool, StoreError> {
        if !execute {
            return Ok(registry::registration(&self.store, table).await?.is_some());
        }
        let previous = registry::registration(&self.store, table).await?;
        let was = self.store.paimon().unregister_table(table).await?;
        self.tables.forget_registrations();
        if was {
            let location = previous.map(|p| p.location).unwrap_or_default();
            tidemark_store::audit::table_change(ctx, table.as_str(), "UNREGISTER", &location, "");
        }
        Ok(was)
    }

    /// ImportConsumers (SPEC §9): the consumer files a registered table
    /// already has become consumers; `table` must be registered.
    pub async fn import_consumers(
        &self,
        ctx: &CallContext,
        table: &TableName,
        execute: bool,
    ) -> Result<Vec<ImportOutcome>, StoreError> {
        let Some(registered) = registry::registration(&self.store, table).await? else {
            return Err(CoreError::invalid("table", "is not registered (RegisterTable first)").into());
        };
        registry::import_consumers(&self.store, ctx, table, &registered, execute).await
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
        expected: &HashMap<String, i64>,
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
}
