//! `consumer_keys` on Postgres: reads of one key, of a listing and of a
//! branch's fence, and the compare-and-set writes.
//!
//! A read is one statement (the row plus `tidemark_now()`); a write is one
//! statement whose CTEs lock and compare-and-set the row, record a lease
//! grant and append the history. Parameters come in a fixed order — the key
//! (`$1`–`$3`), then what the statement needs, then the row's columns, whose
//! placeholders [`KeyRow`] writes — so no statement counts columns.

use std::sync::LazyLock;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use tidemark_core::{BranchName, ConsumerKey, TableName, Timestamp};

use super::fences::{branch_view_statement, fence_view_statement, limit_read};
use super::group_commit::{self, OneEventWrite};
use super::update::{LOCK_THEN_CLOCK, bind_checks, update_key_row};
use super::{LIVE_LEASE, OPTION_COLUMNS, PostgresBackend, UNEXPIRED, from_ts, ts};
use crate::backend::{BranchView, Change, FindKey, HistoryRecord, KeyFilter, KeyStore, Listed, Loaded};
use crate::decode;
use crate::error::StoreError;
use crate::history_row::{EVENT_COLUMNS, HistoryRow, insert_history};
use crate::row::{KeyRow, PgQuery, decode_pg};

pub(super) static LOAD_BY_KEY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT tidemark_now() AS db_now, {row}, {OPTION_COLUMNS}
         FROM (SELECT 1) AS one
         LEFT JOIN consumer_keys k ON k.table_name = $1 AND k.branch = $2 AND k.consumer_id = $3
         LEFT JOIN table_options o ON o.table_name = $1",
        row = KeyRow::select_list("k")
    )
});

// Through lease_grants, so a superseded lease still finds its key.
pub(super) static LOAD_BY_LEASE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT tidemark_now() AS db_now, {row}, {OPTION_COLUMNS}
         FROM (SELECT 1) AS one
         LEFT JOIN lease_grants g ON g.lease_id = $1
         LEFT JOIN consumer_keys k
           ON k.table_name = g.table_name AND k.branch = g.branch AND k.consumer_id = g.consumer_id
         LEFT JOIN table_options o ON o.table_name = g.table_name",
        row = KeyRow::select_list("k")
    )
});

pub(super) static LIST_KEYS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT tidemark_now() AS db_now, {row}, {OPTION_COLUMNS}
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE ($1::text IS NULL OR k.table_name = $1) AND ($2::text IS NULL OR k.branch = $2)
           AND ($3::text IS NULL OR left(k.consumer_id, length($3)) = $3)
           AND ($4::text IS NULL OR (k.table_name, k.branch, k.consumer_id) > ($4::text, $5::text, $6::text))
           AND (k.next_snapshot IS NOT NULL OR {LIVE_LEASE})
         ORDER BY k.table_name, k.branch, k.consumer_id LIMIT $7",
        row = KeyRow::select_list("k")
    )
});

/// The consumers' half of the fence query alone: the lowest unexpired
/// consumers of a branch (`$1` table, `$2` branch, `$3` limit). Public so
/// benchmarks and tests can check its plan walks the position index.
pub static BRANCH_CONSUMERS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {row}
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE k.table_name = $1 AND k.branch = $2 AND k.next_snapshot IS NOT NULL AND {UNEXPIRED}
         ORDER BY k.next_snapshot, k.consumer_id LIMIT $3",
        row = KeyRow::select_list("k")
    )
});

pub(super) static EXPIRED_KEYS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT k.table_name, k.branch, k.consumer_id
         FROM table_options o JOIN consumer_keys k ON k.table_name = o.table_name
         WHERE o.expiration_us IS NOT NULL AND ($1::text IS NULL OR k.table_name = $1)
           AND ($2::text IS NULL OR k.branch = $2) AND k.next_snapshot IS NOT NULL
           AND k.consumer_updated_at < tidemark_now() - o.expiration_us * interval '1 microsecond'
           AND NOT coalesce({LIVE_LEASE}, false)
         ORDER BY k.consumer_updated_at LIMIT $3"
    )
});

