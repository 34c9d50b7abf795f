//! Console sessions on Postgres, timed by the database's clock.

use async_trait::async_trait;
use tidemark_core::time::duration_micros;

use super::PostgresBackend;
use crate::error::StoreError;
use crate::sessions::{MAX_CONSOLE_SESSIONS, NewSession, SessionStore, token_hash};

/// Expired sessions go, and past the cap the oldest, in the statement that
/// keeps the new one.
const OPEN: &str = "WITH expired AS (
        DELETE FROM console_sessions WHERE expires_at <= now()
    ), crowded AS (
        DELETE FROM console_sessions WHERE id_sha256 IN (
            SELECT id_sha256 FROM console_sessions ORDER BY created_at DESC OFFSET $5
        )
    )
    INSERT INTO console_sessions (id_sha256, token_sha256, principal, created_at, expires_at)
    VALUES ($1, $2, $3, now(), now() + $4 * interval '1 microsecond')";

#[async_trait]
impl SessionStore for PostgresBackend {
    async fn open_session(&self, session: &NewSession<'_>) -> Result<(), StoreError> {
        sqlx::query(OPEN)
            .bind(session.id_sha256.as_slice())
            .bind(session.token_sha256.as_slice())
            .bind(session.principal)
            .bind(duration_micros(session.ttl))
            .bind(MAX_CONSOLE_SESSIONS - 1)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn session_token(&self, id_sha256: &[u8; 32]) -> Result<Option<[u8; 32]>, StoreError> {
        let token: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT token_sha256 FROM console_sessions WHERE id_sha256 = $1 AND expires_at > now()")
                .bind(id_sha256.as_slice())
                .fetch_optional(&self.db)
                .await?;
        Ok(token_hash(token))
    }

    async fn close_session(&self, id_sha256: &[u8; 32]) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM console_sessions WHERE id_sha256 = $1")
            .bind(id_sha256.as_slice())
            .execute(&self.db)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
