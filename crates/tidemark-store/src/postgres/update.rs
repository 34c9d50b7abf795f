//! The compare-and-set update of a `consumer_keys` row on Postgres, the
//! building block of every write (keys.rs) and of group commit's single
//! write (group_commit.rs).

use std::sync::LazyLock;

use tidemark_core::Timestamp;
use tidemark_core::time::duration_micros;

use super::ts;
use crate::backend::ESTIMATED_NOW_TOLERANCE;
use crate::row::{KeyRow, PgQuery};

/// The row's lock, then the clock (SPEC §1; `sql/lock_then_clock.sql`): deadlines are judged, and the
/// write stamped, by one reading of the database clock taken once the row is
/// locked, so a write that waited on a lock is judged by when it lands.
/// Every update starts with these CTEs and joins `clock`: the join
/// reads the clock (so takes the lock) before the row is updated; read only
/// afterwards, the lock would skip the row this very statement updated.
/// The update finds the row by the address the lock returned (a TID scan,
/// not a second primary-key lookup). If the row was updated after the
/// statement's snapshot, that address holds a version the snapshot cannot
/// see and nothing is written; the primary-key route would have reached
/// the same answer through the version check (every update bumps it).
pub(super) static LOCK_THEN_CLOCK: LazyLock<String> =
    LazyLock::new(|| crate::sql_template::render(include_str!("sql/lock_then_clock.sql"), &[]));

/// The compare-and-set update: the row's columns from `$row` on, checked
/// against its version, the lease's liveness and the estimated time
/// (`$checks` to `$checks+3`, bound by [`bind_checks`]).
pub(super) fn update_key_row(checks: usize, row: usize) -> String {
    let (version, live, decided, tolerance) = (checks, checks + 1, checks + 2, checks + 3);
    let set = KeyRow::assignments_restamped(row, "consumer_keys", &format!("${decided}::timestamptz"));
    let checks = KeyRow::compare_and_set(
        "",
        &format!("${version}"),
        &format!("${live}"),
        &format!("${decided}::timestamptz"),
        &format!("${tolerance}::int8"),
    );
    crate::sql_template::render(
        include_str!("sql/update_key_row.sql"),
        &[("set", &set), ("checks", &checks)],
    )
}

/// The version, whether the lease must be live, when the transition was
/// decided (its stamps are moved to the write's clock reading), and, when
/// that was an estimate, how far the reading may be past it.
pub(super) fn bind_checks<'q>(
    query: PgQuery<'q>,
    version: i64,
    requires_live_lease: bool,
    decided: Timestamp,
    estimated: bool,
) -> PgQuery<'q> {
    query
        .bind(version)
        .bind(requires_live_lease)
        .bind(ts(decided))
        .bind(estimated.then(|| duration_micros(ESTIMATED_NOW_TOLERANCE)))
}
