//! The database flags (`serve` and `migrate`), opening the store and
//! applying migrations.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tidemark_store::{
    DEFAULT_DATABASE_URL, DbPooler, MIGRATIONS_NEED_A_SESSION, PostgresOptions, open_backend, redact,
};

use crate::flags::HumanDuration;

#[derive(Debug, Args)]
pub(crate) struct DatabaseArgs {
    /// Database URL: postgres://user:pass@host/db, or sqlite://path/to/file.db.
    /// Defaults to an SQLite file in the working directory.
    #[arg(long, env = "TIDEMARK_DATABASE_URL", default_value = DEFAULT_DATABASE_URL, hide_env_values = true)]
    pub(crate) database_url: String,
    /// Most Postgres connections this process opens.
    #[arg(long, env = "TIDEMARK_DB_MAX_CONNECTIONS", default_value_t = PostgresOptions::default().max_connections)]
    db_max_connections: u32,
    /// How long a call waits for a free database connection before failing
    /// with UNAVAILABLE.
    #[arg(long, env = "TIDEMARK_DB_ACQUIRE_TIMEOUT", default_value_t = HumanDuration(PostgresOptions::default().acquire_timeout))]
    db_acquire_timeout: HumanDuration,
    /// Server-side limit on one database statement.
    #[arg(long, env = "TIDEMARK_DB_STATEMENT_TIMEOUT", default_value_t = HumanDuration(PostgresOptions::default().statement_timeout.unwrap_or_default()))]
    db_statement_timeout: HumanDuration,
    /// Group commit on Postgres: concurrent commits share at most this many
    /// statements in flight, each carrying every commit that queued while
    /// the others ran (0: one statement per commit).
    #[arg(long, env = "TIDEMARK_DB_GROUP_COMMIT", default_value_t = PostgresOptions::default().group_commit)]
    db_group_commit: usize,
    /// Group commit on Postgres: when fewer commits wait than the last
    /// statement's cycle had, the next statement waits up to this long for
    /// the callers it answered to come back, so they share one statement
    /// (0: never waits).
    #[arg(long, env = "TIDEMARK_DB_GROUP_COMMIT_WAIT", default_value_t = HumanDuration(PostgresOptions::default().group_commit_wait))]
    db_group_commit_wait: HumanDuration,
    /// Group reads on Postgres: concurrent key reads (a recovery position
    /// above all) share at most this many statements in flight, each
    /// carrying every read that queued while the others ran (0: one
    /// statement per read). A read is sent only after its call arrived.
    #[arg(long, env = "TIDEMARK_DB_GROUP_READ", default_value_t = PostgresOptions::default().group_read)]
    db_group_read: usize,
    /// A readiness probe unanswered this long (commits stalled on a
    /// synchronous standby that is gone, a black-holed socket) is given up:
    /// its backend is terminated and a new connection made, so a stall of
    /// any length holds at most one probe backend.
    #[arg(long, env = "TIDEMARK_READINESS_ABANDON_AFTER", default_value_t = HumanDuration(PostgresOptions::default().readiness_abandon_after))]
    readiness_abandon_after: HumanDuration,
    /// What sits between tidemark and Postgres: none, or PgBouncer (or
    /// alike) in session or transaction pool mode. Behind one, no startup
    /// parameter it refuses is sent and the timeouts are set per session
    /// (session) or per transaction (transaction), where statements are also
    /// unnamed. See docs/deploy.md.
    #[arg(long, env = "TIDEMARK_DB_POOLER", default_value_t = DbPooler::None)]
    db_pooler: DbPooler,
    /// A direct connection to the primary for migrations (they need a
    /// session, which a transaction pooler does not keep). Defaults to
    /// --database-url.
    #[arg(long, env = "TIDEMARK_MIGRATE_DATABASE_URL", hide_env_values = true)]
    migrate_database_url: Option<String>,
    /// At start-up, keep retrying an unreachable database (and the
    /// migrations) this long before giving up; 0 fails at once.
    #[arg(long, env = "TIDEMARK_WAIT_FOR_DATABASE", default_value_t = HumanDuration(Duration::from_secs(60)))]
    wait_for_database: HumanDuration,
}

