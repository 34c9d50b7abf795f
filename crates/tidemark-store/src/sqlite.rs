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
use tidemark_core::{BranchName, ConsumerId, ConsumerKey, HistoryEvent, TableName, TableOptions, Timestamp};

use crate::backend::{
    Backend, BranchView, CallContext, Change, DECIDED_AT_TOLERANCE, HistoryFilter, HistoryRecord, KeyFilter, Listed,
    Loaded, Locate, MirrorEntry, MirrorState, MirrorTask, Pruned, RegisteredTable, StoredOptions,
};
use crate::clock::Clock;
use crate::error::StoreError;
use crate::row::{Decoder, EventColumns, KeyRow, TimestampColumns, expiration_us, mode_text};
use tidemark_core::time::duration_micros;

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

const SELECT_KEY: &str = concat!(
    "SELECT ",
    key_columns!(),
    " FROM consumer_keys k WHERE k.table_name = ?1 AND k.branch = ?2 AND k.consumer_id = ?3"
);

const SELECT_GRANT: &str = "SELECT table_name, branch, consumer_id FROM lease_grants WHERE lease_id = ?1";

const TABLE_OPTIONS: &str = "SELECT expiration_us AS opt_expiration_us, changelog_only AS opt_changelog_only, \
    mode AS opt_mode, version, updated_at, updated_by FROM table_options WHERE table_name = ?1";

// ?6 is the clock; ?7 the expected version (NULL for an insert, unused).
const INSERT_OPTIONS: &str = "INSERT INTO table_options \
    (table_name, expiration_us, changelog_only, mode, version, updated_at, updated_by) \
    SELECT ?1, ?2, ?3, ?4, 1, ?6, ?5 WHERE ?7 IS NULL ON CONFLICT DO NOTHING";

const UPDATE_OPTIONS: &str = "UPDATE table_options SET expiration_us = ?2, changelog_only = ?3, mode = ?4, \
    version = version + 1, updated_at = ?6, updated_by = ?5 WHERE table_name = ?1 AND version = ?7";

const HISTORY_PAGE: &str = "SELECT id, at, table_name, branch, consumer_id, event, old_next, new_next, epoch, \
    lease_id, batch_id, holder, principal, request_id, detail FROM history \
    WHERE table_name = ?1 AND (?2 IS NULL OR branch = ?2) AND (?3 IS NULL OR consumer_id = ?3) \
    AND (?4 IS NULL OR id < ?4) ORDER BY id DESC LIMIT ?5";

const FORGET_MOVED_MIRRORS: &str = "DELETE FROM consumer_mirrors WHERE table_name = ?1 \
    AND EXISTS (SELECT 1 FROM paimon_tables WHERE table_name = ?1 AND location <> ?2)";

const REGISTER_TABLE: &str = "INSERT INTO paimon_tables (table_name, location, registered_at, registered_by, \
    identity) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (table_name) DO UPDATE SET location = excluded.location, \
    registered_at = excluded.registered_at, registered_by = excluded.registered_by, identity = excluded.identity";

const SET_IDENTITY: &str =
    "UPDATE paimon_tables SET identity = ?3 WHERE table_name = ?1 AND location = ?2 AND identity IS NULL";

/// See the Postgres backend's `MIRROR_INVENTORY`; `?1` is the clock.
const MIRROR_INVENTORY: &str = "SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot, \
    k.consumer_updated_at, k.lease_id, m.mirrored_next, coalesce(k.next_snapshot IS NOT NULL AND (o.expiration_us IS NULL \
    OR k.consumer_updated_at >= ?1 - o.expiration_us OR (k.lease_status = 1 AND k.lease_deadline > ?1)), 0) AS kept, \
    CASE WHEN k.full_scan_pin IS NOT NULL AND k.lease_status = 1 AND k.lease_deadline > ?1 THEN k.lease_id END \
    AS pin_lease, \
    CASE WHEN k.full_scan_pin IS NOT NULL AND k.lease_status = 1 AND k.lease_deadline > ?1 THEN k.full_scan_pin END \
    AS pin_snapshot \
    FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name \
    LEFT JOIN table_options o ON o.table_name = k.table_name \
    LEFT JOIN consumer_mirrors m ON m.table_name = k.table_name AND m.branch = k.branch \
    AND m.consumer_id = k.consumer_id \
    WHERE k.next_snapshot IS NOT NULL OR (k.full_scan_pin IS NOT NULL AND k.lease_status = 1 AND k.lease_deadline > ?1) \
    ORDER BY k.table_name, k.branch, k.consumer_id";

