//! How both backends run their embedded migrations.

use sqlx::migrate::{MigrateError, Migrator};

use crate::error::StoreError;

/// `embedded`, run so that migrations a newer release applied are not an
/// error: migrations are expand-only (new tables, columns with defaults,
/// indexes), so an older binary works on a newer schema. That is what a
/// rollback, or an old pod restarting in the middle of a rolling update,
/// needs.
pub(crate) fn expand_only(embedded: &Migrator) -> Migrator {
    Migrator {
        migrations: embedded.migrations.clone(),
        ignore_missing: true,
        locking: embedded.locking,
        no_tx: embedded.no_tx,
        table_name: embedded.table_name.clone(),
        create_schemas: embedded.create_schemas.clone(),
    }
}

/// A migration error as a storage error.
pub(crate) fn failure(error: MigrateError) -> StoreError {
    match error {
        MigrateError::Execute(inner) => StoreError::from(inner),
        other => StoreError::Internal(format!("migration failed: {other}")),
    }
}
