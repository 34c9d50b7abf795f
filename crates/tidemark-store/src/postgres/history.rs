//! The audit trail on Postgres.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use tidemark_core::time::duration_micros;
use tidemark_core::{ConsumerKey, HistoryEvent};

use super::PostgresBackend;
use crate::backend::{CallContext, HistoryFilter, HistoryRecord, HistoryStore, Pruned};
use crate::decode;
use crate::error::StoreError;
use crate::history_row::{HistoryRow, insert_history};

const HISTORY_PAGE: &str = "SELECT id, at, table_name, branch, consumer_id, event, old_next, new_next, epoch,
           lease_id, batch_id, holder, principal, request_id, detail, latest_snapshot
    FROM history
    WHERE table_name = $1 AND ($2::text IS NULL OR branch = $2) AND ($3::text IS NULL OR consumer_id = $3)
      AND ($4::bigint IS NULL OR id < $4)
    ORDER BY id DESC LIMIT $5";

pub(super) static APPEND_HISTORY: LazyLock<String> = LazyLock::new(|| {
    insert_history(&format!(
        "SELECT tidemark_now(), $1, $2, $3, $4, $5, {events}
         FROM unnest({arrays}) WITH ORDINALITY AS e({columns}, n)
         ORDER BY e.n",
        events = HistoryRow::columns("e."),
        arrays = HistoryRow::array_arguments(6),
        columns = HistoryRow::columns(""),
    ))
});

// Old rows are found through the BRIN index on `at` and deleted by tuple
// id (history has no index on `id` alone).
const PRUNE_HISTORY: &str = "DELETE FROM history WHERE ctid IN (
      SELECT ctid FROM history WHERE at < tidemark_now() - $1 * interval '1 microsecond' LIMIT $2)";

// A grant is only needed while it is its key's current lease (or recent
// enough that a stale caller should learn the current epoch).
const PRUNE_GRANTS: &str = "DELETE FROM lease_grants WHERE lease_id IN (
      SELECT g.lease_id FROM lease_grants g
      WHERE g.granted_at < tidemark_now() - $1 * interval '1 microsecond'
        AND NOT EXISTS (SELECT 1 FROM consumer_keys k
                        WHERE k.table_name = g.table_name AND k.branch = g.branch
                          AND k.consumer_id = g.consumer_id AND k.lease_id = g.lease_id)
      LIMIT $2)";

/// A page of history on `conn` (the pool or a snapshot's transaction).
pub(super) async fn page<'c>(
    conn: impl sqlx::Executor<'c, Database = sqlx::Postgres>,
    filter: &HistoryFilter,
    before_id: Option<i64>,
    limit: i64,
) -> Result<Vec<HistoryRecord>, StoreError> {
    let rows = decode::bind_history_page(sqlx::query(HISTORY_PAGE), filter, before_id, limit)
        .fetch_all(conn)
        .await?;
    rows.iter().map(decode::history).collect()
}

#[async_trait]
impl HistoryStore for PostgresBackend {
    async fn history_page(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        page(&self.db, filter, before_id, limit).await
    }

    async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        let query = decode::bind_key(sqlx::query(APPEND_HISTORY.as_str()), key)
            .bind(&ctx.principal)
            .bind(&ctx.request_id);
        HistoryRow::bind_pg_arrays(HistoryRow::from_events(events).iter(), query)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn prune(&self, older_than: Duration, limit: i64) -> Result<Pruned, StoreError> {
        let history = sqlx::query(PRUNE_HISTORY)
            .bind(duration_micros(older_than))
            .bind(limit)
            .execute(&self.db)
            .await?
            .rows_affected();
        let grants = sqlx::query(PRUNE_GRANTS)
            .bind(duration_micros(older_than))
            .bind(limit)
            .execute(&self.db)
            .await?
            .rows_affected();
        Ok(Pruned { history, grants })
    }
}
