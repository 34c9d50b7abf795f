//! `consumer_keys` on SQLite: reads of one key, of a listing and of a
//! branch's fence, and the compare-and-set writes (one transaction each,
//! behind `BEGIN IMMEDIATE`).

use std::sync::LazyLock;

use async_trait::async_trait;
use tidemark_core::{BranchName, ConsumerKey, TableName, TableOptions, Timestamp};

use super::SqliteBackend;
use super::history::insert_history;
use super::options::options_of;
use crate::backend::{
    BranchView, Change, ESTIMATED_NOW_TOLERANCE, FindKey, HistoryRecord, KeyFilter, KeyStore, Listed, Loaded,
};
use crate::decode;
use crate::error::StoreError;
use crate::row::{KeyRow, Placeholders::Question, decode_sqlite};

pub(super) static SELECT_KEY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row} FROM consumer_keys k WHERE k.table_name = ?1 AND k.branch = ?2 AND k.consumer_id = ?3",
        row = KeyRow::select_list("k")
    )
});

const SELECT_GRANT: &str = "SELECT table_name, branch, consumer_id FROM lease_grants WHERE lease_id = ?1";

/// The table options joined as `o`.
const OPTION_COLUMNS: &str =
    "o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode";

// The clock is the last parameter of each of these.
pub(super) static LIST_KEYS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row}, {OPTION_COLUMNS}
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE (?1 IS NULL OR k.table_name = ?1) AND (?2 IS NULL OR k.branch = ?2)
           AND (?3 IS NULL OR substr(k.consumer_id, 1, length(?3)) = ?3)
           AND (?4 IS NULL OR (k.table_name, k.branch, k.consumer_id) > (?4, ?5, ?6))
           AND (k.next_snapshot IS NOT NULL OR (k.lease_status = 1 AND k.lease_deadline > ?8))
         ORDER BY k.table_name, k.branch, k.consumer_id LIMIT ?7",
        row = KeyRow::select_list("k")
    )
});

pub(super) static BRANCH_CONSUMERS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row}
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE k.table_name = ?1 AND k.branch = ?2 AND k.next_snapshot IS NOT NULL
           AND (o.expiration_us IS NULL OR k.consumer_updated_at >= ?4 - o.expiration_us
                OR (k.lease_status = 1 AND k.lease_deadline > ?4))
         ORDER BY k.next_snapshot, k.consumer_id LIMIT ?3",
        row = KeyRow::select_list("k")
    )
});

pub(super) static BRANCH_PINS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row}
         FROM consumer_keys k
         WHERE k.table_name = ?1 AND k.branch = ?2 AND k.full_scan_pin IS NOT NULL
           AND k.lease_status = 1 AND k.lease_deadline > ?4
         ORDER BY k.full_scan_pin, k.consumer_id LIMIT ?3",
        row = KeyRow::select_list("k")
    )
});

const EXPIRED_KEYS: &str = "SELECT k.table_name, k.branch, k.consumer_id
    FROM table_options o JOIN consumer_keys k ON k.table_name = o.table_name
    WHERE o.expiration_us IS NOT NULL AND (?1 IS NULL OR k.table_name = ?1) AND (?2 IS NULL OR k.branch = ?2)
      AND k.next_snapshot IS NOT NULL AND k.consumer_updated_at < ?4 - o.expiration_us
      AND NOT coalesce(k.lease_status = 1 AND k.lease_deadline > ?4, 0)
    ORDER BY k.consumer_updated_at LIMIT ?3";

/// The compare-and-set update: the key (`?1`–`?3`), the version, whether
/// the lease must be live and the clock (`?4`–`?6`), the row (`?7`…).
pub(super) static UPDATE_ROW: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE consumer_keys SET version = version + 1, {set}
         WHERE table_name = ?1 AND branch = ?2 AND consumer_id = ?3 AND version = ?4
           AND (NOT ?5 OR (lease_status = 1 AND lease_deadline > ?6))",
        set = KeyRow::assignments(Question, 7)
    )
});

/// A new row: the key (`?1`–`?3`), the row (`?4`…).
pub(super) static INSERT_ROW: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, {columns})
         VALUES (?1, ?2, ?3, 1, {values}) ON CONFLICT DO NOTHING",
        columns = KeyRow::column_list(),
        values = KeyRow::placeholders(Question, 4)
    )
});

const INSERT_GRANT: &str = "INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, \
    granted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// Whether a table has a key, a registration or options.
const TABLE_KNOWN: &str = "SELECT EXISTS (SELECT 1 FROM consumer_keys WHERE table_name = ?1) \
     OR EXISTS (SELECT 1 FROM paimon_tables WHERE table_name = ?1) \
     OR EXISTS (SELECT 1 FROM table_options WHERE table_name = ?1)";

