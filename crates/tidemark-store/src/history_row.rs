//! The `history` row, declared once, beside `consumer_keys`'s
//! [`KeyRow`](crate::row::KeyRow).
//!
//! An appended history row is the moment of its write, its key, who asked
//! (principal and request id) — the [`LEADING`] columns, which each
//! statement takes from its own context — and one [`HistoryRow`]: the
//! event's columns. Every statement that appends history, on both backends,
//! is built by [`insert_history`], and every binder binds a [`HistoryRow`]
//! (one, or as arrays for `unnest`).

use tidemark_core::HistoryEvent;
use uuid::Uuid;

use crate::row::sql_row;

/// The columns a statement fills from its own context, in order: the
/// moment, the key, who asked.
const LEADING: &[&str] = &["at", "table_name", "branch", "consumer_id", "principal", "request_id"];

sql_row! {
    /// An event's columns of `history`, in the order statements list and
    /// bind them (after [`LEADING`]).
    HistoryRow {
        event: String,
        old_next: Option<i64>,
        new_next: Option<i64>,
        epoch: Option<i64>,
        lease_id: Option<Uuid>,
        batch_id: Option<i64>,
        holder: Option<String>,
        detail: Option<String>,
        latest_snapshot: Option<i64>,
    }
}

/// How many parameters an event takes: statements that bind more after the
/// event count from it, so a new history column moves them all.
pub(crate) const EVENT_COLUMNS: usize = HistoryRow::COLUMNS.len();

impl HistoryRow {
    pub(crate) fn from_event(event: &HistoryEvent) -> Self {
        Self {
            event: event.kind.as_str().to_owned(),
            old_next: event.old_next,
            new_next: event.new_next,
            epoch: event.epoch,
            lease_id: event.lease_id,
            batch_id: event.batch_id,
            holder: event.holder.clone(),
            detail: event.detail.clone(),
            latest_snapshot: event.latest_snapshot,
        }
    }

    pub(crate) fn from_events(events: &[HistoryEvent]) -> Vec<Self> {
        events.iter().map(Self::from_event).collect()
    }

    /// `{prefix}event, {prefix}old_next, ...`: the columns of an `unnest`
    /// alias (`prefix` `ev_`) or read from one (`e.`, `v.ev_`).
    pub(crate) fn columns(prefix: &str) -> String {
        Self::COLUMNS
            .iter()
            .map(|c| format!("{prefix}{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// SQLite's `(?, ?, ...)` for one whole appended row: [`LEADING`], then
    /// the event's columns.
    pub(crate) fn sqlite_row() -> String {
        format!("({})", vec!["?"; LEADING.len() + Self::COLUMNS.len()].join(", "))
    }
}

/// The one `INSERT INTO history`: `rows` (a `SELECT` or `VALUES`) gives, in
/// order, the moment, the key's three columns, the principal, the request
/// id, then the event's columns ([`HistoryRow::COLUMNS`]).
pub(crate) fn insert_history(rows: &str) -> String {
    let columns = LEADING
        .iter()
        .chain(HistoryRow::COLUMNS)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    format!("INSERT INTO history ({columns}) {rows}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_insert_lists_every_column_once_in_the_order_rows_give_them() {
        assert_eq!(
            insert_history("VALUES (1)"),
            "INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, \
             new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) VALUES (1)"
        );
        assert_eq!(
            HistoryRow::array_arguments(7),
            "$7::text[], $8::int8[], $9::int8[], $10::int8[], $11::uuid[], $12::int8[], $13::text[], $14::text[], \
             $15::int8[]"
        );
        assert_eq!(
            HistoryRow::columns("v.ev_").split(", ").count(),
            HistoryRow::COLUMNS.len()
        );
        assert_eq!(HistoryRow::sqlite_row().matches('?').count(), 15);
    }
}