/// The grant and the history of a general write from the `written` CTE
/// (`sql/grant_and_history.sql`, bound by [`bind_grant_and_history`]).
pub(super) static GRANT_AND_HISTORY: LazyLock<String> = LazyLock::new(|| {
    let events = insert_history(&format!(
        "SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $5, $6, {events}
             FROM written w, unnest({arrays}) AS e({columns})",
        events = HistoryRow::columns("e."),
        arrays = HistoryRow::array_arguments(7),
        columns = HistoryRow::columns(""),
    ));
    crate::sql_template::render(include_str!("sql/grant_and_history.sql"), &[("events", &events)])
});

const WRITTEN_COLUMNS: &str = "table_name, branch, consumer_id, lease_id, lease_epoch, lease_holder, lease_acquired_at";

/// A general update: the grant and history, the checks, the row
/// (`sql/update_row.sql` lists its binds).
pub(super) static UPDATE_ROW: LazyLock<String> = LazyLock::new(|| {
    crate::sql_template::render(
        include_str!("sql/update_row.sql"),
        &[
            ("lock_then_clock", &LOCK_THEN_CLOCK),
            // After the grant and history ($4 to $6 + EVENT_COLUMNS): four
            // checks, then the row.
            ("update", &update_key_row(7 + EVENT_COLUMNS, 11 + EVENT_COLUMNS)),
            ("written_columns", WRITTEN_COLUMNS),
            ("grant_and_history", &GRANT_AND_HISTORY),
        ],
    )
});

/// A new row: the grant and history, the row (`sql/insert_row.sql`).
pub(super) static INSERT_ROW: LazyLock<String> = LazyLock::new(|| {
    crate::sql_template::render(
        include_str!("sql/insert_row.sql"),
        &[
            ("grant_and_history", &GRANT_AND_HISTORY),
            ("columns", &KeyRow::column_list()),
            (
                "values",
                &KeyRow::placeholders_restamped(8 + EVENT_COLUMNS, &format!("${}::timestamptz", 7 + EVENT_COLUMNS)),
            ),
            ("written_columns", WRITTEN_COLUMNS),
        ],
    )
});

/// The commonest writes, without arrays or the grant step: an update with
/// no history row (a renewal; `sql/update_row_no_event.sql`) ...
pub(super) static UPDATE_ROW_NO_EVENT: LazyLock<String> = LazyLock::new(|| {
    crate::sql_template::render(
        include_str!("sql/update_row_no_event.sql"),
        &[("lock_then_clock", &LOCK_THEN_CLOCK), ("update", &update_key_row(4, 8))],
    )
});

fn bind_grant_and_history<'q>(query: PgQuery<'q>, change: &Change<'_>) -> PgQuery<'q> {
    let query = query
        .bind(change.new_grant.is_some())
        .bind(change.ctx.principal.clone())
        .bind(change.ctx.request_id.clone());
    HistoryRow::bind_pg_arrays(HistoryRow::from_events(change.events).iter(), query)
}

/// A row read with [`LOAD_BY_KEY`] or [`LOAD_BY_LEASE`].
pub(super) fn decode_loaded(row: &PgRow) -> Result<Loaded, StoreError> {
    let mut now = from_ts(row.try_get("db_now")?);
    // Mutant: decisions judge time by this replica's clock, not the
    // database's (with the database's own deadline check gone, see store.rs).
    if tidemark_core::mutant!("expiry_by_replica_clock") {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        now = Timestamp::from_micros(i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX));
    }
    let options = decode::options(row)?;
    // The LEFT JOIN yields NULL key columns when the key has no row.
    if row.try_get::<Option<String>, _>("table_name")?.is_none() {
        return Ok(Loaded {
            state: None,
            version: None,
            now,
            options,
        });
    }
    let (state, version) = decode_pg(row)?;
    Ok(Loaded {
        state: Some(state),
        version: Some(version),
        now,
        options,
    })
}