const UNREGISTER_MIRRORS: &str = "DELETE FROM consumer_mirrors WHERE table_name = ?1";
const UNREGISTER_TABLE: &str = "DELETE FROM paimon_tables WHERE table_name = ?1";

const REGISTERED_TABLES: &str =
    "SELECT table_name, location, registered_at, registered_by, identity FROM paimon_tables ORDER BY table_name";

/// See the Postgres backend's `MIRROR_TASKS`.
const MIRROR_TASKS: &str = "SELECT * FROM ( \
    SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot, k.consumer_updated_at, \
    coalesce(m.failures, 0) AS failures \
    FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name \
    LEFT JOIN consumer_mirrors m ON m.table_name = k.table_name AND m.branch = k.branch AND m.consumer_id = k.consumer_id \
    WHERE (k.next_snapshot IS NOT NULL AND (m.mirrored_next IS NOT k.next_snapshot \
    OR m.mirrored_updated_at IS NULL OR k.consumer_updated_at > m.mirrored_updated_at + ?1)) \
    OR (k.next_snapshot IS NULL AND m.mirrored_next IS NOT NULL) \
    UNION ALL \
    SELECT m.table_name, m.branch, m.consumer_id, t.location, NULL, NULL, m.failures \
    FROM consumer_mirrors m JOIN paimon_tables t ON t.table_name = m.table_name \
    WHERE m.mirrored_next IS NOT NULL AND NOT EXISTS (SELECT 1 FROM consumer_keys k WHERE k.table_name = m.table_name \
    AND k.branch = m.branch AND k.consumer_id = m.consumer_id)) \
    ORDER BY failures, table_name, branch, consumer_id LIMIT ?2";

const MIRROR_DONE: &str = "INSERT INTO consumer_mirrors (table_name, branch, consumer_id, mirrored_next, \
    mirrored_updated_at, mirrored_at, failures, last_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, NULL) \
    ON CONFLICT (table_name, branch, consumer_id) DO UPDATE SET mirrored_next = excluded.mirrored_next, \
    mirrored_updated_at = excluded.mirrored_updated_at, mirrored_at = excluded.mirrored_at, failures = 0, \
    last_error = NULL";

const MIRROR_FAILED: &str = "INSERT INTO consumer_mirrors (table_name, branch, consumer_id, failures, last_error) \
    VALUES (?1, ?2, ?3, 1, ?4) ON CONFLICT (table_name, branch, consumer_id) DO UPDATE \
    SET failures = consumer_mirrors.failures + 1, last_error = excluded.last_error";

const MIRROR_STATE: &str = "SELECT mirrored_next, mirrored_updated_at, mirrored_at, failures, last_error \
    FROM consumer_mirrors WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3";

const PRUNE_HISTORY: &str = "DELETE FROM history WHERE id IN (SELECT id FROM history WHERE at < ?1 \
    ORDER BY at LIMIT ?2)";

const PRUNE_GRANTS: &str = "DELETE FROM lease_grants WHERE lease_id IN (SELECT g.lease_id FROM lease_grants g \
    WHERE g.granted_at < ?1 AND NOT EXISTS (SELECT 1 FROM consumer_keys k WHERE k.table_name = g.table_name \
    AND k.branch = g.branch AND k.consumer_id = g.consumer_id AND k.lease_id = g.lease_id) LIMIT ?2)";

// The clock is the last parameter of each of these.
const LIST_KEYS: &str = concat!(
    "SELECT ",
    key_columns!(),
    ", ",
    "o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode ",
    "FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name ",
    "WHERE (?1 IS NULL OR k.table_name = ?1) AND (?2 IS NULL OR k.branch = ?2) ",
    "AND (?3 IS NULL OR substr(k.consumer_id, 1, length(?3)) = ?3) ",
    "AND (?4 IS NULL OR (k.table_name, k.branch, k.consumer_id) > (?4, ?5, ?6)) ",
    "AND (k.next_snapshot IS NOT NULL OR (k.lease_status = 1 AND k.lease_deadline > ?8)) ",
    "ORDER BY k.table_name, k.branch, k.consumer_id LIMIT ?7"
);

