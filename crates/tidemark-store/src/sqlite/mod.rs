//! The SQLite backend (the embedded, zero-setup default).
//!
//! WAL mode with `synchronous = FULL`, so an acknowledged commit survives a
//! power loss. Reads use a small pool; writes go through a single connection
//! (`BEGIN IMMEDIATE`), so writers in this process never collide, and a
//! compare-and-set on the row version catches writers in other processes.
//! Times come from the server's clock (SQLite has no shared clock).
//!
//! By concern, as on Postgres: `keys`, `history`, `options`, `paimon`.

mod backup;
mod history;
mod keys;
mod options;
mod paimon;
#[cfg(test)]
mod rendered_sql;
mod sessions;
mod stats;

use std::fs::File;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use tidemark_core::Timestamp;

use crate::backend::Backend;
use crate::clock::Clock;
use crate::decode::TimestampColumns;
use crate::error::StoreError;

/// The embedded SQLite migrations (`migrations/sqlite`).
pub static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| crate::migrations::embedded(crate::migrations::SQLITE));

/// SQLite allows one writer at a time.
const WRITERS: u32 = 1;
/// Read-only connections (WAL lets them read beside the writer).
const READERS: u32 = 4;

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
            .max_connections(WRITERS)
            .connect_with(options.clone())
            .await?;
        let readers = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READERS)
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

impl TimestampColumns for SqliteRow {
    fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, sqlx::Error> {
        Ok(self.try_get::<Option<i64>, _>(column)?.map(Timestamp::from_micros))
    }
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
        let result = crate::migrations::expand_only(&MIGRATOR)
            .run(&self.writer)
            .await
            .map_err(crate::migrations::failure);
        drop(lock);
        result
    }

    async fn schema_level(&self) -> Result<Option<crate::migrations::SchemaLevel>, StoreError> {
        let ruled: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'tidemark_schema_rule')")
                .fetch_one(&self.readers)
                .await?;
        if !ruled {
            return Ok(None);
        }
        let (schema, needs): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT max(version) FROM _sqlx_migrations WHERE success), \
                    (SELECT max(oldest_compatible) FROM tidemark_schema_rule)",
        )
        .fetch_one(&self.readers)
        .await?;
        Ok(schema
            .zip(needs)
            .map(|(schema, needs)| crate::migrations::SchemaLevel { schema, needs }))
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