/// Whether a table has a key, a registration or options.
const TABLE_KNOWN: &str = "SELECT EXISTS (SELECT 1 FROM consumer_keys WHERE table_name = $1) \
     OR EXISTS (SELECT 1 FROM paimon_tables WHERE table_name = $1) \
     OR EXISTS (SELECT 1 FROM table_options WHERE table_name = $1)";

/// The tables seen, by name: the keys' distinct tables by a skip scan of
/// the primary key (one index probe per table, not a read of every key),
/// with the registered tables and those with options.
const KNOWN_TABLES: &str = "WITH RECURSIVE seen(name, n) AS ( \
       SELECT min(table_name), 1 FROM consumer_keys \
       UNION ALL \
       SELECT (SELECT min(table_name) FROM consumer_keys WHERE table_name > seen.name), n + 1 \
       FROM seen WHERE seen.name IS NOT NULL AND n < CAST($1 AS BIGINT)) \
     SELECT name FROM ( \
       SELECT name FROM seen WHERE name IS NOT NULL \
       UNION SELECT table_name FROM paimon_tables \
       UNION SELECT table_name FROM table_options) AS known \
     ORDER BY name LIMIT CAST($1 AS BIGINT)";

/// The highest latest snapshot reported on a branch.
const REPORTED_LATEST: &str = "SELECT max(latest_snapshot) FROM consumer_keys WHERE table_name = $1 AND branch = $2";

#[async_trait]
impl KeyStore for PostgresBackend {
    async fn load(&self, find: FindKey<'_>) -> Result<Loaded, StoreError> {
        let row = match find {
            FindKey::Key(key) => match &self.reads {
                Some(reads) => return reads.read(key).await,
                None => {
                    decode::bind_key(sqlx::query(LOAD_BY_KEY.as_str()), key)
                        .fetch_one(&self.db)
                        .await?
                }
            },
            FindKey::Lease(lease_id) => {
                sqlx::query(LOAD_BY_LEASE.as_str())
                    .bind(lease_id)
                    .fetch_one(&self.db)
                    .await?
            }
        };
        decode_loaded(&row)
    }

    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<Option<Timestamp>, StoreError> {
        let key = &change.state.key;
        let row = KeyRow::from_state(change.state);
        if let (Some(version), None) = (loaded.version, change.new_grant) {
            match change.events {
                [] => {
                    let query = decode::bind_key(sqlx::query(UPDATE_ROW_NO_EVENT.as_str()), key);
                    let query = bind_checks(
                        query,
                        version,
                        change.requires_live_lease,
                        loaded.now,
                        change.estimated_now.is_some(),
                    );
                    let written = row.bind_pg(query).fetch_optional(&self.db).await?;
                    return written
                        .map(|row| Ok(from_ts(row.try_get(0)?)))
                        .transpose()
                        .map_err(|e: sqlx::Error| e.into());
                }
                [event] => {
                    let write = OneEventWrite {
                        key: key.clone(),
                        row,
                        version,
                        requires_live_lease: change.requires_live_lease,
                        estimated_now: change.estimated_now,
                        decided: loaded.now,
                        event: event.clone(),
                        principal: change.ctx.principal.clone(),
                        request_id: change.ctx.request_id.clone(),
                    };
                    return match &self.group {
                        Some(group) => group.write(write).await,
                        None => group_commit::write_one_event(&self.db, &write).await,
                    };
                }
                _ => {}
            }
        }
        let query = match loaded.version {
            Some(version) => {
                let query = bind_grant_and_history(decode::bind_key(sqlx::query(UPDATE_ROW.as_str()), key), change);
                bind_checks(
                    query,
                    version,
                    change.requires_live_lease,
                    loaded.now,
                    change.estimated_now.is_some(),
                )
            }
            None => bind_grant_and_history(decode::bind_key(sqlx::query(INSERT_ROW.as_str()), key), change)
                .bind(ts(loaded.now)),
        };
        let answer = row.bind_pg(query).fetch_one(&self.db).await?;
        let written: i64 = answer.try_get(0)?;
        if written != 1 {
            return Ok(None);
        }
        Ok(Some(from_ts(answer.try_get(1)?)))
    }

