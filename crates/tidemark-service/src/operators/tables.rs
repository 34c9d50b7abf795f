//! The operator calls on tables (SPEC §9, §11 A9): registration with its
//! probe and allow-list, unregistration, the registered tables, importing a
//! registered table's consumer files, and a table's consumer options.

use std::collections::BTreeMap;

use tidemark_core::{CoreError, TableName};
use tidemark_paimon::{PaimonTable, SnapshotRange};
use tidemark_store::{CallContext, OptionsChange, Planned, RegisteredTable, StoreError, StoredOptions};

use crate::app::App;
use crate::registry::{self, ImportOutcome};
use crate::tables::registration;

/// What RegisterTable did (or, in a plan, would do).
#[derive(Debug, Clone)]
pub struct Registration {
    /// The registration as it stands (or would stand).
    pub table: RegisteredTable,
    /// The location it replaced, if it moved.
    pub previous_location: Option<String>,
    /// The main branch's snapshots in the directory, if any.
    pub range: Option<SnapshotRange>,
    /// Why the range could not be read ("" when it was).
    pub probe_error: String,
    /// What an operator should know.
    pub warnings: Vec<String>,
}

impl App {
    /// RegisterTable (SPEC §9): the location checked against the allow-list
    /// before anything reads it, then probed (range, identity, Paimon's own
    /// consumer expiration); recorded and audited when `execute`.
    pub async fn register(
        &self,
        ctx: &CallContext,
        table: &TableName,
        location: &PaimonTable,
        execute: bool,
    ) -> Result<Registration, StoreError> {
        self.check_location(&ctx.principal, location.location())?;
        let previous = registration(&self.store, table).await?;
        let mut probe = registry::probe(table, location, self.mirror_refresh).await;
        probe.warnings.splice(0..0, table.spelling_warning());
        if execute {
            self.store
                .paimon()
                .register_table(table, location.location(), probe.identity.as_deref(), ctx)
                .await?;
            self.tables.forget_registrations();
            let before = previous.as_ref().map(|p| p.location.as_str()).unwrap_or_default();
            tidemark_store::audit::table_change(ctx, table.as_str(), "REGISTER", before, location.location());
        }
        let registered = match registration(&self.store, table).await? {
            Some(now) if execute => now,
            _ => RegisteredTable {
                table: table.clone(),
                location: location.location().to_owned(),
                registered_at: tidemark_core::Timestamp::from_micros(0),
                registered_by: ctx.principal.clone(),
                identity: probe.identity,
            },
        };
        Ok(Registration {
            table: registered,
            previous_location: previous.map(|p| p.location).filter(|l| l != location.location()),
            range: probe.range,
            probe_error: probe.error,
            warnings: probe.warnings,
        })
    }

    /// UnregisterTable: whether the table was registered (audited when
    /// `execute` removed it).
    pub async fn unregister(&self, ctx: &CallContext, table: &TableName, execute: bool) -> Result<bool, StoreError> {
        if !execute {
            return Ok(registration(&self.store, table).await?.is_some());
        }
        let previous = registration(&self.store, table).await?;
        let was = self.store.paimon().unregister_table(table).await?;
        self.tables.forget_registrations();
        if was {
            let location = previous.map(|p| p.location).unwrap_or_default();
            tidemark_store::audit::table_change(ctx, table.as_str(), "UNREGISTER", &location, "");
        }
        Ok(was)
    }

    /// ImportConsumers (SPEC §9): the consumer files a registered table
    /// already has become consumers; `table` must be registered.
    pub async fn import_consumers(
        &self,
        ctx: &CallContext,
        table: &TableName,
        execute: bool,
    ) -> Result<Vec<ImportOutcome>, StoreError> {
        let Some(registered) = registration(&self.store, table).await? else {
            return Err(CoreError::invalid("table", "is not registered (RegisterTable first)").into());
        };
        registry::import_consumers(&self.store, ctx, table, &registered, execute).await
    }

    /// ListTables: every registered table.
    pub async fn list_tables(&self) -> Result<Vec<RegisteredTable>, StoreError> {
        crate::tables::registrations(&self.store).await
    }

    /// GetTableOptions: a table's consumer options as stored.
    pub async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        self.store.table_options(table).await
    }

    /// SetTableOptions: sets and unsets a table's consumer options (a plan
    /// unless `execute`); an applied change is audited.
    pub async fn set_table_options(
        &self,
        ctx: &CallContext,
        table: &TableName,
        set: &BTreeMap<String, String>,
        unset: &[String],
        execute: bool,
    ) -> Result<Planned<OptionsChange>, StoreError> {
        let planned = self.store.set_table_options(ctx, table, set, unset, execute).await?;
        if planned.applied {
            tidemark_store::audit::table_change(
                ctx,
                table.as_str(),
                "SET_OPTIONS",
                &format!("{:?}", planned.change.before.options.to_map()),
                &format!("{:?}", planned.change.after.to_map()),
            );
        }
        Ok(planned)
    }
}
