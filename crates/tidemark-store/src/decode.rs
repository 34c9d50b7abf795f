//! Decoding rows other than `consumer_keys` (history, table options, the
//! Paimon registry and mirror), shared by both backends: each backend's row
//! type reads its timestamps through [`TimestampColumns`], the rest by
//! column name.

use std::time::Duration;

use sqlx::{ColumnIndex, Decode, Row, Type};
use tidemark_core::time::duration_micros;
use tidemark_core::{ConsumerKey, ConsumerMode, EventKind, HistoryEvent, TableName, TableOptions, Timestamp};
use uuid::Uuid;

use crate::backend::{HistoryRecord, MirrorEntry, MirrorState, MirrorTask, RegisteredTable};
use crate::error::StoreError;

/// Binds a key's three columns, in the order every statement takes them
/// (`table_name`, `branch`, `consumer_id`).
pub(crate) fn bind_key<'q, DB: sqlx::Database>(
    query: sqlx::query::Query<'q, DB, DB::Arguments>,
    key: &ConsumerKey,
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    for<'t> String: sqlx::Encode<'t, DB> + Type<DB>,
{
    query
        .bind(key.table.as_str().to_owned())
        .bind(key.branch.as_str().to_owned())
        .bind(key.consumer_id.as_str().to_owned())
}

/// Binds a key listing's parameters, in the order both backends'
/// `LIST_KEYS` take them: table, branch, id prefix, the key to continue
/// after (three columns), how many.
pub(crate) fn bind_key_listing<'q, DB: sqlx::Database>(
    query: sqlx::query::Query<'q, DB, DB::Arguments>,
    filter: &crate::backend::KeyFilter,
    after: Option<&ConsumerKey>,
    limit: i64,
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    for<'t> Option<String>: sqlx::Encode<'t, DB> + Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + Type<DB>,
{
    query
        .bind(filter.table.as_ref().map(|t| t.as_str().to_owned()))
        .bind(filter.branch.as_ref().map(|b| b.as_str().to_owned()))
        .bind(filter.consumer_id_prefix.clone())
        .bind(after.map(|k| k.table.as_str().to_owned()))
        .bind(after.map(|k| k.branch.as_str().to_owned()))
        .bind(after.map(|k| k.consumer_id.as_str().to_owned()))
        .bind(limit)
}

/// Binds an export page's parameters, in the order both backends'
/// `EXPORT_KEYS` take them: the table (or none), the key to read after,
/// how many.
pub(crate) fn bind_export_page<'q, DB: sqlx::Database>(
    query: sqlx::query::Query<'q, DB, DB::Arguments>,
    table: Option<String>,
    after: Option<&ConsumerKey>,
    page: i64,
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    for<'t> Option<String>: sqlx::Encode<'t, DB> + Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + Type<DB>,
{
    query
        .bind(table)
        .bind(after.map(|k| k.table.as_str().to_owned()))
        .bind(after.map(|k| k.branch.as_str().to_owned()))
        .bind(after.map(|k| k.consumer_id.as_str().to_owned()))
        .bind(page)
}

/// Binds a history page's parameters, in the order both backends'
/// `HISTORY_PAGE` take them: table, branch, consumer id, below which id,
/// how many.
pub(crate) fn bind_history_page<'q, DB: sqlx::Database>(
    query: sqlx::query::Query<'q, DB, DB::Arguments>,
    filter: &crate::backend::HistoryFilter,
    before_id: Option<i64>,
    limit: i64,
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    for<'t> String: sqlx::Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: sqlx::Encode<'t, DB> + Type<DB>,
    for<'t> Option<i64>: sqlx::Encode<'t, DB> + Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + Type<DB>,
{
    query
        .bind(filter.table.as_str().to_owned())
        .bind(filter.branch.as_ref().map(|b| b.as_str().to_owned()))
        .bind(filter.consumer_id.as_ref().map(|c| c.as_str().to_owned()))
        .bind(before_id)
        .bind(limit)
}

/// A timestamp as Postgres stores it (`timestamptz`).
pub(crate) fn ts(value: Timestamp) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_micros(value.as_micros()).unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// A `timestamptz` as a timestamp.
pub(crate) fn from_ts(value: chrono::DateTime<chrono::Utc>) -> Timestamp {
    Timestamp::from_micros(value.timestamp_micros())
}

/// A database row type whose timestamps tidemark can read (Postgres stores
/// `timestamptz`, SQLite integer microseconds).
pub(crate) trait TimestampColumns: Row {
    /// The timestamp in `column`, if not NULL.
    fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, sqlx::Error>;
}

/// The table options joined into a row as `opt_expiration_us`,
/// `opt_changelog_only` and `opt_mode` (all NULL: defaults).
pub(crate) fn options<R>(row: &R) -> Result<TableOptions, StoreError>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    let expiration: Option<i64> = row.try_get("opt_expiration_us")?;
    let mode: Option<String> = row.try_get("opt_mode")?;
    Ok(TableOptions {
        expiration: expiration.map(|us| Duration::from_micros(u64::try_from(us).unwrap_or(0))),
        changelog_only: row.try_get::<Option<bool>, _>("opt_changelog_only")?.unwrap_or(false),
        mode: match mode {
            None => None,
            Some(m) => Some(
                ConsumerMode::parse(&m).ok_or_else(|| StoreError::Internal(format!("unknown consumer mode {m:?}")))?,
            ),
        },
    })
}

