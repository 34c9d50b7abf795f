//! Storage errors, and how database errors become them.

use tidemark_core::CoreError;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A domain rule refused the operation; nothing was changed.
    #[error(transparent)]
    Rule(#[from] CoreError),
    /// The database cannot be reached (down, connection lost, pool exhausted).
    /// Safe to retry later.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// The database cancelled a statement that ran past its statement
    /// timeout (a lock held by someone else, an overloaded server).
    /// Nothing was changed; safe to retry.
    #[error("the database timed out a statement: {0}")]
    Timeout(String),
    /// A lock the statement needed was not available (`lock_timeout`, or
    /// `NOWAIT`). Nothing was changed; safe to retry.
    #[error("the database is busy: {0}")]
    Busy(String),
    /// This replica has more waiting work than it queues; the call was not
    /// started. Safe to retry, ideally on another replica.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// The caller's credentials do not cover this key or lease; nothing was
    /// read or changed on its behalf.
    #[error("permission denied: {0}")]
    Denied(#[from] tidemark_core::access::Denied),
    /// Too many concurrent writers on one key; the operation was not applied.
    #[error("too many concurrent changes to one consumer key; retry")]
    Contention,
    /// A bug or an unexpected database error. The message is for logs only:
    /// it may contain SQL and must never reach a client.
    #[error("internal storage error: {0}")]
    Internal(String),
}

/// What the retry loop should do with a database error.
pub(crate) enum DbFailure {
    /// Serialization failure or deadlock: decide again on fresh state.
    Retry,
    /// Give up with this error.
    Fail(StoreError),
}

impl StoreError {
    /// Whether this error says something about the database's health, so
    /// the replica should look at its readiness again at once.
    pub fn concerns_the_database(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable(_) | StoreError::Timeout(_) | StoreError::Busy(_)
        )
    }

    /// The same database condition again, for each caller a failed batch
    /// carried (anything else becomes an internal error with its text).
    pub(crate) fn same_condition(&self) -> StoreError {
        match self {
            StoreError::Unavailable(why) => StoreError::Unavailable(why.clone()),
            StoreError::Timeout(why) => StoreError::Timeout(why.clone()),
            StoreError::Busy(why) => StoreError::Busy(why.clone()),
            StoreError::Overloaded(why) => StoreError::Overloaded(why.clone()),
            StoreError::Contention => StoreError::Contention,
            other => StoreError::Internal(other.to_string()),
        }
    }
}

