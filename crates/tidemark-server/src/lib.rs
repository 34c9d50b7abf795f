//! tidemark's gRPC server.
//!
//! [`serve`] runs the `tidemark.v1` services over a [`tidemark_service::store::Store`]
//! with `grpc.health.v1`, server reflection (v1 and v1alpha, so grpcurl works
//! with no proto files), request timeouts, concurrency limits with load
//! shedding, and a graceful drain on shutdown. Every error is a gRPC status
//! with a `google.rpc.ErrorInfo` reason ([`status`]).

mod admin;
pub mod auth;
mod call;
mod config;
mod context;
mod convert;
mod coordinator;
mod front_door;
pub mod metrics;
mod readiness;
pub mod reload;
mod request;
mod retention;
mod server;
mod shed;
mod spool;
pub mod status;
pub mod tls;

pub use admin::{AdminService, ExportLimits};
pub use config::ServerConfig;
pub use coordinator::CoordinatorService;
pub use front_door::{FrontDoor, Listeners, SharedWithFrontDoor};
pub use readiness::READINESS_SERVICE;
pub use retention::RetentionService;
pub use server::{ServeError, VERSION_HEADER, serve, serve_listeners, serve_with_health};
pub use tls::TlsSettings;
