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

/// Where a database's schema stands under the migration rule
/// (docs/deploy.md, "Migrations"): its newest applied migration, and the
/// oldest migration a binary must have been built with to use it (the
/// highest `oldest_compatible` in `tidemark_schema_rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaLevel {
    /// The newest migration applied.
    pub schema: i64,
    /// The oldest migration a binary using the schema may have been built
    /// with.
    pub needs: i64,
}

/// Why this binary may not use a database's schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this tidemark binary was built with {dialect} migration {own:04}, and the database's schema is at migration \
     {schema:04}, which needs a binary built with migration {needs:04} or later (a contract step it cannot read): \
     run a release at least that new; rolling back past a contract step is not possible (docs/deploy.md, \
     \"Migrations\")"
)]
pub struct SchemaBeyond {
    /// "postgres" or "sqlite".
    pub dialect: &'static str,
    /// This binary's newest migration.
    pub own: i64,
    /// The schema's newest migration.
    pub schema: i64,
    /// What the schema needs of a binary.
    pub needs: i64,
}

/// The newest migration in `files` (this binary's, for a dialect).
pub(crate) fn newest(files: &[(&str, &str)]) -> i64 {
    files
        .iter()
        .filter_map(|(name, _)| name.split_once('_')?.0.parse::<i64>().ok())
        .max()
        .unwrap_or(0)
}

/// Whether a binary whose newest migration is `own` may use a schema at
/// `level` (none: the rule's table is not there yet, so nothing beyond the
/// rule was applied).
pub(crate) fn fits(dialect: &'static str, own: i64, level: Option<SchemaLevel>) -> Result<(), SchemaBeyond> {
    match level {
        Some(SchemaLevel { schema, needs }) if needs > own => Err(SchemaBeyond {
            dialect,
            own,
            schema,
            needs,
        }),
        _ => Ok(()),
    }
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

    use super::{SchemaLevel, fits};

    #[test]
    fn a_binary_refuses_a_schema_that_needs_a_newer_one() {
        // Expand steps beyond the binary: it runs.
        assert!(fits("postgres", 10, Some(SchemaLevel { schema: 14, needs: 10 })).is_ok());
        assert!(fits("postgres", 10, None).is_ok());
        let refused = fits("postgres", 10, Some(SchemaLevel { schema: 14, needs: 12 })).unwrap_err();
        let message = refused.to_string();
        assert!(message.contains("built with postgres migration 0010"), "{message}");
        assert!(message.contains("schema is at migration 0014"), "{message}");
        assert!(message.contains("migration 0012 or later"), "{message}");
    }

    #[test]
    fn this_binary_fits_the_schema_its_own_migrations_make() {
        for files in [super::POSTGRES, super::SQLITE] {
            let own = super::newest(files);
            assert!(own >= 8);
            assert!(fits("x", own, Some(SchemaLevel { schema: own, needs: 1 })).is_ok());
        }
    }

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
