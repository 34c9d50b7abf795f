//! Table options on SQLite.

use async_trait::async_trait;
use sqlx::Row;
use tidemark_core::{TableName, TableOptions, Timestamp};

use super::SqliteBackend;
use crate::backend::{CallContext, OptionsStore, StoredOptions};
use crate::decode::{self, expiration_us, mode_text};
use crate::error::StoreError;

const TABLE_OPTIONS: &str = "SELECT expiration_us AS opt_expiration_us, changelog_only AS opt_changelog_only, \
    mode AS opt_mode, version, updated_at, updated_by FROM table_options WHERE table_name = ?1";

// ?6 is the clock; ?7 the expected version (NULL for an insert, unused).
const INSERT_OPTIONS: &str = "INSERT INTO table_options \
    (table_name, expiration_us, changelog_only, mode, version, updated_at, updated_by) \
    SELECT ?1, ?2, ?3, ?4, 1, ?6, ?5 WHERE ?7 IS NULL ON CONFLICT DO NOTHING";

const UPDATE_OPTIONS: &str = "UPDATE table_options SET expiration_us = ?2, changelog_only = ?3, mode = ?4, \
    version = version + 1, updated_at = ?6, updated_by = ?5 WHERE table_name = ?1 AND version = ?7";

/// A table's options row (defaults when it has none).
pub(super) async fn options_of(conn: &mut sqlx::SqliteConnection, table: &str) -> Result<StoredOptions, StoreError> {
    let Some(row) = sqlx::query(TABLE_OPTIONS)
        .bind(table)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(StoredOptions::default());
    };
    Ok(StoredOptions {
        options: decode::options(&row)?,
        version: Some(row.try_get("version")?),
        updated_at: Some(Timestamp::from_micros(row.try_get("updated_at")?)),
        updated_by: Some(row.try_get("updated_by")?),
    })
}

#[async_trait]
impl OptionsStore for SqliteBackend {
    async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        let mut conn = self.readers.acquire().await?;
        options_of(&mut conn, table.as_str()).await
    }

    async fn save_table_options(
        &self,
        table: &TableName,
        previous: &StoredOptions,
        options: &TableOptions,
        ctx: &CallContext,
    ) -> Result<bool, StoreError> {
        let query = match previous.version {
            None => sqlx::query(INSERT_OPTIONS),
            Some(_) => sqlx::query(UPDATE_OPTIONS),
        }
        .bind(table.as_str())
        .bind(expiration_us(options))
        .bind(options.changelog_only)
        .bind(mode_text(options))
        .bind(ctx.principal.clone())
        .bind(self.clock.now().as_micros())
        .bind(previous.version);
        Ok(query.execute(&self.writer).await?.rows_affected() == 1)
    }
}