/// A `history` row.
pub(crate) fn history<R>(row: &R) -> Result<HistoryRecord, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Uuid: Decode<'r, R::Database> + Type<R::Database>,
{
    let kind: String = row.try_get("event")?;
    Ok(HistoryRecord {
        id: row.try_get("id")?,
        at: row
            .timestamp("at")?
            .ok_or_else(|| StoreError::Internal("history row without a time".into()))?,
        key: key_of(row)?,
        event: HistoryEvent {
            kind: EventKind::parse(&kind)
                .ok_or_else(|| StoreError::Internal(format!("unknown history event {kind:?}")))?,
            old_next: row.try_get("old_next")?,
            new_next: row.try_get("new_next")?,
            epoch: row.try_get("epoch")?,
            lease_id: row.try_get("lease_id")?,
            batch_id: row.try_get("batch_id")?,
            holder: row.try_get("holder")?,
            detail: row.try_get("detail")?,
            latest_snapshot: row.try_get("latest_snapshot")?,
        },
        principal: row.try_get("principal")?,
        request_id: row.try_get("request_id")?,
    })
}
/// A row's `table_name`, as a checked name.
pub(crate) fn table_name<R>(row: &R) -> Result<TableName, StoreError>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    TableName::parse(&row.try_get::<String, _>("table_name")?, "table_name")
        .map_err(|v| StoreError::Internal(format!("a stored table name is invalid: {v:?}")))
}

/// A `paimon_tables` row.
pub(crate) fn registered<R>(row: &R) -> Result<RegisteredTable, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(RegisteredTable {
        table: table_name(row)?,
        location: row.try_get("location")?,
        registered_at: row
            .timestamp("registered_at")?
            .ok_or_else(|| StoreError::Internal("a registration without a time".into()))?,
        registered_by: row.try_get("registered_by")?,
        identity: row.try_get("identity")?,
    })
}

/// A mirror inventory row: the key, its location, position, refresh and
/// what its file was last written with, whether it is kept, its pin.
pub(crate) fn mirror_entry<R>(row: &R) -> Result<MirrorEntry, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<Uuid>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    let pin_lease: Option<Uuid> = row.try_get("pin_lease")?;
    let pin_snapshot: Option<i64> = row.try_get("pin_snapshot")?;
    Ok(MirrorEntry {
        key: key_of(row)?,
        location: row.try_get("location")?,
        next_snapshot: row.try_get("next_snapshot")?,
        updated_at: row.timestamp("consumer_updated_at")?,
        mirrored_next: row.try_get("mirrored_next")?,
        kept: row.try_get("kept")?,
        pin: pin_lease.zip(pin_snapshot),
        lease: row.try_get("lease_id")?,
    })
}

/// A mirror task row (key, location, position and updated_at).
pub(crate) fn mirror_task<R>(row: &R) -> Result<MirrorTask, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(MirrorTask {
        key: key_of(row)?,
        location: row.try_get("location")?,
        next_snapshot: row.try_get("next_snapshot")?,
        updated_at: row.timestamp("consumer_updated_at")?,
    })
}

/// A `consumer_mirrors` row.
pub(crate) fn mirror_state<R>(row: &R) -> Result<MirrorState, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i32: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(MirrorState {
        mirrored_next: row.try_get("mirrored_next")?,
        mirrored_updated_at: row.timestamp("mirrored_updated_at")?,
        mirrored_at: row.timestamp("mirrored_at")?,
        failures: row.try_get("failures")?,
        last_error: row.try_get("last_error")?,
        location: row.try_get("location")?,
    })
}

pub(crate) fn key_of<R>(row: &R) -> Result<ConsumerKey, sqlx::Error>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(ConsumerKey::from_trusted(
        &row.try_get::<String, _>("table_name")?,
        &row.try_get::<String, _>("branch")?,
        &row.try_get::<String, _>("consumer_id")?,
    ))
}

/// `consumer.expiration-time` as stored (microseconds).
pub(crate) fn expiration_us(options: &TableOptions) -> Option<i64> {
    options.expiration.map(duration_micros)
}

/// `consumer.mode` as stored.
pub(crate) fn mode_text(options: &TableOptions) -> Option<&'static str> {
    options.mode.map(ConsumerMode::as_str)
}

/// A row of the fleet statistics' per-branch query.
pub(crate) fn branch_stats<R>(row: &R) -> Result<crate::BranchStats, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(crate::BranchStats {
        table: row.try_get("table_name")?,
        branch: row.try_get("branch")?,
        consumers: row.try_get("consumers")?,
        min_next: row.try_get("min_next")?,
        reported_latest: row.try_get("branch_latest")?,
        oldest_behind: row.timestamp("oldest_behind")?,
    })
}

/// A row of [`crate::StatsStore::branch_overview`].
pub(crate) fn branch_overview<R>(row: &R) -> Result<crate::BranchOverview, StoreError>
where
    R: TimestampColumns,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(crate::BranchOverview {
        table: row.try_get("table_name")?,
        branch: row.try_get("branch")?,
        keys: row.try_get("keys")?,
        leased: row.try_get("leased")?,
        expired: row.try_get("expired")?,
        min_next: row.try_get("min_next")?,
        worst_reported_lag: row.try_get("worst_reported_lag")?,
        now: row
            .timestamp("db_now")?
            .ok_or_else(|| StoreError::Internal("branch overview without the clock".into()))?,
    })
}

/// A row of the fleet statistics' most-lagging-consumers query.
pub(crate) fn consumer_lag_row<R>(row: &R) -> Result<crate::ConsumerLagRow, StoreError>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(crate::ConsumerLagRow {
        table: row.try_get("table_name")?,
        branch: row.try_get("branch")?,
        consumer_id: row.try_get("consumer_id")?,
        next_snapshot: row.try_get("next_snapshot")?,
        branch_latest: row.try_get("branch_latest")?,
    })
}
