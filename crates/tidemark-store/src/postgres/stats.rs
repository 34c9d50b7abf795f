//! Fleet figures on Postgres.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use tidemark_core::time::duration_micros;

use super::{PostgresBackend, from_ts};
use crate::decode;
use crate::error::StoreError;
use crate::stats::{FleetStats, PoolStats, StatsStore, branches_sql, oldest_probe_ages, worst_sql};

/// The collector's advisory lock: this class, and the schema's hash (so
/// tidemark installations in different schemas of one database each have
/// their own collector).
const CLAIM: &str = "SELECT pg_try_advisory_lock(7431, hashtext(current_schema()))";

/// The collector's claim behind a transaction pooler: a row lease, taken
/// when free or lapsed, renewed by its holder. Wall time (the database's),
/// never the test clock.
const CLAIM_ROW: &str = "INSERT INTO collector_lease AS c (id, holder, until)
    VALUES (1, $1, clock_timestamp() + $2 * interval '1 microsecond')
    ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
    WHERE c.holder = EXCLUDED.holder OR c.until < clock_timestamp()
    RETURNING true";

pub(super) const RELEASE_CLAIM_ROW: &str = "DELETE FROM collector_lease WHERE holder = $1";

static BRANCHES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| branches_sql("$1"));
static WORST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| worst_sql("$1"));
pub(super) static BRANCH_OVERVIEW: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    crate::stats::branch_overview_sql(
        "tidemark_now()",
        "$1",
        "($2::text[] IS NULL OR k.table_name LIKE ANY ($2::text[]))",
    )
});

const LIVE_LEASES: &str =
    "SELECT tidemark_now() AS now, count(*) FILTER (WHERE lease_status = 1 AND lease_deadline > tidemark_now()) AS live
    FROM consumer_keys";

// The planner's estimate: exact counting would read the whole table.
const HISTORY_ESTIMATE: &str = "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass('history')";
// Before the table was first analyzed the estimate is -1: count, up to a
// bound.
const HISTORY_BOUNDED_COUNT: &str = "SELECT count(*) FROM (SELECT 1 FROM history LIMIT 1000000) AS h";
/// Histories up to this many rows are searched whole for their oldest row.
const SMALL_HISTORY: i64 = 100_000;

// Found through the BRIN index on `at`: reads about the rows older than the
// probe.
const HISTORY_OLDEST_BEYOND: &str =
    "SELECT min(at) FROM history WHERE at < tidemark_now() - $1 * interval '1 microsecond'";

#[async_trait]
impl StatsStore for PostgresBackend {
    async fn claim_collector(&self) -> Result<bool, StoreError> {
        use sqlx::Connection;
        if self.pooler == super::DbPooler::Transaction {
            // No session outlives a transaction there: a row lease instead
            // of the session's advisory lock.
            let claimed = sqlx::query(CLAIM_ROW)
                .bind(self.collector_id)
                .bind(duration_micros(self.collector_lease))
                .fetch_optional(&self.db)
                .await?
                .is_some();
            let held = self.row_claim_held.swap(claimed, std::sync::atomic::Ordering::Relaxed);
            if claimed && !held {
                tracing::info!("this replica now computes the fleet gauges");
            }
            return Ok(claimed);
        }
        let mut slot = self.collector.lock().await;
        if slot.is_none() {
            let connecting = sqlx::PgConnection::connect_with(&self.connect_options);
            let mut connection = tokio::time::timeout(self.acquire_timeout, connecting)
                .await
                .map_err(|_| StoreError::Unavailable("timed out connecting to the database".into()))??;
            let standby: bool = tokio::time::timeout(
                self.acquire_timeout,
                sqlx::query_scalar("SELECT pg_is_in_recovery()").fetch_one(&mut connection),
            )
            .await
            .map_err(|_| StoreError::Unavailable("timed out asking the database whether it is a standby".into()))??;
            if standby {
                let _ = connection.close().await;
                return Err(StoreError::Unavailable(
                    "the database is a standby in recovery (read-only); tidemark needs the primary".into(),
                ));
            }
            *slot = Some((connection, false));
        }
        let (connection, held) = slot.as_mut().expect("connected above");
        // Holding: the lock lasts while the session does, so a live
        // session is all it takes. Not holding: try to take it.
        // Client-side too: after a failover the session may be half-open,
        // and its statement would wait for TCP to notice (~15 minutes).
        let asked = async {
            if *held {
                sqlx::query("SELECT 1").execute(&mut *connection).await.map(|_| true)
            } else {
                sqlx::query_scalar::<_, bool>(CLAIM).fetch_one(&mut *connection).await
            }
        };
        let outcome = match tokio::time::timeout(self.acquire_timeout, asked).await {
            Ok(outcome) => outcome.map_err(StoreError::from),
            Err(_) => Err(StoreError::Unavailable(
                "the gauge collector's session did not answer in time".into(),
            )),
        };
        match outcome {
            Ok(claimed) => {
                if claimed && !*held {
                    tracing::info!("this replica now computes the fleet gauges");
                }
                *held = claimed;
                Ok(claimed)
            }
            Err(e) => {
                // The session (and any lock) is gone or going; reconnect next
                // round. Another replica may claim the role meanwhile.
                // Dropped, not closed: a half-open session would not answer
                // the goodbye either.
                drop(slot.take());
                Err(e)
            }
        }
    }

