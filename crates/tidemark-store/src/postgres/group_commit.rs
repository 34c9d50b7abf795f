//! Group commit for the Postgres backend.
//!
//! A commit is one compare-and-set update plus one history row. When many
//! arrive at once, each as its own statement and transaction, Postgres
//! spends most of its time on per-statement and per-transaction work
//! (parse, bind, snapshot, WAL flush) and the server on per-query round
//! trips. Here they queue for a few in-flight slots; whatever queued while
//! the slots were busy goes to the database as one statement that applies
//! each write on its own terms (its own version, live-lease and clock
//! checks) and reports which were applied. A batch never waits for a row
//! lock: a write whose row another transaction holds is sent again on its
//! own after the batch, outside the batch slots (so it cannot hold up the
//! writes behind it) but within a bound of its own.
//!
//! The single form of the same write (one update and its history row, as
//! its own statement) lives here too: it is what a batch of one and a
//! write without group commit send.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use super::db::Db;
use sqlx::Row;
use sqlx::postgres::PgRow;
use tidemark_core::{ConsumerKey, HistoryEvent, Timestamp};
use tokio::sync::{Semaphore, oneshot};
use tracing::Instrument;

use super::batch::{Batcher, Job};
use super::from_ts;
use super::update::{LOCK_THEN_CLOCK, bind_checks, update_key_row};
use crate::decode;
use crate::error::StoreError;
use crate::history_row::{EVENT_COLUMNS, HistoryRow, insert_history};
use crate::row::{KeyRow, PgQuery, Placeholders};

/// Most writes one statement carries.
const MAX_BATCH: usize = 64;

/// Commit statements do not wait for more writes by default: waiting cuts
/// Postgres's CPU per commit by a third or more, but slows workers that
/// commit in a closed loop (docs/bench/HISTORY.md, step 7).
pub(crate) const DEFAULT_WAIT: Duration = Duration::ZERO;

/// Metric names (Prometheus, through the `metrics` facade).
pub mod metric_names {
    /// Counter: commit statements sent (their writes / this = the mean
    /// batch size).
    pub const STATEMENTS: &str = "tidemark_commit_statements_total";
    /// Counter: writes those statements carried.
    pub const STATEMENT_WRITES: &str = "tidemark_commit_statement_writes_total";
    /// Counter: writes sent again on their own (row locked elsewhere, or
    /// their batch failed as a whole).
    pub const WRITES_ALONE: &str = "tidemark_commit_writes_alone_total";
}

/// One compare-and-set write with exactly one history row.
#[derive(Debug)]
pub(crate) struct OneEventWrite {
    pub key: ConsumerKey,
    pub row: KeyRow,
    pub version: i64,
    pub requires_live_lease: bool,
    pub estimated_now: Option<Timestamp>,
    /// When the write was decided: its stamps move to the write's reading.
    pub decided: Timestamp,
    pub event: HistoryEvent,
    pub principal: String,
    pub request_id: String,
}

/// What a write came to: `Some(database time)` when applied, `None` when
/// the row had moved on (nothing written).
pub(crate) type Outcome = Result<Option<Timestamp>, StoreError>;

struct Queued {
    write: OneEventWrite,
    reply: oneshot::Sender<Outcome>,
    /// The caller's span, which the statement's span links to.
    caller: Option<tidemark_trace::SpanContext>,
}

impl Job for Queued {
    type Key = ConsumerKey;
    fn key(&self) -> Option<&ConsumerKey> {
        Some(&self.write.key)
    }
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// The queue in front of the database (see the `batch` module).
#[derive(Debug)]
pub(crate) struct GroupCommit {
    batcher: Batcher<Queued>,
    counts: Arc<Counts>,
}

/// How many writes went through how many statements.
#[derive(Debug, Default)]
struct Counts {
    statements: AtomicU64,
    writes: AtomicU64,
    alone: AtomicU64,
}

/// Group commit's work so far: `writes` one-event writes sent in
/// `statements` statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Statements sent (batches, including batches of one).
    pub statements: u64,
    /// Writes carried by them.
    pub writes: u64,
    /// Writes sent again on their own: their row was locked by another
    /// transaction, or their batch failed as a whole.
    pub alone: u64,
}