    async fn load_with_history(
        &self,
        key: &ConsumerKey,
        limit: i64,
    ) -> Result<(Loaded, Vec<HistoryRecord>), StoreError> {
        let mut tx = self.db.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(self.db.on(&mut tx))
            .await?;
        let row = decode::bind_key(sqlx::query(LOAD_BY_KEY.as_str()), key)
            .fetch_one(self.db.on(&mut tx))
            .await?;
        let history = super::history::page(self.db.on(&mut tx), &crate::HistoryFilter::key(key), None, limit).await?;
        tx.commit().await?;
        Ok((decode_loaded(&row)?, history))
    }

    async fn list_keys(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        limit: i64,
    ) -> Result<Listed, StoreError> {
        let rows = decode::bind_key_listing(sqlx::query(LIST_KEYS.as_str()), filter, after, limit)
            .fetch_all(&self.db)
            .await?;
        let now = match rows.first() {
            Some(row) => from_ts(row.try_get("db_now")?),
            None => Timestamp::default(),
        };
        let rows = rows
            .iter()
            .map(|row| Ok((decode_pg(row)?.0, decode::options(row)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Listed { now, rows })
    }

    async fn branch_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        self.read_branch_view(branch_view_statement(limit), table, branch, limit)
            .await
    }

    async fn fence_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        self.read_branch_view(fence_view_statement(limit), table, branch, limit)
            .await
    }

    async fn reported_latest(&self, table: &TableName, branch: &BranchName) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(REPORTED_LATEST)
            .bind(table.as_str())
            .bind(branch.as_str())
            .fetch_one(&self.db)
            .await?)
    }

    async fn table_known(&self, table: &TableName) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(TABLE_KNOWN)
            .bind(table.as_str())
            .fetch_one(&self.db)
            .await?)
    }

    async fn known_tables(&self, limit: i64) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(KNOWN_TABLES).bind(limit).fetch_all(&self.db).await?)
    }

    async fn expired_keys(
        &self,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
    ) -> Result<Vec<ConsumerKey>, StoreError> {
        let rows = sqlx::query(EXPIRED_KEYS.as_str())
            .bind(table.map(TableName::as_str))
            .bind(branch.map(BranchName::as_str))
            .bind(limit)
            .fetch_all(&self.db)
            .await?;
        rows.iter().map(|row| Ok(decode::key_of(row)?)).collect()
    }
}

impl PostgresBackend {
    /// Runs a branch view statement and keeps `limit` rows of each kind.
    async fn read_branch_view(
        &self,
        statement: &'static str,
        table: &TableName,
        branch: &BranchName,
        limit: i64,
    ) -> Result<BranchView, StoreError> {
        let limit = usize::try_from(limit.min(limit_read(limit).1)).unwrap_or(0);
        let rows = sqlx::query(statement)
            .bind(table.as_str())
            .bind(branch.as_str())
            .fetch_all(&self.db)
            .await?;
        let head = rows.first().ok_or(StoreError::Contention)?;
        let mut view = BranchView {
            now: from_ts(head.try_get("db_now")?),
            options: decode::options(head)?,
            consumers: Vec::new(),
            pins: Vec::new(),
        };
        // Rows come in the database's fence order: the first `limit` of each
        // kind are the ones a statement limited to `limit` would return.
        for row in &rows {
            match row.try_get::<Option<i32>, _>("kind")? {
                Some(0) if view.consumers.len() < limit => view.consumers.push(decode_pg(row)?.0),
                Some(1) if view.pins.len() < limit => view.pins.push(decode_pg(row)?.0),
                _ => {}
            }
        }
        view.sort();
        Ok(view)
    }
}
