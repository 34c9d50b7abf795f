//! The Paimon registry and the mirror's bookkeeping on Postgres.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use tidemark_core::time::duration_micros;
use tidemark_core::{BranchName, ConsumerKey, TableName};

use super::{LIVE_LEASE, PostgresBackend, UNEXPIRED, ts};
use crate::backend::{CallContext, MirrorEntry, MirrorFailure, MirrorState, MirrorTask, PaimonStore, RegisteredTable};
use crate::decode;
use crate::error::StoreError;

const REGISTER_TABLE: &str = "WITH old AS (SELECT location FROM paimon_tables WHERE table_name = $1),
    up AS (
      INSERT INTO paimon_tables (table_name, location, registered_at, registered_by, identity)
      VALUES ($1, $2, tidemark_now(), $3, $4)
      ON CONFLICT (table_name) DO UPDATE SET location = EXCLUDED.location, registered_at = EXCLUDED.registered_at,
        registered_by = EXCLUDED.registered_by, identity = EXCLUDED.identity
      RETURNING 1)
    DELETE FROM consumer_mirrors WHERE table_name = $1 AND EXISTS (SELECT 1 FROM old WHERE location <> $2)";

const SET_IDENTITY: &str =
    "UPDATE paimon_tables SET identity = $3 WHERE table_name = $1 AND location = $2 AND identity IS NULL";

const UNREGISTER_TABLE: &str = "WITH m AS (DELETE FROM consumer_mirrors WHERE table_name = $1)
    DELETE FROM paimon_tables WHERE table_name = $1";

const REGISTERED_TABLES: &str =
    "SELECT table_name, location, registered_at, registered_by, identity FROM paimon_tables ORDER BY table_name";

/// What the mirror keeper checks: every consumer and live pin of registered
/// tables, with what its file was last written with.
pub(super) static MIRROR_INVENTORY: LazyLock<String> = LazyLock::new(|| {
    crate::sql_template::render(
        include_str!("sql/mirror_inventory.sql"),
        &[("unexpired", UNEXPIRED), ("live_lease", LIVE_LEASE)],
    )
});

/// Consumers of registered tables whose file is stale, then files of
/// consumers that are gone; failing ones last.
pub(super) static MIRROR_TASKS: LazyLock<String> =
    LazyLock::new(|| crate::sql_template::render(include_str!("sql/mirror_tasks.sql"), &[]));

const ANY_REGISTERED: &str = "SELECT EXISTS (SELECT 1 FROM paimon_tables)";

const MIRROR_DONE: &str = "INSERT INTO consumer_mirrors AS m (table_name, branch, consumer_id, mirrored_next,
                                       mirrored_updated_at, mirrored_at, failures, last_error, location, retry_at)
    VALUES ($1, $2, $3, $4, $5, tidemark_now(), 0, NULL, $6, NULL)
    ON CONFLICT (table_name, branch, consumer_id) DO UPDATE SET mirrored_next = EXCLUDED.mirrored_next,
      mirrored_updated_at = EXCLUDED.mirrored_updated_at, mirrored_at = EXCLUDED.mirrored_at, failures = 0,
      last_error = NULL, location = EXCLUDED.location, retry_at = NULL";

/// `$5` the first wait (µs), doubled per further failure, `$6` the longest.
const MIRROR_FAILED: &str = "INSERT INTO consumer_mirrors AS m (table_name, branch, consumer_id, failures, last_error,
                                       retry_at)
    VALUES ($1, $2, $3, 1, $4, tidemark_now() + least($5, $6) * interval '1 microsecond')
    ON CONFLICT (table_name, branch, consumer_id) DO UPDATE
    SET failures = m.failures + 1, last_error = EXCLUDED.last_error,
      retry_at = tidemark_now() + least($5 * power(2, least(m.failures, 30))::int8, $6) * interval '1 microsecond'";

const MIRROR_STATE: &str = "SELECT mirrored_next, mirrored_updated_at, mirrored_at, failures, last_error, location
    FROM consumer_mirrors WHERE table_name = $1 AND branch = $2 AND consumer_id = $3";

const MIRROR_STATES: &str = "SELECT consumer_id, mirrored_next, mirrored_updated_at, mirrored_at, failures, last_error,
           location FROM consumer_mirrors WHERE table_name = $1 AND branch = $2";

#[async_trait]
impl PaimonStore for PostgresBackend {
    async fn register_table(
        &self,
        table: &TableName,
        location: &str,
        identity: Option<&str>,
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        sqlx::query(REGISTER_TABLE)
            .bind(table.as_str())
            .bind(location)
            .bind(ctx.principal.clone())
            .bind(identity)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn set_table_identity(&self, table: &TableName, location: &str, identity: &str) -> Result<(), StoreError> {
        sqlx::query(SET_IDENTITY)
            .bind(table.as_str())
            .bind(location)
            .bind(identity)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn unregister_table(&self, table: &TableName) -> Result<bool, StoreError> {
        let deleted = sqlx::query(UNREGISTER_TABLE)
            .bind(table.as_str())
            .execute(&self.db)
            .await?
            .rows_affected();
        Ok(deleted > 0)
    }

    async fn registered_tables(&self) -> Result<Vec<RegisteredTable>, StoreError> {
        let rows = sqlx::query(REGISTERED_TABLES).fetch_all(&self.db).await?;
        rows.iter().map(decode::registered).collect()
    }

    async fn mirror_inventory(&self) -> Result<Vec<MirrorEntry>, StoreError> {
        let rows = sqlx::query(MIRROR_INVENTORY.as_str()).fetch_all(&self.db).await?;
        rows.iter().map(decode::mirror_entry).collect()
    }

    async fn mirror_tasks(&self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError> {
        // Every replica asks every interval. With no table registered the
        // answer is empty, but on a large fleet Postgres plans the search as
        // a parallel scan of every consumer and starts two workers for it
        // (8.5 ms, three processes, each second at 300,000 consumers): ask
        // the one-row question first.
        let registered: bool = sqlx::query_scalar(ANY_REGISTERED).fetch_one(&self.db).await?;
        if !registered {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(MIRROR_TASKS.as_str())
            .bind(duration_micros(refresh))
            .bind(limit)
            .fetch_all(&self.db)
            .await?;
        rows.iter().map(decode::mirror_task).collect()
    }

    async fn mirror_done(&self, task: &MirrorTask, failure: Option<MirrorFailure<'_>>) -> Result<(), StoreError> {
        let key = &task.key;
        let query = match failure {
            None => decode::bind_key(sqlx::query(MIRROR_DONE), key)
                .bind(task.next_snapshot)
                .bind(task.updated_at.map(ts))
                .bind(task.location.clone()),
            Some(failure) => decode::bind_key(sqlx::query(MIRROR_FAILED), key)
                .bind(failure.error.to_owned())
                .bind(duration_micros(failure.backoff.base))
                .bind(duration_micros(failure.backoff.cap)),
        };
        query.execute(&self.db).await?;
        Ok(())
    }

    async fn mirror_state(&self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError> {
        let row = decode::bind_key(sqlx::query(MIRROR_STATE), key)
            .fetch_optional(&self.db)
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
            .fetch_all(&self.db)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("consumer_id")?, decode::mirror_state(row)?)))
            .collect()
    }
}