const BRANCH_CONSUMERS: &str = concat!(
    "SELECT ",
    key_columns!(),
    " ",
    "FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name ",
    "WHERE k.table_name = ?1 AND k.branch = ?2 AND k.next_snapshot IS NOT NULL ",
    "AND (o.expiration_us IS NULL OR k.consumer_updated_at >= ?4 - o.expiration_us ",
    "OR (k.lease_status = 1 AND k.lease_deadline > ?4)) ",
    "ORDER BY k.next_snapshot, k.consumer_id LIMIT ?3"
);

const BRANCH_PINS: &str = concat!(
    "SELECT ",
    key_columns!(),
    " ",
    "FROM consumer_keys k WHERE k.table_name = ?1 AND k.branch = ?2 AND k.full_scan_pin IS NOT NULL ",
    "AND k.lease_status = 1 AND k.lease_deadline > ?4 ORDER BY k.full_scan_pin, k.consumer_id LIMIT ?3"
);

const EXPIRED_KEYS: &str = "SELECT k.table_name, k.branch, k.consumer_id FROM table_options o \
    JOIN consumer_keys k ON k.table_name = o.table_name \
    WHERE o.expiration_us IS NOT NULL AND (?1 IS NULL OR k.table_name = ?1) AND (?2 IS NULL OR k.branch = ?2) \
    AND k.next_snapshot IS NOT NULL AND k.consumer_updated_at < ?4 - o.expiration_us \
    AND NOT coalesce(k.lease_status = 1 AND k.lease_deadline > ?4, 0) ORDER BY k.consumer_updated_at LIMIT ?3";

/// A table's options row (defaults when it has none).
async fn options_of(conn: &mut sqlx::SqliteConnection, table: &str) -> Result<StoredOptions, StoreError> {
    let Some(row) = sqlx::query(TABLE_OPTIONS)
        .bind(table)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(StoredOptions::default());
    };
    Ok(StoredOptions {
        options: Decoder::options(&row)?,
        version: Some(row.try_get("version")?),
        updated_at: Some(Timestamp::from_micros(row.try_get("updated_at")?)),
        updated_by: Some(row.try_get("updated_by")?),
    })
}

const UPDATE_ROW: &str = "UPDATE consumer_keys SET version = version + 1, epoch = ?4, next_snapshot = ?5, \
    consumer_created_at = ?6, consumer_updated_at = ?7, latest_snapshot = ?8, lease_id = ?9, lease_holder = ?10, \
    lease_epoch = ?11, lease_status = ?12, lease_ttl_us = ?13, lease_acquired_at = ?14, lease_deadline = ?15, \
    last_batch_id = ?16, last_end_snapshot = ?17, last_end_index = ?18, last_end_full = ?19, \
    last_end_total_splits = ?20, lease_wrote_consumer = ?21, legacy_warned_snapshot = ?22, full_scan_pin = ?23, \
    lease_principal = ?24 \
    WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3 AND version = ?25 \
    AND (NOT ?26 OR (lease_status = 1 AND lease_deadline > ?27))";

const INSERT_ROW: &str = "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, \
    next_snapshot, consumer_created_at, consumer_updated_at, latest_snapshot, lease_id, lease_holder, lease_epoch, \
    lease_status, lease_ttl_us, lease_acquired_at, lease_deadline, last_batch_id, last_end_snapshot, last_end_index, \
    last_end_full, last_end_total_splits, lease_wrote_consumer, legacy_warned_snapshot, full_scan_pin, \
    lease_principal) \
    VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, \
    ?22, ?23, ?24) ON CONFLICT DO NOTHING";

const INSERT_GRANT: &str = "INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, \
    granted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const INSERT_HISTORY: &str = "INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, \
    epoch, lease_id, batch_id, holder, principal, request_id, detail) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";

