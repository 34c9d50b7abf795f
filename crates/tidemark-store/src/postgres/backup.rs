//! State export and import (SPEC §11 A7) on Postgres.

use std::sync::LazyLock;

use async_trait::async_trait;
use sqlx::Row;
use tidemark_core::{ConsumerKey, HistoryEvent, KeyState, TableName};
use tokio::sync::mpsc;

use super::{PostgresBackend, from_ts};
use crate::backend::{CallContext, ExportPart, StateStore};
use crate::decode;
use crate::error::StoreError;
use crate::history_row::{EVENT_COLUMNS, HistoryRow, insert_history};
use crate::row::{KeyRow, decode_pg};

const EXPORT_OPTIONS: &str = "SELECT table_name, expiration_us AS opt_expiration_us,
           changelog_only AS opt_changelog_only, mode AS opt_mode
    FROM table_options WHERE ($1::text IS NULL OR table_name = $1) ORDER BY table_name";

const EXPORT_REGISTRATIONS: &str = "SELECT table_name, location, registered_at, registered_by, identity
    FROM paimon_tables WHERE ($1::text IS NULL OR table_name = $1) ORDER BY table_name";

pub(super) static EXPORT_KEYS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row} FROM consumer_keys k
         WHERE ($1::text IS NULL OR k.table_name = $1)
           AND ($2::text IS NULL OR (k.table_name, k.branch, k.consumer_id) > ($2::text, $3::text, $4::text))
         ORDER BY k.table_name, k.branch, k.consumer_id LIMIT $5",
        row = KeyRow::select_list("k")
    )
});

/// New rows with their one history row each, in one statement; a key that
/// has a row already is skipped (`ON CONFLICT DO NOTHING`) and not logged.
pub(super) static INSERT_NEW_KEYS: LazyLock<String> = LazyLock::new(|| {
    let logged = insert_history(&format!(
        "SELECT (SELECT t FROM clock), v.table_name, v.branch, v.consumer_id, $5, $6, {events}
             FROM written w JOIN v USING (table_name, branch, consumer_id) ORDER BY v.ord",
        events = HistoryRow::columns("v.ev_")
    ));
    crate::sql_template::render(
        include_str!("sql/insert_new_keys.sql"),
        &[
            ("event_arrays", &HistoryRow::array_arguments(7)),
            ("event_columns", &HistoryRow::columns("ev_")),
            ("row_arrays", &KeyRow::array_arguments(7 + EVENT_COLUMNS)),
            ("columns", &KeyRow::column_list()),
            ("logged", &logged),
        ],
    )
});

#[async_trait]
impl StateStore for PostgresBackend {
    async fn export_state(
        &self,
        table: Option<&TableName>,
        page: i64,
        out: mpsc::Sender<ExportPart>,
    ) -> Result<(), StoreError> {
        let table = table.map(|t| t.as_str().to_owned());
        // One snapshot for every statement below (SPEC §11 A7).
        let mut tx = self.db.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(self.db.on(&mut tx))
            .await?;
        let now = from_ts(
            sqlx::query_scalar("SELECT tidemark_now()")
                .fetch_one(self.db.on(&mut tx))
                .await?,
        );
        let options = sqlx::query(EXPORT_OPTIONS)
            .bind(table.clone())
            .fetch_all(self.db.on(&mut tx))
            .await?
            .iter()
            .map(|row| Ok((decode::table_name(row)?, decode::options(row)?)))
            .collect::<Result<_, StoreError>>()?;
        let registrations = sqlx::query(EXPORT_REGISTRATIONS)
            .bind(table.clone())
            .fetch_all(self.db.on(&mut tx))
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
                .fetch_all(self.db.on(&mut tx))
                .await?;
            let keys: Vec<KeyState> = rows
                .iter()
                .map(|row| decode_pg(row).map(|(state, _)| state))
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
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let states = || rows.iter().map(|(s, _)| s);
        let ord: Vec<i32> = (0..rows.len()).map(|i| i32::try_from(i).unwrap_or(i32::MAX)).collect();
        let query = sqlx::query(INSERT_NEW_KEYS.as_str())
            .bind(ord)
            .bind(states().map(|s| s.key.table.as_str().to_owned()).collect::<Vec<_>>())
            .bind(states().map(|s| s.key.branch.as_str().to_owned()).collect::<Vec<_>>())
            .bind(
                states()
                    .map(|s| s.key.consumer_id.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(ctx.principal.clone())
            .bind(ctx.request_id.clone());
        let events: Vec<HistoryRow> = rows.iter().map(|(_, e)| HistoryRow::from_event(e)).collect();
        let query = HistoryRow::bind_pg_arrays(events.iter(), query);
        let row_values: Vec<KeyRow> = states().map(KeyRow::from_state).collect();
        let written = KeyRow::bind_pg_arrays(row_values.iter(), query)
            .fetch_all(&self.db)
            .await?;
        let mut created = vec![false; rows.len()];
        for row in written {
            let ord: i32 = row.try_get("ord")?;
            if let Some(slot) = usize::try_from(ord).ok().and_then(|i| created.get_mut(i)) {
                *slot = true;
            }
        }
        Ok(created)
    }
}
