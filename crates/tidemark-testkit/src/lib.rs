//! Throwaway databases for tests.
//!
//! Postgres tests use the server named by `DATABASE_URL` (the README's test
//! command starts a throwaway cluster and sets it). Each [`TestDb`] gets its
//! own schema, dropped when the `TestDb` is dropped. Without `DATABASE_URL`
//! the Postgres tests fail, unless `TIDEMARK_SKIP_POSTGRES=1` says to skip
//! them on purpose.

mod cluster;
pub mod load;
mod pgbouncer;
pub mod postgres;
pub mod process;
pub mod raw;

pub use cluster::{PgCluster, StopMode};
pub use pgbouncer::{POOL_SIZE as PGBOUNCER_POOL_SIZE, PgBouncer, PoolMode};

use std::sync::Arc;

use std::time::Duration;

pub use tidemark_store::Timestamp;
use tidemark_store::{
    Backend, Clock, DbPooler, ManualClock, PostgresBackend, PostgresOptions, SqliteBackend, SystemClock,
};

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A schema on the Postgres server at `DATABASE_URL`.
    Postgres,
    /// An SQLite file in a temporary directory.
    Sqlite,
}

/// A fresh, migrated, private database.
#[derive(Debug)]
pub struct TestDb {
    kind: Kind,
    url: String,
    schema: Option<String>,
    _dir: Option<tempfile::TempDir>,
    /// When set, the database's clock only moves when the test says so.
    manual: Option<ManualClock>,
    /// PgBouncer in front of the server, when `TIDEMARK_TEST_DB_POOLER`
    /// says so: backends reach the database through it (migrations and raw
    /// pools directly).
    bouncer: Option<(PoolMode, Arc<PgBouncer>)>,
}

/// Proof that the pooler tests can fail: with
/// `TIDEMARK_TEST_POOLER_UNAWARE=1` backends are not told about the test
/// pooler (`--db-pooler none`), as tidemark was before it knew of poolers.
fn pooler_unaware() -> bool {
    std::env::var("TIDEMARK_TEST_POOLER_UNAWARE").is_ok_and(|v| v == "1")
}

/// The pooler Postgres tests run behind: `TIDEMARK_TEST_DB_POOLER` =
/// `session` or `transaction` (unset or `none`: direct).
pub fn test_pooler() -> Option<PoolMode> {
    match std::env::var("TIDEMARK_TEST_DB_POOLER").as_deref() {
        Ok("session") => Some(PoolMode::Session),
        Ok("transaction") => Some(PoolMode::Transaction),
        Ok("" | "none") | Err(_) => None,
        Ok(other) => panic!("TIDEMARK_TEST_DB_POOLER={other:?}: none, session or transaction"),
    }
}

/// The Postgres server URL for tests, or `None` when Postgres tests are
/// explicitly skipped. Panics when it is neither set nor skipped, so a
/// missing database can never pass silently.
pub fn postgres_url() -> Option<String> {
    if let Ok(url) = std::env::var("DATABASE_URL")
        && !url.is_empty()
    {
        return Some(url);
    }
    if std::env::var("TIDEMARK_SKIP_POSTGRES").is_ok_and(|v| v == "1") {
        return None;
    }
    panic!(
        "DATABASE_URL is not set. Run the README's test command (scripts/test.sh), which starts a throwaway \
         Postgres, or set DATABASE_URL, or set TIDEMARK_SKIP_POSTGRES=1 to skip the Postgres tests on purpose"
    );
}

