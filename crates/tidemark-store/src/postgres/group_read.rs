//! Group reads for the Postgres backend.
//!
//! Every call that reads a key (a recovery position above all) is one
//! primary-key read, and on a busy replica most of its cost is the round
//! trip: the pool, the protocol, and a backend woken for one row. Here reads
//! queue for a few in-flight slots, and whatever queued while the slots were
//! busy goes to the database as one statement. A read is only ever sent
//! after its call arrived, so it sees every write acknowledged before the
//! call: nothing is answered from memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use super::db::Db;
use sqlx::Row;
use tidemark_core::ConsumerKey;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::batch::{Batcher, Job};
use super::keys::{LOAD_BY_KEY, decode_loaded};
use crate::backend::Loaded;
use crate::error::StoreError;
use crate::row::KeyRow;

/// Most reads one statement carries.
const MAX_BATCH: usize = 64;

/// Metric names (Prometheus, through the `metrics` facade).
pub mod metric_names {
    /// Counter: key-read statements sent (their reads / this = the mean
    /// batch size).
    pub const STATEMENTS: &str = "tidemark_read_statements_total";
    /// Counter: reads those statements carried.
    pub const STATEMENT_READS: &str = "tidemark_read_statement_reads_total";
}

type Answer = Result<Loaded, StoreError>;

struct Queued {
    key: ConsumerKey,
    reply: oneshot::Sender<Answer>,
    /// The caller's span, which the statement's span links to.
    caller: Option<tidemark_trace::SpanContext>,
}

impl Job for Queued {
    /// Reads of one key may share a statement.
    type Key = ();
    fn key(&self) -> Option<&()> {
        None
    }
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// The queue in front of the database (see the `batch` module).
#[derive(Debug)]
pub(crate) struct GroupRead {
    batcher: Batcher<Queued>,
    counts: Arc<Counts>,
}

/// How many reads went through how many statements.
#[derive(Debug, Default)]
struct Counts {
    statements: AtomicU64,
    reads: AtomicU64,
}

/// Group reads' work so far: `reads` key reads sent in `statements`
/// statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupReadStats {
    /// Statements sent (including statements of one read).
    pub statements: u64,
    /// Reads carried by them.
    pub reads: u64,
}

impl GroupRead {
    /// Reads go through at most `in_flight` statements at a time, fallbacks
    /// included; at most `in_flight` × [`MAX_BATCH`] × 4 wait.
    pub(crate) fn new(pool: Db, in_flight: usize) -> Self {
        let counts: Arc<Counts> = Arc::default();
        let (limit, distrust) = (pool.statement_limit, pool.distrust.clone());
        let batcher = {
            let counts = Arc::clone(&counts);
            Batcher::new(
                "read",
                in_flight,
                MAX_BATCH,
                in_flight.max(1) * MAX_BATCH * 4,
                move |batch| {
                    let (pool, counts) = (pool.clone(), Arc::clone(&counts));
                    async move {
                        counts.statements.fetch_add(1, Ordering::Relaxed);
                        counts.reads.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        metrics::counter!(metric_names::STATEMENTS).increment(1);
                        metrics::counter!(metric_names::STATEMENT_READS).increment(batch.len() as u64);
                        let span = tidemark_trace::statement(
                            "postgres",
                            "group read",
                            batch.len(),
                            batch.iter().filter_map(|q: &Queued| q.caller.as_ref()),
                        );
                        apply(&pool, batch).instrument(span).await;
                    }
                },
            )
            .bounded_by(limit, distrust)
        };
        Self { batcher, counts }
    }

    /// The work done so far.
    pub(crate) fn stats(&self) -> GroupReadStats {
        GroupReadStats {
            statements: self.counts.statements.load(Ordering::Relaxed),
            reads: self.counts.reads.load(Ordering::Relaxed),
        }
    }

    /// Reads `key`, alone or with whatever else is waiting; `OVERLOADED`
    /// when too many reads already wait.
    pub(crate) async fn read(&self, key: &ConsumerKey) -> Answer {
        let (reply, answer) = oneshot::channel();
        self.batcher.submit(Queued {
            key: key.clone(),
            reply,
            caller: tidemark_trace::caller(),
        })?;
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the read was abandoned (no answer from the database in time, or shutting down)".into(),
            ))
        })
    }
}

/// Reads a batch and answers every caller; a batch that failed for a
/// reason of its own is read again one by one, still inside its slot.
async fn apply(pool: &Db, batch: Vec<Queued>) {
    if let [queued] = batch.as_slice() {
        // Alone, the lean statement.
        let answer = read_one(pool, &queued.key).await;
        if let Some(queued) = batch.into_iter().next() {
            let _ = queued.reply.send(answer);
        }
        return;
    }
    match read_many(pool, &batch).await {
        Ok(answers) => {
            for (queued, answer) in batch.into_iter().zip(answers) {
                let _ = queued.reply.send(answer);
            }
        }
        // The database is unreachable, timed the statement out or is
        // locked: so it is for each of them.
        Err(e) if e.concerns_the_database() => {
            for queued in batch {
                let _ = queued.reply.send(Err(e.same_condition()));
            }
        }
        // Each read goes again on its own, so none fails for another.
        Err(e) => {
            tracing::debug!(error = %e, size = batch.len(), "batched read failed; reading one by one");
            futures::future::join_all(batch.into_iter().filter(|q| !q.abandoned()).map(|queued| async move {
                let answer = read_one(pool, &queued.key).await;
                let _ = queued.reply.send(answer);
            }))
            .await;
        }
    }
}

async fn read_one(pool: &Db, key: &ConsumerKey) -> Answer {
    let row = crate::decode::bind_key(sqlx::query(LOAD_BY_KEY.as_str()), key)
        .fetch_one(pool)
        .await?;
    decode_loaded(&row)
}

/// The batched read: every key once per position in the batch, with the
/// same columns as the single read, one database clock for all.
pub(super) static READ_MANY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT q.ord, tidemark_now() AS db_now, {row}, {options}
         FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS q(q_table, q_branch, q_consumer, ord)
         LEFT JOIN consumer_keys k ON k.table_name = q.q_table AND k.branch = q.q_branch AND k.consumer_id = q.q_consumer
         LEFT JOIN table_options o ON o.table_name = q.q_table",
        row = KeyRow::select_list("k"),
        options = super::OPTION_COLUMNS,
    )
});

/// One statement for the whole batch; per read, its answer.
async fn read_many(pool: &Db, batch: &[Queued]) -> Result<Vec<Answer>, StoreError> {
    let keys = || batch.iter().map(|q| &q.key);
    let rows = sqlx::query(READ_MANY.as_str())
        .bind(keys().map(|k| k.table.as_str().to_owned()).collect::<Vec<_>>())
        .bind(keys().map(|k| k.branch.as_str().to_owned()).collect::<Vec<_>>())
        .bind(keys().map(|k| k.consumer_id.as_str().to_owned()).collect::<Vec<_>>())
        .fetch_all(pool)
        .await?;
    let mut answers: Vec<Option<Answer>> = (0..batch.len()).map(|_| None).collect();
    for row in rows {
        let ord: i64 = row.try_get("ord")?;
        if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| answers.get_mut(i)) {
            *slot = Some(decode_loaded(&row));
        }
    }
    Ok(answers
        .into_iter()
        .map(|answer| answer.unwrap_or_else(|| Err(StoreError::Internal("the batched read lost a row".into()))))
        .collect())
}
