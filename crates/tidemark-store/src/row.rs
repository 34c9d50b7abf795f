//! The `consumer_keys` row, as plain values shared by both backends.

use std::time::Duration;

use sqlx::{ColumnIndex, Decode, Row, Type};
use tidemark_core::{
    CommittedBatch, ConsumerKey, ConsumerMode, ConsumerRecord, EventKind, HistoryEvent, KeyState, LeaseRecord,
    LeaseStatus, Offset, TableName, TableOptions, Timestamp,
};
use uuid::Uuid;

use crate::backend::{HistoryRecord, MirrorEntry, MirrorState, MirrorTask, RegisteredTable};
use crate::error::StoreError;
use tidemark_core::time::duration_micros;

/// Every column of `consumer_keys` except the key and the version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyRow {
    pub epoch: i64,
    pub next_snapshot: Option<i64>,
    pub consumer_created_at: Option<Timestamp>,
    pub consumer_updated_at: Option<Timestamp>,
    pub latest_snapshot: Option<i64>,
    pub lease_id: Option<Uuid>,
    pub lease_holder: Option<String>,
    pub lease_principal: Option<String>,
    pub lease_epoch: Option<i64>,
    pub lease_status: Option<i16>,
    pub lease_ttl_us: Option<i64>,
    pub lease_acquired_at: Option<Timestamp>,
    pub lease_deadline: Option<Timestamp>,
    pub last_batch_id: Option<i64>,
    pub last_end_snapshot: Option<i64>,
    pub last_end_index: Option<i64>,
    pub last_end_full: Option<bool>,
    pub last_end_total_splits: Option<i64>,
    pub lease_wrote_consumer: Option<bool>,
    pub legacy_warned_snapshot: Option<i64>,
    pub full_scan_pin: Option<i64>,
}

impl KeyRow {
    /// The row that stores `state`.
    pub fn from_state(state: &KeyState) -> Self {
        let consumer = state.consumer.as_ref();
        let lease = state.lease.as_ref();
        let last = lease.and_then(|l| l.last_batch);
        Self {
            epoch: state.epoch,
            next_snapshot: consumer.map(|c| c.next_snapshot),
            consumer_created_at: consumer.map(|c| c.created_at),
            consumer_updated_at: consumer.map(|c| c.updated_at),
            latest_snapshot: state.latest_snapshot,
            lease_id: lease.map(|l| l.lease_id),
            lease_holder: lease.map(|l| l.holder.clone()),
            lease_principal: lease.map(|l| l.principal.clone()),
            lease_epoch: lease.map(|l| l.epoch),
            lease_status: lease.map(|l| l.status.code()),
            lease_ttl_us: lease.map(|l| duration_micros(l.ttl)),
            lease_acquired_at: lease.map(|l| l.acquired_at),
            lease_deadline: lease.map(|l| l.deadline),
            last_batch_id: last.map(|b| b.batch_id),
            last_end_snapshot: last.map(|b| b.end.snapshot_id),
            last_end_index: last.map(|b| b.end.index),
            last_end_full: last.map(|b| b.end.scan_snapshot),
            last_end_total_splits: last.and_then(|b| b.end.total_splits),
            lease_wrote_consumer: lease.map(|l| l.wrote_consumer),
            legacy_warned_snapshot: lease.and_then(|l| l.legacy_warned_snapshot),
            full_scan_pin: lease.and_then(|l| l.full_scan_pin),
        }
    }

    /// The state this row stores for `key`.
    pub fn into_state(self, key: ConsumerKey) -> Result<KeyState, StoreError> {
        let corrupt = |what: &str| StoreError::Internal(format!("corrupt row for {key}: {what}"));
        let consumer = match (self.next_snapshot, self.consumer_created_at, self.consumer_updated_at) {
            (Some(next_snapshot), Some(created_at), Some(updated_at)) => Some(ConsumerRecord {
                next_snapshot,
                created_at,
                updated_at,
            }),
            (None, _, _) => None,
            _ => return Err(corrupt("consumer timestamps missing")),
        };
        let lease = match self.lease_id {
            None => None,
            Some(lease_id) => {
                let status = self
                    .lease_status
                    .and_then(LeaseStatus::from_code)
                    .ok_or_else(|| corrupt("lease status"))?;
                let last_batch = match (self.last_batch_id, self.last_end_snapshot, self.last_end_index) {
                    (Some(batch_id), Some(snapshot_id), Some(index)) => Some(CommittedBatch {
                        batch_id,
                        end: Offset {
                            snapshot_id,
                            index,
                            scan_snapshot: self.last_end_full.unwrap_or(false),
                            total_splits: self.last_end_total_splits,
                        },
                    }),
                    _ => None,
                };
                Some(LeaseRecord {
                    lease_id,
                    holder: self.lease_holder.ok_or_else(|| corrupt("lease holder"))?,
                    principal: self.lease_principal.unwrap_or_else(|| "anonymous".to_owned()),
                    epoch: self.lease_epoch.ok_or_else(|| corrupt("lease epoch"))?,
                    ttl: Duration::from_micros(
                        u64::try_from(self.lease_ttl_us.ok_or_else(|| corrupt("lease ttl"))?).unwrap_or(0),
                    ),
                    acquired_at: self.lease_acquired_at.ok_or_else(|| corrupt("lease acquired_at"))?,
                    deadline: self.lease_deadline.ok_or_else(|| corrupt("lease deadline"))?,
                    status,
                    last_batch,
                    wrote_consumer: self.lease_wrote_consumer.unwrap_or(false),
                    legacy_warned_snapshot: self.legacy_warned_snapshot,
                    full_scan_pin: self.full_scan_pin,
                })
            }
        };
        Ok(KeyState {
            key,
            epoch: self.epoch,
            consumer,
            lease,
            latest_snapshot: self.latest_snapshot,
        })
    }
}