impl TestDb {
    /// A fresh database of `kind`; `None` when Postgres tests are skipped.
    pub async fn new(kind: Kind) -> Option<Self> {
        let db = match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("tidemark.db").display());
                Self {
                    kind,
                    url,
                    schema: None,
                    _dir: Some(dir),
                    manual: None,
                    bouncer: None,
                }
            }
            Kind::Postgres => {
                let url = postgres_url()?;
                let schema = format!("tidemark_test_{}", uuid::Uuid::new_v4().simple());
                let pool = sqlx::PgPool::connect(&url).await.expect("connect to DATABASE_URL");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                    .execute(&pool)
                    .await
                    .expect("create test schema");
                pool.close().await;
                let bouncer = test_pooler().map(|mode| (mode, Arc::new(PgBouncer::start(mode, &url))));
                Self {
                    kind,
                    url,
                    schema: Some(schema),
                    _dir: None,
                    manual: None,
                    bouncer,
                }
            }
        };
        Some(db)
    }

    /// A fresh database whose clock is stopped at `start` and moves only by
    /// [`TestDb::advance`]: SQLite backends get a manual clock, and on
    /// Postgres the schema's `tidemark_now()` is replaced by a constant.
    pub async fn with_manual_clock(kind: Kind, start: Timestamp) -> Option<Self> {
        let mut db = Self::new(kind).await?;
        db.manual = Some(ManualClock::new(start));
        db.backend().await; // migrate, so tidemark_now() exists to replace
        db.publish_time().await;
        Some(db)
    }

    /// Moves a manual clock forward.
    pub async fn advance(&self, by: Duration) {
        let clock = self.manual.as_ref().expect("advance needs TestDb::with_manual_clock");
        clock.advance(by);
        self.publish_time().await;
    }

    /// The manual clock's time.
    pub fn now(&self) -> Timestamp {
        self.manual.as_ref().expect("a manual clock").now()
    }

    async fn publish_time(&self) {
        let Some(clock) = &self.manual else { return };
        let Some(pool) = self.postgres_pool().await else { return };
        let micros = clock.now().as_micros();
        // Both clocks: the read one and the write one (SPEC §1).
        for (function, volatility) in [("tidemark_now", "STABLE"), ("tidemark_write_now", "VOLATILE")] {
            let sql = format!(
                "CREATE OR REPLACE FUNCTION {function}() RETURNS timestamptz LANGUAGE sql {volatility} \
                 AS $clock$ SELECT to_timestamp(0) + {micros} * interval '1 microsecond' $clock$"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .expect("set the database clock");
        }
        pool.close().await;
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The database URL (for Postgres, the schema is set separately: see
    /// [`TestDb::postgres_options`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Postgres options that select this database's schema (and, behind
    /// the test pooler, say so and migrate directly).
    pub fn postgres_options(&self) -> PostgresOptions {
        let (pooler, migrate_url) = match &self.bouncer {
            Some((mode, _)) if pooler_unaware() => (
                DbPooler::None,
                Some(self.url.clone()).filter(|_| *mode == PoolMode::Transaction),
            ),
            Some((PoolMode::Session, _)) => (DbPooler::Session, Some(self.url.clone())),
            Some((PoolMode::Transaction, _)) => (DbPooler::Transaction, Some(self.url.clone())),
            None => (DbPooler::None, None),
        };
        PostgresOptions {
            schema: self.schema.clone(),
            pooler,
            migrate_url,
            ..PostgresOptions::default()
        }
    }

    /// Postgres options for a backend on [`TestDb::url`] itself (direct,
    /// whatever the test pooler): for tests that read the backend's own
    /// pool with raw SQL.
    pub fn direct_postgres_options(&self) -> PostgresOptions {
        PostgresOptions {
            schema: self.schema.clone(),
            ..PostgresOptions::default()
        }
    }

    /// The URL backends use: through the test pooler when there is one,
    /// else [`TestDb::url`].
    pub fn backend_url(&self) -> String {
        match &self.bouncer {
            Some((_, bouncer)) => {
                let options: sqlx::postgres::PgConnectOptions = self.url.parse().expect("url");
                let database = options.get_database().unwrap_or(options.get_username()).to_owned();
                bouncer.url(&database)
            }
            None => self.url.clone(),
        }
    }

    /// A raw connection pool on this Postgres schema (to hold locks or read
    /// tables directly); `None` for SQLite.
    pub async fn postgres_pool(&self) -> Option<sqlx::PgPool> {
        let schema = self.schema.clone()?;
        let options = self
            .url
            .parse::<sqlx::postgres::PgConnectOptions>()
            .expect("url")
            .options([("search_path", schema)]);
        Some(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect_with(options)
                .await
                .expect("connect"),
        )
    }

    /// A new backend (its own connection pool) on this database, migrated.
    /// Several backends on one `TestDb` behave like several server replicas.
    pub async fn backend(&self) -> Arc<dyn Backend> {
        let backend = self.unmigrated_backend().await;
        backend.migrate().await.expect("migrate");
        backend
    }

    /// A new backend on this database, without running migrations.
    pub async fn unmigrated_backend(&self) -> Arc<dyn Backend> {
        match self.kind {
            Kind::Postgres => Arc::new(
                PostgresBackend::connect(&self.backend_url(), &self.postgres_options()).expect("postgres backend"),
            ),
            Kind::Sqlite => {
                let clock: Arc<dyn Clock> = match &self.manual {
                    Some(manual) => Arc::new(manual.clone()),
                    None => Arc::new(SystemClock),
                };
                Arc::new(SqliteBackend::open(&self.url, clock).await.expect("sqlite backend"))
            }
        }
    }
}

/// A summary of everything stored: (keys, sum of row versions, lease
/// grants, history rows). Every write either adds a row or bumps a version,
/// so any change to the database changes the fingerprint.
pub type Fingerprint = (i64, i64, i64, i64);

impl TestDb {
    /// The database's [`Fingerprint`].
    pub async fn fingerprint(&self) -> Fingerprint {
        const QUERY: &str = "SELECT (SELECT count(*) FROM consumer_keys), \
             (SELECT coalesce(sum(version), 0) FROM consumer_keys), \
             (SELECT count(*) FROM lease_grants), (SELECT count(*) FROM history)";
        match self.kind {
            Kind::Postgres => {
                let pool = self.postgres_pool().await.expect("postgres");
                let row: (i64, i64, i64, i64) = sqlx::query_as(
                    "SELECT (SELECT count(*) FROM consumer_keys), \
                     (SELECT coalesce(sum(version), 0)::bigint FROM consumer_keys), \
                     (SELECT count(*) FROM lease_grants), (SELECT count(*) FROM history)",
                )
                .fetch_one(&pool)
                .await
                .expect("fingerprint");
                pool.close().await;
                row
            }
            Kind::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.expect("connect");
                let row: (i64, i64, i64, i64) = sqlx::query_as(QUERY).fetch_one(&pool).await.expect("fingerprint");
                pool.close().await;
                row
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(schema) = self.schema.take() else { return };
        let url = self.url.clone();
        // Drop runs outside any runtime guarantee; use a private one.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(pool) = sqlx::PgPool::connect(&url).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA IF EXISTS {schema} CASCADE")))
                        .execute(&pool)
                        .await;
                    pool.close().await;
                }
            });
        })
        .join();
    }
}

