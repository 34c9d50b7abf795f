//! The SQLite backend (the embedded, zero-setup default).
//!
//! WAL mode with `synchronous = FULL`, so an acknowledged commit survives a
//! power loss. Reads use a small pool; writes go through a single connection
//! (`BEGIN IMMEDIATE`), so writers in this process never collide, and a
//! compare-and-set on the row version catches writers in other processes.
//! Times come from the server's clock (SQLite has no shared clock).

use std::fs::File;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, query::Query};
use tidemark_core::{ConsumerKey, Timestamp};

use crate::backend::{Backend, Change, HistoryRecord, Loaded, Locate};
use crate::clock::Clock;
use crate::error::StoreError;
use crate::row::{Decoder, EventColumns, KeyRow, TimestampColumns};

/// The embedded SQLite migrations (`migrations/sqlite`).
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// tidemark state in an SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    readers: SqlitePool,
    writer: SqlitePool,
    clock: Arc<dyn Clock>,
    /// The database file; `None` for in-memory databases.
    path: Option<PathBuf>,
}

impl SqliteBackend {
    /// Opens (creating if missing) the database at `url`
    /// (`sqlite://path/to/file.db`).
    pub async fn open(url: &str, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Internal(format!("invalid SQLite URL {url:?}: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let path = (!in_memory).then(|| options.get_filename().to_path_buf());
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let readers = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(options.read_only(true))
                .await?
        };
        Ok(Self {
            readers,
            writer,
            clock,
            path,
        })
    }
}

type SqliteQuery<'q> = Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

const SELECT_KEY: &str = "SELECT table_name, branch, consumer_id, version, epoch, next_snapshot, \
    consumer_created_at, consumer_updated_at, latest_snapshot, lease_id, lease_holder, lease_epoch, lease_status, \
    lease_ttl_us, lease_acquired_at, lease_deadline, last_batch_id, last_end_snapshot, last_end_index, \
    last_end_full, last_end_total_splits, lease_wrote_consumer, legacy_warned_snapshot, full_scan_pin \
    FROM consumer_keys WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3";

const SELECT_GRANT: &str = "SELECT table_name, branch, consumer_id FROM lease_grants WHERE lease_id = ?1";

const UPDATE_ROW: &str = "UPDATE consumer_keys SET version = version + 1, epoch = ?4, next_snapshot = ?5, \
    consumer_created_at = ?6, consumer_updated_at = ?7, latest_snapshot = ?8, lease_id = ?9, lease_holder = ?10, \
    lease_epoch = ?11, lease_status = ?12, lease_ttl_us = ?13, lease_acquired_at = ?14, lease_deadline = ?15, \
    last_batch_id = ?16, last_end_snapshot = ?17, last_end_index = ?18, last_end_full = ?19, \
    last_end_total_splits = ?20, lease_wrote_consumer = ?21, legacy_warned_snapshot = ?22, full_scan_pin = ?23 \
    WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3 AND version = ?24 \
    AND (NOT ?25 OR (lease_status = 1 AND lease_deadline > ?26))";

const INSERT_ROW: &str = "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, \
    next_snapshot, consumer_created_at, consumer_updated_at, latest_snapshot, lease_id, lease_holder, lease_epoch, \
    lease_status, lease_ttl_us, lease_acquired_at, lease_deadline, last_batch_id, last_end_snapshot, last_end_index, \
    last_end_full, last_end_total_splits, lease_wrote_consumer, legacy_warned_snapshot, full_scan_pin) \
    VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, \
    ?22, ?23) ON CONFLICT DO NOTHING";

const INSERT_GRANT: &str = "INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, \
    granted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const INSERT_HISTORY: &str = "INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, \
    epoch, lease_id, batch_id, holder, principal, request_id, detail) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";

fn micros(t: Option<Timestamp>) -> Option<i64> {
    t.map(Timestamp::as_micros)
}

impl TimestampColumns for SqliteRow {
    fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, sqlx::Error> {
        Ok(self.try_get::<Option<i64>, _>(column)?.map(Timestamp::from_micros))
    }
}

fn bind_row<'q>(query: SqliteQuery<'q>, key: &ConsumerKey, row: KeyRow) -> SqliteQuery<'q> {
    query
        .bind(key.table.as_str().to_owned())
        .bind(key.branch.as_str().to_owned())
        .bind(key.consumer_id.as_str().to_owned())
        .bind(row.epoch)
        .bind(row.next_snapshot)
        .bind(micros(row.consumer_created_at))
        .bind(micros(row.consumer_updated_at))
        .bind(row.latest_snapshot)
        .bind(row.lease_id)
        .bind(row.lease_holder)
        .bind(row.lease_epoch)
        .bind(row.lease_status)
        .bind(row.lease_ttl_us)
        .bind(micros(row.lease_acquired_at))
        .bind(micros(row.lease_deadline))
        .bind(row.last_batch_id)
        .bind(row.last_end_snapshot)
        .bind(row.last_end_index)
        .bind(row.last_end_full)
        .bind(row.last_end_total_splits)
        .bind(row.lease_wrote_consumer)
        .bind(row.legacy_warned_snapshot)
        .bind(row.full_scan_pin)
}

