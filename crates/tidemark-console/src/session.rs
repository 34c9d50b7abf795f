//! Who is looking at the console: a bearer token on each request
//! (scripts), or a token posted once to the sign-in form and kept here,
//! server-side, behind a random session id in a cookie.
//!
//! The kept token is authenticated again on every request against the
//! credentials in force, so a reload that removes it (or takes away its
//! viewer role) ends its sessions at the next page or refresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderMap;
use tidemark_core::{TableName, TableScope};

use tidemark_service::auth::{Grant, Role, SharedAuth, hex};

/// The session cookie's name.
pub(super) const COOKIE: &str = "tidemark_console";

/// How long a session lasts after sign-in.
pub(super) const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// Most sessions kept at once; signing in beyond it drops the oldest.
const MAX_SESSIONS: usize = 10_000;

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
}

impl Viewer {
    pub(super) fn sees(&self, table: &TableName) -> bool {
        self.scope.allows(table)
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
}

#[derive(Debug)]
struct Session {
    token: String,
    expires: Instant,
    created: Instant,
}

/// The signed-in sessions of one replica.
#[derive(Debug, Clone, Default)]
pub(super) struct Sessions(Arc<Mutex<HashMap<String, Session>>>);

impl Sessions {
    /// A new session for `token`; its id goes in the cookie.
    pub(super) fn open(&self, token: &str) -> Result<String, String> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| format!("no randomness available: {e}"))?;
        let id = hex(&secret);
        let now = Instant::now();
        let mut sessions = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            id.clone(),
            Session {
                token: token.to_owned(),
                expires: now + SESSION_TTL,
                created: now,
            },
        );
        Ok(id)
    }

    /// Ends a session.
    pub(super) fn close(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    fn token(&self, id: &str) -> Option<String> {
        let mut sessions = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match sessions.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.token.clone()),
            Some(_) => {
                sessions.remove(id);
                None
            }
            None => None,
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
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
pub(super) fn identify(auth: &SharedAuth, sessions: &Sessions, headers: &HeaderMap) -> Result<Viewer, Refusal> {
    let config = auth.current();
    if !config.is_enabled() {
        return Ok(Viewer {
            principal: "anonymous".to_owned(),
            scope: TableScope::All,
            session: false,
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
        });
    }
    let id = session_id(headers).ok_or(Refusal::SignIn)?;
    let token = sessions.token(&id).ok_or(Refusal::SignIn)?;
    // Authenticated again each time: a reload that removed the token (or
    // its role) ends the session here.
    let Some(grant) = config.authenticate_token(&token) else {
        sessions.close(&id);
        return Err(Refusal::SignIn);
    };
    if let Err(refused) = allowed(&grant) {
        sessions.close(&id);
        return Err(refused);
    }
    Ok(Viewer {
        principal: grant.principal.clone(),
        scope: grant.scope.clone(),
        session: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidemark_service::auth::{AuthConfig, hash_token};

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

    fn cookie(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::COOKIE, format!("a=b; {COOKIE}={id}").parse().unwrap());
        h
    }

    #[test]
    fn sessions_follow_the_credentials_in_force() {
        let shared = auth(&[("ops", "tdm_v", "viewer")]);
        let sessions = Sessions::default();
        let id = sessions.open("tdm_v").unwrap();
        let viewer = identify(&shared, &sessions, &cookie(&id)).unwrap();
        assert_eq!(viewer.principal, "ops");
        assert!(viewer.sees(&TableName::parse("db.a", "t").unwrap()));
        assert!(!viewer.sees(&TableName::parse("other.a", "t").unwrap()));
        // A reload without the token ends the session.
        shared.replace(auth(&[("x", "tdm_x", "viewer")]).current().as_ref().clone());
        assert_eq!(identify(&shared, &sessions, &cookie(&id)).unwrap_err(), Refusal::SignIn);
        assert_eq!(sessions.len(), 0);
        assert_eq!(
            identify(&shared, &sessions, &cookie("nope")).unwrap_err(),
            Refusal::SignIn
        );
        assert_eq!(
            identify(&shared, &sessions, &HeaderMap::new()).unwrap_err(),
            Refusal::SignIn
        );
    }

    #[test]
    fn workers_and_unknown_bearers_are_refused() {
        let shared = auth(&[("etl", "tdm_w", "worker"), ("ops", "tdm_v", "viewer")]);
        let sessions = Sessions::default();
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, "Bearer tdm_w".parse().unwrap());
        assert!(matches!(
            identify(&shared, &sessions, &h),
            Err(Refusal::Forbidden { .. })
        ));
        h.insert(http::header::AUTHORIZATION, "Bearer tdm_nope".parse().unwrap());
        assert_eq!(identify(&shared, &sessions, &h).unwrap_err(), Refusal::Unknown);
        h.insert(http::header::AUTHORIZATION, "Bearer tdm_v".parse().unwrap());
        assert_eq!(identify(&shared, &sessions, &h).unwrap().principal, "ops");
    }

    #[test]
    fn without_credentials_the_console_is_open() {
        let shared = SharedAuth::new(AuthConfig::default());
        let viewer = identify(&shared, &Sessions::default(), &HeaderMap::new()).unwrap();
        assert_eq!(viewer.principal, "anonymous");
        assert!(viewer.scope.is_all());
    }
}
