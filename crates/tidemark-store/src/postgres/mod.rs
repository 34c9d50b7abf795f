//! The Postgres backend (production).
//!
//! A read is one statement (the row plus `tidemark_now()`); a write is one statement
//! whose CTEs compare-and-set the row, record a lease grant and append the
//! history, so each is its own transaction and costs one round trip; commits
//! that arrive together share one (see the `group_commit` module). Times come
//! from the database clock.

pub(crate) mod group_commit;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Row, query::Query};
use tidemark_core::{BranchName, ConsumerId, ConsumerKey, HistoryEvent, TableName, TableOptions, Timestamp};

use crate::backend::{
    Backend, BranchView, CallContext, Change, DECIDED_AT_TOLERANCE, HistoryFilter, HistoryRecord, KeyFilter, Listed,
    Loaded, Locate, MirrorEntry, MirrorState, MirrorTask, Pruned, RegisteredTable, StoredOptions,
};
use crate::error::StoreError;
use crate::row::{Decoder, EventColumns, KeyRow, TimestampColumns, expiration_us, mode_text};
use group_commit::{Applied, GroupCommit, OneEventWrite, Outcome};
use tidemark_core::time::duration_micros;

/// The embedded Postgres migrations (`migrations/postgres`).
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// Connection settings for the Postgres backend.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Most connections the pool opens.
    pub max_connections: u32,
    /// How long a call waits for a free connection before failing with
    /// UNAVAILABLE.
    pub acquire_timeout: Duration,
    /// Server-side limit on any one statement.
    pub statement_timeout: Option<Duration>,
    /// Schema to use instead of the default search path (tests use one
    /// schema each).
    pub schema: Option<String>,
    /// Group commit: concurrent commits share at most this many statements
    /// in flight, each carrying whatever queued meanwhile (0: every commit
    /// is its own statement). See the `group_commit` module.
    pub group_commit: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Some(Duration::from_secs(10)),
            schema: None,
            group_commit: DEFAULT_GROUP_COMMIT,
        }
    }
}

/// In-flight commit statements per replica by default: enough to keep the
/// database busy, few enough that concurrent commits share statements.
pub const DEFAULT_GROUP_COMMIT: usize = 1;

/// tidemark state in Postgres.
#[derive(Debug, Clone)]
pub struct PostgresBackend {
    pool: PgPool,
    group: Option<Arc<GroupCommit>>,
}

impl PostgresBackend {
    /// Creates the pool. Connections are opened lazily, so this succeeds even
    /// while the database is down.
    pub fn connect(url: &str, options: &PostgresOptions) -> Result<Self, StoreError> {
        let mut connect: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("invalid Postgres URL: {e}")))?;
        connect = connect.application_name("tidemark");
        let mut settings = Vec::new();
        if let Some(timeout) = options.statement_timeout {
            settings.push(("statement_timeout", timeout.as_millis().to_string()));
        }
        if let Some(schema) = &options.schema {
            settings.push(("search_path", schema.clone()));
        }
        if !settings.is_empty() {
            connect = connect.options(settings);
        }
        // No ping before handing out a pooled connection: it would cost a
        // round trip on every call. A connection that died (say, Postgres
        // restarted) fails its next statement with UNAVAILABLE, which the
        // client retries, and is dropped from the pool.
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(false)
            .connect_lazy_with(connect);
        let group = (options.group_commit > 0).then(|| Arc::new(GroupCommit::new(pool.clone(), options.group_commit)));
        Ok(Self { pool, group })
    }

    /// Group commit's work so far (`None` when it is off).
    pub fn group_commit_stats(&self) -> Option<crate::GroupCommitStats> {
        self.group.as_ref().map(|g| g.stats())
    }

    /// The connection pool (for tests and benchmarks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