/// Classifies an sqlx error.
pub(crate) fn classify(err: sqlx::Error) -> DbFailure {
    match &err {
        sqlx::Error::PoolTimedOut => DbFailure::Fail(StoreError::Unavailable(
            "timed out waiting for a database connection (pool exhausted or database unreachable)".into(),
        )),
        sqlx::Error::PoolClosed => DbFailure::Fail(StoreError::Unavailable("the connection pool is closed".into())),
        sqlx::Error::Io(e) => DbFailure::Fail(StoreError::Unavailable(format!("connection error: {e}"))),
        sqlx::Error::Tls(e) => DbFailure::Fail(StoreError::Unavailable(format!("TLS error: {e}"))),
        // A conversation cut short: a balancer that accepted the connection
        // and closed it (no database behind it), or a connection broken
        // mid-message. Like any lost connection, retryable.
        sqlx::Error::Protocol(e) => DbFailure::Fail(StoreError::Unavailable(format!("connection broken: {e}"))),
        sqlx::Error::WorkerCrashed => DbFailure::Fail(StoreError::Unavailable("the database worker crashed".into())),
        sqlx::Error::Database(db) => {
            let code = db.code();
            match code.as_deref() {
                // Postgres serialization failure / deadlock (CockroachDB
                // reports retryable transactions as 40001 too).
                Some("40001" | "40P01") => DbFailure::Retry,
                // SQLite busy / locked (another process holds the write lock).
                Some("5" | "6" | "517" | "262") => DbFailure::Retry,
                // Postgres: the statement ran past statement_timeout (57014
                // is also an operator's pg_cancel_backend; both are safe to
                // retry, since the transaction was rolled back).
                Some("57014") => DbFailure::Fail(StoreError::Timeout(
                    "a statement ran past the database's statement timeout (57014)".into(),
                )),
                // Postgres: lock_timeout or NOWAIT on a lock someone holds.
                Some("55P03") => DbFailure::Fail(StoreError::Busy("a lock was not available in time (55P03)".into())),
                // PgBouncer refuses a startup parameter it does not know: it
                // will every time, so the fix is said (in the log) with it.
                Some("08P01") if db.message().contains("unsupported startup parameter") => {
                    warn_now_and_then(&REFUSED_PARAMETER_WARNED, || {
                        tracing::error!(
                            refused = %db.message(),
                            "the connection pooler refused a startup parameter tidemark sent: behind PgBouncer run \
                             with --db-pooler session or --db-pooler transaction (TIDEMARK_DB_POOLER), which send \
                             none it refuses; other clients of the pooler may need \
                             ignore_startup_parameters = extra_float_digits in pgbouncer.ini"
                        )
                    });
                    DbFailure::Fail(StoreError::Unavailable(format!(
                        "the connection pooler refused a startup parameter ({}): see --db-pooler",
                        db.message()
                    )))
                }
                // Named statements lost or clashing between clients: a
                // transaction pooler that tidemark was not told about.
                Some("26000" | "42P05") if db.message().contains("prepared statement") => {
                    warn_now_and_then(&STATEMENT_CLASH_WARNED, || {
                        tracing::error!(
                            error = %db.message(),
                            "a prepared statement was lost or clashed: is the database behind a transaction \
                             pooler (PgBouncer pool_mode = transaction)? Run with --db-pooler transaction"
                        )
                    });
                    DbFailure::Fail(StoreError::Internal(err.to_string()))
                }
                // Postgres connection exceptions, shutdown, cannot connect now,
                // insufficient resources (disk full, out of memory, too many
                // connections, configuration limits), system errors (class
                // 58: an I/O error on a failing volume), read-only transaction.
                Some(c)
                    if c.starts_with("08")
                        || c.starts_with("57P")
                        || c.starts_with("53")
                        || c.starts_with("58")
                        || c == "25006" =>
                {
                    DbFailure::Fail(StoreError::Unavailable(format!("database refused the request ({c})")))
                }
                // SQLite: disk full (13) and I/O errors (10 with any extended
                // code), a volume that filled or went away; read-only (8),
                // cannot open (14) and out of memory (7) likewise.
                Some(c) if sqlite_unavailable(c) => DbFailure::Fail(StoreError::Unavailable(format!(
                    "the database file cannot be written (SQLite error {c})"
                ))),
                _ => DbFailure::Fail(StoreError::Internal(err.to_string())),
            }
        }
        _ => DbFailure::Fail(StoreError::Internal(err.to_string())),
    }
}

static REFUSED_PARAMETER_WARNED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
static STATEMENT_CLASH_WARNED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// Runs `warn` unless it ran in the last minute (a misconfiguration fails
/// every connection attempt; the log says it once a minute).
fn warn_now_and_then(last: &std::sync::Mutex<Option<std::time::Instant>>, warn: impl FnOnce()) {
    let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if last.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(60)) {
        *last = Some(std::time::Instant::now());
        warn();
    }
}

/// Whether `code` is an SQLite result code (primary or extended) that says
/// the file cannot be written right now: I/O error, disk full, read-only,
/// cannot open, out of memory. SQLite codes are numbers; Postgres SQLSTATEs are five
/// characters and never parse as one of these.
fn sqlite_unavailable(code: &str) -> bool {
    const SQLITE_IOERR: u32 = 10;
    const SQLITE_FULL: u32 = 13;
    const SQLITE_READONLY: u32 = 8;
    const SQLITE_CANTOPEN: u32 = 14;
    const SQLITE_NOMEM: u32 = 7;
    code.len() < 5
        && code.parse::<u32>().is_ok_and(|c| {
            matches!(
                c & 0xff,
                SQLITE_IOERR | SQLITE_FULL | SQLITE_READONLY | SQLITE_CANTOPEN | SQLITE_NOMEM
            )
        })
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match classify(err) {
            DbFailure::Retry => StoreError::Contention,
            DbFailure::Fail(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite_unavailable;

    #[test]
    fn sqlite_codes_that_mean_the_file_cannot_be_written() {
        // Primary codes, and extended ones (SQLITE_IOERR_WRITE = 778,
        // SQLITE_IOERR_FSYNC = 1034, SQLITE_READONLY_DBMOVED = 1032).
        for code in ["10", "13", "8", "14", "7", "778", "1034", "1032"] {
            assert!(sqlite_unavailable(code), "{code}");
        }
        // Busy and locked are retried, constraint errors are bugs, and a
        // Postgres SQLSTATE is never mistaken for an SQLite code.
        for code in ["5", "6", "19", "2067", "53100", "10000", "XX000"] {
            assert!(!sqlite_unavailable(code), "{code}");
        }
    }
}
