//! The `consumer_keys` row, declared once.
//!
//! [`KeyRow`] lists every column after the key and the version, with its
//! Rust type. From that one list come the statements' column lists,
//! assignments and placeholders, the binders of both backends (and group
//! commit's arrays) and the decoders, so a new column is a migration per
//! backend, a line here and its place in [`KeyRow::from_state`] /
//! [`KeyRow::into_state`].

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Postgres, Row, Sqlite};
use tidemark_core::{KeyState, Timestamp};
use uuid::Uuid;

use crate::decode::key_of;
use crate::error::StoreError;

pub(crate) type PgQuery<'q> = Query<'q, Postgres, PgArguments>;
pub(crate) type SqliteQuery<'q> = Query<'q, Sqlite, SqliteArguments>;

/// A `consumer_keys` column's Rust type: how each backend stores it.
pub(crate) trait Column: Sized {
    /// Its Postgres type, for `unnest` casts.
    const PG_TYPE: &'static str;
    type Pg;
    type Sqlite;
    fn into_pg(self) -> Self::Pg;
    fn into_sqlite(self) -> Self::Sqlite;
    fn from_pg(row: &PgRow, column: &str) -> Result<Self, sqlx::Error>;
    fn from_sqlite(row: &SqliteRow, column: &str) -> Result<Self, sqlx::Error>;
}

/// Types both drivers store as they are.
macro_rules! plain_columns {
    ($($ty:ty => $pg:literal),* $(,)?) => {$(
        impl Column for $ty {
            const PG_TYPE: &'static str = $pg;
            type Pg = Self;
            type Sqlite = Self;
            fn into_pg(self) -> Self {
                self
            }
            fn into_sqlite(self) -> Self {
                self
            }
            fn from_pg(row: &PgRow, column: &str) -> Result<Self, sqlx::Error> {
                row.try_get(column)
            }
            fn from_sqlite(row: &SqliteRow, column: &str) -> Result<Self, sqlx::Error> {
                row.try_get(column)
            }
        }
    )*};
}

plain_columns! {
    i64 => "int8",
    String => "text",
    Option<i64> => "int8",
    Option<i16> => "int2",
    Option<bool> => "bool",
    Option<String> => "text",
    Option<Uuid> => "uuid",
}

/// Postgres stores `timestamptz`, SQLite integer microseconds.
impl Column for Option<Timestamp> {
    const PG_TYPE: &'static str = "timestamptz";
    type Pg = Option<DateTime<Utc>>;
    type Sqlite = Option<i64>;
    fn into_pg(self) -> Self::Pg {
        self.map(crate::decode::ts)
    }
    fn into_sqlite(self) -> Self::Sqlite {
        self.map(Timestamp::as_micros)
    }
    fn from_pg(row: &PgRow, column: &str) -> Result<Self, sqlx::Error> {
        Ok(row
            .try_get::<Option<DateTime<Utc>>, _>(column)?
            .map(crate::decode::from_ts))
    }
    fn from_sqlite(row: &SqliteRow, column: &str) -> Result<Self, sqlx::Error> {
        Ok(row.try_get::<Option<i64>, _>(column)?.map(Timestamp::from_micros))
    }
}

