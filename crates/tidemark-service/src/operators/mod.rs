//! The operator API as the application makes it, one file per entity
//! (consumers, leases, tables, state): each `tidemark.v1.Admin` RPC is one
//! [`App`](crate::App) call here, whatever the store, the table's directory
//! and the allow-list contribute to it.

pub(crate) mod consumers;
pub(crate) mod leases;
pub(crate) mod names;
pub(crate) mod state;
pub(crate) mod tables;

pub use consumers::{Consumer, ConsumerListing, Described};
pub use names::TableSeen;
pub use state::{Export, ImportSettings};
pub use tables::Registration;
