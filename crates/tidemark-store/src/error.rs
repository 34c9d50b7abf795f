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
                // Postgres connection exceptions, shutdown, cannot connect now,
                // too many connections, read-only standby.
                Some(c) if c.starts_with("08") || c.starts_with("57P") || c == "53300" || c == "25006" => {
                    DbFailure::Fail(StoreError::Unavailable(format!("database refused the request ({c})")))
                }
                _ => DbFailure::Fail(StoreError::Internal(err.to_string())),
            }
        }
        _ => DbFailure::Fail(StoreError::Internal(err.to_string())),
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match classify(err) {
            DbFailure::Retry => StoreError::Contention,
            DbFailure::Fail(e) => e,
        }
    }
}
