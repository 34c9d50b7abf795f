//! tidemark's application layer: what a call does, without transport.
//!
//! [`App`] owns the store and one [`Tables`] (the registration cache, the
//! registered tables' directories, lag, pin files) and is the one door from
//! a transport to the application: every worker RPC ([`workers`]: leases,
//! recovery, commit) and every operator RPC ([`operators`], one file per
//! entity) is one `App` call, and handlers parse, make that call and
//! encode. The store itself is not reachable from outside; the types a
//! transport needs from the store and the Paimon crate are re-exported
//! here ([`store`], [`paimon`]). Who may call what ([`auth`]: credentials,
//! roles, table scopes) is the application's too, shared by every front
//! door (the gRPC server's auth layer, the console's sign-in). The
//! background jobs (the mirror and its keeper, the sweeper, the gauge
//! collector) run from [`App::run_background`].
//!
//! Depends on the store and the Paimon crate; never on tonic or the protos.

mod app;
pub mod auth;
pub mod backup;
mod gauges;
pub mod metrics;
mod mirror;
pub mod operators;
mod overview;
mod registry;
mod retention;
mod sweeper;
mod tables;
pub mod workers;

pub use app::{App, Background};
pub use gauges::GaugeSettings;
pub use mirror::MirrorSettings;
pub use operators::{Consumer, ConsumerListing, Described, Export, ImportSettings, Registration, TableSeen};
pub use overview::{BranchConsumers, BranchSummary, ConsumerRow, FencePicture, OVERVIEW_BRANCH_LIMIT, Overview};
pub use registry::{ImportOutcome, ImportSkipped, MirrorFile};
pub use sweeper::SweeperSettings;
pub use tables::{Lag, Registered, Tables};
pub use workers::RecoveryDone;

/// The store's types a transport sees in the application's calls and
/// answers (the store itself stays behind [`App`]).
pub mod store {
    pub use tidemark_store::{
        BulkChange, BulkExpected, CallContext, ConsumerView, Expired, Explanation, FenceReport, HistoryFilter,
        HistoryRecord, Holder, HolderKind, ImportReport, KeyFilter, MAX_BATCH, MAX_PAGE, MirrorState, NewSession,
        OptionsChange, Planned, RegisteredTable, Store, StoreError, StoredOptions, UnavailableSignal, audit,
        group_commit_metrics, group_read_metrics,
    };
}

/// The Paimon crate's types a transport sees: a table location as parsed
/// from a request, the allow-list a replica is configured with, and a
/// table's snapshot range.
pub mod paimon {
    pub use tidemark_paimon::{LocationAllowList, PaimonTable, SnapshotRange, within_deadline};
}
