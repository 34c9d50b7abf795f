//! tidemark's storage.
//!
//! One trait, [`Backend`] (by concern: [`KeyStore`], [`HistoryStore`],
//! [`OptionsStore`], [`PaimonStore`]), implemented for Postgres ([`PostgresBackend`], the
//! production store) and SQLite ([`SqliteBackend`], the embedded default), and
//! [`Store`], which applies the domain rules of `tidemark-core` over either.
//! The same conformance suite (`tests/conformance`) runs against both.

mod admin;
pub mod audit;
mod backend;
mod backup;
mod cache;
mod clock;
mod decode;
mod error;
mod history_row;
mod migrations;
pub use migrations::{SchemaBeyond, SchemaLevel};
mod paimon;
pub mod postgres;
#[cfg(test)]
mod rendered_sql;
mod row;
mod sessions;
mod sql_template;
pub mod sqlite;
mod stamp;
mod stats;
mod store;
mod workers;

use std::sync::Arc;

pub use admin::{
    BulkChange, BulkExpected, ConsumerPage, ConsumerView, Expired, ExpiryRun, Explanation, FenceReport, Holder,
    HolderKind, MAX_BATCH, OptionsChange, Planned,
};
pub use backend::{
    Backend, BranchView, CallContext, Change, ESTIMATED_NOW_TOLERANCE, FindKey, HistoryFilter, HistoryRecord,
    HistoryStore, KeyFilter, KeyStore, Listed, Loaded, MirrorBackoff, MirrorEntry, MirrorFailure, MirrorState,
    MirrorTask, OptionsStore, PaimonStore, PruneRun, Pruned, RegisteredTable, StoredOptions,
};
pub use backend::{ExportPart, MAX_PAGE, StateStore};
pub use backup::{
    EXPORT_PAGE, ExportedRegistration, ImportReport, KeyOutcome, OptionsImport, RegistrationImport, SettingOutcome,
    StateFile,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::StoreError;
pub use paimon::PaimonRegistry;
pub use postgres::group_commit::{GroupCommitStats, metric_names as group_commit_metrics};
pub use postgres::group_read::{GroupReadStats, metric_names as group_read_metrics};
pub use postgres::{DbPooler, MIGRATIONS_NEED_A_SESSION, PostgresBackend, PostgresOptions};
pub use sessions::{MAX_CONSOLE_SESSIONS, NewSession, SessionStore};
pub use sqlite::SqliteBackend;
pub use stats::{BranchOverview, BranchStats, ConsumerLagRow, FleetStats, PoolStats, StatsStore};
pub use store::{Store, UnavailableSignal};

/// Whether this binary may use `backend`'s schema under the migration rule
/// (docs/deploy.md, "Migrations"): the outer error is the database's, the
/// inner one a schema that needs a newer binary.
pub async fn schema_fits(backend: &dyn Backend) -> Result<Result<(), SchemaBeyond>, StoreError> {
    let level = backend.schema_level().await?;
    let (dialect, files) = match backend.name() {
        "sqlite" => ("sqlite", migrations::SQLITE),
        _ => ("postgres", migrations::POSTGRES),
    };
    Ok(migrations::fits(dialect, migrations::newest(files), level))
}
pub use tidemark_core::Timestamp;

/// The database used when none is configured: an SQLite file in the working
/// directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://tidemark.db";

/// Opens the backend a database URL names: `postgres://` / `postgresql://`
/// for Postgres, `sqlite:` for SQLite.
pub async fn open_backend(url: &str, postgres: &PostgresOptions) -> Result<Arc<dyn Backend>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PostgresBackend::connect(url, postgres)?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteBackend::open(url, Arc::new(SystemClock)).await?))
    } else {
        Err(StoreError::Internal(format!(
            "unsupported database URL {:?}: use postgres://... or sqlite://path/to/file.db",
            redact(url)
        )))
    }
}

/// A database URL without its password, for logs and errors.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let (head, query) = match url[scheme_end..].find('?') {
        Some(q) => url.split_at(scheme_end + q),
        None => (url, ""),
    };
    let authority_end = head[scheme_end..].find('/').map_or(head.len(), |i| scheme_end + i);
    let mut out = String::with_capacity(url.len());
    match head[scheme_end..authority_end].rfind('@') {
        Some(at) => {
            let credentials = &head[scheme_end..scheme_end + at];
            match credentials.find(':') {
                Some(colon) => {
                    out.push_str(&head[..scheme_end + colon]);
                    out.push_str(":***");
                    out.push_str(&head[scheme_end + at..]);
                }
                None => out.push_str(head),
            }
        }
        None => out.push_str(head),
    }
    // libpq's query parameters that carry secrets.
    for (i, pair) in query.trim_start_matches('?').split('&').enumerate() {
        if query.is_empty() {
            break;
        }
        out.push(if i == 0 { '?' } else { '&' });
        match pair.split_once('=') {
            Some((key, _)) if matches!(key, "password" | "sslpassword") => {
                out.push_str(key);
                out.push_str("=***");
            }
            _ => out.push_str(pair),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_hides_passwords_only() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact("sqlite://tidemark.db"), "sqlite://tidemark.db");
        // As query parameters (libpq's password and sslpassword), too.
        assert_eq!(
            super::redact("postgres://u@h/db?sslmode=require&password=se@cret&sslpassword=k"),
            "postgres://u@h/db?sslmode=require&password=***&sslpassword=***"
        );
        assert_eq!(
            super::redact("postgresql://u:p@h/db?application_name=x"),
            "postgresql://u:***@h/db?application_name=x"
        );
    }
}
