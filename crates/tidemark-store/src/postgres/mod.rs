//! The Postgres backend (production), by concern: `keys` (the
//! `consumer_keys` rows), `history`, `options`, `paimon` (the registry and
//! the mirror's bookkeeping) and `group_commit`.
//!
//! A read is one statement (the row plus `tidemark_now()`); a write is one statement
//! whose CTEs compare-and-set the row, record a lease grant and append the
//! history, so each is its own transaction and costs one round trip; commits
//! that arrive together share one (see the `group_commit` module). Times come
//! from the database clock.

mod backup;
pub(crate) mod batch;
mod db;
mod fences;
pub(crate) mod group_commit;
pub(crate) mod group_read;
mod history;
mod keys;
mod migrate;
mod options;
mod paimon;
mod probe;
#[cfg(test)]
mod rendered_sql;
mod sessions;
mod stats;
mod update;

use migrate::migrate_on;

use probe::{ProbeBackend, ProbeConnection, commit_probe, commit_probe_in_transaction, terminate_backend};

pub use db::DbPooler;
pub use fences::{branch_view_statement, fence_view_statement};
pub use keys::BRANCH_CONSUMERS;
pub use migrate::MIGRATIONS_NEED_A_SESSION;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use tidemark_core::Timestamp;

use crate::backend::Backend;
use crate::decode::TimestampColumns;
use crate::error::StoreError;
use db::Db;
use group_commit::GroupCommit;
use group_read::GroupRead;

/// The embedded Postgres migrations (`migrations/postgres`).
pub static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| crate::migrations::embedded(crate::migrations::POSTGRES));

/// Connection settings for the Postgres backend.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Most connections the pool opens.
    pub max_connections: u32,
    /// How long a call waits for a free connection before failing with
    /// UNAVAILABLE.
    pub acquire_timeout: Duration,
    /// Server-side limit on any one statement.
    pub statement_timeout: Option<Duration>,
    /// Schema to use instead of the default search path (tests use one
    /// schema each).
    pub schema: Option<String>,
    /// Group commit: concurrent commits share at most this many statements
    /// in flight, each carrying whatever queued meanwhile (0: every commit
    /// is its own statement). See the `group_commit` module.
    pub group_commit: usize,
    /// Group commit: how long a statement may wait for more writes (see the
    /// `batch` module; zero: never waits).
    pub group_commit_wait: Duration,
    /// Group reads: concurrent key reads share at most this many statements
    /// in flight (0: every read is its own statement). See the
    /// `group_read` module.
    pub group_read: usize,
    /// A readiness probe unanswered this long is given up: its backend is
    /// terminated (`pg_terminate_backend`, over the new connection) and a
    /// new connection made.
    pub readiness_abandon_after: Duration,
    /// What sits between tidemark and Postgres (`--db-pooler`): behind
    /// PgBouncer no startup parameter but those it knows is sent, and in
    /// transaction mode every statement is unnamed, in a transaction of its
    /// own that sets the timeouts.
    pub pooler: DbPooler,
    /// A direct connection for migrations (`--migrate-database-url`): they
    /// need a session (an advisory lock, a setting) that a transaction
    /// pooler does not keep.
    pub migrate_url: Option<String>,
    /// Behind a transaction pooler, how long the gauge collector's row
    /// claim lasts unrenewed (a collector that died is replaced within
    /// it); the server sets three gauge intervals.
    pub collector_lease: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Some(Duration::from_secs(10)),
            schema: None,
            group_commit: DEFAULT_GROUP_COMMIT,
            group_commit_wait: group_commit::DEFAULT_WAIT,
            group_read: DEFAULT_GROUP_READ,
            readiness_abandon_after: Duration::from_secs(60),
            pooler: DbPooler::None,
            migrate_url: None,
            collector_lease: Duration::from_secs(60),
        }
    }
}

/// In-flight commit statements per replica by default: enough to keep the
/// database busy, few enough that concurrent commits share statements.
pub const DEFAULT_GROUP_COMMIT: usize = 1;

