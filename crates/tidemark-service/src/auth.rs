//! Who may call what (SPEC §7): the credential file's format (tokens by
//! SHA-256, certificate rules), roles and table scopes, and the credentials
//! in force ([`SharedAuth`]). Shared by every front door: the gRPC server's
//! tower layer decides each call with it, the console each sign-in.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tidemark_core::{TablePattern, TableScope};

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

/// The caller of a request, as established by the server's auth layer; handlers read
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
        self.authenticate_hash(&hash_token(token))
    }

    /// The grant of a token known only by its SHA-256 (a console session
    /// keeps no token), compared as a presented token's.
    pub fn authenticate_hash(&self, presented: &[u8; 32]) -> Option<Arc<Grant>> {
        let mut found = None;
        for (hash, grant) in &self.tokens {
            if bool::from(hash.ct_eq(presented)) {
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

/// The credentials in force; cheap to read on every call, replaced whole by
/// a reload (the server's `reload` module).
#[derive(Debug, Clone)]
pub struct SharedAuth(Arc<ArcSwap<AuthConfig>>);

impl SharedAuth {
    /// Credentials that start as `config`.
    pub fn new(config: AuthConfig) -> Self {
        Self(Arc::new(ArcSwap::from_pointee(config)))
    }

    /// The credentials in force now.
    pub fn current(&self) -> Arc<AuthConfig> {
        self.0.load_full()
    }

    /// Puts `config` in force for the next call.
    pub fn replace(&self, config: AuthConfig) {
        self.0.store(Arc::new(config));
    }
}

impl From<Arc<AuthConfig>> for SharedAuth {
    fn from(config: Arc<AuthConfig>) -> Self {
        Self(Arc::new(ArcSwap::new(config)))
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
    fn minted_tokens_are_random_and_long() {
        let a = mint_token().unwrap();
        let b = mint_token().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
    }
}
