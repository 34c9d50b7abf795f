//! The ports a replica serves, and the hook through which another front
//! door (the operators' console, its own crate) is served beside the gRPC
//! API on the same application without the server depending on it.

use std::sync::Arc;

use tidemark_service::App;
use tidemark_service::auth::SharedAuth;
use tidemark_service::store::StoreError;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The ports a replica serves.
pub struct Listeners {
    /// The gRPC API.
    pub grpc: TcpListener,
    /// `grpc.health.v1` alone, in plaintext.
    pub health: Option<TcpListener>,
    /// Another front door on the same application, such as the operators'
    /// console (`tidemark-console`), which owns its own listener.
    pub front_door: Option<FrontDoor>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners")
            .field("grpc", &self.grpc)
            .field("health", &self.health)
            .field("front_door", &self.front_door.is_some())
            .finish()
    }
}

/// A front door served beside the gRPC API (the console): started once the
/// replica's application exists, with what it shares with the gRPC API;
/// it ends when `stop` is cancelled (the replica stops accepting calls),
/// and the replica waits for it before it exits. The server knows nothing
/// else of it, so it depends on no front door's crate.
pub type FrontDoor = Box<dyn FnOnce(SharedWithFrontDoor) -> tokio::task::JoinHandle<()> + Send>;

/// What a front door shares with the gRPC API.
pub struct SharedWithFrontDoor {
    /// The replica's one application (its registered tables and caches).
    pub app: App,
    /// The credentials in force, reloaded with the gRPC API's.
    pub auth: SharedAuth,
    /// The TLS configuration to serve HTTPS with, as it stands at each
    /// handshake (reloaded with the gRPC API's); `None`: plaintext.
    pub tls: Option<Arc<dyn Fn() -> Arc<tokio_rustls::rustls::ServerConfig> + Send + Sync>>,
    /// How the gRPC API answers an error: its code number and message (the
    /// one mapping, [`crate::status::store_status`]).
    pub errors: fn(StoreError) -> (i32, String),
    /// Cancelled when the replica stops accepting calls.
    pub stop: CancellationToken,
}

impl std::fmt::Debug for SharedWithFrontDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWithFrontDoor")
            .field("app", &self.app)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// The gRPC API's answer to `err`, for a front door: the code's number and
/// the message (never SQL text).
pub(crate) fn front_door_error(err: StoreError) -> (i32, String) {
    let status = crate::status::store_status(err, "front door");
    (status.code() as i32, status.message().to_owned())
}
