//! Fleet figures on SQLite: one process owns the file, so it always
//! collects, and history has a b-tree index on `at`.

use std::time::Duration;

use async_trait::async_trait;

use super::SqliteBackend;
use crate::Timestamp;
use crate::decode;
use crate::error::StoreError;
use crate::stats::{FleetStats, PoolStats, StatsStore, branches_sql, worst_sql};

static BRANCHES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| branches_sql("?1"));
static WORST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| worst_sql("?1"));
pub(super) static BRANCH_OVERVIEW: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    crate::stats::branch_overview_sql(
        "?2",
        "?1",
        "(?3 IS NULL OR EXISTS (SELECT 1 FROM json_each(?3) AS p WHERE k.table_name GLOB p.value))",
    )
});

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
        for row in sqlx::query(sqlx::AssertSqlSafe(BRANCHES.as_str()))
            .bind(branch_limit)
            .fetch_all(&self.readers)
            .await?
        {
            stats.branches.push(decode::branch_stats(&row)?);
        }
        if worst > 0 {
            for row in sqlx::query(sqlx::AssertSqlSafe(WORST.as_str()))
                .bind(worst)
                .fetch_all(&self.readers)
                .await?
            {
                stats.worst.push(decode::consumer_lag_row(&row)?);
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

    async fn branch_overview(
        &self,
        limit: i64,
        scope: &tidemark_core::TableScope,
    ) -> Result<Vec<crate::stats::BranchOverview>, StoreError> {
        let patterns = match scope {
            tidemark_core::TableScope::All => None,
            // A JSON array for json_each (patterns hold no control
            // characters: only quotes and backslashes need escaping).
            tidemark_core::TableScope::Only(patterns) => Some(format!(
                "[{}]",
                patterns
                    .iter()
                    .map(|p| format!("\"{}\"", p.to_sqlite_glob().replace('\\', "\\\\").replace('"', "\\\"")))
                    .collect::<Vec<_>>()
                    .join(",")
            )),
        };
        let rows = sqlx::query(sqlx::AssertSqlSafe(BRANCH_OVERVIEW.as_str()))
            .bind(limit)
            .bind(self.clock.now().as_micros())
            .bind(patterns)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(decode::branch_overview).collect()
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
