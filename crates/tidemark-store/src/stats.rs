//! Figures about the whole fleet for the metrics: consumers and their lag
//! per branch, live leases, history size and age. Computed periodically by
//! one replica at a time ([`StatsStore::claim_collector`]), so gauges have
//! one writer and their cost is paid once, not by every replica.

use std::time::Duration;

use async_trait::async_trait;

use crate::Timestamp;
use crate::error::StoreError;
use tidemark_core::TableScope;

/// One branch's consumers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchStats {
    /// The table.
    pub table: String,
    /// The branch.
    pub branch: String,
    /// Consumers (keys with a position).
    pub consumers: i64,
    /// The lowest position.
    pub min_next: i64,
    /// The highest latest snapshot any of its consumers reported.
    pub reported_latest: Option<i64>,
    /// The oldest `updated_at` among consumers with snapshots left to read
    /// (by the branch's reported latest): how long the most idle consumer
    /// that is behind has not moved.
    pub oldest_behind: Option<Timestamp>,
}

/// One consumer and how far behind its branch it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerLagRow {
    /// The table.
    pub table: String,
    /// The branch.
    pub branch: String,
    /// The consumer.
    pub consumer_id: String,
    /// Its position.
    pub next_snapshot: i64,
    /// The branch's highest reported latest snapshot.
    pub branch_latest: i64,
}

/// What [`StatsStore::fleet_stats`] reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FleetStats {
    /// The database clock when it was computed.
    pub now: Timestamp,
    /// Per branch, in table and branch order.
    pub branches: Vec<BranchStats>,
    /// The consumers furthest behind, worst first (only when asked).
    pub worst: Vec<ConsumerLagRow>,
    /// Leases live now.
    pub live_leases: i64,
    /// History rows (on Postgres the planner's estimate, or a count capped
    /// at a million before the table was first analyzed).
    pub history_rows: Option<i64>,
    /// When the oldest history row was written, when it could be found
    /// cheaply (see [`StatsStore::fleet_stats`]).
    pub history_oldest: Option<Timestamp>,
}

/// The database connection pool's occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Connections open.
    pub open: u32,
    /// Of which idle.
    pub idle: u32,
    /// The most it may open.
    pub max: u32,
}

/// Fleet figures for the metrics.
#[async_trait]
pub trait StatsStore: Send + Sync + 'static {
    /// Whether this process computes the fleet's gauges now. On Postgres,
    /// one replica holds a session advisory lock on a connection it keeps
    /// (released when the process or its connection dies, so another
    /// replica takes over within a round); on SQLite, always.
    async fn claim_collector(&self) -> Result<bool, StoreError>;

    /// The fleet's figures: at most `branch_limit` branches and the
    /// `worst` consumers furthest behind. The oldest history row is looked
    /// for only when `history_retention` is set: in a small history (up to
    /// 100,000 rows) among all rows; in a larger one among rows older than
    /// the retention and then in widening windows (`window`, ×10, ×100,
    /// ×1000) younger than it, so the search reads about what pruning
    /// reads; it is `None` when none of those windows holds a row.
    async fn fleet_stats(
        &self,
        branch_limit: i64,
        worst: i64,
        history_retention: Option<Duration>,
        window: Duration,
    ) -> Result<FleetStats, StoreError>;

    /// The connection pool now.
    fn pool_stats(&self) -> PoolStats;

    /// Per branch (at most `limit`, in order), what the console's tables
    /// page shows, from aggregates in one statement: keys with a consumer
    /// or a live lease, of those leased and expired, the lowest position,
    /// and the most snapshots any consumer is behind the latest it reported.
    /// Only tables in `scope`, chosen by the statement itself.
    async fn branch_overview(&self, limit: i64, scope: &TableScope) -> Result<Vec<BranchOverview>, StoreError>;
}

/// One branch's row of [`StatsStore::branch_overview`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchOverview {
    /// The table.
    pub table: String,
    /// The branch.
    pub branch: String,
    /// Keys with a consumer or a live lease.
    pub keys: i64,
    /// Of those, keys whose lease is live.
    pub leased: i64,
    /// Of those, consumers that expired (E2).
    pub expired: i64,
    /// The lowest position (`None`: leases only).
    pub min_next: Option<i64>,
    /// The most snapshots a consumer is behind the latest it reported.
    pub worst_reported_lag: Option<i64>,
    /// The database's clock when read.
    pub now: Timestamp,
}

