//! Fleet figures on SQLite: one process owns the file, so it always
//! collects, and history has a b-tree index on `at`.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;

use super::SqliteBackend;
use crate::Timestamp;
use crate::error::StoreError;
use crate::stats::{BranchStats, ConsumerLagRow, FleetStats, PoolStats, StatsStore};

const BRANCHES: &str = "WITH c AS (
        SELECT table_name, branch, next_snapshot, consumer_updated_at,
               max(latest_snapshot) OVER (PARTITION BY table_name, branch) AS branch_latest
        FROM consumer_keys WHERE next_snapshot IS NOT NULL)
    SELECT table_name, branch, count(*) AS consumers, min(next_snapshot) AS min_next,
           max(branch_latest) AS branch_latest,
           min(consumer_updated_at) FILTER (WHERE next_snapshot <= branch_latest) AS oldest_behind
    FROM c GROUP BY table_name, branch ORDER BY table_name, branch LIMIT ?1";

const WORST: &str = "WITH c AS (
        SELECT table_name, branch, consumer_id, next_snapshot,
               max(latest_snapshot) OVER (PARTITION BY table_name, branch) AS branch_latest
        FROM consumer_keys WHERE next_snapshot IS NOT NULL)
    SELECT table_name, branch, consumer_id, next_snapshot, branch_latest FROM c
    WHERE branch_latest IS NOT NULL
    ORDER BY branch_latest - next_snapshot DESC, table_name, branch, consumer_id LIMIT ?1";

const LIVE_LEASES: &str = "SELECT count(*) FROM consumer_keys WHERE lease_status = 1 AND lease_deadline > ?1";

#[async_trait]
impl StatsStore for SqliteBackend {
    async fn claim_collector(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn fleet_stats(
        &self,
        branch_limit: i64,
        worst: i64,
        history_retention: Option<Duration>,
        _window: Duration,
    ) -> Result<FleetStats, StoreError> {
        let now = self.clock.now();
        let mut stats = FleetStats {
            now,
            ..FleetStats::default()
        };
        stats.live_leases = sqlx::query_scalar(LIVE_LEASES)
            .bind(now.as_micros())
            .fetch_one(&self.readers)
            .await?;
        for row in sqlx::query(BRANCHES)
            .bind(branch_limit)
            .fetch_all(&self.readers)
            .await?
        {
            stats.branches.push(BranchStats {
                table: row.try_get("table_name")?,
                branch: row.try_get("branch")?,
                consumers: row.try_get("consumers")?,
                min_next: row.try_get("min_next")?,
                reported_latest: row.try_get("branch_latest")?,
                oldest_behind: row
                    .try_get::<Option<i64>, _>("oldest_behind")?
                    .map(Timestamp::from_micros),
            });
        }
        if worst > 0 {
            for row in sqlx::query(WORST).bind(worst).fetch_all(&self.readers).await? {
                stats.worst.push(ConsumerLagRow {
                    table: row.try_get("table_name")?,
                    branch: row.try_get("branch")?,
                    consumer_id: row.try_get("consumer_id")?,
                    next_snapshot: row.try_get("next_snapshot")?,
                    branch_latest: row.try_get("branch_latest")?,
                });
            }
        }
        stats.history_rows = Some(
            sqlx::query_scalar("SELECT count(*) FROM history")
                .fetch_one(&self.readers)
                .await?,
        );
        if history_retention.is_some() {
            let oldest: Option<i64> = sqlx::query_scalar("SELECT min(at) FROM history")
                .fetch_one(&self.readers)
                .await?;
            stats.history_oldest = oldest.map(Timestamp::from_micros);
        }
        Ok(stats)
    }

    fn pool_stats(&self) -> PoolStats {
        // An in-memory database has one pool for both.
        let open = if self.path.is_some() {
            self.readers.size() + self.writer.size()
        } else {
            self.writer.size()
        };
        let idle = u32::try_from(self.readers.num_idle() + self.writer.num_idle()).unwrap_or(open);
        PoolStats {
            open,
            idle,
            max: super::WRITERS + super::READERS,
        }
    }
}
