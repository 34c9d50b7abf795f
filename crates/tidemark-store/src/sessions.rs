//! Console sessions any replica honours (docs/operations.md, "Console
//! sessions"): a session is kept by the SHA-256 of its id (the cookie's
//! secret) and the SHA-256 of the token it signed in with, never either in
//! clear, so what is at rest opens nothing. Every replica reads the row on
//! every request; sign-out deletes it.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;

/// Most sessions kept at once; opening one beyond it drops the oldest.
pub const MAX_CONSOLE_SESSIONS: i64 = 10_000;

/// A session to keep.
#[derive(Debug, Clone, Copy)]
pub struct NewSession<'a> {
    /// SHA-256 of the session id.
    pub id_sha256: &'a [u8; 32],
    /// SHA-256 of the bearer token it signed in with.
    pub token_sha256: &'a [u8; 32],
    /// Who signed in (for operators reading the table).
    pub principal: &'a str,
    /// How long it lasts, from now by the database's clock.
    pub ttl: Duration,
}

/// The `console_sessions` rows.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Keeps `session`, dropping expired sessions and, past
    /// [`MAX_CONSOLE_SESSIONS`], the oldest.
    async fn open_session(&self, session: &NewSession<'_>) -> Result<(), StoreError>;

    /// The token hash of the live session whose id hashes to `id_sha256`.
    async fn session_token(&self, id_sha256: &[u8; 32]) -> Result<Option<[u8; 32]>, StoreError>;

    /// Ends the session whose id hashes to `id_sha256`; whether one was
    /// there.
    async fn close_session(&self, id_sha256: &[u8; 32]) -> Result<bool, StoreError>;
}

/// A stored token hash as 32 bytes (a row of another length is no session).
pub(crate) fn token_hash(bytes: Option<Vec<u8>>) -> Option<[u8; 32]> {
    bytes.and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
}