impl GroupCommit {
    /// Writes go through at most `in_flight` batch statements at a time,
    /// and at most `in_flight` more writes on their own (a row locked
    /// elsewhere); at most `in_flight` × [`MAX_BATCH`] × 4 wait. A
    /// statement waits up to `gather` for the callers of the last one to
    /// come back (see the `batch` module).
    pub(crate) fn new(pool: Db, in_flight: usize, gather: Duration) -> Self {
        let counts: Arc<Counts> = Arc::default();
        let alone = Arc::new(Semaphore::new(in_flight.max(1)));
        let (limit, distrust) = (pool.statement_limit, pool.distrust.clone());
        let batcher = {
            let counts = Arc::clone(&counts);
            Batcher::new(
                "commit",
                in_flight,
                MAX_BATCH,
                in_flight.max(1) * MAX_BATCH * 4,
                move |batch| send(pool.clone(), batch, Arc::clone(&counts), Arc::clone(&alone)),
            )
            .gathering(gather)
            .bounded_by(limit, distrust)
        };
        Self { batcher, counts }
    }

    /// The work done so far.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            statements: self.counts.statements.load(Ordering::Relaxed),
            writes: self.counts.writes.load(Ordering::Relaxed),
            alone: self.counts.alone.load(Ordering::Relaxed),
        }
    }

    /// Applies `write`, alone or with whatever else is waiting; `OVERLOADED`
    /// when too many writes already wait.
    pub(crate) async fn write(&self, write: OneEventWrite) -> Outcome {
        let (reply, answer) = oneshot::channel();
        // Mutant: answer "written" as soon as the write is queued, before
        // its transaction commits (or even starts).
        let acknowledged_early = write
            .estimated_now
            .filter(|_| tidemark_core::mutant!("ack_before_commit"));
        self.batcher.submit(Queued {
            write,
            reply,
            caller: tidemark_trace::caller(),
        })?;
        if let Some(at) = acknowledged_early {
            tokio::spawn(answer);
            return Ok(Some(at));
        }
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the write was abandoned (no answer from the database in time, or shutting down): it may or may not \
                 have been applied; retry it"
                    .into(),
            ))
        })
    }
}

/// Sends one batch as one statement. Each write whose row another
/// transaction held goes again on its own, after the batch's slot is given
/// back (it may wait for the lock, and must not hold up the batches
/// behind it) but within `alone`'s permits, so those writes are bounded
/// too; one whose caller went away meanwhile is not sent.
async fn send(pool: Db, batch: Vec<Queued>, counts: Arc<Counts>, alone: Arc<Semaphore>) {
    counts.statements.fetch_add(1, Ordering::Relaxed);
    counts.writes.fetch_add(batch.len() as u64, Ordering::Relaxed);
    metrics::counter!(metric_names::STATEMENTS).increment(1);
    metrics::counter!(metric_names::STATEMENT_WRITES).increment(batch.len() as u64);
    let span = tidemark_trace::statement(
        "postgres",
        "group commit",
        batch.len(),
        batch.iter().filter_map(|q| q.caller.as_ref()),
    );
    for queued in apply(&pool, batch, &counts).instrument(span).await {
        let (pool, alone) = (pool.clone(), Arc::clone(&alone));
        tokio::spawn(async move {
            let Ok(_permit) = alone.acquire_owned().await else {
                return;
            };
            if !queued.abandoned() {
                write_alone(&pool, queued).await;
            }
        });
    }
}

/// Applies a batch and answers every caller but those whose row another
/// transaction had locked: those come back, to be written on their own.
async fn apply(pool: &Db, mut batch: Vec<Queued>, counts: &Counts) -> Vec<Queued> {
    // In key order: the batched statement locks its rows in the order it
    // is given them.
    batch.sort_by(|a, b| a.write.key.cmp(&b.write.key));
    let applied = match batch.as_slice() {
        // Alone, the lean statement: arrays and joins cost more than they
        // save.
        [queued] => write_one_event_unless_locked(pool, &queued.write)
            .await
            .map(|applied| vec![applied]),
        _ => write_many(pool, &batch).await,
    };
    match applied {
        Ok(applied) => {
            let mut busy = Vec::new();
            for (queued, outcome) in batch.into_iter().zip(applied) {
                match outcome {
                    Applied::Written(at) => drop(queued.reply.send(Ok(Some(at)))),
                    Applied::Moved => drop(queued.reply.send(Ok(None))),
                    Applied::Busy => busy.push(queued),
                }
            }
            counts.alone.fetch_add(busy.len() as u64, Ordering::Relaxed);
            metrics::counter!(metric_names::WRITES_ALONE).increment(busy.len() as u64);
            busy
        }
        // The database is unreachable, timed the statement out or is
        // locked: so it is for each of them.
        Err(e) if e.concerns_the_database() => {
            for queued in batch {
                let _ = queued.reply.send(Err(e.same_condition()));
            }
            Vec::new()
        }
        // Anything else rolled the whole statement back: each write goes
        // again on its own, so none fails for another.
        Err(e) => {
            tracing::debug!(error = %e, size = batch.len(), "batched write failed; writing one by one");
            counts.alone.fetch_add(batch.len() as u64, Ordering::Relaxed);
            metrics::counter!(metric_names::WRITES_ALONE).increment(batch.len() as u64);
            batch
        }
    }
}

