//! Table options on Postgres.

use async_trait::async_trait;
use sqlx::Row;
use tidemark_core::{TableName, TableOptions};

use super::{PostgresBackend, from_ts};
use crate::backend::{CallContext, OptionsStore, StoredOptions};
use crate::decode::{self, expiration_us, mode_text};
use crate::error::StoreError;

const TABLE_OPTIONS: &str = "SELECT expiration_us AS opt_expiration_us, changelog_only AS opt_changelog_only,
           mode AS opt_mode, version, updated_at, updated_by
    FROM table_options WHERE table_name = $1";

const INSERT_OPTIONS: &str = "INSERT INTO table_options
      (table_name, expiration_us, changelog_only, mode, version, updated_at, updated_by)
    VALUES ($1, $2, $3, $4, 1, tidemark_now(), $5) ON CONFLICT DO NOTHING";

const UPDATE_OPTIONS: &str = "UPDATE table_options
    SET expiration_us = $2, changelog_only = $3, mode = $4, version = version + 1, updated_at = tidemark_now(),
        updated_by = $5
    WHERE table_name = $1 AND version = $6";

#[async_trait]
impl OptionsStore for PostgresBackend {
    async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        let Some(row) = sqlx::query(TABLE_OPTIONS)
            .bind(table.as_str())
            .fetch_optional(&self.db)
            .await?
        else {
            return Ok(StoredOptions::default());
        };
        Ok(StoredOptions {
            options: decode::options(&row)?,
            version: Some(row.try_get("version")?),
            updated_at: Some(from_ts(row.try_get("updated_at")?)),
            updated_by: Some(row.try_get("updated_by")?),
        })
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
        .bind(ctx.principal.clone());
        let query = match previous.version {
            None => query,
            Some(version) => query.bind(version),
        };
        Ok(query.execute(&self.db).await?.rows_affected() == 1)
    }
}
