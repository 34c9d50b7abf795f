//! Migrations on Postgres: on a session of their own that reaches a primary
//! (never through a transaction pooler), over the pool's connection or a
//! direct URL of their own.

use sqlx::postgres::PgConnectOptions;

use super::{MIGRATOR, PostgresBackend};
use crate::error::StoreError;
use crate::migrations::SchemaLevel;

/// Why migrations refuse to run through a transaction pooler.
pub const MIGRATIONS_NEED_A_SESSION: &str = "migrations need a database session (an advisory lock held across \
     statements, a session setting), which a transaction pooler does not keep: give --migrate-database-url (a \
     direct connection to the primary), or run `tidemark migrate` with a direct --database-url and serve with \
     --no-migrate";

/// Applies the migrations on `connection`, a session of its own that
/// reaches a primary.
pub(super) async fn migrate_on(connection: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    // A migration may rewrite a large table: no --db-statement-timeout.
    sqlx::query("SET statement_timeout = 0")
        .execute(&mut *connection)
        .await?;
    // sqlx takes a Postgres advisory lock around the run, so replicas
    // starting at once apply each migration exactly once. (`run_direct`
    // is `run` on a connection already held: `run`'s `Acquire` bound on
    // `&mut PgConnection` does not hold across async_trait's future.)
    crate::migrations::expand_only(&MIGRATOR)
        .run_direct(None, &mut *connection, false)
        .await
        .map_err(crate::migrations::failure)
}

impl PostgresBackend {
    /// Migrations over `url`, a direct connection (`--migrate-database-url`),
    /// on the same schema as the pool.
    pub(super) async fn migrate_directly(&self, url: &str) -> Result<(), StoreError> {
        use sqlx::Connection;
        let mut options: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("invalid migration database URL: {e}")))?;
        options = options.application_name("tidemark");
        if let Some((_, schema)) = self.session_settings.iter().find(|(name, _)| *name == "search_path") {
            options = options.options([("search_path", schema.clone())]);
        }
        let mut connection = tokio::time::timeout(self.acquire_timeout, sqlx::PgConnection::connect_with(&options))
            .await
            .map_err(|_| StoreError::Unavailable("timed out connecting to the migration database".into()))??;
        let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
            .fetch_one(&mut connection)
            .await?;
        let outcome = if standby {
            Err(StoreError::Unavailable(
                "the migration database is a standby in recovery (read-only); migrations need the primary".into(),
            ))
        } else {
            migrate_on(&mut connection).await
        };
        // Closed, never kept: a failed run leaves the migrator's lock in the
        // session.
        let _ = connection.close().await;
        outcome
    }
}

/// The schema's level under the migration rule (see
/// [`crate::Backend::schema_level`]).
pub(super) async fn schema_level(db: &super::db::Db) -> Result<Option<SchemaLevel>, StoreError> {
    // Once, at start: not bound by --db-statement-timeout (a migration is
    // not either, and a tiny one must not make the replica refuse to start).
    let mut tx = db.begin().await?;
    sqlx::query("SET LOCAL statement_timeout = 0")
        .execute(db.on(&mut tx))
        .await?;
    let level: (Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT (SELECT max(version) FROM _sqlx_migrations WHERE success), \
                CASE WHEN to_regclass('tidemark_schema_rule') IS NOT NULL \
                     THEN (SELECT max(oldest_compatible) FROM tidemark_schema_rule) END",
    )
    .fetch_one(db.on(&mut tx))
    .await?;
    tx.commit().await?;
    Ok(match level {
        (Some(schema), Some(needs)) => Some(SchemaLevel { schema, needs }),
        _ => None,
    })
}