/// A Paimon table directory as Paimon lays it out: a first schema (with its
/// creation time and `options`, JSON members such as
/// `"consumer.expiration-time":"6 s"`) and snapshots 1..=latest with their
/// EARLIEST and LATEST hints.
pub fn paimon_table_dir(root: &std::path::Path, latest: i64, created_millis: i64, options: &str) {
    let schemas = root.join("schema");
    std::fs::create_dir_all(&schemas).unwrap();
    std::fs::write(
        schemas.join("schema-0"),
        format!(r#"{{"version":3,"id":0,"fields":[],"options":{{{options}}},"timeMillis":{created_millis}}}"#),
    )
    .unwrap();
    let snapshots = root.join("snapshot");
    std::fs::create_dir_all(&snapshots).unwrap();
    // Committed a second apart, after the schema, as Paimon records them.
    for id in 1..=latest {
        std::fs::write(
            snapshots.join(format!("snapshot-{id}")),
            format!(
                r#"{{"version":3,"id":{id},"timeMillis":{}}}"#,
                created_millis + id * 1000
            ),
        )
        .unwrap();
    }
    std::fs::write(snapshots.join("EARLIEST"), "1").unwrap();
    std::fs::write(snapshots.join("LATEST"), latest.to_string()).unwrap();
}
