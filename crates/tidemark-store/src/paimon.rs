//! The Paimon registry and the mirror's bookkeeping, through the store's
//! door ([`Store::paimon`]): the server never reaches the backend itself.

use std::time::Duration;

use tidemark_core::{ConsumerKey, TableName};
use tracing::Instrument;

use crate::backend::{Backend, CallContext, MirrorEntry, MirrorFailure, MirrorState, MirrorTask, RegisteredTable};
use crate::error::StoreError;
use crate::store::Store;

/// Registered Paimon tables (SPEC §9) and what the mirror wrote to their
/// consumer files.
#[derive(Debug, Clone, Copy)]
pub struct PaimonRegistry<'a> {
    backend: &'a dyn Backend,
    calls: &'a std::sync::atomic::AtomicU64,
}

impl Store {
    /// The Paimon registry and the mirror's bookkeeping.
    pub fn paimon(&self) -> PaimonRegistry<'_> {
        PaimonRegistry {
            backend: self.backend().as_ref(),
            calls: &self.calls,
        }
    }
}

impl PaimonRegistry<'_> {
    /// A span for one of the backend's statements (see [`Store::statement`]).
    fn statement(&self, operation: &'static str) -> tracing::Span {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::store::statement_span(self.backend, operation)
    }

    /// Registers (or moves) a table's location; a move forgets what was
    /// mirrored, so every consumer file is written at the new place.
    pub async fn register_table(
        self,
        table: &TableName,
        location: &str,
        identity: Option<&str>,
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        self.backend
            .register_table(table, location, identity, ctx)
            .instrument(self.statement("register table"))
            .await
    }

    /// Records the identity of a table registered before identities were
    /// kept (only while it has none, and only at that location).
    pub async fn set_table_identity(self, table: &TableName, location: &str, identity: &str) -> Result<(), StoreError> {
        self.backend
            .set_table_identity(table, location, identity)
            .instrument(self.statement("set table identity"))
            .await
    }

    /// Forgets a registration and its mirror state; `false` when the table
    /// was not registered.
    pub async fn unregister_table(self, table: &TableName) -> Result<bool, StoreError> {
        self.backend
            .unregister_table(table)
            .instrument(self.statement("unregister table"))
            .await
    }

    /// Registered tables, by name.
    pub async fn registered_tables(self) -> Result<Vec<RegisteredTable>, StoreError> {
        self.backend
            .registered_tables()
            .instrument(self.statement("registered tables"))
            .await
    }

    /// Every consumer and live full-scan pin of registered tables, with
    /// what the mirror last wrote (the keeper's inventory).
    pub async fn mirror_inventory(self) -> Result<Vec<MirrorEntry>, StoreError> {
        self.backend
            .mirror_inventory()
            .instrument(self.statement("mirror inventory"))
            .await
    }

    /// Consumer files that need writing or deleting, failing ones last.
    pub async fn mirror_tasks(self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError> {
        self.backend
            .mirror_tasks(refresh, limit)
            .instrument(self.statement("mirror tasks"))
            .await
    }

    /// Records a task's outcome: done, or the failure (the task then waits
    /// out its backoff).
    pub async fn mirror_done(self, task: &MirrorTask, failure: Option<MirrorFailure<'_>>) -> Result<(), StoreError> {
        self.backend
            .mirror_done(task, failure)
            .instrument(self.statement("mirror done"))
            .await
    }

    /// Every mirrored consumer's state on a branch, by consumer id, in one
    /// statement.
    pub async fn mirror_states(
        self,
        table: &TableName,
        branch: &tidemark_core::BranchName,
    ) -> Result<std::collections::HashMap<String, MirrorState>, StoreError> {
        self.backend
            .mirror_states(table, branch)
            .instrument(self.statement("mirror states"))
            .await
    }

    /// What a consumer's file shows, if tidemark ever mirrored it.
    pub async fn mirror_state(self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError> {
        self.backend
            .mirror_state(key)
            .instrument(self.statement("mirror state"))
            .await
    }
}