pub(crate) fn ts(value: Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(value.as_micros()).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

pub(crate) fn from_ts(value: DateTime<Utc>) -> Timestamp {
    Timestamp::from_micros(value.timestamp_micros())
}

impl TimestampColumns for PgRow {
    fn timestamp(&self, column: &str) -> Result<Option<Timestamp>, sqlx::Error> {
        Ok(self.try_get::<Option<DateTime<Utc>>, _>(column)?.map(from_ts))
    }
}

/// The table options joined as `o`.
macro_rules! option_columns {
    () => {
        "o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode"
    };
}

/// E2: `k` has not expired (by `o`'s expiration time, or because a live
/// lease holds it).
macro_rules! unexpired {
    () => {
        "(o.expiration_us IS NULL \
          OR k.consumer_updated_at >= tidemark_now() - o.expiration_us * interval '1 microsecond' \
          OR (k.lease_status = 1 AND k.lease_deadline > tidemark_now()))"
    };
}

/// `k`'s lease is live.
macro_rules! live_lease {
    () => {
        "(k.lease_status = 1 AND k.lease_deadline > tidemark_now())"
    };
}

const LOAD_BY_KEY: &str = concat!(
    "SELECT tidemark_now() AS db_now, ",
    key_columns!(),
    ", ",
    option_columns!(),
    " FROM (SELECT 1) AS one ",
    "LEFT JOIN consumer_keys k ON k.table_name = $1 AND k.branch = $2 AND k.consumer_id = $3 ",
    "LEFT JOIN table_options o ON o.table_name = $1"
);

// Through lease_grants, so a superseded lease still finds its key.
const LOAD_BY_LEASE: &str = concat!(
    "SELECT tidemark_now() AS db_now, ",
    key_columns!(),
    ", ",
    option_columns!(),
    " FROM (SELECT 1) AS one ",
    "LEFT JOIN lease_grants g ON g.lease_id = $1 ",
    "LEFT JOIN consumer_keys k ",
    "ON k.table_name = g.table_name AND k.branch = g.branch AND k.consumer_id = g.consumer_id ",
    "LEFT JOIN table_options o ON o.table_name = g.table_name"
);

const LIST_KEYS: &str = concat!(
    "SELECT tidemark_now() AS db_now, ",
    key_columns!(),
    ", ",
    option_columns!(),
    " FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name ",
    "WHERE ($1::text IS NULL OR k.table_name = $1) AND ($2::text IS NULL OR k.branch = $2) ",
    "AND ($3::text IS NULL OR left(k.consumer_id, length($3)) = $3) ",
    "AND ($4::text IS NULL OR (k.table_name, k.branch, k.consumer_id) > ($4::text, $5::text, $6::text)) ",
    "AND (k.next_snapshot IS NOT NULL OR ",
    live_lease!(),
    ") ORDER BY k.table_name, k.branch, k.consumer_id LIMIT $7"
);

/// The query behind retention fences: the lowest unexpired consumers of a
/// branch (`$1` table, `$2` branch, `$3` limit). Public so benchmarks and
/// tests can check its plan walks the position index.
pub const BRANCH_CONSUMERS: &str = concat!(
    "SELECT ",
    key_columns!(),
    " FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name ",
    "WHERE k.table_name = $1 AND k.branch = $2 AND k.next_snapshot IS NOT NULL AND ",
    unexpired!(),
    " ORDER BY k.next_snapshot, k.consumer_id LIMIT $3"
);

/// A branch's options, lowest consumers and lowest live full-scan pins in
/// one statement, so one snapshot (SPEC §8): read apart, a scan completing
/// in between (its pin gone, its consumer not yet seen) showed no fence.
/// One row per consumer (`kind` 0) and pin (`kind` 1), each carrying the
/// clock and the options; one row with a NULL `kind` when there are none.
const BRANCH_VIEW: &str = concat!(
    "WITH head AS (SELECT tidemark_now() AS db_now, ",
    option_columns!(),
    " FROM (SELECT 1) AS one LEFT JOIN table_options o ON o.table_name = $1), ",
    "holders AS ((SELECT 0 AS kind, ",
    key_columns!(),
    " FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name ",
    "WHERE k.table_name = $1 AND k.branch = $2 AND k.next_snapshot IS NOT NULL AND ",
    unexpired!(),
    " ORDER BY k.next_snapshot, k.consumer_id LIMIT $3) UNION ALL (SELECT 1 AS kind, ",
    key_columns!(),
    " FROM consumer_keys k WHERE k.table_name = $1 AND k.branch = $2 AND k.full_scan_pin IS NOT NULL AND ",
    live_lease!(),
    " ORDER BY k.full_scan_pin, k.consumer_id LIMIT $3)) ",
    "SELECT head.*, holders.* FROM head LEFT JOIN holders ON true"
);

const EXPIRED_KEYS: &str = concat!(
    "SELECT k.table_name, k.branch, k.consumer_id FROM table_options o ",
    "JOIN consumer_keys k ON k.table_name = o.table_name ",
    "WHERE o.expiration_us IS NOT NULL AND ($1::text IS NULL OR k.table_name = $1) ",
    "AND ($2::text IS NULL OR k.branch = $2) AND k.next_snapshot IS NOT NULL ",
    "AND k.consumer_updated_at < tidemark_now() - o.expiration_us * interval '1 microsecond' ",
    "AND NOT coalesce(",
    live_lease!(),
    ", false) ORDER BY k.consumer_updated_at LIMIT $3"
);

const HISTORY_PAGE: &str = "SELECT id, at, table_name, branch, consumer_id, event, old_next, new_next, epoch, \
    lease_id, batch_id, holder, principal, request_id, detail FROM history \
    WHERE table_name = $1 AND ($2::text IS NULL OR branch = $2) AND ($3::text IS NULL OR consumer_id = $3) \
    AND ($4::bigint IS NULL OR id < $4) ORDER BY id DESC LIMIT $5";

const TABLE_OPTIONS: &str = "SELECT expiration_us AS opt_expiration_us, changelog_only AS opt_changelog_only, \
    mode AS opt_mode, version, updated_at, updated_by FROM table_options WHERE table_name = $1";

const INSERT_OPTIONS: &str = "INSERT INTO table_options \
    (table_name, expiration_us, changelog_only, mode, version, updated_at, updated_by) \
    VALUES ($1, $2, $3, $4, 1, tidemark_now(), $5) ON CONFLICT DO NOTHING";

const UPDATE_OPTIONS: &str = "UPDATE table_options SET expiration_us = $2, changelog_only = $3, mode = $4, \
    version = version + 1, updated_at = tidemark_now(), updated_by = $5 WHERE table_name = $1 AND version = $6";

// Old rows are found through the BRIN index on `at` and deleted by tuple
// id (history has no index on `id` alone).
const PRUNE_HISTORY: &str = "DELETE FROM history WHERE ctid IN (SELECT ctid FROM history \
    WHERE at < tidemark_now() - $1 * interval '1 microsecond' LIMIT $2)";

// A grant is only needed while it is its key's current lease (or recent
// enough that a stale caller should learn the current epoch).
const PRUNE_GRANTS: &str = "DELETE FROM lease_grants WHERE lease_id IN (SELECT g.lease_id FROM lease_grants g \
    WHERE g.granted_at < tidemark_now() - $1 * interval '1 microsecond' AND NOT EXISTS (SELECT 1 FROM consumer_keys k \
    WHERE k.table_name = g.table_name AND k.branch = g.branch AND k.consumer_id = g.consumer_id \
    AND k.lease_id = g.lease_id) LIMIT $2)";

const REGISTER_TABLE: &str = "WITH old AS (SELECT location FROM paimon_tables WHERE table_name = $1), \
    up AS (INSERT INTO paimon_tables (table_name, location, registered_at, registered_by, identity) \
    VALUES ($1, $2, tidemark_now(), $3, $4) ON CONFLICT (table_name) DO UPDATE SET location = EXCLUDED.location, \
    registered_at = EXCLUDED.registered_at, registered_by = EXCLUDED.registered_by, identity = EXCLUDED.identity \
    RETURNING 1) \
    DELETE FROM consumer_mirrors WHERE table_name = $1 AND EXISTS (SELECT 1 FROM old WHERE location <> $2)";

const SET_IDENTITY: &str =
    "UPDATE paimon_tables SET identity = $3 WHERE table_name = $1 AND location = $2 AND identity IS NULL";

/// What the mirror keeper checks: every consumer and live pin of registered
/// tables, with what its file was last written with.
const MIRROR_INVENTORY: &str = concat!(
    "SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot, k.consumer_updated_at, ",
    "k.lease_id, m.mirrored_next, coalesce(k.next_snapshot IS NOT NULL AND ",
    unexpired!(),
    ", false) AS kept, ",
    "CASE WHEN k.full_scan_pin IS NOT NULL AND ",
    live_lease!(),
    " THEN k.lease_id END AS pin_lease, ",
    "CASE WHEN k.full_scan_pin IS NOT NULL AND ",
    live_lease!(),
    " THEN k.full_scan_pin END AS pin_snapshot ",
    "FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name ",
    "LEFT JOIN table_options o ON o.table_name = k.table_name ",
    "LEFT JOIN consumer_mirrors m ON m.table_name = k.table_name AND m.branch = k.branch ",
    "AND m.consumer_id = k.consumer_id ",
    "WHERE k.next_snapshot IS NOT NULL OR (k.full_scan_pin IS NOT NULL AND ",
    live_lease!(),
    ") ORDER BY k.table_name, k.branch, k.consumer_id"
);

const APPEND_HISTORY: &str = "INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, \
    epoch, lease_id, batch_id, holder, principal, request_id, detail) \
    VALUES (tidemark_now(), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";

const UNREGISTER_TABLE: &str = "WITH m AS (DELETE FROM consumer_mirrors WHERE table_name = $1) \
    DELETE FROM paimon_tables WHERE table_name = $1";

const REGISTERED_TABLES: &str =
    "SELECT table_name, location, registered_at, registered_by, identity FROM paimon_tables ORDER BY table_name";

/// Consumers of registered tables whose file is stale, then files of
/// consumers that are gone; failing ones last.
const MIRROR_TASKS: &str = "SELECT * FROM ( \
    SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot, k.consumer_updated_at, \
    coalesce(m.failures, 0) AS failures \
    FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name \
    LEFT JOIN consumer_mirrors m ON m.table_name = k.table_name AND m.branch = k.branch AND m.consumer_id = k.consumer_id \
    WHERE (k.next_snapshot IS NOT NULL AND (m.mirrored_next IS DISTINCT FROM k.next_snapshot \
    OR m.mirrored_updated_at IS NULL OR k.consumer_updated_at > m.mirrored_updated_at + $1 * interval '1 microsecond')) \
    OR (k.next_snapshot IS NULL AND m.mirrored_next IS NOT NULL) \
    UNION ALL \
    SELECT m.table_name, m.branch, m.consumer_id, t.location, NULL::bigint, NULL::timestamptz, m.failures \
    FROM consumer_mirrors m JOIN paimon_tables t ON t.table_name = m.table_name \
    WHERE m.mirrored_next IS NOT NULL AND NOT EXISTS (SELECT 1 FROM consumer_keys k WHERE k.table_name = m.table_name \
    AND k.branch = m.branch AND k.consumer_id = m.consumer_id)) w \
    ORDER BY failures, table_name, branch, consumer_id LIMIT $2";

const MIRROR_DONE: &str = "INSERT INTO consumer_mirrors AS m (table_name, branch, consumer_id, mirrored_next, \
    mirrored_updated_at, mirrored_at, failures, last_error) VALUES ($1, $2, $3, $4, $5, tidemark_now(), 0, NULL) \
    ON CONFLICT (table_name, branch, consumer_id) DO UPDATE SET mirrored_next = EXCLUDED.mirrored_next, \
    mirrored_updated_at = EXCLUDED.mirrored_updated_at, mirrored_at = EXCLUDED.mirrored_at, failures = 0, last_error = NULL";

const MIRROR_FAILED: &str = "INSERT INTO consumer_mirrors AS m (table_name, branch, consumer_id, failures, last_error) \
    VALUES ($1, $2, $3, 1, $4) ON CONFLICT (table_name, branch, consumer_id) DO UPDATE \
    SET failures = m.failures + 1, last_error = EXCLUDED.last_error";

const MIRROR_STATE: &str = "SELECT mirrored_next, mirrored_updated_at, mirrored_at, failures, last_error \
    FROM consumer_mirrors WHERE table_name = $1 AND branch = $2 AND consumer_id = $3";

/// The grant and history CTEs shared by both writes; `$G` is the "a lease
/// was granted" flag, `$P`/`$R` principal and request id, then the eight
/// history arrays.
macro_rules! write_tail {
    ($source:literal, $grant:literal, $p:literal, $r:literal, $a:literal, $b:literal, $c:literal, $d:literal,
     $e:literal, $f:literal, $g:literal, $h:literal) => {
        concat!(
            ", grant_row AS (",
            "INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, granted_at) ",
            "SELECT $9, w.table_name, w.branch, w.consumer_id, $11, $10, $14 FROM ",
            $source,
            " w WHERE ",
            $grant,
            "), events AS (",
            "INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, epoch, lease_id, ",
            "batch_id, holder, principal, request_id, detail) ",
            "SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, e.event, e.old_next, e.new_next, ",
            "e.epoch, ",
            "e.lease_id, ",
            "e.batch_id, e.holder, ",
            $p,
            ", ",
            $r,
            ", e.detail FROM ",
            $source,
            " w, unnest(",
            $a,
            "::text[], ",
            $b,
            "::int8[], ",
            $c,
            "::int8[], ",
            $d,
            "::int8[], ",
            $e,
            "::uuid[], ",
            $f,
            "::int8[], ",
            $g,
            "::text[], ",
            $h,
            "::text[]) AS e(event, old_next, new_next, epoch, lease_id, batch_id, holder, detail)",
            ") SELECT count(*), (SELECT t FROM clock) FROM ",
            $source
        )
    };
}

/// The row's lock, then the clock (SPEC §1): deadlines are judged, and the
/// write stamped, by one reading of the database clock taken once the row is
/// locked, so a write that waited on a lock is judged by when it lands.
/// Every update below starts with these CTEs and joins `clock`: the join
/// reads the clock (so takes the lock) before the row is updated; read only
/// afterwards, the lock would skip the row this very statement updated.
macro_rules! lock_then_clock {
    () => {
        concat!(
            "WITH locked AS (SELECT 1 FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 ",
            "FOR UPDATE), clock AS (SELECT tidemark_write_now() AS t FROM locked), "
        )
    };
}

const UPDATE_ROW: &str = concat!(
    lock_then_clock!(),
    "written AS (UPDATE consumer_keys SET version = version + 1, epoch = $4, next_snapshot = $5, ",
    "consumer_created_at = $6, consumer_updated_at = $7, latest_snapshot = $8, lease_id = $9, lease_holder = $10, ",
    "lease_epoch = $11, lease_status = $12, lease_ttl_us = $13, lease_acquired_at = $14, lease_deadline = $15, ",
    "last_batch_id = $16, last_end_snapshot = $17, last_end_index = $18, last_end_full = $19, ",
    "last_end_total_splits = $20, lease_wrote_consumer = $21, legacy_warned_snapshot = $22, full_scan_pin = $23, ",
    "lease_principal = $24 FROM clock ",
    "WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 AND version = $25 ",
    "AND (NOT $26 OR (lease_status = 1 AND lease_deadline > clock.t)) ",
    "AND ($38::timestamptz IS NULL OR (clock.t >= $38 AND clock.t < $38 + $39 * interval '1 microsecond')) ",
    "RETURNING table_name, branch, consumer_id)",
    write_tail!(
        "written", "$27", "$28", "$29", "$30", "$31", "$32", "$33", "$34", "$35", "$36", "$37"
    )
);

/// The columns an update writes and the conditions it checks ($1..$26,
/// then the decided-at check on `$dec`/`$tol`), shared by the lean
/// variants below.
macro_rules! update_key_row {
    ($dec:literal, $tol:literal) => {
        concat!(
            "UPDATE consumer_keys SET version = version + 1, epoch = $4, next_snapshot = $5, ",
            "consumer_created_at = $6, consumer_updated_at = $7, latest_snapshot = $8, lease_id = $9, ",
            "lease_holder = $10, lease_epoch = $11, lease_status = $12, lease_ttl_us = $13, lease_acquired_at = $14, ",
            "lease_deadline = $15, last_batch_id = $16, last_end_snapshot = $17, last_end_index = $18, ",
            "last_end_full = $19, last_end_total_splits = $20, lease_wrote_consumer = $21, ",
            "legacy_warned_snapshot = $22, full_scan_pin = $23, lease_principal = $24 FROM clock ",
            "WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 AND version = $25 ",
            "AND (NOT $26 OR (lease_status = 1 AND lease_deadline > clock.t)) ",
            "AND (",
            $dec,
            "::timestamptz IS NULL OR (clock.t >= ",
            $dec,
            " AND clock.t < ",
            $dec,
            " + ",
            $tol,
            " * interval '1 microsecond')) "
        )
    };
}

/// The commonest writes, without arrays or the grant step: an update with
/// no history row (a renewal) ...
const UPDATE_ROW_NO_EVENT: &str = concat!(
    lock_then_clock!(),
    "written AS (",
    update_key_row!("$27", "$28"),
    "RETURNING 1) SELECT (SELECT t FROM clock) FROM written"
);

/// ... and an update with exactly one history row (a commit).
const UPDATE_ROW_ONE_EVENT: &str = concat!(
    lock_then_clock!(),
    "written AS (",
    update_key_row!("$27", "$28"),
    "RETURNING table_name, branch, consumer_id) ",
    "INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, epoch, lease_id, ",
    "batch_id, holder, principal, request_id, detail) ",
    "SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38 ",
    "FROM written w RETURNING at"
);

/// ... and the same, unless another transaction holds the row's lock (then
/// nothing is written and `locked` is false): group commit's batch of one.
const UPDATE_ROW_ONE_EVENT_UNLESS_LOCKED: &str = concat!(
    "WITH locked AS (SELECT 1 FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 ",
    "FOR UPDATE SKIP LOCKED), clock AS (SELECT tidemark_write_now() AS t FROM locked), written AS (",
    update_key_row!("$27", "$28"),
    "AND EXISTS (SELECT 1 FROM locked) RETURNING table_name, branch, consumer_id), ",
    "logged AS (INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, epoch, ",
    "lease_id, batch_id, holder, principal, request_id, detail) ",
    "SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $29, $30, $31, $32, $33, $34, $35, $36, ",
    "$37, $38 FROM written w) ",
    "SELECT EXISTS (SELECT 1 FROM locked) AS locked, EXISTS (SELECT 1 FROM written) AS written, ",
    "coalesce((SELECT t FROM clock), tidemark_write_now()) AS at"
);

const INSERT_ROW: &str = concat!(
    "WITH clock AS (SELECT tidemark_write_now() AS t), written AS (INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, ",
    "consumer_created_at, consumer_updated_at, latest_snapshot, lease_id, lease_holder, lease_epoch, lease_status, ",
    "lease_ttl_us, lease_acquired_at, lease_deadline, last_batch_id, last_end_snapshot, last_end_index, ",
    "last_end_full, last_end_total_splits, lease_wrote_consumer, legacy_warned_snapshot, full_scan_pin, ",
    "lease_principal) ",
    "VALUES ($1, $2, $3, 1, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, ",
    "$22, $23, $24) ON CONFLICT DO NOTHING RETURNING table_name, branch, consumer_id)",
    write_tail!(
        "written", "$25", "$26", "$27", "$28", "$29", "$30", "$31", "$32", "$33", "$34", "$35"
    )
);

type PgQuery<'q> = Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Binds `$1..$24`: the key and every row column.
fn bind_row<'q>(query: PgQuery<'q>, key: &ConsumerKey, row: KeyRow) -> PgQuery<'q> {
    query
        .bind(key.table.as_str().to_owned())
        .bind(key.branch.as_str().to_owned())
        .bind(key.consumer_id.as_str().to_owned())
        .bind(row.epoch)
        .bind(row.next_snapshot)
        .bind(row.consumer_created_at.map(ts))
        .bind(row.consumer_updated_at.map(ts))
        .bind(row.latest_snapshot)
        .bind(row.lease_id)
        .bind(row.lease_holder)
        .bind(row.lease_epoch)
        .bind(row.lease_status)
        .bind(row.lease_ttl_us)
        .bind(row.lease_acquired_at.map(ts))
        .bind(row.lease_deadline.map(ts))
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

