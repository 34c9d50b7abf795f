//! The tower layer: who is calling, whether their roles allow the method,
//! and each principal's share of concurrent calls, decided before any
//! handler or database work.

use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;
use tonic_types::{ErrorDetails, StatusExt};

use super::policy::{MethodAccess, access};
use crate::status::ERROR_DOMAIN;
use tidemark_service::auth::{AuthConfig, Authenticated, Grant, SharedAuth};

/// Why a call was refused before its handler.
#[derive(Debug)]
struct Denial {
    code: tonic::Code,
    reason: &'static str,
    message: String,
}

fn denial(code: tonic::Code, reason: &'static str, message: String) -> Denial {
    Denial { code, reason, message }
}

impl Denial {
    fn into_response(self) -> http::Response<Body> {
        let mut details = ErrorDetails::new();
        details.set_error_info(self.reason, ERROR_DOMAIN, std::collections::HashMap::new());
        Status::with_error_details(self.code, self.message, details).into_http()
    }
}

/// Decides who is calling and whether their roles allow the method.
fn authorize<B>(config: &AuthConfig, request: &http::Request<B>) -> Result<Option<Arc<Grant>>, Denial> {
    let access = access(request.uri().path(), config.reflection_requires_auth);
    if access == MethodAccess::Open {
        return Ok(None);
    }
    let bearer = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default())
        .map(|v| match v.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => "",
        });
    let grant = match bearer {
        Some(token) => config.authenticate_token(token).ok_or_else(|| {
            denial(
                tonic::Code::Unauthenticated,
                "UNKNOWN_CREDENTIALS",
                "the bearer token is not known to this server".into(),
            )
        })?,
        None => peer_certificate(request)
            .and_then(|der| config.authenticate_certificate(&der))
            .ok_or_else(|| {
                denial(
                    tonic::Code::Unauthenticated,
                    "MISSING_CREDENTIALS",
                    "credentials required: send the metadata 'authorization: Bearer <token>' (or a client \
                     certificate the server knows)"
                        .into(),
                )
            })?,
    };
    if let MethodAccess::Roles(roles) = access
        && !grant.has_any(roles)
    {
        let mut have: Vec<String> = grant.roles.iter().map(ToString::to_string).collect();
        have.sort();
        let need: Vec<String> = roles.iter().map(ToString::to_string).collect();
        return Err(denial(
            tonic::Code::PermissionDenied,
            "ROLE_NOT_ALLOWED",
            format!(
                "{} (roles: {}) may not call {}; it needs one of: {}",
                grant.principal,
                have.join(", "),
                request.uri().path(),
                need.join(", ")
            ),
        ));
    }
    Ok(Some(grant))
}

fn peer_certificate<B>(request: &http::Request<B>) -> Option<Vec<u8>> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let info = request.extensions().get::<TlsConnectInfo<TcpConnectInfo>>()?;
    let certs = info.peer_certs()?;
    certs.first().map(|c| c.as_ref().to_vec())
}

/// The tower layer that authenticates every call and checks its role,
/// against the credentials in force at the call (they can be reloaded), and
/// holds each principal to its share of concurrent calls.
#[derive(Debug, Clone)]
pub struct AuthLayer {
    config: SharedAuth,
    limits: Option<PrincipalLimits>,
}

impl AuthLayer {
    /// A layer enforcing `config` (a no-op while it has no credentials).
    pub fn new(config: SharedAuth) -> Self {
        Self { config, limits: None }
    }

    /// At most `per_principal` calls of one principal in flight at once; more
    /// are refused at once with RESOURCE_EXHAUSTED (reason
    /// `PRINCIPAL_LIMIT`), so one runaway credential cannot take every slot
    /// (and the database pool) from the others. Zero: no limit.
    pub fn with_principal_limit(mut self, per_principal: usize) -> Self {
        self.limits = (per_principal > 0).then(|| PrincipalLimits {
            per_principal,
            slots: Arc::default(),
        });
        self
    }
}

/// Each principal's in-flight calls.
#[derive(Debug, Clone)]
struct PrincipalLimits {
    per_principal: usize,
    slots: Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>>,
}

impl PrincipalLimits {
    fn try_acquire(&self, principal: &str) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let semaphore = {
            let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(
                slots
                    .entry(principal.to_owned())
                    .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.per_principal))),
            )
        };
        semaphore.try_acquire_owned().ok()
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            config: self.config.clone(),
            limits: self.limits.clone(),
        }
    }
}

/// See [`AuthLayer`].
#[derive(Debug, Clone)]
pub struct AuthService<S> {
    inner: S,
    config: SharedAuth,
    limits: Option<PrincipalLimits>,
}

/// Denials are logged at most once a second per reason, with how many were
/// left out since, so a client hammering with a bad token cannot flood the
/// log (every one is still counted in `tidemark_errors_total`).
fn log_denial(path: &str, denial: &Denial) {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    use std::time::{Duration, Instant};
    static LAST: LazyLock<Mutex<HashMap<&'static str, (Instant, u64)>>> = LazyLock::new(Mutex::default);
    let suppressed = {
        let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let entry = last.entry(denial.reason).or_insert((now - Duration::from_secs(2), 0));
        if now.duration_since(entry.0) < Duration::from_secs(1) {
            entry.1 += 1;
            return;
        }
        let suppressed = entry.1;
        *entry = (now, 0);
        suppressed
    };
    tracing::info!(
        path,
        reason = denial.reason,
        suppressed_since_last = suppressed,
        "refused before the handler: {}",
        denial.message
    );
}

impl<S, B> tower::Service<http::Request<B>> for AuthService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let config = self.config.current();
        if !config.is_enabled() {
            return Box::pin(self.inner.call(request));
        }
        let authorized = authorize(&config, &request).and_then(|grant| {
            // Authenticated first, then held to the principal's share.
            let permit = match (&grant, &self.limits) {
                (Some(grant), Some(limits)) => Some(limits.try_acquire(&grant.principal).ok_or_else(|| {
                    denial(
                        tonic::Code::ResourceExhausted,
                        "PRINCIPAL_LIMIT",
                        format!(
                            "{} already has {} calls in flight, its limit; retry with backoff",
                            grant.principal, limits.per_principal
                        ),
                    )
                })?),
                _ => None,
            };
            Ok((grant, permit))
        });
        match authorized {
            Ok((grant, permit)) => {
                if let Some(grant) = grant {
                    request.extensions_mut().insert(Authenticated(grant));
                }
                let call = self.inner.call(request);
                Box::pin(async move {
                    let response = call.await;
                    drop(permit);
                    response
                })
            }
            Err(denial) => {
                let path = request.uri().path();
                log_denial(path, &denial);
                if denial.reason != "PRINCIPAL_LIMIT" {
                    crate::metrics::auth_denied();
                }
                crate::metrics::error(crate::metrics::method_of(path), denial.code, denial.reason);
                let response = denial.into_response();
                Box::pin(async move { Ok(response) })
            }
        }
    }
}