/// Writes one on its own (it may wait for a row lock), then answers.
async fn write_alone(pool: &Db, queued: Queued) {
    let span = tidemark_trace::statement("postgres", "commit alone", 1, queued.caller.as_ref());
    let outcome = write_one_event(pool, &queued.write).instrument(span).await;
    let _ = queued.reply.send(outcome);
}

/// What the batched statement did with one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Written, at this database time.
    Written(Timestamp),
    /// Not written: the row moved on (another version, lease no longer
    /// live, clock check failed, or no row).
    Moved,
    /// Not tried: another transaction held the row's lock.
    Busy,
}

impl Applied {
    /// From a row with the columns `locked`, `written` and `at`.
    pub(crate) fn decode(row: &PgRow) -> Result<Self, sqlx::Error> {
        Ok(match (row.try_get("locked")?, row.try_get("written")?) {
            (_, true) => Applied::Written(from_ts(row.try_get("at")?)),
            (true, false) => Applied::Moved,
            // Mutant: a write skipped because another transaction held its
            // row is reported as written.
            (false, false) if tidemark_core::mutant!("group_commit_busy_as_written") => {
                Applied::Written(from_ts(row.try_get("at")?))
            }
            (false, false) => Applied::Busy,
        })
    }
}

/// One history row's values: who asked (`$8`, `$9`) and the event
/// (`$10`–`$17`), bound by [`bind_event`].
pub(super) static ONE_EVENT: LazyLock<String> = LazyLock::new(|| {
    insert_history(&format!(
        "SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $8, $9, {event} FROM written w",
        event = HistoryRow::placeholders(Placeholders::Dollar, 10)
    ))
});

/// The row's first bind in a write with one event (key, checks, who, event).
const ROW: usize = 10 + EVENT_COLUMNS;
/// ... and an update with exactly one history row (a commit;
/// `sql/update_row_one_event.sql` lists its binds) ...
pub(super) static UPDATE_ROW_ONE_EVENT: LazyLock<String> = LazyLock::new(|| {
    crate::sql_template::render(
        include_str!("sql/update_row_one_event.sql"),
        &[
            ("lock_then_clock", &LOCK_THEN_CLOCK),
            ("update", &update_key_row(4, ROW)),
            ("one_event", &ONE_EVENT),
        ],
    )
});

/// ... and the same, unless another transaction holds the row's lock (then
/// nothing is written and `locked` is false): group commit's batch of one
/// (`sql/update_row_one_event_unless_locked.sql`).
pub(super) static UPDATE_ROW_ONE_EVENT_UNLESS_LOCKED: LazyLock<String> = LazyLock::new(|| {
    crate::sql_template::render(
        include_str!("sql/update_row_one_event_unless_locked.sql"),
        &[("update", &update_key_row(4, ROW)), ("one_event", &ONE_EVENT)],
    )
});

fn bind_event<'q>(query: PgQuery<'q>, write: &'q OneEventWrite) -> PgQuery<'q> {
    let query = query.bind(write.principal.clone()).bind(write.request_id.clone());
    HistoryRow::from_event(&write.event).bind_pg(query)
}

fn bind_one_event<'q>(sql: &'static str, write: &'q OneEventWrite) -> PgQuery<'q> {
    let query = decode::bind_key(sqlx::query(sql), &write.key);
    let query = bind_checks(
        query,
        write.version,
        write.requires_live_lease,
        write.decided,
        write.estimated_now.is_some(),
    );
    write.row.clone().bind_pg(bind_event(query, write))
}

/// A compare-and-set update with one history row, as its own statement.
pub(super) async fn write_one_event(pool: &Db, write: &OneEventWrite) -> Outcome {
    let written = bind_one_event(&UPDATE_ROW_ONE_EVENT, write)
        .fetch_optional(pool)
        .await?;
    written
        .map(|row| Ok(from_ts(row.try_get(0)?)))
        .transpose()
        .map_err(|e: sqlx::Error| e.into())
}

/// The same, unless another transaction holds the row's lock.
pub(super) async fn write_one_event_unless_locked(pool: &Db, write: &OneEventWrite) -> Result<Applied, StoreError> {
    let row = bind_one_event(&UPDATE_ROW_ONE_EVENT_UNLESS_LOCKED, write)
        .fetch_one(pool)
        .await?;
    Ok(Applied::decode(&row)?)
}

