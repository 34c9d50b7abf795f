//! The storage trait: what a database must do for tidemark. Postgres and
//! SQLite implement it; [`crate::Store`] applies the domain rules over it.

use std::time::Duration;

use async_trait::async_trait;
use tidemark_core::access::Access;
use tidemark_core::{
    BranchName, ConsumerId, ConsumerKey, HistoryEvent, KeyState, LeaseRecord, TableName, TableOptions, TableScope,
    Timestamp,
};
use uuid::Uuid;

use crate::error::StoreError;

mod paimon;
mod state;

pub use paimon::{MirrorBackoff, MirrorEntry, MirrorFailure, MirrorState, MirrorTask, PaimonStore, RegisteredTable};
pub(crate) use state::send_key_page;
pub use state::{ExportPart, StateStore};

/// Most rows one listing or explanation returns.
pub const MAX_PAGE: i64 = 1000;

/// Who asked for a change: for the audit trail and for authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// The authenticated principal (token name, certificate subject, or
    /// "anonymous").
    pub principal: String,
    /// The request id (from `x-request-id`, or generated).
    pub request_id: String,
    /// The tables the caller may touch.
    pub scope: TableScope,
    /// Whether the caller may use leases other principals acquired
    /// (operators); workers may only renew, commit or release their own.
    pub any_lease: bool,
    /// Where the call came from (recorded on the leases it acquires).
    pub caller: tidemark_core::Caller,
    /// Why an operator made the change (kept in its history rows that say
    /// nothing else).
    pub reason: Option<String>,
}

impl CallContext {
    /// An unrestricted caller (no authentication configured, internal tasks).
    pub fn new(principal: impl Into<String>, request_id: impl Into<String>) -> Self {
        Self {
            principal: principal.into(),
            request_id: request_id.into(),
            scope: TableScope::All,
            any_lease: true,
            caller: tidemark_core::Caller::UNKNOWN,
            reason: None,
        }
    }

    /// A context for internal callers and tests.
    pub fn internal(request_id: impl Into<String>) -> Self {
        Self::new("internal", request_id)
    }

    /// The caller's rights.
    pub fn access(&self) -> Access<'_> {
        Access {
            principal: &self.principal,
            scope: &self.scope,
            any_lease: self.any_lease,
        }
    }

    /// Refuses access to a key outside the caller's scope, and the use of a
    /// lease another principal acquired.
    pub fn authorize(&self, find: FindKey<'_>, state: &KeyState) -> Result<(), StoreError> {
        self.access().table(&state.key.table)?;
        if let FindKey::Lease(lease_id) = find
            && let Some(lease) = state.lease.as_ref().filter(|l| l.lease_id == lease_id)
        {
            self.access().lease(lease)?;
        }
        Ok(())
    }
}

/// How to find a key's row.
#[derive(Debug, Clone, Copy)]
pub enum FindKey<'a> {
    /// By the key itself.
    Key(&'a ConsumerKey),
    /// By a lease granted on it (current or not).
    Lease(Uuid),
}

/// A key's row as read, with the version to compare-and-set against and the
/// database's `now` at the read.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The key's state; `None` when the key has no row (or the lease is
    /// unknown).
    pub state: Option<KeyState>,
    /// The row's version; `None` when there is no row.
    pub version: Option<i64>,
    /// The database clock at the read.
    pub now: Timestamp,
    /// The options of the key's table.
    pub options: TableOptions,
}

/// A change to write atomically: the key's new state, a lease grant record
/// if a lease was granted, and history rows.
#[derive(Debug)]
pub struct Change<'a> {
    /// The new state of the key.
    pub state: &'a KeyState,
    /// Only write while the row's lease is still live at write time.
    pub requires_live_lease: bool,
    /// A lease granted by this change.
    pub new_grant: Option<&'a LeaseRecord>,
    /// History rows to append.
    pub events: &'a [HistoryEvent],
    /// Who asked.
    pub ctx: &'a CallContext,
    /// For a change decided on a remembered state at an estimated database
    /// time: only write if the database's clock reads between that estimate
    /// and [`ESTIMATED_NOW_TOLERANCE`] after it (a clock that jumped, or an
    /// estimate that ran ahead, sends the call back to a fresh read).
    pub estimated_now: Option<Timestamp>,
}