/// [`StatsStore::branch_overview`]'s statement. `{now}` is the dialect's
/// clock, `{limit}` its placeholder for the limit, `{in_scope}` its test of
/// `k.table_name` against the caller's scope.
pub(crate) fn branch_overview_sql(now: &str, limit: &str, in_scope: &str) -> String {
    let live = format!("(k.lease_status = 1 AND k.lease_deadline > {now})");
    format!(
        "SELECT k.table_name, k.branch, {now} AS db_now, count(*) AS keys,
                count(*) FILTER (WHERE {live}) AS leased,
                count(*) FILTER (WHERE k.next_snapshot IS NOT NULL AND o.expiration_us IS NOT NULL
                                 AND k.consumer_updated_at < {now} - {expiration} AND NOT {live}) AS expired,
                min(k.next_snapshot) AS min_next,
                max(CASE WHEN k.latest_snapshot >= k.next_snapshot THEN k.latest_snapshot - k.next_snapshot + 1
                         WHEN k.latest_snapshot IS NOT NULL AND k.next_snapshot IS NOT NULL THEN 0 END)
                  AS worst_reported_lag
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE (k.next_snapshot IS NOT NULL OR {live}) AND {in_scope}
         GROUP BY k.table_name, k.branch ORDER BY k.table_name, k.branch LIMIT {limit}",
        expiration = if now.starts_with('?') {
            "o.expiration_us".to_owned()
        } else {
            "o.expiration_us * interval '1 microsecond'".to_owned()
        },
    )
}

/// Every consumer with a position, beside the highest latest snapshot any
/// consumer of its branch reported.
const WITH_BRANCH_LATEST: &str = "WITH c AS (
            SELECT table_name, branch, consumer_id, next_snapshot, consumer_updated_at,
                   max(latest_snapshot) OVER (PARTITION BY table_name, branch) AS branch_latest
            FROM consumer_keys WHERE next_snapshot IS NOT NULL)";

/// Per branch: consumers, lowest position, the highest latest snapshot
/// reported, and the oldest `updated_at` among consumers behind that latest.
/// `{limit}` is the dialect's first placeholder.
pub(crate) fn branches_sql(limit: &str) -> String {
    format!(
        "{WITH_BRANCH_LATEST}
        SELECT table_name, branch, count(*) AS consumers, min(next_snapshot) AS min_next,
               max(branch_latest) AS branch_latest,
               min(consumer_updated_at) FILTER (WHERE next_snapshot <= branch_latest) AS oldest_behind
        FROM c GROUP BY table_name, branch ORDER BY table_name, branch LIMIT {limit}"
    )
}

/// The consumers furthest behind their branch's reported latest, worst
/// first. `{limit}` is the dialect's first placeholder.
pub(crate) fn worst_sql(limit: &str) -> String {
    format!(
        "{WITH_BRANCH_LATEST}
        SELECT table_name, branch, consumer_id, next_snapshot, branch_latest FROM c
        WHERE branch_latest IS NOT NULL
        ORDER BY branch_latest - next_snapshot DESC, table_name, branch, consumer_id LIMIT {limit}"
    )
}

/// The ages at which the oldest history row is looked for, oldest first:
/// the retention, then windows widening by ten below it, down to zero.
pub(crate) fn oldest_probe_ages(retention: Duration, window: Duration) -> Vec<Duration> {
    let mut ages = vec![retention];
    let mut width = window;
    for _ in 0..4 {
        let age = retention.saturating_sub(width);
        ages.push(age);
        if age.is_zero() {
            break;
        }
        width *= 10;
    }
    ages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_widen_below_the_retention_and_stop_at_zero() {
        let day = Duration::from_secs(86_400);
        let minute = Duration::from_secs(60);
        assert_eq!(
            oldest_probe_ages(30 * day, 2 * minute),
            vec![
                30 * day,
                30 * day - 2 * minute,
                30 * day - 20 * minute,
                30 * day - 200 * minute,
                30 * day - 2000 * minute
            ]
        );
        assert_eq!(
            oldest_probe_ages(Duration::from_secs(300), minute),
            vec![Duration::from_secs(300), Duration::from_secs(240), Duration::ZERO]
        );
    }
}
