//! Who is looking at the console: a bearer token on each request
//! (scripts), or a token posted once to the sign-in form, behind a random
//! session id in a cookie.
//!
//! Sessions live in the database (`console_sessions`), so every replica
//! honours them, a restart keeps them, and sign-out on one replica ends
//! them on all: each request reads its session's row. Neither the id nor
//! the token is kept: the row holds the SHA-256 of each, and the token's
//! hash is authenticated again on every request against the credentials
//! in force on the replica answering, so a reload that removes the token
//! (or its viewer role) ends its sessions there at once (and deletes the
//! row, ending them everywhere). Why not signed cookies: a cookie that
//! carries its own validity still needs a server-side record to be signed
//! out, and a signing key to distribute and rotate; the row is both.

use std::time::Duration;

use http::HeaderMap;
use tidemark_core::{TableName, TableScope};
use tidemark_service::App;
use tidemark_service::auth::{Grant, Role, SharedAuth, hash_token, hex};
use tidemark_service::store::{NewSession, StoreError};

/// The session cookie's name.
pub(super) const COOKIE: &str = "tidemark_console";

/// How long a session lasts after sign-in.
pub(super) const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// The roles that may use the console: every page reads through the
/// read-only Admin calls and Retention, which viewers and operators may make.
pub(super) const CONSOLE_ROLES: [Role; 2] = [Role::Viewer, Role::Operator];

/// The caller of a page.
#[derive(Debug, Clone)]
pub(super) struct Viewer {
    /// The principal's name ("anonymous" without authentication).
    pub(super) principal: String,
    /// The tables it may see.
    pub(super) scope: TableScope,
    /// Whether it came with a session (it can sign out).
    pub(super) session: bool,
    /// Whether it may act (the `operator` role; everyone without
    /// credentials configured). Viewers see no action.
    pub(super) operator: bool,
    /// What its forms' CSRF token is derived from: the session id (any
    /// replica derives the same token), or the principal for callers
    /// without a session.
    pub(super) csrf_seed: String,
}

impl Viewer {
    pub(super) fn sees(&self, table: &TableName) -> bool {
        self.scope.allows(table)
    }

    /// The viewer as the application's calls know a caller (its scope
    /// bounds what a did-you-mean may name; an operator may touch any
    /// lease, as over gRPC).
    pub(super) fn call_context(&self) -> tidemark_service::store::CallContext {
        let mut ctx = tidemark_service::store::CallContext::new(self.principal.clone(), "console");
        ctx.scope = self.scope.clone();
        ctx.any_lease = self.operator;
        ctx
    }

    /// The token every form of this viewer carries (`key`: the replica's
    /// own secret, for callers without a session). A cross-site page can
    /// neither read nor compute it, so a post it forges is refused even
    /// where SameSite lets the cookie through (a same-site attacker).
    pub(super) fn csrf_token(&self, key: &[u8; 32]) -> String {
        let mut material = hex(key);
        if self.session {
            material.clear();
        }
        material.push_str("\0tidemark console csrf\0");
        material.push_str(&self.csrf_seed);
        hex(&hash_token(&material))
    }
}

/// Why a request gets no page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// No credential, or one no longer valid: the sign-in page.
    SignIn,
    /// An unknown bearer token.
    Unknown,
    /// A known credential without a console role.
    Forbidden { principal: String, roles: String },
    /// The session could not be read (the database is down): try again.
    Unavailable(String),
}

/// A new session for `token` (already authenticated as `principal`), kept
/// by the database; its id goes in the cookie.
pub(super) async fn open(app: &App, token: &str, principal: &str) -> Result<String, String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness available: {e}"))?;
    let id = hex(&secret);
    let session = NewSession {
        id_sha256: &hash_token(&id),
        token_sha256: &hash_token(token),
        principal,
        ttl: SESSION_TTL,
    };
    app.open_console_session(&session)
        .await
        .map_err(|e| format!("the session could not be kept ({})", unavailable(&e)))?;
    Ok(id)
}