fn bind_tail<'q>(query: PgQuery<'q>, change: &Change<'_>) -> PgQuery<'q> {
    let events = EventColumns::new(change.events);
    query
        .bind(change.new_grant.is_some())
        .bind(change.ctx.principal.clone())
        .bind(change.ctx.request_id.clone())
        .bind(events.event)
        .bind(events.old_next)
        .bind(events.new_next)
        .bind(events.epoch)
        .bind(events.lease_id)
        .bind(events.batch_id)
        .bind(events.holder)
        .bind(events.detail)
}

/// A compare-and-set update with one history row, as its own statement.
pub(crate) async fn write_one_event(pool: &PgPool, write: &OneEventWrite) -> Outcome {
    let written = bind_one_event(UPDATE_ROW_ONE_EVENT, write).fetch_optional(pool).await?;
    written
        .map(|row| Ok(from_ts(row.try_get(0)?)))
        .transpose()
        .map_err(|e: sqlx::Error| e.into())
}

/// The same, unless another transaction holds the row's lock.
pub(crate) async fn write_one_event_unless_locked(pool: &PgPool, write: &OneEventWrite) -> Result<Applied, StoreError> {
    let row = bind_one_event(UPDATE_ROW_ONE_EVENT_UNLESS_LOCKED, write)
        .fetch_one(pool)
        .await?;
    Ok(Applied::decode(&row)?)
}

