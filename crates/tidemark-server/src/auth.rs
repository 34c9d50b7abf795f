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

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tidemark_core::{TablePattern, TableScope};
use tonic::Status;
use tonic::body::Body;
use tonic_types::{ErrorDetails, StatusExt};

use crate::reload::SharedAuth;
use crate::status::ERROR_DOMAIN;

/// A role a credential carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The worker protocol (Coordinator).
    Worker,
    /// Retention fences (Retention).
    Maintainer,
    /// Read-only operator calls (Admin list, describe, history, options).
    Viewer,
    /// Everything.
    Operator,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Worker => "worker",
            Role::Maintainer => "maintainer",
            Role::Viewer => "viewer",
            Role::Operator => "operator",
        })
    }
}

/// What a credential may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The principal's name (token name, or `cert:<common name>`).
    pub principal: String,
    /// Its roles.
    pub roles: HashSet<Role>,
    /// The tables it may touch.
    pub scope: TableScope,
}

impl Grant {
    /// Whether it has any of `roles`.
    pub fn has_any(&self, roles: &[Role]) -> bool {
        roles.iter().any(|r| self.roles.contains(r))
    }
}

/// The caller of a request, as established by [`AuthLayer`]; handlers read
/// it from the request extensions.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Arc<Grant>);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    token: Vec<TokenConfig>,
    #[serde(default)]
    certificate: Vec<CertificateConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenConfig {
    name: String,
    sha256: String,
    roles: Vec<Role>,
    #[serde(default)]
    tables: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CertificateConfig {
    /// A glob on a URI subject alternative name (a SPIFFE ID such as
    /// `spiffe://example.org/ns/etl/*`).
    #[serde(default)]
    uri: Option<String>,
    /// A glob on a DNS subject alternative name.
    #[serde(default)]
    dns_name: Option<String>,
    /// A glob on the subject's common name.
    #[serde(default)]
    common_name: Option<String>,
    roles: Vec<Role>,
    #[serde(default)]
    tables: Vec<String>,
}

/// What a certificate rule matches. Rules are tried in this order — every
/// URI rule, then every DNS rule, then every common-name rule, each kind in
/// file order — and the first match decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum CertField {
    Uri,
    DnsName,
    CommonName,
}

impl CertField {
    fn key(self) -> &'static str {
        match self {
            CertField::Uri => "uri",
            CertField::DnsName => "dns_name",
            CertField::CommonName => "common_name",
        }
    }
}

/// The configured credentials.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    tokens: Vec<([u8; 32], Arc<Grant>)>,
    /// Certificate rules: a glob on a URI or DNS subject alternative name,
    /// or on the subject's common name.
    certificates: Vec<(CertField, TablePattern, Arc<Grant>)>,
    /// Require credentials for server reflection too.
    pub reflection_requires_auth: bool,
}

fn scope_of(tables: &[String], who: &str) -> Result<TableScope, String> {
    if tables.is_empty() || tables.iter().any(|t| t == "*") {
        return Ok(TableScope::All);
    }
    let patterns = tables
        .iter()
        .map(|t| TablePattern::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{who}: {e}"))?;
    Ok(TableScope::Only(patterns))
}

fn roles_of(roles: &[Role], who: &str) -> Result<HashSet<Role>, String> {
    if roles.is_empty() {
        return Err(format!(
            "{who}: needs at least one role (worker, maintainer, viewer, operator)"
        ));
    }
    Ok(roles.iter().copied().collect())
}

/// The SHA-256 of a token, as configured.
pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random token: `tdm_` and 256 random bits in hex.
pub fn mint_token() -> Result<String, String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness available: {e}"))?;
    Ok(format!("tdm_{}", hex(&secret)))
}