/// The tables seen, by name: the keys' distinct tables by a skip scan of
/// the primary key (one index probe per table, not a read of every key),
/// with the registered tables and those with options.
const KNOWN_TABLES: &str = "WITH RECURSIVE seen(name, n) AS ( \
       SELECT min(table_name), 1 FROM consumer_keys \
       UNION ALL \
       SELECT (SELECT min(table_name) FROM consumer_keys WHERE table_name > seen.name), n + 1 \
       FROM seen WHERE seen.name IS NOT NULL AND n < CAST(?1 AS BIGINT)) \
     SELECT name FROM ( \
       SELECT name FROM seen WHERE name IS NOT NULL \
       UNION SELECT table_name FROM paimon_tables \
       UNION SELECT table_name FROM table_options) AS known \
     ORDER BY name LIMIT CAST(?1 AS BIGINT)";

/// The highest latest snapshot reported on a branch.
const REPORTED_LATEST: &str = "SELECT max(latest_snapshot) FROM consumer_keys WHERE table_name = ?1 AND branch = ?2";

#[async_trait]
impl KeyStore for SqliteBackend {
    async fn load(&self, find: FindKey<'_>) -> Result<Loaded, StoreError> {
        let mut conn = self.readers.acquire().await?;
        // The key to read: given, or found through the lease's grant.
        let key: Option<(String, String, String)> = match find {
            FindKey::Key(key) => Some((
                key.table.as_str().to_owned(),
                key.branch.as_str().to_owned(),
                key.consumer_id.as_str().to_owned(),
            )),
            FindKey::Lease(lease_id) => {
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
        let found = sqlx::query(SELECT_KEY.as_str())
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
                let (state, version) = decode_sqlite(&row)?;
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
        // The clock is read once this process holds the writer and the file's
        // write lock (SPEC §1): a write that waited for either is judged, and
        // stamped, by when it lands, not by when it asked.
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now = self.clock.now();
        let state = crate::stamp::restamp(change.state, loaded.state.as_ref(), loaded.now, now);
        let row = KeyRow::from_state(&state);
        if let Some(estimated_now) = change.estimated_now
            && !(estimated_now <= now && now < estimated_now.plus(ESTIMATED_NOW_TOLERANCE))
        {
            tx.rollback().await?;
            return Ok(None);
        }
        let written = match loaded.version {
            Some(version) => {
                let query = decode::bind_key(sqlx::query(UPDATE_ROW.as_str()), key)
                    .bind(version)
                    .bind(change.requires_live_lease)
                    .bind(now.as_micros());
                row.bind_sqlite(query).execute(&mut *tx).await?
            }
            None => {
                row.bind_sqlite(decode::bind_key(sqlx::query(INSERT_ROW.as_str()), key))
                    .execute(&mut *tx)
                    .await?
            }
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
                .bind(
                    state
                        .lease
                        .as_ref()
                        .map_or(grant.acquired_at, |l| l.acquired_at)
                        .as_micros(),
                )
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
        let found = decode::bind_key(sqlx::query(SELECT_KEY.as_str()), key)
            .fetch_optional(&mut *tx)
            .await?;
        let options = options_of(&mut tx, key.table.as_str()).await?.options;
        let history = super::history::page(&mut tx, &crate::HistoryFilter::key(key), None, limit).await?;
        tx.commit().await?;
        let now = self.clock.now();
        let (state, version) = match found {
            None => (None, None),
            Some(row) => {
                let (state, version) = decode_sqlite(&row)?;
                (Some(state), Some(version))
            }
        };
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

    async fn list_keys(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        limit: i64,
    ) -> Result<Listed, StoreError> {
        let now = self.clock.now();
        let rows = decode::bind_key_listing(sqlx::query(LIST_KEYS.as_str()), filter, after, limit)
            .bind(now.as_micros())
            .fetch_all(&self.readers)
            .await?;
        let rows = rows
            .iter()
            .map(|row| Ok((decode_sqlite(row)?.0, decode::options(row)?)))
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
        for query in [BRANCH_CONSUMERS.as_str(), BRANCH_PINS.as_str()] {
            let rows = sqlx::query(query)
                .bind(table.as_str())
                .bind(branch.as_str())
                .bind(limit)
                .bind(now.as_micros())
                .fetch_all(&mut *tx)
                .await?;
            states.push(
                rows.iter()
                    .map(|r| decode_sqlite(r).map(|(s, _)| s))
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

    async fn reported_latest(&self, table: &TableName, branch: &BranchName) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(REPORTED_LATEST)
            .bind(table.as_str())
            .bind(branch.as_str())
            .fetch_one(&self.readers)
            .await?)
    }

    async fn table_known(&self, table: &TableName) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(TABLE_KNOWN)
            .bind(table.as_str())
            .fetch_one(&self.readers)
            .await?)
    }

    async fn known_tables(&self, limit: i64) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(KNOWN_TABLES)
            .bind(limit)
            .fetch_all(&self.readers)
            .await?)
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
}