/// Declares a row type of one table's columns, each with its [`Column`]
/// type: the struct, its column names and Postgres types in order, its
/// binders (one row, or arrays of rows for `unnest`) and its decoders. Both
/// [`KeyRow`] and `history_row::HistoryRow` are declared with it.
macro_rules! sql_row {
    ($(#[$meta:meta])* $name:ident { $($field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub(crate) struct $name {
            $(pub $field: $ty,)*
        }

        impl $name {
            /// The columns' names, in order.
            pub(crate) const COLUMNS: &[&str] = &[$(stringify!($field)),*];
            /// Their Postgres types, in order.
            const PG_TYPES: &[&str] = &[$(<$ty as $crate::row::Column>::PG_TYPE),*];

            /// Binds every column, in order.
            pub(crate) fn bind_pg(self, query: $crate::row::PgQuery<'_>) -> $crate::row::PgQuery<'_> {
                $(let query = query.bind($crate::row::Column::into_pg(self.$field));)*
                query
            }

            /// Binds every column, in order.
            pub(crate) fn bind_sqlite(self, query: $crate::row::SqliteQuery<'_>) -> $crate::row::SqliteQuery<'_> {
                $(let query = query.bind($crate::row::Column::into_sqlite(self.$field));)*
                query
            }

            /// Binds every column as an array over `rows` (for `unnest`).
            pub(crate) fn bind_pg_arrays<'q, 'r>(
                rows: impl Iterator<Item = &'r $name> + Clone,
                query: $crate::row::PgQuery<'q>,
            ) -> $crate::row::PgQuery<'q> {
                $(let query = query.bind(rows.clone().map(|r| $crate::row::Column::into_pg(r.$field.clone())).collect::<Vec<_>>());)*
                query
            }

            /// `$first::int8[], ...`: the columns' arrays, for `unnest`.
            pub(crate) fn array_arguments(first: usize) -> String {
                Self::PG_TYPES
                    .iter()
                    .enumerate()
                    .map(|(i, t)| format!("${}::{t}[]", first + i))
                    .collect::<Vec<_>>()
                    .join(", ")
            }

            /// `($first::int8[])[at], ...`: one element of each column's
            /// array (bound as by [`Self::bind_pg_arrays`]), read by subscript.
            #[allow(dead_code, reason = "not every row type is read by subscript")]
            pub(crate) fn array_elements(first: usize, at: &str) -> String {
                (0..Self::COLUMNS.len())
                    .map(|i| Self::array_element(first, i, at))
                    .collect::<Vec<_>>()
                    .join(", ")
            }

            /// `($first+i::type[])[at]`: column `i`'s element `at`.
            fn array_element(first: usize, i: usize, at: &str) -> String {
                format!("(${}::{}[])[{at}]", first + i, Self::PG_TYPES[i])
            }

            /// The placeholders of the columns bound from parameter `first` on.
            pub(crate) fn placeholders(style: $crate::row::Placeholders, first: usize) -> String {
                (0..Self::COLUMNS.len())
                    .map(|i| style.nth(first + i))
                    .collect::<Vec<_>>()
                    .join(", ")
            }

            #[allow(dead_code, reason = "not every row type is read back by name")]
            fn from_pg(row: &sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
                Ok(Self { $($field: $crate::row::Column::from_pg(row, stringify!($field))?,)* })
            }

            #[allow(dead_code, reason = "not every row type is read back by name")]
            fn from_sqlite(row: &sqlx::sqlite::SqliteRow) -> Result<Self, sqlx::Error> {
                Ok(Self { $($field: $crate::row::Column::from_sqlite(row, stringify!($field))?,)* })
            }
        }
    };
}
pub(crate) use sql_row;

sql_row! {
    /// Every column of `consumer_keys` except the key and the version,
    /// in the order statements list and bind them.
    KeyRow {
    epoch: i64,
    next_snapshot: Option<i64>,
    consumer_created_at: Option<Timestamp>,
    consumer_updated_at: Option<Timestamp>,
    latest_snapshot: Option<i64>,
    lease_id: Option<Uuid>,
    lease_holder: Option<String>,
    lease_epoch: Option<i64>,
    lease_status: Option<i16>,
    lease_ttl_us: Option<i64>,
    lease_acquired_at: Option<Timestamp>,
    lease_deadline: Option<Timestamp>,
    last_batch_id: Option<i64>,
    last_end_snapshot: Option<i64>,
    last_end_index: Option<i64>,
    last_end_full: Option<bool>,
    last_end_total_splits: Option<i64>,
    lease_wrote_consumer: Option<bool>,
    legacy_warned_snapshot: Option<i64>,
    full_scan_pin: Option<i64>,
    lease_principal: Option<String>,
    lease_peer: Option<String>,
    lease_client: Option<String>,
    lease_committed_at: Option<Timestamp>,
    lease_caller_of: Option<Uuid>,
    }
}

/// The times a transition stamps with the moment it was decided (see
/// `stamp.rs`).
const STAMPED: &[&str] = &[
    "consumer_created_at",
    "consumer_updated_at",
    "lease_acquired_at",
    "lease_deadline",
    "lease_committed_at",
];

/// How a backend writes its placeholders: Postgres `$1`, SQLite `?1`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Placeholders {
    Dollar,
    Question,
}

impl Placeholders {
    pub(crate) fn nth(self, n: usize) -> String {
        match self {
            Self::Dollar => format!("${n}"),
            Self::Question => format!("?{n}"),
        }
    }
}

