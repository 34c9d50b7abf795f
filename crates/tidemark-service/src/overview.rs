//! What the console shows (docs/operations.md, "Console"): every branch
//! with its consumers, worst lag and fence; one branch's consumers with
//! their mirror state; a branch's fence over its snapshots. Built from the
//! same calls the Admin and Retention handlers make, so the console and
//! the API cannot disagree.

use std::collections::BTreeMap;
use std::time::Duration;

use tidemark_core::{BranchName, ConsumerKey, TableName, TableScope};
use tidemark_paimon::SnapshotRange;
use tidemark_store::{Explanation, FenceReport, KeyFilter, MirrorState, RegisteredTable, StoreError};

use crate::app::App;
use crate::operators::Consumer;

/// Most branches one overview shows.
pub const OVERVIEW_BRANCH_LIMIT: i64 = 1_000;

/// One branch of a table, registered or seen through its consumers.
#[derive(Debug, Clone)]
pub struct BranchSummary {
    /// The table.
    pub table: TableName,
    /// The branch.
    pub branch: BranchName,
    /// The registration, when the table is registered.
    pub registration: Option<RegisteredTable>,
    /// Keys with a consumer or a live lease.
    pub consumers: usize,
    /// Of those, keys whose lease is live.
    pub leased: usize,
    /// Of those, consumers that have expired (they no longer fence).
    pub expired: usize,
    /// The worst lag in snapshots, when any consumer's lag is known.
    pub worst_lag_snapshots: Option<i64>,
    /// The longest time a consumer's next snapshot has waited.
    pub worst_lag_time: Option<Duration>,
    /// The fence and the holders that set it.
    pub fence: Option<FenceReport>,
}

/// Every branch in scope, and whether the walk stopped at the limit.
#[derive(Debug, Clone)]
pub struct Overview {
    /// Branches by (table, branch).
    pub branches: Vec<BranchSummary>,
    /// Whether more branches exist than the overview shows.
    pub truncated: bool,
}

/// One consumer on a table's page: the listing's row and its mirror state.
#[derive(Debug, Clone)]
pub struct ConsumerRow {
    /// The consumer, with its lag.
    pub consumer: Consumer,
    /// What the mirror last wrote for it (registered tables).
    pub mirror: Option<MirrorState>,
}

/// One branch's consumers as a table page shows them.
#[derive(Debug, Clone)]
pub struct BranchConsumers {
    /// The consumers (at most the limit asked for), each with its mirror state.
    pub rows: Vec<ConsumerRow>,
    /// Whether more exist.
    pub truncated: bool,
    /// The table's registration, if it is registered.
    pub registration: Option<RegisteredTable>,
}

/// A branch's fence over its snapshots.
#[derive(Debug, Clone)]
pub struct FencePicture {
    /// Everything holding the branch back, lowest first.
    pub explanation: Explanation,
    /// The snapshots in the table's directory, when registered and readable.
    pub range: Option<SnapshotRange>,
    /// Why the directory could not be read ("" when it was, or is not registered).
    pub range_error: String,
}