/// Appends a key's history rows inside a write transaction, stamped `now`.
async fn insert_history(
    tx: &mut sqlx::SqliteConnection,
    now: Timestamp,
    key: &ConsumerKey,
    events: &[HistoryEvent],
    ctx: &CallContext,
) -> Result<(), StoreError> {
    let columns = EventColumns::new(events);
    for i in 0..events.len() {
        sqlx::query(INSERT_HISTORY)
            .bind(now.as_micros())
            .bind(key.table.as_str())
            .bind(key.branch.as_str())
            .bind(key.consumer_id.as_str())
            .bind(&columns.event[i])
            .bind(columns.old_next[i])
            .bind(columns.new_next[i])
            .bind(columns.epoch[i])
            .bind(columns.lease_id[i])
            .bind(columns.batch_id[i])
            .bind(&columns.holder[i])
            .bind(&ctx.principal)
            .bind(&ctx.request_id)
            .bind(&columns.detail[i])
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

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
        .bind(row.lease_principal)
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
        // The key to read: given, or found through the lease's grant.
        let key: Option<(String, String, String)> = match locate {
            Locate::Key(key) => Some((
                key.table.as_str().to_owned(),
                key.branch.as_str().to_owned(),
                key.consumer_id.as_str().to_owned(),
            )),
            Locate::Lease(lease_id) => {
                sqlx::query_as(SELECT_GRANT)
                    .bind(lease_id)
                    .fetch_optional(&mut *conn)
                    .await?
            }
        };
        let Some((table, branch, consumer_id)) = key else {
            return Ok(Loaded {
                state: None,
                version: None,
                now: self.clock.now(),
                options: TableOptions::default(),
            });
        };
        let found = sqlx::query(SELECT_KEY)
            .bind(&table)
            .bind(&branch)
            .bind(&consumer_id)
            .fetch_optional(&mut *conn)
            .await?;
        let options = options_of(&mut conn, &table).await?.options;
        let now = self.clock.now();
        let (state, version) = match found {
            None => (None, None),
            Some(row) => {
                let (state, version) = Decoder::key_row(&row)?;
                (Some(state), Some(version))
            }
        };
        Ok(Loaded {
            state,
            version,
            now,
            options,
        })
    }

    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<Option<Timestamp>, StoreError> {
        let key = &change.state.key;
        let row = KeyRow::from_state(change.state);
        // The clock is read once this process holds the writer and the file's
        // write lock (SPEC §1): a write that waited for either is judged by
        // when it lands, not by when it asked.
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now = self.clock.now();
        if let Some(decided_at) = change.decided_at
            && !(decided_at <= now && now < decided_at.plus(DECIDED_AT_TOLERANCE))
        {
            tx.rollback().await?;
            return Ok(None);
        }
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
            return Ok(None);
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
        insert_history(&mut tx, now, key, change.events, change.ctx).await?;
        tx.commit().await?;
        Ok(Some(now))
    }

    async fn load_with_history(
        &self,
        key: &ConsumerKey,
        limit: i64,
    ) -> Result<(Loaded, Vec<HistoryRecord>), StoreError> {
        // One read transaction: one snapshot of the file.
        let mut tx = self.readers.begin().await?;
        let found = sqlx::query(SELECT_KEY)
            .bind(key.table.as_str())
            .bind(key.branch.as_str())
            .bind(key.consumer_id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let options = options_of(&mut tx, key.table.as_str()).await?.options;
        let history = sqlx::query(HISTORY_PAGE)
            .bind(key.table.as_str())
            .bind(Some(key.branch.as_str()))
            .bind(Some(key.consumer_id.as_str()))
            .bind(None::<i64>)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let now = self.clock.now();
        let (state, version) = match found {
            None => (None, None),
            Some(row) => {
                let (state, version) = Decoder::key_row(&row)?;
                (Some(state), Some(version))
            }
        };
        let history = history.iter().map(Decoder::history).collect::<Result<_, _>>()?;
        Ok((
            Loaded {
                state,
                version,
                now,
                options,
            },
            history,
        ))
    }

    async fn history_page(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        let rows = sqlx::query(HISTORY_PAGE)
            .bind(filter.table.as_str())
            .bind(filter.branch.as_ref().map(BranchName::as_str))
            .bind(filter.consumer_id.as_ref().map(ConsumerId::as_str))
            .bind(before_id)
            .bind(limit)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(Decoder::history).collect()
    }

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

    async fn list_keys(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        limit: i64,
    ) -> Result<Listed, StoreError> {
        let now = self.clock.now();
        let rows = sqlx::query(LIST_KEYS)
            .bind(filter.table.as_ref().map(TableName::as_str))
            .bind(filter.branch.as_ref().map(BranchName::as_str))
            .bind(filter.consumer_id_prefix.as_deref())
            .bind(after.map(|k| k.table.as_str()))
            .bind(after.map(|k| k.branch.as_str()))
            .bind(after.map(|k| k.consumer_id.as_str()))
            .bind(limit)
            .bind(now.as_micros())
            .fetch_all(&self.readers)
            .await?;
        let rows = rows
            .iter()
            .map(|row| Ok((Decoder::key_row(row)?.0, Decoder::options(row)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Listed { now, rows })
    }

    async fn branch_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        // One read transaction, so one snapshot of the file (SPEC §8): read
        // apart, a scan completing in between (its pin gone, its consumer
        // not yet seen) showed no fence.
        let mut tx = self.readers.begin().await?;
        let options = options_of(&mut tx, table.as_str()).await?.options;
        let now = self.clock.now();
        let mut states = Vec::with_capacity(2);
        for query in [BRANCH_CONSUMERS, BRANCH_PINS] {
            let rows = sqlx::query(query)
                .bind(table.as_str())
                .bind(branch.as_str())
                .bind(limit)
                .bind(now.as_micros())
                .fetch_all(&mut *tx)
                .await?;
            states.push(
                rows.iter()
                    .map(|r| Decoder::key_row(r).map(|(s, _)| s))
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        tx.commit().await?;
        let pins = states.pop().unwrap_or_default();
        let consumers = states.pop().unwrap_or_default();
        Ok(BranchView {
            now,
            options,
            consumers,
            pins,
        })
    }

    async fn expired_keys(
        &self,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
    ) -> Result<Vec<ConsumerKey>, StoreError> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(EXPIRED_KEYS)
            .bind(table.map(TableName::as_str))
            .bind(branch.map(BranchName::as_str))
            .bind(limit)
            .bind(self.clock.now().as_micros())
            .fetch_all(&self.readers)
            .await?;
        Ok(rows
            .iter()
            .map(|(t, b, c)| ConsumerKey::from_trusted(t, b, c))
            .collect())
    }

    async fn prune(&self, older_than: Duration, limit: i64) -> Result<Pruned, StoreError> {
        let cutoff = self.clock.now().as_micros() - duration_micros(older_than);
        let history = sqlx::query(PRUNE_HISTORY)
            .bind(cutoff)
            .bind(limit)
            .execute(&self.writer)
            .await?
            .rows_affected();
        let grants = sqlx::query(PRUNE_GRANTS)
            .bind(cutoff)
            .bind(limit)
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(Pruned { history, grants })
    }

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

    async fn mirror_inventory(&self) -> Result<Vec<MirrorEntry>, StoreError> {
        let rows = sqlx::query(MIRROR_INVENTORY)
            .bind(self.clock.now().as_micros())
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(Decoder::mirror_entry).collect()
    }

    async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now = self.clock.now();
        insert_history(&mut tx, now, key, events, ctx).await?;
        tx.commit().await?;
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
        rows.iter().map(Decoder::registered).collect()
    }

    async fn mirror_tasks(&self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError> {
        let rows = sqlx::query(MIRROR_TASKS)
            .bind(duration_micros(refresh))
            .bind(limit)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(Decoder::mirror_task).collect()
    }

    async fn mirror_done(&self, task: &MirrorTask, error: Option<&str>) -> Result<(), StoreError> {
        let key = &task.key;
        let query = match error {
            None => sqlx::query(MIRROR_DONE)
                .bind(key.table.as_str().to_owned())
                .bind(key.branch.as_str().to_owned())
                .bind(key.consumer_id.as_str().to_owned())
                .bind(task.next_snapshot)
                .bind(task.updated_at.map(Timestamp::as_micros))
                .bind(self.clock.now().as_micros()),
            Some(error) => sqlx::query(MIRROR_FAILED)
                .bind(key.table.as_str().to_owned())
                .bind(key.branch.as_str().to_owned())
                .bind(key.consumer_id.as_str().to_owned())
                .bind(error.to_owned()),
        };
        query.execute(&self.writer).await?;
        Ok(())
    }

    async fn mirror_state(&self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError> {
        let row = sqlx::query(MIRROR_STATE)
            .bind(key.table.as_str().to_owned())
            .bind(key.branch.as_str().to_owned())
            .bind(key.consumer_id.as_str().to_owned())
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(Decoder::mirror_state).transpose()
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
