//! tidemark's application layer: what a call does, without transport.
//!
//! [`App`] owns the store and one [`Tables`] (the registration cache, the
//! registered tables' directories, lag, pin files) and offers the
//! operations the gRPC handlers make: a recovery ([`App::recover`]) and a
//! commit ([`App::commit`]) for workers; registration, import, export,
//! listings with lag and the mirror's view for operators. Handlers parse,
//! make one call and encode; calls that are one store operation with
//! nothing around it go to [`App::store`] directly. The background jobs
//! (the mirror and its keeper, the sweeper, the gauge collector) run from
//! [`App::run_background`].
//!
//! Depends on the store and the Paimon crate; never on tonic or the protos.

mod app;
pub mod backup;
mod gauges;
pub mod metrics;
mod mirror;
mod operator;
mod overview;
mod registry;
mod sweeper;
mod tables;
mod transfer;
mod worker;

pub use app::{App, Background};
pub use gauges::GaugeSettings;
pub use mirror::MirrorSettings;
pub use operator::{Consumer, ConsumerListing, Described, Registration};
pub use overview::{BranchSummary, ConsumerRow, FencePicture, OVERVIEW_CONSUMER_LIMIT, Overview};
pub use registry::{ImportOutcome, ImportSkipped, MirrorFile};
pub use sweeper::SweeperSettings;
pub use tables::{Lag, Registered, Tables};
pub use transfer::{Export, ImportSettings};
pub use worker::RecoveryDone;