/// Ends a session, on every replica.
pub(super) async fn close(app: &App, id: &str) -> Result<(), String> {
    app.close_console_session(&hash_token(id))
        .await
        .map(|_| ())
        .map_err(|e| unavailable(&e))
}

/// What a failed session read says to the browser (never SQL text).
fn unavailable(error: &StoreError) -> String {
    if error.concerns_the_database() {
        "the database is unavailable; try again shortly".to_owned()
    } else {
        "the session store failed".to_owned()
    }
}

/// The session id in the request's cookies, if any.
pub(super) fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Whether a grant may use the console.
pub(super) fn allowed(grant: &Grant) -> Result<(), Refusal> {
    if grant.has_any(&CONSOLE_ROLES) {
        return Ok(());
    }
    let mut roles: Vec<String> = grant.roles.iter().map(Role::to_string).collect();
    roles.sort();
    Err(Refusal::Forbidden {
        principal: grant.principal.clone(),
        roles: roles.join(", "),
    })
}

/// The caller of a request: open (no credentials configured), a bearer
/// token, or a session.
pub(super) async fn identify(auth: &SharedAuth, app: &App, headers: &HeaderMap) -> Result<Viewer, Refusal> {
    let config = auth.current();
    if !config.is_enabled() {
        return Ok(Viewer {
            principal: "anonymous".to_owned(),
            scope: TableScope::All,
            session: false,
            operator: true,
            csrf_seed: "anonymous".to_owned(),
        });
    }
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    if let Some(token) = bearer {
        let grant = config.authenticate_token(token).ok_or(Refusal::Unknown)?;
        allowed(&grant)?;
        return Ok(Viewer {
            principal: grant.principal.clone(),
            scope: grant.scope.clone(),
            session: false,
            operator: grant.roles.contains(&Role::Operator),
            csrf_seed: grant.principal.clone(),
        });
    }
    let id = session_id(headers).ok_or(Refusal::SignIn)?;
    let id_sha256 = hash_token(&id);
    let token_sha256 = app
        .console_session(&id_sha256)
        .await
        .map_err(|e| Refusal::Unavailable(unavailable(&e)))?
        .ok_or(Refusal::SignIn)?;
    // Authenticated again each time: a reload that removed the token (or
    // its role) ends the session here, and by its row everywhere.
    let grant = match config.authenticate_hash(&token_sha256) {
        Some(grant) => grant,
        None => {
            let _ = app.close_console_session(&id_sha256).await;
            return Err(Refusal::SignIn);
        }
    };
    if let Err(refused) = allowed(&grant) {
        let _ = app.close_console_session(&id_sha256).await;
        return Err(refused);
    }
    Ok(Viewer {
        principal: grant.principal.clone(),
        scope: grant.scope.clone(),
        session: true,
        operator: grant.roles.contains(&Role::Operator),
        csrf_seed: id,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use tidemark_service::auth::AuthConfig;
    use tidemark_service::store::Store;
    use tidemark_store::{Backend, SqliteBackend, SystemClock};

    fn auth(tokens: &[(&str, &str, &str)]) -> SharedAuth {
        let text: String = tokens
            .iter()
            .map(|(name, token, role)| {
                format!(
                    "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\nroles = [\"{role}\"]\ntables = [\"db.*\"]\n",
                    hex(&hash_token(token))
                )
            })
            .collect();
        SharedAuth::new(AuthConfig::parse(&text, "test").unwrap())
    }

    /// Two replicas' applications over one SQLite file.
    async fn apps(dir: &std::path::Path) -> (App, App) {
        let url = format!("sqlite://{}", dir.join("t.db").display());
        let mut apps = Vec::new();
        for _ in 0..2 {
            let backend = SqliteBackend::open(&url, Arc::new(SystemClock)).await.unwrap();
            backend.migrate().await.unwrap();
            apps.push(App::new(Store::new(Arc::new(backend), Default::default())));
        }
        let other = apps.pop().unwrap();
        (apps.pop().unwrap(), other)
    }

    fn cookie(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::COOKIE, format!("a=b; {COOKIE}={id}").parse().unwrap());
        h
    }

    #[tokio::test]
    async fn sessions_follow_the_credentials_in_force_on_every_replica() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = apps(dir.path()).await;
        let shared = auth(&[("ops", "tdm_v", "viewer")]);
        let id = open(&one, "tdm_v", "ops").await.unwrap();
        // Another replica honours it.
        let viewer = identify(&shared, &other, &cookie(&id)).await.unwrap();
        assert_eq!(viewer.principal, "ops");
        assert!(viewer.session);
        assert!(viewer.sees(&TableName::parse("db.a", "t").unwrap()));
        assert!(!viewer.sees(&TableName::parse("other.a", "t").unwrap()));
        // A reload without the token ends the session, on both.
        let reloaded = auth(&[("x", "tdm_x", "viewer")]);
        assert_eq!(
            identify(&reloaded, &other, &cookie(&id)).await.unwrap_err(),
            Refusal::SignIn
        );
        assert_eq!(
            identify(&shared, &one, &cookie(&id)).await.unwrap_err(),
            Refusal::SignIn
        );
        for headers in [cookie("nope"), HeaderMap::new()] {
            assert_eq!(identify(&shared, &one, &headers).await.unwrap_err(), Refusal::SignIn);
        }
    }

    #[tokio::test]
    async fn sign_out_on_one_replica_ends_the_session_on_all() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = apps(dir.path()).await;
        let shared = auth(&[("ops", "tdm_v", "viewer")]);
        let id = open(&one, "tdm_v", "ops").await.unwrap();
        assert!(identify(&shared, &one, &cookie(&id)).await.is_ok());
        close(&other, &id).await.unwrap();
        assert_eq!(
            identify(&shared, &one, &cookie(&id)).await.unwrap_err(),
            Refusal::SignIn
        );
    }

    #[tokio::test]
    async fn neither_the_session_id_nor_the_token_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (one, _) = apps(dir.path()).await;
        let id = open(&one, "tdm_secret_token_value", "ops").await.unwrap();
        one.close_console_session(&[0u8; 32]).await.unwrap();
        let bytes = std::fs::read(dir.path().join("t.db")).unwrap();
        let wal = std::fs::read(dir.path().join("t.db-wal")).unwrap_or_default();
        for file in [&bytes, &wal] {
            for secret in [id.as_bytes(), b"tdm_secret_token_value".as_slice()] {
                assert!(!file.windows(secret.len()).any(|w| w == secret), "a secret is at rest");
            }
        }
    }

    #[tokio::test]
    async fn workers_and_unknown_bearers_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (one, _) = apps(dir.path()).await;
        let shared = auth(&[("etl", "tdm_w", "worker"), ("ops", "tdm_v", "viewer")]);
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, "Bearer tdm_w".parse().unwrap());
        assert!(matches!(
            identify(&shared, &one, &h).await,
            Err(Refusal::Forbidden { .. })
        ));
        h.insert(http::header::AUTHORIZATION, "Bearer tdm_nope".parse().unwrap());
        assert_eq!(identify(&shared, &one, &h).await.unwrap_err(), Refusal::Unknown);
        h.insert(http::header::AUTHORIZATION, "Bearer tdm_v".parse().unwrap());
        assert_eq!(identify(&shared, &one, &h).await.unwrap().principal, "ops");
    }

    #[tokio::test]
    async fn without_credentials_the_console_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let (one, _) = apps(dir.path()).await;
        let shared = SharedAuth::new(AuthConfig::default());
        let viewer = identify(&shared, &one, &HeaderMap::new()).await.unwrap();
        assert_eq!(viewer.principal, "anonymous");
        assert!(viewer.scope.is_all());
    }
}