/// See [`Change::estimated_now`].
pub const ESTIMATED_NOW_TOLERANCE: Duration = Duration::from_secs(1);

/// One history row as stored: the event plus who, when and which key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRecord {
    /// Monotonic id (order of insertion).
    pub id: i64,
    /// When it was written (database clock).
    pub at: Timestamp,
    /// The key.
    pub key: ConsumerKey,
    /// What happened.
    pub event: HistoryEvent,
    /// Who asked.
    pub principal: String,
    /// The request id.
    pub request_id: String,
}

/// A table's options as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredOptions {
    /// The options (defaults when never set).
    pub options: TableOptions,
    /// The row's version; `None` when the table has no options row.
    pub version: Option<i64>,
    /// Last change.
    pub updated_at: Option<Timestamp>,
    /// Who made it.
    pub updated_by: Option<String>,
}

/// Which keys a listing returns.
#[derive(Debug, Clone, Default)]
pub struct KeyFilter {
    /// Only this table.
    pub table: Option<TableName>,
    /// Only this branch.
    pub branch: Option<BranchName>,
    /// Only consumer ids starting with this.
    pub consumer_id_prefix: Option<String>,
}

/// Keys that have a consumer or a live lease, with their table's options.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The database clock at the read.
    pub now: Timestamp,
    /// The keys, in (table, branch, consumer_id) order.
    pub rows: Vec<(KeyState, TableOptions)>,
}

/// What holds a branch's retention back, lowest first.
#[derive(Debug, Clone)]
pub struct BranchView {
    /// The database clock at the read.
    pub now: Timestamp,
    /// The table's options.
    pub options: TableOptions,
    /// Unexpired consumers, by (next_snapshot, consumer_id).
    pub consumers: Vec<KeyState>,
    /// Keys whose live lease pins an initial full scan, by (pin, consumer_id).
    pub pins: Vec<KeyState>,
}

impl BranchView {
    /// Puts consumers and pins in fence order (a backend may return them in
    /// any order).
    pub(crate) fn sort(&mut self) {
        self.consumers
            .sort_by(|a, b| (a.next_snapshot(), &a.key.consumer_id).cmp(&(b.next_snapshot(), &b.key.consumer_id)));
        let pin = |s: &KeyState| s.lease.as_ref().and_then(|l| l.full_scan_pin);
        self.pins
            .sort_by(|a, b| (pin(a), &a.key.consumer_id).cmp(&(pin(b), &b.key.consumer_id)));
    }
}

/// Which history rows a page returns.
#[derive(Debug, Clone)]
pub struct HistoryFilter {
    /// The table.
    pub table: TableName,
    /// Only this branch.
    pub branch: Option<BranchName>,
    /// Only this consumer (with `branch`).
    pub consumer_id: Option<ConsumerId>,
}

impl HistoryFilter {
    /// The history of one key.
    pub fn key(key: &ConsumerKey) -> Self {
        Self {
            table: key.table.clone(),
            branch: Some(key.branch.clone()),
            consumer_id: Some(key.consumer_id.clone()),
        }
    }
}

/// What a pruning run deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    /// History rows.
    pub history: u64,
    /// Lease grant records of leases that are no longer current.
    pub grants: u64,
}

/// What [`crate::Store::prune_until_caught_up`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneRun {
    /// History rows deleted.
    pub history: u64,
    /// Lease grant records deleted.
    pub grants: u64,
    /// Statements it took.
    pub batches: u64,
    /// Whether nothing old enough is left (else the budget ran out).
    pub caught_up: bool,
}

