//! Readiness on Postgres: a probe that proves the primary takes a commit
//! (not merely answers a read), on a connection of its own that a stalled
//! probe gives up and whose backend it ends.

use std::time::{Duration, Instant};

use sqlx::Row;

use crate::error::StoreError;

/// The backend an abandoned probe leaves behind: its process id and, behind
/// a transaction pooler, when the probe's transaction began (the backend is
/// the probe's only while that transaction lasts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ProbeBackend {
    pub(super) pid: i32,
    /// `now()` of the probe's transaction, in microseconds since the epoch;
    /// `None` for a session of our own.
    pub(super) transaction_began: Option<i64>,
}

/// Ends the backend of an abandoned readiness connection (a session may
/// end its own role's backends). Behind a transaction pooler the backend is
/// terminated only while it is still in the probe's transaction: once that
/// ended, the pooler may have handed the server connection to another
/// client (another replica's commit, another application).
pub(super) async fn terminate_backend(connection: &mut sqlx::PgConnection, backend: ProbeBackend, limit: Duration) {
    let pid = backend.pid;
    // Unprepared (the values are numbers): behind a transaction pooler no
    // statement may be named.
    let statement = match backend.transaction_began {
        None => format!("SELECT pg_terminate_backend({pid})"),
        Some(began) => format!(
            "SELECT coalesce((SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = {pid} \
             AND (extract(epoch FROM xact_start) * 1000000)::bigint = {began}), false)"
        ),
    };
    let terminated = tokio::time::timeout(
        limit,
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).fetch_one(connection),
    )
    .await
    .map(|answer| answer.and_then(|row| row.try_get::<bool, _>(0)));
    match terminated {
        Ok(Ok(true)) => tracing::info!(pid, "terminated the abandoned readiness backend"),
        Ok(Ok(false)) => tracing::debug!(pid, "the abandoned readiness backend had already ended"),
        Ok(Err(e)) => tracing::warn!(pid, error = %e, "cannot terminate the abandoned readiness backend"),
        Err(_) => tracing::warn!(pid, "terminating the abandoned readiness backend timed out"),
    }
}

/// Readiness's connection, and since when a probe on it has gone
/// unanswered (set before each probe, cleared by its answer: a probe cut
/// short leaves it set).
#[derive(Debug)]
pub(super) struct ProbeConnection {
    pub(super) connection: sqlx::PgConnection,
    /// Its backend, to terminate it once abandoned (`None` when it could
    /// not be read, and behind a transaction pooler outside a probe's
    /// transaction).
    pub(super) backend: Option<ProbeBackend>,
    pub(super) unanswered_since: Option<Instant>,
    /// Whether the current silence was judged (see [`judge_silence`]).
    pub(super) silence_judged: bool,
}

/// The last probe went unanswered. Either the database stalls (a commit
/// waiting for a synchronous standby: its backend is there, waiting), or
/// the connection is half-open (a failover: the server that answers now
/// has no such backend, or none answers). Only the second distrusts the
/// pool's older connections and gives up the statements sent on them
/// (see `Distrust`). Once a silence, on a connection of its own.
pub(super) async fn judge_silence(
    probe: &mut ProbeConnection,
    options: &sqlx::postgres::PgConnectOptions,
    distrust: &super::db::Distrust,
    limit: Duration,
) {
    use sqlx::Connection;
    if probe.silence_judged || probe.unanswered_since.is_none() {
        return;
    }
    probe.silence_judged = true;
    // Behind a transaction pooler (no backend of its own) the pool's
    // connections reach PgBouncer, which outlives a failover.
    let Some(pid) = probe
        .backend
        .as_ref()
        .filter(|b| b.transaction_began.is_none())
        .map(|b| b.pid)
    else {
        return;
    };
    let still_there = async {
        let mut connection = sqlx::PgConnection::connect_with(options).await?;
        let found: Option<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .persistent(false)
            .fetch_optional(&mut connection)
            .await?;
        let _ = connection.close().await;
        Ok::<bool, sqlx::Error>(found.is_some())
    };
    if !matches!(tokio::time::timeout(limit, still_there).await, Ok(Ok(true))) {
        distrust.connections_made_before_now();
    }
}