impl AuthConfig {
    /// Parses the TOML configuration (`[[token]]` and `[[certificate]]`
    /// tables); `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, String> {
        let file: FileConfig = toml::from_str(text).map_err(|e| format!("{source}: {e}"))?;
        let mut config = Self::default();
        for t in file.token {
            let who = format!("{source}: token {:?}", t.name);
            if t.name.is_empty() || t.name.chars().any(char::is_control) || t.name.len() > 128 {
                return Err(format!(
                    "{who}: a token needs a printable name of at most 128 characters"
                ));
            }
            let hash = parse_hash(&t.sha256).ok_or_else(|| {
                format!("{who}: sha256 must be 64 hex digits (the SHA-256 of the token; see `tidemark token mint`)")
            })?;
            let grant = Grant {
                principal: t.name.clone(),
                roles: roles_of(&t.roles, &who)?,
                scope: scope_of(&t.tables, &who)?,
            };
            config.tokens.push((hash, Arc::new(grant)));
        }
        for c in file.certificate {
            let chosen: Vec<(CertField, String)> = [
                (CertField::Uri, c.uri),
                (CertField::DnsName, c.dns_name),
                (CertField::CommonName, c.common_name),
            ]
            .into_iter()
            .filter_map(|(field, value)| value.map(|v| (field, v)))
            .collect();
            let [(field, glob)] = <[_; 1]>::try_from(chosen).map_err(|chosen| {
                format!(
                    "{source}: a [[certificate]] rule names exactly one of uri, dns_name or common_name (this one names {})",
                    chosen.len()
                )
            })?;
            let who = format!("{source}: certificate {} {glob:?}", field.key());
            let pattern = TablePattern::parse(&glob).map_err(|_| {
                format!("{who}: must be a name or a glob such as \"spark-*\" or \"spiffe://example.org/etl/*\"")
            })?;
            let grant = Grant {
                principal: format!("cert:{glob}"),
                roles: roles_of(&c.roles, &who)?,
                scope: scope_of(&c.tables, &who)?,
            };
            config.certificates.push((field, pattern, Arc::new(grant)));
        }
        config.check_unique()?;
        Ok(config)
    }

    /// Adds another configuration's credentials (e.g. a file and an
    /// environment variable).
    pub fn merge(mut self, other: AuthConfig) -> Result<Self, String> {
        self.tokens.extend(other.tokens);
        self.certificates.extend(other.certificates);
        self.reflection_requires_auth |= other.reflection_requires_auth;
        self.check_unique()?;
        Ok(self)
    }

    fn check_unique(&self) -> Result<(), String> {
        let mut names = HashSet::new();
        let mut hashes = HashSet::new();
        for (hash, grant) in &self.tokens {
            if !names.insert(grant.principal.clone()) {
                return Err(format!("token name {:?} is configured twice", grant.principal));
            }
            if !hashes.insert(*hash) {
                return Err(format!(
                    "token {:?} has the same secret as another token",
                    grant.principal
                ));
            }
        }
        let mut rules = HashSet::new();
        for (field, pattern, _) in &self.certificates {
            if !rules.insert((*field, pattern.as_str().to_owned())) {
                return Err(format!(
                    "certificate {} {:?} is configured twice",
                    field.key(),
                    pattern.as_str()
                ));
            }
        }
        Ok(())
    }

    /// Whether any credential is configured (else the server is open, and
    /// only on loopback).
    pub fn is_enabled(&self) -> bool {
        !self.tokens.is_empty() || !self.certificates.is_empty()
    }

    /// Number of tokens and certificate rules.
    pub fn counts(&self) -> (usize, usize) {
        (self.tokens.len(), self.certificates.len())
    }

    /// The grant of a presented token. Every configured hash is compared, in
    /// constant time, whichever matches.
    pub fn authenticate_token(&self, token: &str) -> Option<Arc<Grant>> {
        let presented = hash_token(token);
        let mut found = None;
        for (hash, grant) in &self.tokens {
            if bool::from(hash.ct_eq(&presented)) {
                found = Some(Arc::clone(grant));
            }
        }
        found
    }

    /// Whether any certificate rule is configured (they need mutual TLS).
    pub fn has_certificate_rules(&self) -> bool {
        !self.certificates.is_empty()
    }

    /// The grant of a verified client certificate (DER): URI rules against
    /// its URI subject alternative names (SPIFFE IDs), then DNS rules
    /// against its DNS names, then common-name rules against its subject's
    /// common name; the first match decides, and the principal is `cert:`
    /// and the matched value.
    pub fn authenticate_certificate(&self, der: &[u8]) -> Option<Arc<Grant>> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let mut uris = Vec::new();
        let mut dns_names = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::URI(uri) => uris.push((*uri).to_owned()),
                    GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
                    _ => {}
                }
            }
        }
        let common_names: Vec<String> = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(|cn| vec![cn.to_owned()])
            .unwrap_or_default();
        for (field, values) in [
            (CertField::Uri, &uris),
            (CertField::DnsName, &dns_names),
            (CertField::CommonName, &common_names),
        ] {
            for (rule_field, rule, grant) in &self.certificates {
                if *rule_field != field {
                    continue;
                }
                if let Some(value) = values.iter().find(|v| rule.matches(v)) {
                    return Some(Arc::new(Grant {
                        principal: format!("cert:{value}"),
                        ..(**grant).clone()
                    }));
                }
            }
        }
        None
    }
}

fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Who may call a gRPC path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Anyone (health).
    Open,
    /// Any authenticated caller.
    Authenticated,
    /// Callers with one of these roles.
    Roles(&'static [Role]),
}

const READ_ONLY_ADMIN: [&str; 5] = [
    "ListConsumers",
    "DescribeConsumer",
    "ListHistory",
    "GetTableOptions",
    "ListTables",
];

fn access(path: &str, reflection_requires_auth: bool) -> Access {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let service = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or_default();
    match service {
        "grpc.health.v1.Health" => Access::Open,
        "grpc.reflection.v1.ServerReflection" | "grpc.reflection.v1alpha.ServerReflection" => {
            if reflection_requires_auth {
                Access::Authenticated
            } else {
                Access::Open
            }
        }
        "tidemark.v1.Coordinator" => Access::Roles(&[Role::Worker, Role::Operator]),
        // Every Retention call is a read (fences and their explanations);
        // SPEC §7 lets viewers make them.
        "tidemark.v1.Retention" => Access::Roles(&[Role::Maintainer, Role::Viewer, Role::Operator]),
        "tidemark.v1.Admin" if READ_ONLY_ADMIN.contains(&method) => Access::Roles(&[Role::Viewer, Role::Operator]),
        "tidemark.v1.Admin" => Access::Roles(&[Role::Operator]),
        _ => Access::Authenticated,
    }
}

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
    if access == Access::Open {
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
    if let Access::Roles(roles) = access
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AuthConfig {
        let worker = hex(&hash_token("tdm_worker"));
        let viewer = hex(&hash_token("tdm_viewer"));
        AuthConfig::parse(
            &format!(
                r#"
                [[token]]
                name = "etl"
                sha256 = "{worker}"
                roles = ["worker"]
                tables = ["db.*"]

                [[token]]
                name = "dashboards"
                sha256 = "{viewer}"
                roles = ["viewer"]
                "#
            ),
            "test",
        )
        .unwrap()
    }

    #[test]
    fn tokens_are_recognized_by_hash() {
        let c = config();
        let grant = c.authenticate_token("tdm_worker").unwrap();
        assert_eq!(grant.principal, "etl");
        assert!(grant.roles.contains(&Role::Worker));
        assert!(!grant.scope.is_all());
        assert!(c.authenticate_token("tdm_nope").is_none());
        assert!(c.authenticate_token("").is_none());
        assert!(c.authenticate_token("tdm_viewer").unwrap().scope.is_all());
    }

    #[test]
    fn configuration_errors_name_the_problem() {
        let err = AuthConfig::parse("[[token]]\nname='a'\nsha256='zz'\nroles=['worker']", "f").unwrap_err();
        assert!(err.contains("64 hex digits"), "{err}");
        let err = AuthConfig::parse("[[token]]\nname='a'\nsha256='zz'\nroles=['admin']", "f").unwrap_err();
        assert!(err.contains("unknown variant"), "{err}");
        let h = hex(&hash_token("x"));
        let twice = format!(
            "[[token]]\nname='a'\nsha256='{h}'\nroles=['worker']\n[[token]]\nname='a'\nsha256='{h}'\nroles=['viewer']"
        );
        assert!(AuthConfig::parse(&twice, "f").unwrap_err().contains("twice"));
        let err = AuthConfig::parse("[[tokens]]\nname='a'", "f").unwrap_err();
        assert!(err.contains("unknown field"), "{err}");
    }

    #[test]
    fn roles_per_method() {
        use Access::*;
        assert_eq!(access("/grpc.health.v1.Health/Check", false), Open);
        assert_eq!(
            access("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", false),
            Open
        );
        assert_eq!(
            access("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true),
            Authenticated
        );
        assert_eq!(
            access("/tidemark.v1.Coordinator/CommitBatch", false),
            Roles(&[Role::Worker, Role::Operator])
        );
        assert_eq!(
            access("/tidemark.v1.Admin/ListConsumers", false),
            Roles(&[Role::Viewer, Role::Operator])
        );
        assert_eq!(
            access("/tidemark.v1.Admin/ResetConsumer", false),
            Roles(&[Role::Operator])
        );
        assert_eq!(
            access("/tidemark.v1.Retention/GetRetentionFence", false),
            Roles(&[Role::Maintainer, Role::Viewer, Role::Operator])
        );
    }

    #[test]
    fn minted_tokens_are_random_and_long() {
        let a = mint_token().unwrap();
        let b = mint_token().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
    }
}
