//! The storage trait: what a database must do for tidemark. Postgres and
//! SQLite implement it; [`crate::Store`] applies the domain rules over it.

use async_trait::async_trait;
use tidemark_core::{ConsumerKey, HistoryEvent, KeyState, LeaseRecord, Timestamp};
use uuid::Uuid;

use crate::error::StoreError;

/// Who asked for a change, for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// The authenticated principal (token name, certificate subject, or
    /// "anonymous").
    pub principal: String,
    /// The request id (from `x-request-id`, or generated).
    pub request_id: String,
}

impl CallContext {
    /// A context for internal callers and tests.
    pub fn internal(request_id: impl Into<String>) -> Self {
        Self {
            principal: "internal".into(),
            request_id: request_id.into(),
        }
    }
}

/// How to find a key's row.
#[derive(Debug, Clone, Copy)]
pub enum Locate<'a> {
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
}

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

/// A database tidemark can keep its state in.
///
/// Writes are optimistic: [`Backend::save`] applies a change only if the row
/// still has the version it was [loaded](Backend::load) with (and, when asked,
/// only while its lease is live by the database clock), and writes the row,
/// the grant and the history in one transaction.
#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Short name for logs ("postgres", "sqlite").
    fn name(&self) -> &'static str;

    /// Applies the embedded migrations (safe when several processes run them
    /// at once).
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Reads a key's row and the database clock in one round trip.
    async fn load(&self, locate: Locate<'_>) -> Result<Loaded, StoreError>;

    /// Writes `change` if the row is unchanged since `loaded`. `Ok(false)`
    /// means another writer got there first (nothing was written).
    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<bool, StoreError>;

    /// The newest history rows of a key, newest first.
    async fn history(&self, key: &ConsumerKey, limit: i64) -> Result<Vec<HistoryRecord>, StoreError>;

    /// Checks that the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Closes the connections.
    async fn close(&self);
}
