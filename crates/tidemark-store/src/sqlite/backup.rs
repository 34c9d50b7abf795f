//! State export and import (SPEC §11 A7) on SQLite.

use std::collections::HashSet;
use std::sync::LazyLock;

use async_trait::async_trait;
use tidemark_core::{ConsumerKey, HistoryEvent, KeyState, TableName};
use tokio::sync::mpsc;

use super::SqliteBackend;
use crate::backend::{CallContext, ExportPart, StateStore};
use crate::decode;
use crate::error::StoreError;
use crate::history_row::{HistoryRow, insert_history};
use crate::row::{KeyRow, decode_sqlite};

const EXPORT_OPTIONS: &str = "SELECT table_name, expiration_us AS opt_expiration_us, \
    changelog_only AS opt_changelog_only, mode AS opt_mode \
    FROM table_options WHERE (?1 IS NULL OR table_name = ?1) ORDER BY table_name";

const EXPORT_REGISTRATIONS: &str = "SELECT table_name, location, registered_at, registered_by, identity \
    FROM paimon_tables WHERE (?1 IS NULL OR table_name = ?1) ORDER BY table_name";

pub(super) static EXPORT_KEYS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row} FROM consumer_keys k
         WHERE (?1 IS NULL OR k.table_name = ?1)
           AND (?2 IS NULL OR (k.table_name, k.branch, k.consumer_id) > (?2, ?3, ?4))
         ORDER BY k.table_name, k.branch, k.consumer_id LIMIT ?5",
        row = KeyRow::select_list("k")
    )
});

#[async_trait]
impl StateStore for SqliteBackend {
    async fn export_state(
        &self,
        table: Option<&TableName>,
        page: i64,
        out: mpsc::Sender<ExportPart>,
    ) -> Result<(), StoreError> {
        let table = table.map(|t| t.as_str().to_owned());
        // One read transaction: one snapshot of the file (WAL keeps it for
        // as long as the transaction lasts).
        let mut tx = self.readers.begin().await?;
        let options = sqlx::query(EXPORT_OPTIONS)
            .bind(table.clone())
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|row| Ok((decode::table_name(row)?, decode::options(row)?)))
            .collect::<Result<_, StoreError>>()?;
        let now = self.clock.now();
        let registrations = sqlx::query(EXPORT_REGISTRATIONS)
            .bind(table.clone())
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(decode::registered)
            .collect::<Result<_, StoreError>>()?;
        if out
            .send(ExportPart::Head {
                now,
                options,
                registrations,
            })
            .await
            .is_err()
        {
            return Ok(());
        }
        let mut after: Option<ConsumerKey> = None;
        loop {
            let rows = decode::bind_export_page(sqlx::query(EXPORT_KEYS.as_str()), table.clone(), after.as_ref(), page)
                .fetch_all(&mut *tx)
                .await?;
            let keys: Vec<KeyState> = rows
                .iter()
                .map(|row| decode_sqlite(row).map(|(state, _)| state))
                .collect::<Result<_, _>>()?;
            match crate::backend::send_key_page(&out, keys, page).await {
                Some(last) => after = Some(last),
                None => break,
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn insert_new_keys(
        &self,
        rows: &[(KeyState, HistoryEvent)],
        ctx: &CallContext,
    ) -> Result<Vec<bool>, StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now = self.clock.now();
        let mut created = Vec::with_capacity(rows.len());
        // Many rows per statement: one statement a row made a large import
        // spend its time in statement overhead.
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(insert_keys_sql(chunk.len())));
            for (state, _) in chunk {
                insert = KeyRow::from_state(state).bind_sqlite(decode::bind_key(insert, &state.key));
            }
            let inserted: HashSet<ConsumerKey> = insert
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(decode::key_of)
                .collect::<Result<_, _>>()?;
            let logged: Vec<&(KeyState, HistoryEvent)> =
                chunk.iter().filter(|(s, _)| inserted.contains(&s.key)).collect();
            if !logged.is_empty() {
                let mut history = sqlx::query(sqlx::AssertSqlSafe(insert_history_sql(logged.len())));
                for (state, event) in &logged {
                    history = decode::bind_key(history.bind(now.as_micros()), &state.key)
                        .bind(ctx.principal.clone())
                        .bind(ctx.request_id.clone());
                    history = HistoryRow::from_event(event).bind_sqlite(history);
                }
                history.execute(&mut *tx).await?;
            }
            created.extend(chunk.iter().map(|(s, _)| inserted.contains(&s.key)));
        }
        tx.commit().await?;
        Ok(created)
    }
}

/// Rows per multi-row statement (SQLite allows 32,766 parameters).
const ROWS_PER_STATEMENT: usize = 500;

fn insert_keys_sql(rows: usize) -> String {
    let row = format!("(?, ?, ?, 1, {})", vec!["?"; KeyRow::COLUMNS.len()].join(", "));
    format!(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, {}) VALUES {} \
         ON CONFLICT DO NOTHING RETURNING table_name, branch, consumer_id",
        KeyRow::column_list(),
        vec![row; rows].join(", ")
    )
}

fn insert_history_sql(rows: usize) -> String {
    insert_history(&format!("VALUES {}", vec![HistoryRow::sqlite_row(); rows].join(", ")))
}
