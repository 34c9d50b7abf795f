//! The Paimon registry and the mirror's bookkeeping on SQLite.

use std::collections::HashMap;
use std::time::Duration;

use std::sync::LazyLock;

use async_trait::async_trait;
use sqlx::Row;
use tidemark_core::time::duration_micros;
use tidemark_core::{BranchName, ConsumerKey, TableName, Timestamp};

use super::SqliteBackend;
use crate::backend::{CallContext, MirrorEntry, MirrorFailure, MirrorState, MirrorTask, PaimonStore, RegisteredTable};
use crate::decode;
use crate::error::StoreError;

const FORGET_MOVED_MIRRORS: &str = "DELETE FROM consumer_mirrors WHERE table_name = ?1 \
    AND EXISTS (SELECT 1 FROM paimon_tables WHERE table_name = ?1 AND location <> ?2)";

const REGISTER_TABLE: &str = "INSERT INTO paimon_tables (table_name, location, registered_at, registered_by, \
    identity) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (table_name) DO UPDATE SET location = excluded.location, \
    registered_at = excluded.registered_at, registered_by = excluded.registered_by, identity = excluded.identity";

const SET_IDENTITY: &str =
    "UPDATE paimon_tables SET identity = ?3 WHERE table_name = ?1 AND location = ?2 AND identity IS NULL";

/// See the Postgres backend's `MIRROR_INVENTORY`; `?1` is the clock.
pub(super) static MIRROR_INVENTORY: LazyLock<String> =
    LazyLock::new(|| crate::sql_template::render_one_line(include_str!("sql/mirror_inventory.sql"), &[]));

const UNREGISTER_MIRRORS: &str = "DELETE FROM consumer_mirrors WHERE table_name = ?1";
const UNREGISTER_TABLE: &str = "DELETE FROM paimon_tables WHERE table_name = ?1";

const REGISTERED_TABLES: &str =
    "SELECT table_name, location, registered_at, registered_by, identity FROM paimon_tables ORDER BY table_name";

/// See the Postgres backend's `MIRROR_TASKS`.
pub(super) static MIRROR_TASKS: LazyLock<String> =
    LazyLock::new(|| crate::sql_template::render_one_line(include_str!("sql/mirror_tasks.sql"), &[]));

const MIRROR_DONE: &str = "INSERT INTO consumer_mirrors (table_name, branch, consumer_id, mirrored_next, \
    mirrored_updated_at, mirrored_at, failures, last_error, location, retry_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, NULL, ?7, NULL) \
    ON CONFLICT (table_name, branch, consumer_id) DO UPDATE SET mirrored_next = excluded.mirrored_next, \
    mirrored_updated_at = excluded.mirrored_updated_at, mirrored_at = excluded.mirrored_at, failures = 0, \
    last_error = NULL, location = excluded.location, retry_at = NULL";

/// `?5` the clock, `?6` the first wait (µs), doubled per further failure,
/// `?7` the longest.
const MIRROR_FAILED: &str = "INSERT INTO consumer_mirrors (table_name, branch, consumer_id, failures, last_error, \
    retry_at) VALUES (?1, ?2, ?3, 1, ?4, ?5 + min(?6, ?7)) ON CONFLICT (table_name, branch, consumer_id) DO UPDATE \
    SET failures = consumer_mirrors.failures + 1, last_error = excluded.last_error, \
    retry_at = ?5 + min(?6 * (1 << min(consumer_mirrors.failures, 30)), ?7)";

const MIRROR_STATE: &str = "SELECT mirrored_next, mirrored_updated_at, mirrored_at, failures, last_error, \
    location FROM consumer_mirrors WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3";

const MIRROR_STATES: &str = "SELECT consumer_id, mirrored_next, mirrored_updated_at, mirrored_at, failures, \
    last_error, location FROM consumer_mirrors WHERE table_name = ?1 AND branch = ?2";

#[async_trait]
impl PaimonStore for SqliteBackend {
    async fn register_table(
        &self,
        table: &TableName,
        location: &str,
        identity: Option<&str>,
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(FORGET_MOVED_MIRRORS)
            .bind(table.as_str())
            .bind(location)
            .execute(&mut *tx)
            .await?;
        sqlx::query(REGISTER_TABLE)
            .bind(table.as_str())
            .bind(location)
            .bind(self.clock.now().as_micros())
            .bind(ctx.principal.clone())
            .bind(identity)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_table_identity(&self, table: &TableName, location: &str, identity: &str) -> Result<(), StoreError> {
        sqlx::query(SET_IDENTITY)
            .bind(table.as_str())
            .bind(location)
            .bind(identity)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn unregister_table(&self, table: &TableName) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(UNREGISTER_MIRRORS)
            .bind(table.as_str())
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query(UNREGISTER_TABLE)
            .bind(table.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted > 0)
    }

    async fn registered_tables(&self) -> Result<Vec<RegisteredTable>, StoreError> {
        let rows = sqlx::query(REGISTERED_TABLES).fetch_all(&self.readers).await?;
        rows.iter().map(decode::registered).collect()
    }

    async fn mirror_inventory(&self) -> Result<Vec<MirrorEntry>, StoreError> {
        let rows = sqlx::query(MIRROR_INVENTORY.as_str())
            .bind(self.clock.now().as_micros())
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(decode::mirror_entry).collect()
    }

    async fn mirror_tasks(&self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError> {
        let rows = sqlx::query(MIRROR_TASKS.as_str())
            .bind(duration_micros(refresh))
            .bind(limit)
            .bind(self.clock.now().as_micros())
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(decode::mirror_task).collect()
    }

    async fn mirror_done(&self, task: &MirrorTask, failure: Option<MirrorFailure<'_>>) -> Result<(), StoreError> {
        let key = &task.key;
        let query = match failure {
            None => decode::bind_key(sqlx::query(MIRROR_DONE), key)
                .bind(task.next_snapshot)
                .bind(task.updated_at.map(Timestamp::as_micros))
                .bind(self.clock.now().as_micros())
                .bind(task.location.clone()),
            Some(failure) => decode::bind_key(sqlx::query(MIRROR_FAILED), key)
                .bind(failure.error.to_owned())
                .bind(self.clock.now().as_micros())
                .bind(duration_micros(failure.backoff.base))
                .bind(duration_micros(failure.backoff.cap)),
        };
        query.execute(&self.writer).await?;
        Ok(())
    }

    async fn mirror_state(&self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError> {
        let row = decode::bind_key(sqlx::query(MIRROR_STATE), key)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(decode::mirror_state).transpose()
    }

    async fn mirror_states(
        &self,
        table: &TableName,
        branch: &BranchName,
    ) -> Result<HashMap<String, MirrorState>, StoreError> {
        let rows = sqlx::query(MIRROR_STATES)
            .bind(table.as_str())
            .bind(branch.as_str())
            .fetch_all(&self.readers)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("consumer_id")?, decode::mirror_state(row)?)))
            .collect()
    }
}
