//! SPEC §11 A7: exporting tidemark's own state and importing it again (a
//! backup and its restore, or a move between clusters).

use std::collections::HashMap;

use futures::StreamExt;
use tidemark_core::restore::{self, ExportedKey, ImportPolicy, KeyImport};
use tidemark_core::{ConsumerKey, CoreError, KeyState, TableName, TableOptions, Timestamp};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::backend::{CallContext, ExportPart, FindKey, RegisteredTable};
use crate::error::StoreError;
use crate::store::Store;

/// Key rows per page of an export.
pub const EXPORT_PAGE: i64 = 2000;
/// New keys one insert statement carries.
const INSERT_CHUNK: usize = 1000;
/// Existing keys written at once (each its own compare-and-set).
const CONCURRENT_WRITES: usize = 16;

/// A registration as a state file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedRegistration {
    /// The table.
    pub table: TableName,
    /// Its location.
    pub location: String,
    /// Its identity when registered.
    pub identity: Option<String>,
}

impl From<&RegisteredTable> for ExportedRegistration {
    fn from(t: &RegisteredTable) -> Self {
        Self {
            table: t.table.clone(),
            location: t.location.clone(),
            identity: t.identity.clone(),
        }
    }
}

/// What a state file holds (parsed and checked by the server).
#[derive(Debug, Clone, Default)]
pub struct StateFile {
    /// Table options, one entry per table.
    pub options: Vec<(TableName, TableOptions)>,
    /// Registrations, one per table.
    pub registrations: Vec<ExportedRegistration>,
    /// Keys, each once.
    pub keys: Vec<ExportedKey>,
}

impl StateFile {
    /// Every table the file names.
    pub fn tables(&self) -> std::collections::BTreeSet<&TableName> {
        self.options
            .iter()
            .map(|(t, _)| t)
            .chain(self.registrations.iter().map(|r| &r.table))
            .chain(self.keys.iter().map(|k| &k.key.table))
            .collect()
    }
}

/// How the target's table-level setting (options, a registration) compares
/// with the file's, and what the import does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingOutcome {
    /// The target had none: set.
    Created,
    /// Already as the file says.
    Same,
    /// Different, and replaced (`replace_existing`).
    Replaced,
    /// Different, and kept.
    Kept,
}

impl SettingOutcome {
    fn decide(current: Option<bool>, replace_existing: bool) -> Self {
        match current {
            None => SettingOutcome::Created,
            Some(true) => SettingOutcome::Same,
            Some(false) if replace_existing => SettingOutcome::Replaced,
            Some(false) => SettingOutcome::Kept,
        }
    }

    /// Whether the import writes it.
    pub fn writes(self) -> bool {
        matches!(self, SettingOutcome::Created | SettingOutcome::Replaced)
    }

    /// Stable name, in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SettingOutcome::Created => "created",
            SettingOutcome::Same => "same",
            SettingOutcome::Replaced => "replaced",
            SettingOutcome::Kept => "kept",
        }
    }
}

/// One table's options in an import.
#[derive(Debug, Clone)]
pub struct OptionsImport {
    /// The table.
    pub table: TableName,
    /// What happened.
    pub outcome: SettingOutcome,
    /// The target's options before (`None`: never set).
    pub before: Option<TableOptions>,
    /// The file's.
    pub file: TableOptions,
}

/// One registration in an import.
#[derive(Debug, Clone)]
pub struct RegistrationImport {
    /// The table.
    pub table: TableName,
    /// What happened.
    pub outcome: SettingOutcome,
    /// The target's location before.
    pub before: Option<String>,
    /// The file's location.
    pub location: String,
}

/// One key in an import: what it does, or why it was refused.
#[derive(Debug, Clone)]
pub struct KeyOutcome {
    /// The key.
    pub key: ConsumerKey,
    /// The change (possibly none), or the refusal (a live lease).
    pub result: Result<KeyImport, CoreError>,
}

/// What an import did (or, as a plan, would do).
#[derive(Debug, Clone)]
pub struct ImportReport {
    /// Whether it was written.
    pub executed: bool,
    /// The database clock the plan was decided at.
    pub now: Timestamp,
    /// Table options.
    pub options: Vec<OptionsImport>,
    /// Registrations.
    pub registrations: Vec<RegistrationImport>,
    /// Every key of the file, in the file's order.
    pub keys: Vec<KeyOutcome>,
}