fn bind_one_event<'q>(sql: &'static str, write: &'q OneEventWrite) -> PgQuery<'q> {
    let event = &write.event;
    bind_row(sqlx::query(sql), &write.key, write.row.clone())
        .bind(write.version)
        .bind(write.requires_live_lease)
        .bind(write.decided_at)
        .bind(duration_micros(DECIDED_AT_TOLERANCE))
        .bind(event.kind.as_str())
        .bind(event.old_next)
        .bind(event.new_next)
        .bind(event.epoch)
        .bind(event.lease_id)
        .bind(event.batch_id)
        .bind(event.holder.clone())
        .bind(write.principal.clone())
        .bind(write.request_id.clone())
        .bind(event.detail.clone())
}

fn decode_loaded(row: &PgRow) -> Result<Loaded, StoreError> {
    let now = from_ts(row.try_get("db_now")?);
    let options = Decoder::options(row)?;
    // The LEFT JOIN yields NULL key columns when the key has no row.
    if row.try_get::<Option<String>, _>("table_name")?.is_none() {
        return Ok(Loaded {
            state: None,
            version: None,
            now,
            options,
        });
    }
    let (state, version) = Decoder::key_row(row)?;
    Ok(Loaded {
        state: Some(state),
        version: Some(version),
        now,
        options,
    })
}

