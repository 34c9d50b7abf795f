//! What the storage keeps of Paimon (SPEC §9): table registrations and
//! what the mirror wrote to each consumer's file.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use tidemark_core::{BranchName, ConsumerKey, TableName, Timestamp};
use uuid::Uuid;

use super::CallContext;
use crate::error::StoreError;

/// A Paimon table registered with its storage location (SPEC §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredTable {
    /// The table.
    pub table: TableName,
    /// Its directory: an absolute path, `file://` or `s3://` URL.
    pub location: String,
    /// When it was registered.
    pub registered_at: Timestamp,
    /// Who registered it.
    pub registered_by: String,
    /// The table's identity when it was registered (SPEC §9); `None` for
    /// registrations older than identities.
    pub identity: Option<String>,
}

/// A consumer or a live full-scan pin of a registered table, as the mirror
/// keeper checks its file against the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorEntry {
    /// The key.
    pub key: ConsumerKey,
    /// Its table's location.
    pub location: String,
    /// The consumer's position (`None`: the key only has a pin).
    pub next_snapshot: Option<i64>,
    /// The consumer's last refresh.
    pub updated_at: Option<Timestamp>,
    /// What tidemark last wrote to the consumer's file.
    pub mirrored_next: Option<i64>,
    /// Whether tidemark keeps the consumer (E2: unexpired, or a live lease).
    pub kept: bool,
    /// A live lease's full-scan pin: the lease and the pinned snapshot.
    pub pin: Option<(Uuid, i64)>,
    /// The key's latest lease (live or not), which names its pin file.
    pub lease: Option<Uuid>,
}

/// A failed mirror task: why, and how long it waits before its next
/// attempt.
#[derive(Debug, Clone, Copy)]
pub struct MirrorFailure<'a> {
    /// The error, as DescribeConsumer shows it.
    pub error: &'a str,
    /// The wait before the next attempt.
    pub backoff: MirrorBackoff,
}

/// How long a failing mirror task waits: `base` after its first failure,
/// twice as long after each further one, never more than `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorBackoff {
    /// The wait after the first failure.
    pub base: Duration,
    /// The longest wait.
    pub cap: Duration,
}

impl MirrorBackoff {
    /// The wait after `failures` consecutive failures (1 for the first).
    pub fn after(&self, failures: u32) -> Duration {
        let doubled = self.base.saturating_mul(1u32 << failures.saturating_sub(1).min(30));
        doubled.min(self.cap)
    }
}

/// A consumer of a registered table whose Paimon file does not show what
/// the database holds (or that has not been refreshed for a while).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorTask {
    /// The consumer.
    pub key: ConsumerKey,
    /// Its table's location.
    pub location: String,
    /// The position to write; `None`: delete the file (no consumer).
    pub next_snapshot: Option<i64>,
    /// The consumer's updated_at the file will reflect.
    pub updated_at: Option<Timestamp>,
}

/// What a consumer's Paimon file shows, as last written by tidemark.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MirrorState {
    /// The position in the file; `None` once deleted.
    pub mirrored_next: Option<i64>,
    /// The consumer's updated_at the file reflects.
    pub mirrored_updated_at: Option<Timestamp>,
    /// When the file was last written or deleted.
    pub mirrored_at: Option<Timestamp>,
    /// Consecutive failed attempts.
    pub failures: i32,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// The table location the file was last written at; `None` for a record
    /// of a release before postgres 0008 / sqlite 0007 (taken as current).
    pub location: Option<String>,
}

/// The Paimon registry (SPEC §9) and what the mirror wrote to its files.
#[async_trait]
pub trait PaimonStore: Send + Sync + 'static {
    /// Registers (or moves) a Paimon table's location. A move forgets what
    /// was mirrored, so every consumer file is written at the new place.
    async fn register_table(
        &self,
        table: &TableName,
        location: &str,
        identity: Option<&str>,
        ctx: &CallContext,
    ) -> Result<(), StoreError>;

    /// Records the identity of a table registered before identities were
    /// kept (only while it has none, and only at that location).
    async fn set_table_identity(&self, table: &TableName, location: &str, identity: &str) -> Result<(), StoreError>;

    /// Forgets a table's registration and mirror state (its files stay);
    /// `false` when it was not registered.
    async fn unregister_table(&self, table: &TableName) -> Result<bool, StoreError>;

    /// Registered tables, by name.
    async fn registered_tables(&self) -> Result<Vec<RegisteredTable>, StoreError>;

    /// Every consumer and live full-scan pin of registered tables, with what
    /// the mirror last wrote, from one consistent read.
    async fn mirror_inventory(&self) -> Result<Vec<MirrorEntry>, StoreError>;

    /// Up to `limit` consumers of registered tables whose file is stale: a
    /// different position, a deleted consumer, or an updated_at more than
    /// `refresh` newer than the file's, or a file written at a location the
    /// table has since left. Failing ones come last, and only once their
    /// backoff has passed.
    async fn mirror_tasks(&self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError>;

    /// Records the outcome of a task: done (the file at the task's location
    /// now shows it), or the failure, after which the task waits out its
    /// backoff.
    async fn mirror_done(&self, task: &MirrorTask, failure: Option<MirrorFailure<'_>>) -> Result<(), StoreError>;

    /// What a consumer's file shows, if tidemark ever mirrored it.
    async fn mirror_state(&self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError>;

    /// [`PaimonStore::mirror_state`] of every consumer of a branch that
    /// has one, by consumer id, in one statement (a console page of
    /// thousands of consumers reads them all at once).
    async fn mirror_states(
        &self,
        table: &TableName,
        branch: &BranchName,
    ) -> Result<HashMap<String, MirrorState>, StoreError>;
}