/// In-flight key-read statements per replica by default.
pub const DEFAULT_GROUP_READ: usize = 1;

/// tidemark state in Postgres.
#[derive(Debug, Clone)]
pub struct PostgresBackend {
    db: Db,
    group: Option<Arc<GroupCommit>>,
    reads: Option<Arc<GroupRead>>,
    /// The gauge collector's own connection (outside the pool, so it never
    /// takes a serving connection nor holds up closing the pool), and
    /// whether it holds the collector's advisory lock.
    collector: Arc<tokio::sync::Mutex<Option<(sqlx::PgConnection, bool)>>>,
    /// This backend's id as the collector's row-lease holder (behind a
    /// transaction pooler), and whether it holds it.
    collector_id: uuid::Uuid,
    collector_lease: Duration,
    row_claim_held: Arc<std::sync::atomic::AtomicBool>,
    /// Readiness's own connection (outside the pool): a probe that stalls
    /// (commits waiting for a synchronous standby) holds this one
    /// connection, never a serving one, and the next probe waits on the
    /// same stall instead of opening another; an exhausted pool is load,
    /// not a database that cannot commit.
    probe: Arc<tokio::sync::Mutex<Option<ProbeConnection>>>,
    connect_options: PgConnectOptions,
    /// The session settings (statement timeout, schema) a connection needs
    /// and, behind a pooler, cannot be given at start-up.
    session_settings: Vec<(&'static str, String)>,
    pooler: DbPooler,
    migrate_url: Option<String>,
    acquire_timeout: Duration,
    max_connections: u32,
    probe_abandon_after: Duration,
}

impl PostgresBackend {
    /// Creates the pool. Connections are opened lazily, so this succeeds even
    /// while the database is down.
    pub fn connect(url: &str, options: &PostgresOptions) -> Result<Self, StoreError> {
        let mut connect: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("invalid Postgres URL: {e}")))?;
        connect = connect.application_name("tidemark");
        let mut settings: Vec<(&'static str, String)> = Vec::new();
        if let Some(timeout) = options.statement_timeout {
            settings.push(("statement_timeout", timeout.as_millis().to_string()));
        }
        if let Some(schema) = &options.schema {
            settings.push(("search_path", schema.clone()));
        }
        let mut pool_options = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            // No ping before handing out a pooled connection: it would cost
            // a round trip on every call. A connection that died (say,
            // Postgres restarted) fails its next statement with
            // UNAVAILABLE, which the client retries, and is dropped from
            // the pool.
            .test_before_acquire(false);
        match options.pooler {
            DbPooler::None => {
                if !settings.is_empty() {
                    connect = connect.options(settings.clone());
                }
            }
            // PgBouncer refuses startup parameters it does not know
            // (`options`, `extra_float_digits`): none is sent (tidemark
            // reads no floats as text, so the digits do not matter).
            DbPooler::Session => {
                connect = connect.extra_float_digits(None);
                // The session is ours until we close it (PgBouncer resets it
                // then): set once per connection.
                let set = session_set_sql(&settings);
                pool_options = pool_options.after_connect(move |connection, _| {
                    let set = set.clone();
                    Box::pin(async move {
                        if !set.is_empty() {
                            use sqlx::Executor;
                            connection.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(set))).await?;
                        }
                        Ok(())
                    })
                });
            }
            // No session setting survives: each statement's transaction
            // sets them (see the `db` module).
            DbPooler::Transaction => {
                connect = connect.extra_float_digits(None);
            }
        }
        let distrust = db::Distrust::default();
        let trusted = distrust.clone();
        pool_options = pool_options.before_acquire(move |_, meta| {
            let trusted = trusted.trusts(meta.age);
            Box::pin(async move { Ok(trusted) })
        });
        let pool = pool_options.connect_lazy_with(connect.clone());
        // A connection, a statement and its retry, and a second to spare.
        let limit = options.acquire_timeout + 2 * options.statement_timeout.unwrap_or(Duration::from_secs(30));
        let db = Db::new(
            pool,
            options.pooler,
            &settings,
            distrust,
            limit + Duration::from_secs(1),
        );
        let group = (options.group_commit > 0).then(|| {
            Arc::new(GroupCommit::new(
                db.clone(),
                options.group_commit,
                options.group_commit_wait,
            ))
        });
        let reads = (options.group_read > 0).then(|| Arc::new(GroupRead::new(db.clone(), options.group_read)));
        Ok(Self {
            db,
            group,
            reads,
            collector: Arc::default(),
            collector_id: uuid::Uuid::now_v7(),
            collector_lease: options.collector_lease,
            row_claim_held: Arc::default(),
            probe: Arc::default(),
            connect_options: connect,
            session_settings: settings,
            pooler: options.pooler,
            migrate_url: options.migrate_url.clone(),
            acquire_timeout: options.acquire_timeout,
            max_connections: options.max_connections,
            probe_abandon_after: options.readiness_abandon_after,
        })
    }

    /// Group reads' work so far (`None` when they are off).
    pub fn group_read_stats(&self) -> Option<crate::GroupReadStats> {
        self.reads.as_ref().map(|g| g.stats())
    }

    /// Group commit's work so far (`None` when it is off).
    pub fn group_commit_stats(&self) -> Option<crate::GroupCommitStats> {
        self.group.as_ref().map(|g| g.stats())
    }

    /// The connection pool (for tests and benchmarks).
    pub fn pool(&self) -> &PgPool {
        self.db.pool()
    }
}