/// SQL fragments over [`KeyRow::COLUMNS`].
impl KeyRow {
    /// `alias.table_name, alias.branch, alias.consumer_id, alias.version,
    /// alias.epoch, ...`: a whole row, key and version first.
    pub(crate) fn select_list(alias: &str) -> String {
        ["table_name", "branch", "consumer_id", "version"]
            .iter()
            .chain(Self::COLUMNS)
            .map(|c| format!("{alias}.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `epoch, next_snapshot, ...`.
    pub(crate) fn column_list() -> String {
        Self::COLUMNS.join(", ")
    }

    /// `epoch = $first, next_snapshot = $first+1, ...`.
    pub(crate) fn assignments(style: Placeholders, first: usize) -> String {
        Self::COLUMNS
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = {}", style.nth(first + i)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Postgres assignments from `value(column)` (a placeholder or an
    /// alias's column), with each time a transition stamps moved by
    /// `clock.t - decided` where it changes the row's value (`target` names
    /// the row being updated): see `stamp.rs`.
    fn assignments_restamped_with(value: impl Fn(usize, &str) -> String, target: &str, decided: &str) -> String {
        Self::COLUMNS
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let v = value(i, c);
                if STAMPED.contains(c) {
                    format!(
                        "{c} = CASE WHEN {v} IS NOT DISTINCT FROM {target}.{c} THEN {v} \
                         ELSE {v} + (clock.t - {decided}) END"
                    )
                } else {
                    format!("{c} = {v}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Postgres placeholders from `first` on, each stamped time moved by
    /// the clock's reading less `decided` (see `stamp.rs`).
    pub(crate) fn placeholders_restamped(first: usize, decided: &str) -> String {
        Self::COLUMNS
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let p = Placeholders::Dollar.nth(first + i);
                if STAMPED.contains(c) {
                    format!("{p} + ((SELECT t FROM clock) - {decided})")
                } else {
                    p
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Postgres: the compare-and-set conditions of a key row's update, the
    /// one spelling for the single and the batched forms. The row (its
    /// columns prefixed by `row`) is still at the `version` it was read at;
    /// its lease is live by the clock's reading when `requires_live`; and
    /// when the write's time was an estimate (`estimated_now` and
    /// `tolerance`, in microseconds, both set) the clock reads at or after
    /// it, by less than the tolerance (see `stamp.rs`). Needs `clock`.
    pub(crate) fn compare_and_set(
        row: &str,
        version: &str,
        requires_live: &str,
        estimated_now: &str,
        tolerance: &str,
    ) -> String {
        crate::sql_template::render(
            include_str!("../sql/compare_and_set.sql"),
            &[
                ("row", row),
                ("version", version),
                ("requires_live", requires_live),
                ("estimated_now", estimated_now),
                ("tolerance", tolerance),
            ],
        )
    }

    /// `epoch = $first, ...`, restamped (see `stamp.rs`).
    pub(crate) fn assignments_restamped(first: usize, target: &str, decided: &str) -> String {
        Self::assignments_restamped_with(|i, _| Placeholders::Dollar.nth(first + i), target, decided)
    }

    /// `epoch = ($first::int8[])[at], ...`: each column from element `at`
    /// of its array (bound by [`KeyRow::bind_pg_arrays`] from parameter
    /// `first` on), restamped (see `stamp.rs`).
    pub(crate) fn assignments_from_arrays_restamped(first: usize, at: &str, target: &str, decided: &str) -> String {
        Self::assignments_restamped_with(|i, _| Self::array_element(first, i, at), target, decided)
    }
}

/// A `consumer_keys` row read with [`KeyRow::select_list`]: the state and
/// the version.
pub(crate) fn decode_pg(row: &PgRow) -> Result<(KeyState, i64), StoreError> {
    let key = key_of(row)?;
    Ok((KeyRow::from_pg(row)?.into_state(key)?, row.try_get("version")?))
}

/// The same for SQLite.
pub(crate) fn decode_sqlite(row: &SqliteRow) -> Result<(KeyState, i64), StoreError> {
    let key = key_of(row)?;
    Ok((KeyRow::from_sqlite(row)?.into_state(key)?, row.try_get("version")?))
}

mod state;

#[cfg(test)]
mod tests;
