//! SPEC §11 A7 as a call makes it: an export read from one snapshot and
//! written as the backup file's lines, and an import checked against the
//! caller's scope and the location allow-list before the store plans it.

use tidemark_core::TableName;
use tidemark_core::restore::ImportPolicy;
use tidemark_store::{CallContext, ExportPart, ImportReport, StoreError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::backup::{Parsed, Writer};

/// An export under way: the file's lines, part by part.
#[derive(Debug)]
pub struct Export {
    parts: mpsc::Receiver<ExportPart>,
    task: Option<JoinHandle<Result<(), StoreError>>>,
    writer: Writer,
    table: Option<TableName>,
    started: bool,
}

impl Export {
    /// The file's next lines: the header and the tables' settings first,
    /// then the keys page by page, then the trailer with the counts; `None`
    /// after the trailer. An error ends the file without a trailer, so an
    /// import refuses whatever was kept of it as cut short. Dropping the
    /// export ends the snapshot's transaction.
    pub async fn next(&mut self) -> Option<Result<Vec<String>, StoreError>> {
        if let Some(part) = self.parts.recv().await {
            self.started = true;
            return Some(Ok(self.writer.lines(part, self.table.as_ref())));
        }
        let task = self.task.take()?;
        Some(match task.await {
            Ok(Ok(())) if self.started => Ok(vec![self.writer.end()]),
            Ok(Ok(())) => Err(StoreError::Internal("the export sent nothing".into())),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(StoreError::Internal(format!("the export failed: {e}"))),
        })
    }
}

/// What an import may do.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportSettings {
    /// Move consumers (and settings) the target has differently to the file's.
    pub replace_existing: bool,
    /// Revoke live leases on keys the import changes.
    pub force: bool,
    /// Leave the target's table registrations alone.
    pub skip_registrations: bool,
    /// Re-create consumers deleted since the export.
    pub restore_deleted: bool,
    /// Apply; otherwise only plan.
    pub execute: bool,
}

impl App {
    /// ExportState: everything tidemark holds of `table` (or of every
    /// table), from one consistent snapshot.
    pub fn export(&self, table: Option<TableName>) -> Export {
        let (parts, task) = self.store.export_state(table.clone());
        Export {
            parts,
            task: Some(task),
            writer: Writer::default(),
            table,
            started: false,
        }
    }

    /// ImportState: every table of the file must be in the caller's scope
    /// and every registration it brings under the allow-list, before the
    /// store plans (or applies) it.
    pub async fn import_state(
        &self,
        ctx: &CallContext,
        parsed: &Parsed,
        settings: ImportSettings,
    ) -> Result<ImportReport, StoreError> {
        let access = ctx.access();
        for table in parsed.file.tables() {
            access.table(table)?;
        }
        if !settings.skip_registrations {
            for registration in &parsed.file.registrations {
                self.check_location(&ctx.principal, &registration.location)?;
            }
        }
        let policy = ImportPolicy {
            replace_existing: settings.replace_existing,
            force: settings.force,
            restore_deleted: settings.restore_deleted,
        };
        let report = self
            .store
            .import_state(
                ctx,
                &parsed.file,
                policy,
                !settings.skip_registrations,
                settings.execute,
            )
            .await?;
        if settings.execute && !settings.skip_registrations {
            self.tables.forget_registrations();
        }
        Ok(report)
    }
}