/// `SET name = 'value'; …` for a session's settings (empty without any).
fn session_set_sql(settings: &[(&str, String)]) -> String {
    settings
        .iter()
        .map(|(name, value)| format!("SET {name} = '{}'", value.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) use crate::decode::{from_ts, ts};

/// A pooled connection that reaches a primary. One that reaches a standby
/// in recovery (read-only) fails with UNAVAILABLE and is closed rather than
/// pooled again, so the next call connects afresh (and a balancer that has
/// caught up with a failover sends it to the new primary).
async fn writable_connection(pool: &PgPool) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, StoreError> {
    let mut connection = pool.acquire().await?;
    let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut *connection)
        .await?;
    if standby {
        connection.close_on_drop();
        return Err(StoreError::Unavailable(
            "the database is a standby in recovery (read-only); tidemark needs the primary".into(),
        ));
    }
    Ok(connection)
}

impl TimestampColumns for PgRow {
    fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, sqlx::Error> {
        Ok(self.try_get::<Option<DateTime<Utc>>, _>(column)?.map(from_ts))
    }
}

/// The table options joined as `o`.
const OPTION_COLUMNS: &str =
    "o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode";

/// E2: `k` has not expired (by `o`'s expiration time, or because a live
/// lease holds it).
const UNEXPIRED: &str = "(o.expiration_us IS NULL
      OR k.consumer_updated_at >= tidemark_now() - o.expiration_us * interval '1 microsecond'
      OR (k.lease_status = 1 AND k.lease_deadline > tidemark_now()))";

/// `k`'s lease is live.
const LIVE_LEASE: &str = "(k.lease_status = 1 AND k.lease_deadline > tidemark_now())";

