//! How both backends run their embedded migrations.

use std::borrow::Cow;

use sqlx::SqlStr;
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};

use crate::error::StoreError;

// `POSTGRES` and `SQLITE`: each dialect's migration files as (name, SQL),
// written by build.rs.
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The migrator of embedded migration files, resolved as sqlx resolves a
/// migrations directory (`sqlx_core::migrate::resolve_blocking`, what its
/// `migrate!` macro runs): `<version>_<description>.sql`, the description's
/// `_` read as spaces, `.up.sql`/`.down.sql` reversible, `-- no-transaction`
/// first opting out of the transaction, the checksum SHA-384 of the SQL.
/// Versions, descriptions and checksums must match what the macro gave, or
/// databases migrated by an older release would be refused; the tests
/// compare both ways of resolving the directory.
pub(crate) fn embedded(files: &'static [(&'static str, &'static str)]) -> Migrator {
    let migrations = files
        .iter()
        .filter_map(|&(name, sql)| {
            let (version, rest) = name.split_once('_')?;
            if !rest.ends_with(".sql") {
                return None;
            }
            let version: i64 = version
                .parse()
                .unwrap_or_else(|_| panic!("migration {name:?} has no integer version prefix"));
            let migration_type = MigrationType::from_filename(rest);
            let description = rest.trim_end_matches(migration_type.suffix()).replace('_', " ");
            let no_tx = sql.starts_with("-- no-transaction");
            Some(Migration::new(
                version,
                Cow::Owned(description),
                migration_type,
                SqlStr::from_static(sql),
                no_tx,
            ))
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// `embedded`, run so that migrations a newer release applied are not an
/// error: migrations are expand-only (new tables, columns with defaults,
/// indexes), so an older binary works on a newer schema. That is what a
/// rollback, or an old pod restarting in the middle of a rolling update,
/// needs.
pub(crate) fn expand_only(embedded: &Migrator) -> Migrator {
    let mut migrator = Migrator::with_migrations(embedded.iter().cloned().collect());
    migrator.set_ignore_missing(true);
    migrator
}

/// A migration error as a storage error.
pub(crate) fn failure(error: MigrateError) -> StoreError {
    match error {
        MigrateError::Execute(inner) => StoreError::from(inner),
        other => StoreError::Internal(format!("migration failed: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sqlx::migrate::Migrator;

    /// The embedded migrators are what sqlx resolves from the directories
    /// (what its `migrate!` macro embedded before): same versions,
    /// descriptions, kinds, checksums and transaction modes.
    #[tokio::test]
    async fn embedded_migrations_are_what_sqlx_resolves_from_the_directories() {
        for (dialect, embedded) in [("postgres", super::POSTGRES), ("sqlite", super::SQLITE)] {
            let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../migrations")
                .join(dialect);
            let resolved = Migrator::new(directory.as_path())
                .await
                .expect("sqlx resolves the directory");
            let embedded = super::embedded(embedded);
            let describe = |migrator: &Migrator| {
                migrator
                    .iter()
                    .map(|m| {
                        (
                            m.version,
                            m.description.to_string(),
                            m.migration_type,
                            m.checksum.to_vec(),
                            m.no_tx,
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert!(!describe(&resolved).is_empty(), "{dialect}: no migration found");
            assert_eq!(describe(&embedded), describe(&resolved), "{dialect}");
        }
    }
}