impl Store {
    /// Streams everything tidemark holds of `table` (or of every table) from
    /// one consistent snapshot (see [`crate::StateStore::export_state`]).
    /// The receiver ends after the last page; an error ends it early.
    pub fn export_state(
        &self,
        table: Option<TableName>,
    ) -> (
        mpsc::Receiver<ExportPart>,
        tokio::task::JoinHandle<Result<(), StoreError>>,
    ) {
        let (sender, receiver) = mpsc::channel(4);
        let backend = self.backend().clone();
        let span = self.statement("export state");
        let task = tokio::spawn(async move {
            backend
                .export_state(table.as_ref(), EXPORT_PAGE, sender)
                .instrument(span)
                .await
        });
        (receiver, task)
    }

    /// The target's state of the file's tables, from one snapshot.
    async fn target_of(&self, file: &StateFile) -> Result<(Timestamp, Target), StoreError> {
        let tables = file.tables();
        let only = match tables.len() {
            1 => tables.into_iter().next().cloned(),
            _ => None,
        };
        let (mut parts, task) = self.export_state(only);
        let mut target = Target::default();
        let mut now = Timestamp::default();
        while let Some(part) = parts.recv().await {
            match part {
                ExportPart::Head {
                    now: at,
                    options,
                    registrations,
                } => {
                    now = at;
                    target.options = options.into_iter().collect();
                    target.registrations = registrations.into_iter().map(|r| (r.table.clone(), r)).collect();
                }
                ExportPart::Keys(keys) => target.keys.extend(keys.into_iter().map(|s| (s.key.clone(), s))),
            }
        }
        task.await
            .map_err(|e| StoreError::Internal(format!("the export task failed: {e}")))??;
        Ok((now, target))
    }

    /// SPEC §11 A7: imports a state file (plan-only unless `execute`).
    /// Epochs never go down; consumers, options and registrations the
    /// target already has differently are kept unless `replace_existing`;
    /// keys with live leases refuse unless `force` (which fences them).
    /// Decided on one snapshot of the target; when executed, each existing
    /// key is decided again at its own compare-and-set, so a change that
    /// raced the import is never overwritten by the plan.
    pub async fn import_state(
        &self,
        ctx: &CallContext,
        file: &StateFile,
        policy: ImportPolicy,
        with_registrations: bool,
        execute: bool,
    ) -> Result<ImportReport, StoreError> {
        let (now, target) = self.target_of(file).await?;
        let options = file
            .options
            .iter()
            .map(|(table, options)| {
                let before = target.options.get(table).copied();
                OptionsImport {
                    table: table.clone(),
                    outcome: SettingOutcome::decide(before.as_ref().map(|b| b == options), policy.replace_existing),
                    before,
                    file: *options,
                }
            })
            .collect::<Vec<_>>();
        let registrations = file
            .registrations
            .iter()
            .filter(|_| with_registrations)
            .map(|r| {
                let before = target.registrations.get(&r.table);
                RegistrationImport {
                    table: r.table.clone(),
                    outcome: SettingOutcome::decide(before.map(|b| b.location == r.location), policy.replace_existing),
                    before: before.map(|b| b.location.clone()),
                    location: r.location.clone(),
                }
            })
            .collect::<Vec<_>>();
        let mut keys: Vec<KeyOutcome> = file
            .keys
            .iter()
            .map(|exported| KeyOutcome {
                key: exported.key.clone(),
                result: restore::import(target.keys.get(&exported.key), exported, policy, now).map(|t| t.output),
            })
            .collect();
        if !execute {
            return Ok(ImportReport {
                executed: false,
                now,
                options,
                registrations,
                keys,
            });
        }
        // Options first: they decide when the imported consumers expire.
        for change in options.iter().filter(|o| o.outcome.writes()) {
            self.import_options(ctx, change, policy).await?;
        }
        for change in registrations.iter().filter(|r| r.outcome.writes()) {
            let identity = file
                .registrations
                .iter()
                .find(|r| r.table == change.table)
                .and_then(|r| r.identity.as_deref());
            self.backend()
                .register_table(&change.table, &change.location, identity, ctx)
                .instrument(self.statement("register table"))
                .await?;
            crate::audit::table_change(
                ctx,
                change.table.as_str(),
                "REGISTER",
                change.before.as_deref().unwrap_or(""),
                &change.location,
            );
        }
        self.import_keys(ctx, file, &target, policy, now, &mut keys).await?;
        Ok(ImportReport {
            executed: true,
            now,
            options,
            registrations,
            keys,
        })
    }