/// The batched statement (`sql/write_many.sql`, which lists its binds):
/// every write's values as parallel arrays, in key order (`apply` sorts
/// the batch; `$1` is each write's place in it).
/// Each row is found through the primary key and locked in that order,
/// skipping any another transaction holds (so a batch never waits on a
/// lock, and two replicas' batches cannot deadlock), then updated only if
/// its own conditions hold, with its history row. Per write: whether its
/// row was locked, and whether it was written.
///
/// Why it is shaped so (docs/bench/HISTORY.md, "Step 3"):
/// - The lock is a lateral lookup per key: as a join, the planner hashed a
///   sequential scan of `consumer_keys` whenever its statistics were young
///   or the table small, and that scan read every dead version on its
///   pages.
/// - The update reaches each row by the address its lock returned (see
///   `LOCK_THEN_CLOCK` for why the address is safe) and reads the write's
///   values by subscript (`($n::type[])[ord + 1]`) rather than from a
///   relation of every array unnested: a row of that relation's forty
///   columns was copied whole for every row updated (the recheck of a
///   concurrently updated row needs it).
pub(super) static WRITE_MANY: LazyLock<String> = LazyLock::new(|| {
    // A write's element of each array: in the update, that of the locked
    // row `l`; in the history rows, that of the written row `w`.
    let (at, written_at) = ("l.ord + 1", "w.ord + 1");
    let element = |n: usize, ty: &str, at: &str| format!("(${n}::{ty}[])[{at}]");
    let checks = KeyRow::compare_and_set(
        "k.",
        &element(5, "int8", at),
        &element(6, "bool", at),
        &element(7, "timestamptz", at),
        &format!("${}::int8", 11 + EVENT_COLUMNS),
    );
    let logged = insert_history(&format!(
        "SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, {principal}, {request_id},
                    {events}
             FROM written w ORDER BY w.ord",
        principal = element(8, "text", written_at),
        request_id = element(9, "text", written_at),
        events = HistoryRow::array_elements(10, written_at)
    ));
    let decided = element(10 + EVENT_COLUMNS, "timestamptz", at);
    let assignments = KeyRow::assignments_from_arrays_restamped(12 + EVENT_COLUMNS, at, "k", &decided);
    crate::sql_template::render(
        include_str!("sql/write_many.sql"),
        &[("assignments", &assignments), ("checks", &checks), ("logged", &logged)],
    )
});

/// One statement for the whole batch; per write, what came of it.
async fn write_many(pool: &Db, batch: &[Queued]) -> Result<Vec<Applied>, StoreError> {
    let writes = || batch.iter().map(|q| &q.write);
    let ord: Vec<i32> = (0..batch.len()).map(|i| i32::try_from(i).unwrap_or(i32::MAX)).collect();
    let query = sqlx::query(WRITE_MANY.as_str())
        .bind(ord)
        .bind(writes().map(|w| w.key.table.as_str().to_owned()).collect::<Vec<_>>())
        .bind(writes().map(|w| w.key.branch.as_str().to_owned()).collect::<Vec<_>>())
        .bind(
            writes()
                .map(|w| w.key.consumer_id.as_str().to_owned())
                .collect::<Vec<_>>(),
        )
        .bind(writes().map(|w| w.version).collect::<Vec<_>>())
        .bind(writes().map(|w| w.requires_live_lease).collect::<Vec<_>>())
        .bind(writes().map(|w| w.estimated_now.map(super::ts)).collect::<Vec<_>>())
        .bind(writes().map(|w| w.principal.clone()).collect::<Vec<_>>())
        .bind(writes().map(|w| w.request_id.clone()).collect::<Vec<_>>());
    let events: Vec<HistoryRow> = writes().map(|w| HistoryRow::from_event(&w.event)).collect();
    let query = HistoryRow::bind_pg_arrays(events.iter(), query)
        .bind(writes().map(|w| super::ts(w.decided)).collect::<Vec<_>>())
        .bind(tidemark_core::time::duration_micros(
            crate::backend::ESTIMATED_NOW_TOLERANCE,
        ));
    let answered = KeyRow::bind_pg_arrays(writes().map(|w| &w.row), query)
        .fetch_all(pool)
        .await?;
    let mut applied = vec![Applied::Busy; batch.len()];
    for row in answered {
        let ord: i32 = row.try_get("ord")?;
        let outcome = Applied::decode(&row)?;
        if let Some(slot) = usize::try_from(ord).ok().and_then(|i| applied.get_mut(i)) {
            *slot = outcome;
        }
    }
    Ok(applied)
}
