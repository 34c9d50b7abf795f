//! Console sessions on SQLite, timed by the server's clock.

use async_trait::async_trait;
use tidemark_core::time::duration_micros;

use super::SqliteBackend;
use crate::error::StoreError;
use crate::sessions::{MAX_CONSOLE_SESSIONS, NewSession, SessionStore, token_hash};

#[async_trait]
impl SessionStore for SqliteBackend {
    async fn open_session(&self, session: &NewSession<'_>) -> Result<(), StoreError> {
        let now = self.clock.now().as_micros();
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM console_sessions WHERE expires_at <= ?1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM console_sessions WHERE id_sha256 IN (
                SELECT id_sha256 FROM console_sessions ORDER BY created_at DESC LIMIT -1 OFFSET ?1)",
        )
        .bind(MAX_CONSOLE_SESSIONS - 1)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO console_sessions (id_sha256, token_sha256, principal, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .bind(session.id_sha256.as_slice())
        .bind(session.token_sha256.as_slice())
        .bind(session.principal)
        .bind(now)
        .bind(now.saturating_add(duration_micros(session.ttl)))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn session_token(&self, id_sha256: &[u8; 32]) -> Result<Option<[u8; 32]>, StoreError> {
        let token: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT token_sha256 FROM console_sessions WHERE id_sha256 = ?1 AND expires_at > ?2")
                .bind(id_sha256.as_slice())
                .bind(self.clock.now().as_micros())
                .fetch_optional(&self.readers)
                .await?;
        Ok(token_hash(token))
    }

    async fn close_session(&self, id_sha256: &[u8; 32]) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM console_sessions WHERE id_sha256 = ?1")
            .bind(id_sha256.as_slice())
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