impl App {
    /// Every branch (of tables registered, or seen through consumers) in
    /// `scope`, with consumer counts, worst lag and fence. Read from
    /// aggregates (one statement for every branch in scope, the scope
    /// applied by the statement, then a fence a branch shown), never from
    /// each consumer's row.
    pub async fn overview(&self, scope: &TableScope) -> Result<Overview, StoreError> {
        let in_scope = |table: &TableName| scope.allows(table);
        let mut branches: BTreeMap<(String, String), BranchSummary> = BTreeMap::new();
        let registered = crate::tables::registrations(&self.store).await?;
        for r in registered.iter().filter(|r| in_scope(&r.table)) {
            let branch = BranchName::main();
            branches.insert(
                (r.table.as_str().to_owned(), branch.as_str().to_owned()),
                BranchSummary::new(r.table.clone(), branch, Some(r.clone())),
            );
        }
        let rows = self.store.branch_overview(OVERVIEW_BRANCH_LIMIT, scope).await?;
        let truncated = rows.len() >= OVERVIEW_BRANCH_LIMIT as usize;
        for row in rows {
            // Names the store holds are valid; one that is not is skipped.
            let (Ok(table), Ok(branch)) = (
                TableName::parse(&row.table, "table"),
                BranchName::parse(&row.branch, "branch"),
            ) else {
                continue;
            };
            if !in_scope(&table) {
                continue;
            }
            let entry = branches
                .entry((row.table.clone(), row.branch.clone()))
                .or_insert_with(|| {
                    let registration = registered.iter().find(|r| r.table == table).cloned();
                    BranchSummary::new(table.clone(), branch.clone(), registration)
                });
            entry.consumers = usize::try_from(row.keys).unwrap_or(0);
            entry.leased = usize::try_from(row.leased).unwrap_or(0);
            entry.expired = usize::try_from(row.expired).unwrap_or(0);
            entry.worst_lag_snapshots = row.worst_reported_lag;
            // The lag counts to the latest snapshot known now; the lowest
            // position is the furthest behind.
            if let Some(min_next) = row.min_next
                && let Some(lag) = self
                    .tables
                    .branch_lag(&table, branch.as_str(), min_next, None, row.now)
                    .await
            {
                entry.worst_lag_snapshots = lag.snapshots.or(entry.worst_lag_snapshots);
                entry.worst_lag_time = lag.waited;
            }
        }
        for summary in branches.values_mut() {
            summary.fence = Some(self.store.fence(&summary.table, &summary.branch, false, 5).await?);
        }
        Ok(Overview {
            branches: branches.into_values().collect(),
            truncated,
        })
    }

    /// One branch's consumers (at most `limit`), each with its mirror
    /// state, whether more exist, and the table's registration.
    pub async fn branch_consumers(
        &self,
        table: &TableName,
        branch: &BranchName,
        limit: usize,
    ) -> Result<BranchConsumers, StoreError> {
        let filter = KeyFilter {
            table: Some(table.clone()),
            branch: Some(branch.clone()),
            consumer_id_prefix: None,
        };
        // Only whether it is registered (from the registrations every lag
        // reads, refreshed every few seconds and at once after a change on
        // this replica): the directory is not read here. One whose location
        // cannot be opened is registered too.
        let (registered, registration) = match self.tables.table(table).await {
            Ok(None) => (false, None),
            Ok(Some(found)) => (true, Some(found.registration)),
            // Registered, at a location that cannot be opened now.
            Err(_) => (true, crate::tables::registration(&self.store, table).await?),
        };
        // Every mirror state of the branch in one statement, not one per row.
        let mut mirrors = if registered {
            self.store.paimon().mirror_states(table, branch).await?
        } else {
            Default::default()
        };
        let (mut rows, mut after) = (Vec::new(), None::<ConsumerKey>);
        loop {
            let page = self
                .list_consumers(&filter, after.as_ref(), tidemark_store::MAX_PAGE)
                .await?;
            for consumer in page.consumers {
                let mirror = mirrors.remove(consumer.view.state.key.consumer_id.as_str());
                rows.push(ConsumerRow { consumer, mirror });
                if rows.len() >= limit {
                    let truncated = page.next.is_some();
                    return Ok(BranchConsumers {
                        rows,
                        truncated,
                        registration,
                    });
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => {
                    return Ok(BranchConsumers {
                        rows,
                        truncated: false,
                        registration,
                    });
                }
            }
        }
    }

    /// A branch's holders (at most `limit`) and, for a registered table,
    /// its snapshots.
    pub async fn fence_picture(
        &self,
        table: &TableName,
        branch: &BranchName,
        limit: i64,
    ) -> Result<FencePicture, StoreError> {
        let explanation = self.store.explain(table, branch, false, limit).await?;
        let (range, range_error) = match self.tables.table(table).await {
            Ok(Some(registered)) => match registered.directory.snapshot_range(branch.as_str()).await {
                Ok(range) => (range, String::new()),
                Err(e) => (None, e.to_string()),
            },
            Ok(None) => (None, String::new()),
            Err(e) => (None, e.to_string()),
        };
        Ok(FencePicture {
            explanation,
            range,
            range_error,
        })
    }
}

impl BranchSummary {
    fn new(table: TableName, branch: BranchName, registration: Option<RegisteredTable>) -> Self {
        Self {
            table,
            branch,
            registration,
            consumers: 0,
            leased: 0,
            expired: 0,
            worst_lag_snapshots: None,
            worst_lag_time: None,
            fence: None,
        }
    }
}
