//! The audit trail on SQLite.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use tidemark_core::time::duration_micros;
use tidemark_core::{ConsumerKey, HistoryEvent, Timestamp};

use super::SqliteBackend;
use crate::backend::{CallContext, HistoryFilter, HistoryRecord, HistoryStore, Pruned};
use crate::decode;
use crate::error::StoreError;
use crate::history_row::{self, HistoryRow};

const HISTORY_PAGE: &str = "SELECT id, at, table_name, branch, consumer_id, event, old_next, new_next, epoch, \
    lease_id, batch_id, holder, principal, request_id, detail, latest_snapshot FROM history \
    WHERE table_name = ?1 AND (?2 IS NULL OR branch = ?2) AND (?3 IS NULL OR consumer_id = ?3) \
    AND (?4 IS NULL OR id < ?4) ORDER BY id DESC LIMIT ?5";

pub(super) static INSERT_HISTORY: LazyLock<String> =
    LazyLock::new(|| history_row::insert_history(&format!("VALUES {}", HistoryRow::sqlite_row())));

const PRUNE_HISTORY: &str = "DELETE FROM history WHERE id IN (SELECT id FROM history WHERE at < ?1 \
    ORDER BY at LIMIT ?2)";

const PRUNE_GRANTS: &str = "DELETE FROM lease_grants WHERE lease_id IN (SELECT g.lease_id FROM lease_grants g \
    WHERE g.granted_at < ?1 AND NOT EXISTS (SELECT 1 FROM consumer_keys k WHERE k.table_name = g.table_name \
    AND k.branch = g.branch AND k.consumer_id = g.consumer_id AND k.lease_id = g.lease_id) LIMIT ?2)";

/// Appends a key's history rows inside a write transaction, stamped `now`.
pub(super) async fn insert_history(
    tx: &mut sqlx::SqliteConnection,
    now: Timestamp,
    key: &ConsumerKey,
    events: &[HistoryEvent],
    ctx: &CallContext,
) -> Result<(), StoreError> {
    for row in HistoryRow::from_events(events) {
        let query = decode::bind_key(sqlx::query(INSERT_HISTORY.as_str()).bind(now.as_micros()), key)
            .bind(&ctx.principal)
            .bind(&ctx.request_id);
        row.bind_sqlite(query).execute(&mut *tx).await?;
    }
    Ok(())
}

/// A page of history on `conn` (a pool connection or a snapshot's
/// transaction).
pub(super) async fn page(
    conn: &mut sqlx::SqliteConnection,
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
impl HistoryStore for SqliteBackend {
    async fn history_page(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        let mut conn = self.readers.acquire().await?;
        page(&mut conn, filter, before_id, limit).await
    }

    async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now = self.clock.now();
        insert_history(&mut tx, now, key, events, ctx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn prune(&self, older_than: Duration, limit: i64) -> Result<Pruned, StoreError> {
        let cutoff = self.clock.now().as_micros() - duration_micros(older_than);
        let history = sqlx::query(PRUNE_HISTORY)
            .bind(cutoff)
            .bind(limit)
            .execute(&self.writer)
            .await?
            .rows_affected();
        let grants = sqlx::query(PRUNE_GRANTS)
            .bind(cutoff)
            .bind(limit)
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(Pruned { history, grants })
    }
}
