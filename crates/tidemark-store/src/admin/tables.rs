//! A table's options, and the history of its consumers (list, prune).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tidemark_core::{ConsumerKey, CoreError, TableName, TableOptions};
use tracing::Instrument;

use super::Planned;
use crate::backend::{CallContext, FindKey, HistoryFilter, HistoryRecord, MAX_PAGE, PruneRun, Pruned, StoredOptions};
use crate::error::StoreError;
use crate::store::Store;

/// A table-options change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsChange {
    /// The options before.
    pub before: StoredOptions,
    /// The options after.
    pub after: TableOptions,
}

impl Store {
    /// A5: deletes history rows and stale lease grants older than `max_age`.
    pub async fn prune(&self, max_age: Duration, limit: i64) -> Result<Pruned, StoreError> {
        self.backend()
            .prune(max_age, limit)
            .instrument(self.statement("prune"))
            .await
    }

    /// A5, keeping up with any commit rate: prunes `batch` rows at a time
    /// (each its own short transaction) until a batch finds fewer than
    /// `batch` rows to delete, or `budget` has passed. `caught_up` says
    /// which.
    pub async fn prune_until_caught_up(
        &self,
        max_age: Duration,
        batch: i64,
        budget: Duration,
    ) -> Result<PruneRun, StoreError> {
        let started = Instant::now();
        let mut run = PruneRun::default();
        loop {
            let pruned = self.prune(max_age, batch).await?;
            run.history += pruned.history;
            run.grants += pruned.grants;
            run.batches += 1;
            let full = |n: u64| i64::try_from(n).unwrap_or(i64::MAX) >= batch;
            if !full(pruned.history) && !full(pruned.grants) {
                run.caught_up = true;
                return Ok(run);
            }
            if started.elapsed() >= budget {
                return Ok(run);
            }
        }
    }

    /// A5: a page of history, newest first.
    pub async fn list_history(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        page_size: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        let page = self
            .backend()
            .history_page(filter, before_id, page_size.clamp(1, MAX_PAGE))
            .instrument(self.statement("history page"))
            .await?;
        // An empty first page of one consumer: a key tidemark has never
        // seen is NOT_FOUND (a typo must not read as "no history").
        if let (true, None, Some(branch), Some(consumer_id)) =
            (page.is_empty(), before_id, &filter.branch, &filter.consumer_id)
        {
            let key = ConsumerKey {
                table: filter.table.clone(),
                branch: branch.clone(),
                consumer_id: consumer_id.clone(),
            };
            if self.load(FindKey::Key(&key)).await?.state.is_none() {
                return Err(CoreError::ConsumerNotFound { key, suggestion: None }.into());
            }
        }
        Ok(page)
    }

    /// E1/A4: a table's options.
    pub async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        self.backend()
            .table_options(table)
            .instrument(self.statement("table options"))
            .await
    }

    /// E1/A4: changes a table's options (plan-only unless `execute`).
    pub async fn set_table_options(
        &self,
        ctx: &CallContext,
        table: &TableName,
        set: &BTreeMap<String, String>,
        unset: &[String],
        execute: bool,
    ) -> Result<Planned<OptionsChange>, StoreError> {
        for _ in 0..8 {
            let before = self
                .backend()
                .table_options(table)
                .instrument(self.statement("table options"))
                .await?;
            let after = before.options.apply(set, unset).map_err(CoreError::InvalidArgument)?;
            let change = OptionsChange { before, after };
            if !execute {
                return Ok(Planned { change, applied: false });
            }
            if self
                .backend()
                .save_table_options(table, &change.before, &after, ctx)
                .instrument(self.statement("save table options"))
                .await?
            {
                return Ok(Planned { change, applied: true });
            }
        }
        Err(StoreError::Contention)
    }
}