impl DatabaseArgs {
    /// The Postgres settings from the command line.
    pub(crate) fn postgres_options(&self) -> PostgresOptions {
        PostgresOptions {
            max_connections: self.db_max_connections,
            acquire_timeout: self.db_acquire_timeout.0,
            statement_timeout: Some(self.db_statement_timeout.0),
            schema: None,
            group_commit: self.db_group_commit,
            group_commit_wait: self.db_group_commit_wait.0,
            group_read: self.db_group_read,
            readiness_abandon_after: self.readiness_abandon_after.0.max(Duration::from_millis(100)),
            pooler: self.db_pooler,
            migrate_url: self.migrate_database_url.clone(),
            ..PostgresOptions::default()
        }
    }

    pub(crate) async fn store_backend(&self) -> anyhow::Result<std::sync::Arc<dyn tidemark_store::Backend>> {
        self.store_backend_with(self.postgres_options()).await
    }

    /// [`DatabaseArgs::store_backend`] with these Postgres options.
    pub(crate) async fn store_backend_with(
        &self,
        options: PostgresOptions,
    ) -> anyhow::Result<std::sync::Arc<dyn tidemark_store::Backend>> {
        open_backend(&self.database_url, &options)
            .await
            .with_context(|| format!("cannot open the database {}", redact(&self.database_url)))
    }

    /// Without migrating (`serve --no-migrate`): refuses a schema beyond this
    /// binary (the migration rule); a database not reachable yet is left to
    /// readiness, as it is without the check.
    pub(crate) async fn check_schema(&self, backend: &dyn tidemark_store::Backend) -> anyhow::Result<()> {
        match tidemark_store::schema_fits(backend).await {
            Ok(Err(beyond)) => anyhow::bail!("tidemark refuses to start: {beyond}"),
            Ok(Ok(())) => Ok(()),
            Err(error) => {
                tracing::warn!("cannot read the schema's migration level yet ({error}); not checked");
                Ok(())
            }
        }
    }

    /// Applies the migrations, retrying with backoff while the database is
    /// unreachable for up to --wait-for-database (a pod may start before its
    /// database). Concurrent runs are safe: the migrator takes a lock.
    pub(crate) async fn migrate(&self, backend: &dyn tidemark_store::Backend) -> anyhow::Result<()> {
        // Refused at once, not retried for --wait-for-database.
        if self.db_pooler == DbPooler::Transaction
            && self.migrate_database_url.is_none()
            && !self.database_url.starts_with("sqlite:")
        {
            anyhow::bail!(
                "cannot migrate through a transaction pooler (--db-pooler transaction): {MIGRATIONS_NEED_A_SESSION}"
            );
        }
        let started = std::time::Instant::now();
        let mut backoff = Duration::from_millis(200);
        loop {
            let migrated = match backend.migrate().await {
                Ok(()) => tidemark_store::schema_fits(backend).await,
                Err(error) => Err(error),
            };
            match migrated {
                // Refused at once: waiting does not make this binary newer.
                Ok(Err(beyond)) => anyhow::bail!("tidemark refuses to start: {beyond}"),
                Ok(Ok(())) => return Ok(()),
                Err(error) if started.elapsed() + backoff < self.wait_for_database.0 => {
                    tracing::warn!(
                        database = %redact(&self.database_url),
                        retry_in = ?backoff,
                        "migrations failed ({error}); waiting for the database"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                Err(error) => {
                    return Err(anyhow::Error::new(error)).with_context(|| {
                        format!(
                            "migration failed (gave up after {:?}; see --wait-for-database)",
                            self.wait_for_database.0
                        )
                    });
                }
            }
        }
    }
}