impl ProbeConnection {
    pub(super) fn abandoned(&self, after: Duration) -> bool {
        self.unanswered_since.is_some_and(|since| since.elapsed() > after)
    }
}

/// Ready means a commit can be made now, not only that the server answers:
/// a standby (a demoted primary a balancer still routes to) answers, and so
/// do a primary in read-only mode (`default_transaction_read_only`, as when
/// its disk is nearly full) and a primary whose commits wait for a
/// synchronous standby that is gone, but every write would fail or hang.
/// The probe's transaction writes one small WAL record and no table (a
/// transactional logical message, which decoding plugins ignore unless
/// asked for messages), so its commit waits for the WAL flush and the
/// synchronous standbys as every commit does.
pub(super) async fn commit_probe(connection: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut *connection)
        .await?;
    if standby {
        return Err(StoreError::Unavailable(
            "the database is a standby in recovery (read-only); tidemark needs the primary".into(),
        ));
    }
    let probe = sqlx::query_scalar::<_, String>(
        "SELECT current_setting('transaction_read_only'), pg_logical_emit_message(true, 'tidemark', 'readiness')",
    )
    .fetch_one(&mut *connection)
    .await;
    let read_only = match probe {
        Ok(read_only) => read_only,
        // A role that may not emit WAL messages (EXECUTE revoked from
        // PUBLIC): readiness can still see read-only mode, not a stall.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501") => {
            warn_once_without_commit_probe();
            sqlx::query_scalar("SELECT current_setting('transaction_read_only')")
                .fetch_one(&mut *connection)
                .await?
        }
        Err(e) => return Err(e.into()),
    };
    if read_only == "on" {
        return Err(StoreError::Unavailable(
            "the database is in read-only mode (default_transaction_read_only); tidemark needs to write".into(),
        ));
    }
    Ok(())
}

/// [`commit_probe`] behind a transaction pooler: one explicit transaction
/// (the server is ours only inside one), unprepared statements, and the
/// backend's id read inside it, so a probe abandoned in its commit can
/// still have that backend terminated (through the pooler, from another
/// server connection of tidemark's role). The id is forgotten before the
/// transaction begins and once it ends: a probe abandoned before it learnt
/// its backend, or after its transaction, terminates nothing.
pub(super) async fn commit_probe_in_transaction(probe: &mut ProbeConnection) -> Result<(), StoreError> {
    probe.backend = None;
    let outcome = probe_transaction(probe).await;
    if outcome.is_ok() {
        probe.backend = None;
    }
    outcome
}

async fn probe_transaction(probe: &mut ProbeConnection) -> Result<(), StoreError> {
    let connection = &mut probe.connection;
    let began = sqlx::raw_sql("BEGIN; SELECT pg_backend_pid(), (extract(epoch FROM now()) * 1000000)::bigint")
        .fetch_one(&mut *connection)
        .await?;
    probe.backend = Some(ProbeBackend {
        pid: began.try_get(0)?,
        transaction_began: Some(began.try_get(1)?),
    });
    let state = sqlx::raw_sql("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
        .fetch_one(&mut *connection)
        .await?;
    if state.try_get::<bool, _>(0)? {
        return Err(StoreError::Unavailable(
            "the database is a standby in recovery (read-only); tidemark needs the primary".into(),
        ));
    }
    if state.try_get::<String, _>(1)? == "on" {
        return Err(StoreError::Unavailable(
            "the database is in read-only mode (default_transaction_read_only); tidemark needs to write".into(),
        ));
    }
    match sqlx::raw_sql("SELECT pg_logical_emit_message(true, 'tidemark', 'readiness')")
        .execute(&mut *connection)
        .await
    {
        Ok(_) => {}
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501") => {
            warn_once_without_commit_probe();
            sqlx::raw_sql("ROLLBACK").execute(&mut *connection).await?;
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    }
    // Waits for the WAL flush and the synchronous standbys, as every commit.
    sqlx::raw_sql("COMMIT").execute(&mut *connection).await?;
    Ok(())
}

fn warn_once_without_commit_probe() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            "readiness cannot see commits stalled on synchronous replication: this role may not \
             execute pg_logical_emit_message (GRANT EXECUTE ON FUNCTION \
             pg_logical_emit_message(boolean, text, text) TO it)"
        );
    });
}