#[async_trait]
impl Backend for PostgresBackend {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        // sqlx takes a Postgres advisory lock around the run, so replicas
        // starting at once apply each migration exactly once.
        MIGRATOR.run(&self.pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(inner) => StoreError::from(inner),
            other => StoreError::Internal(format!("migration failed: {other}")),
        })
    }

    async fn load(&self, locate: Locate<'_>) -> Result<Loaded, StoreError> {
        let row = match locate {
            Locate::Key(key) => {
                sqlx::query(LOAD_BY_KEY)
                    .bind(key.table.as_str())
                    .bind(key.branch.as_str())
                    .bind(key.consumer_id.as_str())
                    .fetch_one(&self.pool)
                    .await?
            }
            Locate::Lease(lease_id) => sqlx::query(LOAD_BY_LEASE).bind(lease_id).fetch_one(&self.pool).await?,
        };
        decode_loaded(&row)
    }

    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<Option<Timestamp>, StoreError> {
        let key = &change.state.key;
        let row = KeyRow::from_state(change.state);
        if let (Some(version), None) = (loaded.version, change.new_grant) {
            match change.events {
                [] => {
                    let written = bind_row(sqlx::query(UPDATE_ROW_NO_EVENT), key, row)
                        .bind(version)
                        .bind(change.requires_live_lease)
                        .bind(change.decided_at.map(ts))
                        .bind(duration_micros(DECIDED_AT_TOLERANCE))
                        .fetch_optional(&self.pool)
                        .await?;
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
                        decided_at: change.decided_at.map(ts),
                        event: event.clone(),
                        principal: change.ctx.principal.clone(),
                        request_id: change.ctx.request_id.clone(),
                    };
                    return match &self.group {
                        Some(group) => group.write(write).await,
                        None => write_one_event(&self.pool, &write).await,
                    };
                }
                _ => {}
            }
        }
        let query = match loaded.version {
            Some(version) => bind_tail(
                bind_row(sqlx::query(UPDATE_ROW), key, row)
                    .bind(version)
                    .bind(change.requires_live_lease),
                change,
            )
            .bind(change.decided_at.map(ts))
            .bind(duration_micros(DECIDED_AT_TOLERANCE)),
            None => bind_tail(bind_row(sqlx::query(INSERT_ROW), key, row), change),
        };
        let row = query.fetch_one(&self.pool).await?;
        let written: i64 = row.try_get(0)?;
        if written != 1 {
            return Ok(None);
        }
        Ok(Some(from_ts(row.try_get(1)?)))
    }

    async fn load_with_history(
        &self,
        key: &ConsumerKey,
        limit: i64,
    ) -> Result<(Loaded, Vec<HistoryRecord>), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(LOAD_BY_KEY)
            .bind(key.table.as_str())
            .bind(key.branch.as_str())
            .bind(key.consumer_id.as_str())
            .fetch_one(&mut *tx)
            .await?;
        let history = sqlx::query(HISTORY_PAGE)
            .bind(key.table.as_str())
            .bind(Some(key.branch.as_str()))
            .bind(Some(key.consumer_id.as_str()))
            .bind(None::<i64>)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let history = history.iter().map(Decoder::history).collect::<Result<_, _>>()?;
        Ok((decode_loaded(&row)?, history))
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
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(Decoder::history).collect()
    }

    async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        let Some(row) = sqlx::query(TABLE_OPTIONS)
            .bind(table.as_str())
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(StoredOptions::default());
        };
        Ok(StoredOptions {
            options: Decoder::options(&row)?,
            version: Some(row.try_get("version")?),
            updated_at: Some(from_ts(row.try_get("updated_at")?)),
            updated_by: Some(row.try_get("updated_by")?),
        })
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
        .bind(ctx.principal.clone());
        let query = match previous.version {
            None => query,
            Some(version) => query.bind(version),
        };
        Ok(query.execute(&self.pool).await?.rows_affected() == 1)
    }

    async fn list_keys(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        limit: i64,
    ) -> Result<Listed, StoreError> {
        let rows = sqlx::query(LIST_KEYS)
            .bind(filter.table.as_ref().map(TableName::as_str))
            .bind(filter.branch.as_ref().map(BranchName::as_str))
            .bind(filter.consumer_id_prefix.as_deref())
            .bind(after.map(|k| k.table.as_str()))
            .bind(after.map(|k| k.branch.as_str()))
            .bind(after.map(|k| k.consumer_id.as_str()))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        let now = match rows.first() {
            Some(row) => from_ts(row.try_get("db_now")?),
            None => Timestamp::default(),
        };
        let rows = rows
            .iter()
            .map(|row| Ok((Decoder::key_row(row)?.0, Decoder::options(row)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Listed { now, rows })
    }

    async fn branch_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        let rows = sqlx::query(BRANCH_VIEW)
            .bind(table.as_str())
            .bind(branch.as_str())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        let head = rows.first().ok_or(StoreError::Contention)?;
        let mut view = BranchView {
            now: from_ts(head.try_get("db_now")?),
            options: Decoder::options(head)?,
            consumers: Vec::new(),
            pins: Vec::new(),
        };
        for row in &rows {
            match row.try_get::<Option<i32>, _>("kind")? {
                Some(0) => view.consumers.push(Decoder::key_row(row)?.0),
                Some(_) => view.pins.push(Decoder::key_row(row)?.0),
                None => {}
            }
        }
        view.sort();
        Ok(view)
    }

    async fn expired_keys(
        &self,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
    ) -> Result<Vec<ConsumerKey>, StoreError> {
        let rows = sqlx::query(EXPIRED_KEYS)
            .bind(table.map(TableName::as_str))
            .bind(branch.map(BranchName::as_str))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ConsumerKey::from_trusted(
                    &row.try_get::<String, _>("table_name")?,
                    &row.try_get::<String, _>("branch")?,
                    &row.try_get::<String, _>("consumer_id")?,
                ))
            })
            .collect()
    }

    async fn prune(&self, older_than: Duration, limit: i64) -> Result<Pruned, StoreError> {
        let history = sqlx::query(PRUNE_HISTORY)
            .bind(duration_micros(older_than))
            .bind(limit)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let grants = sqlx::query(PRUNE_GRANTS)
            .bind(duration_micros(older_than))
            .bind(limit)
            .execute(&self.pool)
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
        sqlx::query(REGISTER_TABLE)
            .bind(table.as_str())
            .bind(location)
            .bind(ctx.principal.clone())
            .bind(identity)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn set_table_identity(&self, table: &TableName, location: &str, identity: &str) -> Result<(), StoreError> {
        sqlx::query(SET_IDENTITY)
            .bind(table.as_str())
            .bind(location)
            .bind(identity)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn mirror_inventory(&self) -> Result<Vec<MirrorEntry>, StoreError> {
        let rows = sqlx::query(MIRROR_INVENTORY).fetch_all(&self.pool).await?;
        rows.iter().map(Decoder::mirror_entry).collect()
    }

    async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        let columns = EventColumns::new(events);
        let mut tx = self.pool.begin().await?;
        for i in 0..events.len() {
            sqlx::query(APPEND_HISTORY)
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
        tx.commit().await?;
        Ok(())
    }

    async fn unregister_table(&self, table: &TableName) -> Result<bool, StoreError> {
        let deleted = sqlx::query(UNREGISTER_TABLE)
            .bind(table.as_str())
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(deleted > 0)
    }

    async fn registered_tables(&self) -> Result<Vec<RegisteredTable>, StoreError> {
        let rows = sqlx::query(REGISTERED_TABLES).fetch_all(&self.pool).await?;
        rows.iter().map(Decoder::registered).collect()
    }

    async fn mirror_tasks(&self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError> {
        let rows = sqlx::query(MIRROR_TASKS)
            .bind(duration_micros(refresh))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(Decoder::mirror_task).collect()
    }

    async fn mirror_done(&self, task: &MirrorTask, error: Option<&str>) -> Result<(), StoreError> {
        let key = &task.key;
        let query = match error {
            None => sqlx::query(MIRROR_DONE)
                .bind(key.table.as_str())
                .bind(key.branch.as_str())
                .bind(key.consumer_id.as_str())
                .bind(task.next_snapshot)
                .bind(task.updated_at.map(ts)),
            Some(error) => sqlx::query(MIRROR_FAILED)
                .bind(key.table.as_str())
                .bind(key.branch.as_str())
                .bind(key.consumer_id.as_str())
                .bind(error.to_owned()),
        };
        query.execute(&self.pool).await?;
        Ok(())
    }

    async fn mirror_state(&self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError> {
        let row = sqlx::query(MIRROR_STATE)
            .bind(key.table.as_str())
            .bind(key.branch.as_str())
            .bind(key.consumer_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(Decoder::mirror_state).transpose()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        // Twice: the first attempt may land on a pooled connection that died
        // with a database restart (it is then discarded).
        match sqlx::query("SELECT 1").execute(&self.pool).await {
            Ok(_) => Ok(()),
            Err(_) => {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }
        }
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}