#[async_trait]
impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        // sqlx does not lock SQLite migrations; an exclusive lock on a file
        // next to the database keeps processes starting at once from racing.
        let lock = match &self.path {
            Some(path) => {
                let lock_path = path.with_extension("migrate-lock");
                let file = tokio::task::spawn_blocking(move || -> std::io::Result<File> {
                    let file = File::create(lock_path)?;
                    file.lock()?;
                    Ok(file)
                })
                .await
                .map_err(|e| StoreError::Internal(format!("migration lock task failed: {e}")))?
                .map_err(|e| StoreError::Internal(format!("cannot lock the database for migration: {e}")))?;
                Some(file)
            }
            None => None,
        };
        let result = MIGRATOR.run(&self.writer).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(inner) => StoreError::from(inner),
            other => StoreError::Internal(format!("migration failed: {other}")),
        });
        drop(lock);
        result
    }

    async fn load(&self, locate: Locate<'_>) -> Result<Loaded, StoreError> {
        let mut conn = self.readers.acquire().await?;
        let found = match locate {
            Locate::Key(key) => {
                sqlx::query(SELECT_KEY)
                    .bind(key.table.as_str())
                    .bind(key.branch.as_str())
                    .bind(key.consumer_id.as_str())
                    .fetch_optional(&mut *conn)
                    .await?
            }
            Locate::Lease(lease_id) => {
                let grant = sqlx::query(SELECT_GRANT)
                    .bind(lease_id)
                    .fetch_optional(&mut *conn)
                    .await?;
                match grant {
                    None => None,
                    Some(g) => {
                        sqlx::query(SELECT_KEY)
                            .bind(g.try_get::<String, _>("table_name")?)
                            .bind(g.try_get::<String, _>("branch")?)
                            .bind(g.try_get::<String, _>("consumer_id")?)
                            .fetch_optional(&mut *conn)
                            .await?
                    }
                }
            }
        };
        let now = self.clock.now();
        match found {
            None => Ok(Loaded {
                state: None,
                version: None,
                now,
            }),
            Some(row) => {
                let (state, version) = Decoder::key_row(&row)?;
                Ok(Loaded {
                    state: Some(state),
                    version: Some(version),
                    now,
                })
            }
        }
    }

    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<bool, StoreError> {
        let key = &change.state.key;
        let row = KeyRow::from_state(change.state);
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now = self.clock.now();
        let written = match loaded.version {
            Some(version) => {
                bind_row(sqlx::query(UPDATE_ROW), key, row)
                    .bind(version)
                    .bind(change.requires_live_lease)
                    .bind(now.as_micros())
                    .execute(&mut *tx)
                    .await?
            }
            None => bind_row(sqlx::query(INSERT_ROW), key, row).execute(&mut *tx).await?,
        };
        if written.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        if let Some(grant) = change.new_grant {
            sqlx::query(INSERT_GRANT)
                .bind(grant.lease_id)
                .bind(key.table.as_str())
                .bind(key.branch.as_str())
                .bind(key.consumer_id.as_str())
                .bind(grant.epoch)
                .bind(&grant.holder)
                .bind(grant.acquired_at.as_micros())
                .execute(&mut *tx)
                .await?;
        }
        let events = EventColumns::new(change.events);
        for i in 0..change.events.len() {
            sqlx::query(INSERT_HISTORY)
                .bind(now.as_micros())
                .bind(key.table.as_str())
                .bind(key.branch.as_str())
                .bind(key.consumer_id.as_str())
                .bind(&events.event[i])
                .bind(events.old_next[i])
                .bind(events.new_next[i])
                .bind(events.epoch[i])
                .bind(events.lease_id[i])
                .bind(events.batch_id[i])
                .bind(&events.holder[i])
                .bind(&change.ctx.principal)
                .bind(&change.ctx.request_id)
                .bind(&events.detail[i])
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn history(&self, key: &ConsumerKey, limit: i64) -> Result<Vec<HistoryRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, at, table_name, branch, consumer_id, event, old_next, new_next, epoch, lease_id, batch_id, \
             holder, principal, request_id, detail FROM history \
             WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3 ORDER BY id DESC LIMIT ?4",
        )
        .bind(key.table.as_str())
        .bind(key.branch.as_str())
        .bind(key.consumer_id.as_str())
        .bind(limit)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(Decoder::history).collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.readers).await?;
        Ok(())
    }

    async fn close(&self) {
        self.writer.close().await;
        self.readers.close().await;
    }
}
