//! Authentication and authorization (SPEC §7): bearer tokens and client
//! certificates, with roles and table scopes.
//!
//! - `worker`: the Coordinator (leases, commits, recovery);
//! - `maintainer`: Retention (fences);
//! - `viewer`: the read-only Admin calls and the Retention reads;
//! - `operator`: everything.
//!
//! Tokens are configured by their SHA-256 only and compared in constant time.
//! A missing or unknown credential is UNAUTHENTICATED; a known one calling
//! outside its roles is PERMISSION_DENIED — decided here, in a tower layer,
//! before any handler or database work. Table scopes and lease ownership are
//! checked where the table is known (the handlers and the store).
//! Health (and, unless told otherwise, reflection) stays open: Kubernetes
//! probes cannot send credentials.

mod layer;
mod policy;

// The credentials themselves are the application's (the console reads them
// too); re-exported where the server's users have always found them.
pub use layer::{AuthLayer, AuthService};
pub use tidemark_service::auth::{AuthConfig, Authenticated, Grant, Role, SharedAuth, hash_token, hex, mint_token};