    /// Writes one table's options, compare-and-set on what was planned
    /// against: options changed meanwhile are decided again.
    async fn import_options(
        &self,
        ctx: &CallContext,
        change: &OptionsImport,
        policy: ImportPolicy,
    ) -> Result<(), StoreError> {
        for _ in 0..8 {
            let before = self
                .backend()
                .table_options(&change.table)
                .instrument(self.statement("table options"))
                .await?;
            let current = before.version.map(|_| before.options == change.file);
            if !SettingOutcome::decide(current, policy.replace_existing).writes() {
                return Ok(());
            }
            if self
                .backend()
                .save_table_options(&change.table, &before, &change.file, ctx)
                .instrument(self.statement("save table options"))
                .await?
            {
                crate::audit::table_change(
                    ctx,
                    change.table.as_str(),
                    "SET_OPTIONS",
                    &format!("{:?}", before.options.to_map()),
                    &format!("{:?}", change.file.to_map()),
                );
                return Ok(());
            }
        }
        Err(StoreError::Contention)
    }

    /// Writes the keys whose plan changes something: keys the target lacked
    /// in batches (a key created meanwhile is decided again), the others
    /// one compare-and-set each. `keys` ends up with what was written.
    async fn import_keys(
        &self,
        ctx: &CallContext,
        file: &StateFile,
        target: &Target,
        policy: ImportPolicy,
        now: Timestamp,
        keys: &mut [KeyOutcome],
    ) -> Result<(), StoreError> {
        let mut again = Vec::new();
        let new: Vec<usize> = (0..keys.len())
            .filter(|&i| !target.keys.contains_key(&keys[i].key))
            .filter(|&i| keys[i].result.as_ref().is_ok_and(KeyImport::changes_anything))
            .collect();
        for chunk in new.chunks(INSERT_CHUNK) {
            let mut rows = Vec::with_capacity(chunk.len());
            for &i in chunk {
                let transition = restore::import(None, &file.keys[i], policy, now)?;
                let (Some(state), Some(event)) = (transition.write, transition.events.into_iter().next()) else {
                    continue;
                };
                rows.push((i, state, event));
            }
            let batch: Vec<(KeyState, tidemark_core::HistoryEvent)> =
                rows.iter().map(|(_, s, e)| (s.clone(), e.clone())).collect();
            let created = self
                .backend()
                .insert_new_keys(&batch, ctx)
                .instrument(self.statement("insert new keys"))
                .await?;
            for ((i, state, event), created) in rows.into_iter().zip(created) {
                if created {
                    crate::audit::consumer_change(ctx, &state.key, &event);
                } else {
                    again.push(i);
                }
            }
        }
        let existing = (0..keys.len())
            .filter(|&i| target.keys.contains_key(&keys[i].key))
            .filter(|&i| keys[i].result.as_ref().is_ok_and(KeyImport::changes_anything));
        // A key the plan refused (a live lease) is tried again too: the
        // lease may have ended by now.
        let refused = (0..keys.len()).filter(|&i| keys[i].result.is_err());
        again.extend(existing.chain(refused));
        again.sort_unstable();
        again.dedup();
        let outcomes: Vec<(usize, Result<KeyImport, StoreError>)> = futures::stream::iter(again)
            .map(|i| {
                let exported = &file.keys[i];
                async move { (i, self.import_key(ctx, exported, policy).await) }
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        for (i, outcome) in outcomes {
            keys[i].result = match outcome {
                Ok(done) => Ok(done),
                Err(StoreError::Rule(rule)) => Err(rule),
                Err(other) => return Err(other),
            };
        }
        Ok(())
    }

    /// Imports one key, decided on its state at the write.
    async fn import_key(
        &self,
        ctx: &CallContext,
        exported: &ExportedKey,
        policy: ImportPolicy,
    ) -> Result<KeyImport, StoreError> {
        let mut written = Vec::new();
        let done = self
            .apply(FindKey::Key(&exported.key), ctx, |loaded| {
                let transition = restore::import(loaded.state.as_ref(), exported, policy, loaded.now)?;
                written.clone_from(&transition.events);
                Ok(transition)
            })
            .await?;
        if done.changes_anything() {
            for event in &written {
                crate::audit::consumer_change(ctx, &exported.key, event);
            }
        }
        Ok(done)
    }
}

/// The target's state of the tables an import touches.
#[derive(Debug, Default)]
struct Target {
    options: HashMap<TableName, TableOptions>,
    registrations: HashMap<TableName, RegisteredTable>,
    keys: HashMap<ConsumerKey, KeyState>,
}