#[async_trait]
impl Backend for PostgresBackend {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        if let Some(url) = &self.migrate_url {
            return self.migrate_directly(url).await;
        }
        if self.pooler == DbPooler::Transaction {
            return Err(StoreError::Internal(MIGRATIONS_NEED_A_SESSION.into()));
        }
        // Never on a standby: behind a balancer that has not yet noticed a
        // failover, or given a replica's address by mistake, the run would
        // fail halfway (or, with nothing to apply, pass without a primary).
        // The check and the run share one connection, so they reach the
        // same server.
        let mut connection = writable_connection(self.db.pool()).await?;
        // The connection leaves with session state: the statement timeout
        // lifted below, and after a failed run the migrator's advisory lock
        // (sqlx releases it only on success), which would otherwise block
        // every other replica's migrations for as long as it stays pooled.
        connection.close_on_drop();
        migrate_on(&mut connection).await
    }

    async fn schema_level(&self) -> Result<Option<crate::migrations::SchemaLevel>, StoreError> {
        migrate::schema_level(&self.db).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        use sqlx::Connection;
        let mut slot = self.probe.lock().await;
        // A probe cut short by the caller's time limit leaves its
        // connection waiting for that answer, which the next probe waits
        // for first: a stall costs one connection, not one per probe. Past
        // `probe_abandon_after` unanswered, the connection is given up (a
        // black-holed socket would otherwise keep readiness down after the
        // database came back elsewhere) and its backend terminated: a
        // backend waiting for a synchronous standby that is gone never
        // notices its client left, and one more a minute would use up
        // max_connections.
        let mut abandoned = None;
        if let Some(probe) = slot.as_mut() {
            probe::judge_silence(probe, &self.connect_options, &self.db.distrust, self.acquire_timeout).await;
        }
        if slot.as_ref().is_some_and(|p| p.abandoned(self.probe_abandon_after)) {
            tracing::warn!(after = ?self.probe_abandon_after, "readiness probe unanswered; terminating its backend and connecting afresh");
            abandoned = slot.take().and_then(|p| p.backend);
        }
        // Twice: a kept connection may have died with a database restart
        // or a failover (it is then dropped and a new one made).
        let mut attempts = 0;
        loop {
            attempts += 1;
            if slot.is_none() {
                let connecting = sqlx::PgConnection::connect_with(&self.connect_options);
                let mut connection = tokio::time::timeout(self.acquire_timeout, connecting)
                    .await
                    .map_err(|_| StoreError::Unavailable("timed out connecting to the database".into()))??;
                // Reads need no commit: neither waits for a standby. Behind a
                // transaction pooler the backend is ours only inside each
                // probe's transaction, which reads its id itself.
                let backend = match self.pooler {
                    DbPooler::Transaction => None,
                    _ => tokio::time::timeout(
                        self.acquire_timeout,
                        sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()").fetch_one(&mut connection),
                    )
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|pid| ProbeBackend {
                        pid,
                        transaction_began: None,
                    }),
                };
                if let Some(abandoned) = abandoned.take() {
                    terminate_backend(&mut connection, abandoned, self.acquire_timeout).await;
                }
                *slot = Some(ProbeConnection {
                    connection,
                    backend,
                    unanswered_since: None,
                    silence_judged: false,
                });
            }
            let probe = slot.as_mut().expect("connected above");
            probe.unanswered_since.get_or_insert_with(Instant::now);
            let outcome = match self.pooler {
                DbPooler::Transaction => commit_probe_in_transaction(probe).await,
                _ => commit_probe(&mut probe.connection).await,
            };
            (probe.unanswered_since, probe.silence_judged) = (None, false);
            if outcome.is_err() {
                self.db.distrust.connections_made_before_now();
                // A standby's or a broken session is not kept: the next
                // probe connects afresh (through a balancer, perhaps to
                // the new primary).
                if let Some(probe) = slot.take() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), probe.connection.close()).await;
                }
            }
            if outcome.is_ok() || attempts == 2 {
                return outcome;
            }
        }
    }

    async fn close(&self) {
        // Ending the collector's session releases its lock at once, so
        // another replica takes the role in its next round.
        use sqlx::Connection;
        if let Some((connection, _)) = self.collector.lock().await.take() {
            let _ = connection.close().await;
        }
        if self.row_claim_held.swap(false, std::sync::atomic::Ordering::Relaxed) {
            let _ = sqlx::query(stats::RELEASE_CLAIM_ROW)
                .bind(self.collector_id)
                .execute(&self.db)
                .await;
        }
        if let Some(probe) = self.probe.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), probe.connection.close()).await;
        }
        self.db.pool().close().await;
    }
}
