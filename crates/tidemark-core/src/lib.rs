//! tidemark's domain core: the rules of SPEC §2–§5 as pure functions.
//!
//! Nothing here does I/O or reads a clock. Storage loads a key's
//! [`KeyState`] together with the database's `now`, calls a rule, and writes
//! the [`Transition`] it returns (new state plus history) in one transaction.

pub mod access;
pub mod activity;
pub mod admin;
pub mod commit;
pub mod error;
pub mod expiry;
pub mod ids;
pub mod lease;
pub mod mutant;
pub mod offset;
pub mod options;
pub mod recovery;
pub mod reset;
pub mod restore;
pub mod retention;
pub mod scope;
pub mod state;
pub mod suggest;
pub mod time;
pub mod validate;

pub use activity::{Caller, LeaseActivity};
pub use commit::{CommitBatch, CommitOutcome, Committed, RefreshHistory};
pub use error::{Claimant, CoreError, LeaseLoss};
pub use ids::{BranchName, ConsumerId, ConsumerKey, TABLE_NAME_SPELLING, TableName};
pub use lease::{Acquired, LeasePolicy, Revoked};
pub use offset::{MAX_SNAPSHOT_ID, Offset};
pub use options::{ConsumerMode, TableOptions};
pub use recovery::{
    LoggedBatch, OnExpired, Recovered, RecoveryPlan, RecoveryRequest, RecoverySource, SnapshotRange, StartupKind,
    StartupMode,
};
pub use scope::{TablePattern, TableScope};
pub use state::{
    CommittedBatch, ConsumerRecord, EventKind, HistoryEvent, KeyState, LeaseRecord, LeaseStatus, Transition,
};
pub use time::Timestamp;
pub use validate::FieldViolation;