/// A database tidemark can keep its state in: the four concerns below, and
/// the database itself.
///
/// Writes are optimistic: [`KeyStore::save`] applies a change only if the
/// row still has the version it was [loaded](KeyStore::load) with (and, when
/// asked, only while its lease is live by the database clock), and writes
/// the row, the grant and the history in one transaction.
#[async_trait]
pub trait Backend:
    KeyStore
    + HistoryStore
    + OptionsStore
    + PaimonStore
    + StateStore
    + crate::StatsStore
    + crate::SessionStore
    + std::fmt::Debug
{
    /// Short name for logs ("postgres", "sqlite").
    fn name(&self) -> &'static str;

    /// Applies the embedded migrations (safe when several processes run them
    /// at once).
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Where the schema stands under the migration rule (none before a
    /// binary that knows the rule migrated it).
    async fn schema_level(&self) -> Result<Option<crate::migrations::SchemaLevel>, StoreError>;

    /// Checks that the database answers and can make a commit now (the
    /// readiness probe's question).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Closes the connections.
    async fn close(&self);
}

/// The `consumer_keys` rows: one per key, read and compare-and-set.
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// Reads a key's row and the database clock in one round trip.
    async fn load(&self, find: FindKey<'_>) -> Result<Loaded, StoreError>;

    /// Writes `change` if the row is unchanged since `loaded` (and, when
    /// the change requires it, its lease is still live by the database
    /// clock). `Ok(Some(now))`: written, at database time `now`.
    /// `Ok(None)`: another writer got there first or the lease ended;
    /// nothing was written.
    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<Option<Timestamp>, StoreError>;

    /// A key's row and its newest `limit` history rows, newest first, from
    /// one consistent snapshot (so the history never shows a change the row
    /// does not, or the other way round).
    async fn load_with_history(
        &self,
        key: &ConsumerKey,
        limit: i64,
    ) -> Result<(Loaded, Vec<HistoryRecord>), StoreError>;

    /// Keys with a consumer or a live lease, after `after`, in key order.
    async fn list_keys(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        limit: i64,
    ) -> Result<Listed, StoreError>;

    /// The lowest `limit` unexpired consumers and live full-scan pins of a
    /// branch (E2, E4, E5); indexed, so it stays fast with many consumers.
    async fn branch_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError>;

    /// The branch view a fence needs (E4): the unexpired consumers at the
    /// lowest position and the live pins at the lowest pin, at most `limit`
    /// of each. A backend may return the whole branch view instead (its
    /// caller keeps the holders at the fence).
    async fn fence_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        self.branch_view(table, branch, limit).await
    }

    /// The highest latest snapshot any worker of the branch reported with a
    /// commit (what an unregistered table's lag counts to); one range read
    /// of the primary key.
    async fn reported_latest(&self, table: &TableName, branch: &BranchName) -> Result<Option<i64>, StoreError>;

    /// Whether tidemark has seen `table`: a key of it (consumer, lease or
    /// epoch), a registration or table options.
    async fn table_known(&self, table: &TableName) -> Result<bool, StoreError>;

    /// The names of up to `limit` tables tidemark has seen, by name (for
    /// did-you-mean: read only when a name was not found).
    async fn known_tables(&self, limit: i64) -> Result<Vec<String>, StoreError>;

    /// Up to `limit` consumers that have expired (E2), longest idle first.
    async fn expired_keys(
        &self,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
    ) -> Result<Vec<ConsumerKey>, StoreError>;
}

/// The audit trail, and pruning it.
#[async_trait]
pub trait HistoryStore: Send + Sync + 'static {
    /// A page of history, newest first, with ids below `before_id`.
    async fn history_page(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError>;

    /// Appends history rows about a key without changing it (e.g. a consumer
    /// file changed from outside and put back).
    async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError>;

    /// Deletes up to `limit` history rows and stale lease grants older than
    /// `older_than`.
    async fn prune(&self, older_than: Duration, limit: i64) -> Result<Pruned, StoreError>;
}

/// Per-table options (SPEC §5).
#[async_trait]
pub trait OptionsStore: Send + Sync + 'static {
    /// A table's options.
    async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError>;

    /// Writes a table's options if they are unchanged since `previous` was
    /// read. `Ok(false)`: another writer got there first.
    async fn save_table_options(
        &self,
        table: &TableName,
        previous: &StoredOptions,
        options: &TableOptions,
        ctx: &CallContext,
    ) -> Result<bool, StoreError>;
}