    async fn fleet_stats(
        &self,
        branch_limit: i64,
        worst: i64,
        history_retention: Option<Duration>,
        window: Duration,
    ) -> Result<FleetStats, StoreError> {
        let mut stats = FleetStats::default();
        let row = sqlx::query(LIVE_LEASES).fetch_one(&self.db).await?;
        stats.now = from_ts(row.try_get::<DateTime<Utc>, _>("now")?);
        stats.live_leases = row.try_get("live")?;
        for row in sqlx::query(sqlx::AssertSqlSafe(BRANCHES.as_str()))
            .bind(branch_limit)
            .fetch_all(&self.db)
            .await?
        {
            stats.branches.push(decode::branch_stats(&row)?);
        }
        if worst > 0 {
            for row in sqlx::query(sqlx::AssertSqlSafe(WORST.as_str()))
                .bind(worst)
                .fetch_all(&self.db)
                .await?
            {
                stats.worst.push(decode::consumer_lag_row(&row)?);
            }
        }
        let estimate: Option<i64> = sqlx::query_scalar(HISTORY_ESTIMATE).fetch_optional(&self.db).await?;
        stats.history_rows = match estimate {
            Some(rows) if rows >= 0 => Some(rows),
            _ => Some(sqlx::query_scalar(HISTORY_BOUNDED_COUNT).fetch_one(&self.db).await?),
        };
        if let Some(retention) = history_retention {
            // A small history is simply read whole; a large one around the
            // retention, where pruning reads anyway.
            let small = stats.history_rows.is_some_and(|rows| rows <= SMALL_HISTORY);
            let probes = if small {
                vec![Duration::ZERO]
            } else {
                oldest_probe_ages(retention, window)
            };
            for age in probes {
                let oldest: Option<DateTime<Utc>> = sqlx::query_scalar(HISTORY_OLDEST_BEYOND)
                    .bind(duration_micros(age))
                    .fetch_one(&self.db)
                    .await?;
                if let Some(oldest) = oldest {
                    stats.history_oldest = Some(from_ts(oldest));
                    break;
                }
            }
        }
        Ok(stats)
    }

    async fn branch_overview(
        &self,
        limit: i64,
        scope: &tidemark_core::TableScope,
    ) -> Result<Vec<crate::stats::BranchOverview>, StoreError> {
        let patterns: Option<Vec<String>> = match scope {
            tidemark_core::TableScope::All => None,
            tidemark_core::TableScope::Only(patterns) => {
                Some(patterns.iter().map(tidemark_core::TablePattern::to_sql_like).collect())
            }
        };
        let rows = sqlx::query(sqlx::AssertSqlSafe(BRANCH_OVERVIEW.as_str()))
            .bind(limit)
            .bind(patterns)
            .fetch_all(&self.db)
            .await?;
        rows.iter().map(decode::branch_overview).collect()
    }

    fn pool_stats(&self) -> PoolStats {
        let open = self.db.pool().size();
        PoolStats {
            open,
            idle: u32::try_from(self.db.pool().num_idle()).unwrap_or(open),
            max: self.max_connections,
        }
    }
}