/// History columns in the order both backends bind them.
pub(crate) struct EventColumns {
    pub event: Vec<String>,
    pub old_next: Vec<Option<i64>>,
    pub new_next: Vec<Option<i64>>,
    pub epoch: Vec<Option<i64>>,
    pub lease_id: Vec<Option<Uuid>>,
    pub batch_id: Vec<Option<i64>>,
    pub holder: Vec<Option<String>>,
    pub detail: Vec<Option<String>>,
}

impl EventColumns {
    pub fn new(events: &[HistoryEvent]) -> Self {
        Self {
            event: events.iter().map(|e| e.kind.as_str().to_owned()).collect(),
            old_next: events.iter().map(|e| e.old_next).collect(),
            new_next: events.iter().map(|e| e.new_next).collect(),
            epoch: events.iter().map(|e| e.epoch).collect(),
            lease_id: events.iter().map(|e| e.lease_id).collect(),
            batch_id: events.iter().map(|e| e.batch_id).collect(),
            holder: events.iter().map(|e| e.holder.clone()).collect(),
            detail: events.iter().map(|e| e.detail.clone()).collect(),
        }
    }
}

/// A database row type whose timestamps tidemark can read (Postgres stores
/// `timestamptz`, SQLite integer microseconds).
pub(crate) trait TimestampColumns: Row {
    /// The timestamp in `column`, if not NULL.
    fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, sqlx::Error>;
}

/// Decodes `consumer_keys` and `history` rows of either backend, by column
/// name.
pub(crate) struct Decoder;

impl Decoder {
    /// A `consumer_keys` row (with its key and version columns).
    pub fn key_row<R>(row: &R) -> Result<(KeyState, i64), StoreError>
    where
        R: TimestampColumns,
        for<'c> &'c str: ColumnIndex<R>,
        for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
        for<'r> i16: Decode<'r, R::Database> + Type<R::Database>,
        for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
        for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
        for<'r> Uuid: Decode<'r, R::Database> + Type<R::Database>,
    {
        let key = key_of(row)?;
        let key_row = KeyRow {
            epoch: row.try_get("epoch")?,
            next_snapshot: row.try_get("next_snapshot")?,
            consumer_created_at: row.timestamp("consumer_created_at")?,
            consumer_updated_at: row.timestamp("consumer_updated_at")?,
            latest_snapshot: row.try_get("latest_snapshot")?,
            lease_id: row.try_get("lease_id")?,
            lease_holder: row.try_get("lease_holder")?,
            lease_principal: row.try_get("lease_principal")?,
            lease_epoch: row.try_get("lease_epoch")?,
            lease_status: row.try_get("lease_status")?,
            lease_ttl_us: row.try_get("lease_ttl_us")?,
            lease_acquired_at: row.timestamp("lease_acquired_at")?,
            lease_deadline: row.timestamp("lease_deadline")?,
            last_batch_id: row.try_get("last_batch_id")?,
            last_end_snapshot: row.try_get("last_end_snapshot")?,
            last_end_index: row.try_get("last_end_index")?,
            last_end_full: row.try_get("last_end_full")?,
            last_end_total_splits: row.try_get("last_end_total_splits")?,
            lease_wrote_consumer: row.try_get("lease_wrote_consumer")?,
            legacy_warned_snapshot: row.try_get("legacy_warned_snapshot")?,
            full_scan_pin: row.try_get("full_scan_pin")?,
        };
        Ok((key_row.into_state(key)?, row.try_get("version")?))
    }

    /// The table options joined into a row as `opt_expiration_us`,
    /// `opt_changelog_only` and `opt_mode` (all NULL: defaults).
    pub fn options<R>(row: &R) -> Result<TableOptions, StoreError>
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
                    ConsumerMode::parse(&m)
                        .ok_or_else(|| StoreError::Internal(format!("unknown consumer mode {m:?}")))?,
                ),
            },
        })
    }

    /// A `history` row.
    pub fn history<R>(row: &R) -> Result<HistoryRecord, StoreError>
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
            },
            principal: row.try_get("principal")?,
            request_id: row.try_get("request_id")?,
        })
    }
}

impl Decoder {
    /// A `paimon_tables` row.
    pub fn registered<R>(row: &R) -> Result<RegisteredTable, StoreError>
    where
        R: TimestampColumns,
        for<'c> &'c str: ColumnIndex<R>,
        for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
        for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    {
        Ok(RegisteredTable {
            table: TableName::parse(&row.try_get::<String, _>("table_name")?, "table_name")
                .map_err(|v| StoreError::Internal(format!("a stored table name is invalid: {v:?}")))?,
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
    pub fn mirror_entry<R>(row: &R) -> Result<MirrorEntry, StoreError>
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
    pub fn mirror_task<R>(row: &R) -> Result<MirrorTask, StoreError>
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
    pub fn mirror_state<R>(row: &R) -> Result<MirrorState, StoreError>
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
        })
    }
}

fn key_of<R>(row: &R) -> Result<ConsumerKey, sqlx::Error>
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
