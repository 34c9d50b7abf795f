//! Credentials and TLS material that change without a restart.
//!
//! The server reads its credentials and its certificate through
//! [`SharedAuth`] and [`SharedTls`]; [`watch`] re-reads their files every
//! interval (and at once when triggered, e.g. by SIGHUP) and swaps in what
//! it read only when the whole of it is valid:
//!
//! - a file is taken only once two reads an interval apart agree (or on a
//!   trigger), so a file being written in place is not taken half-way;
//! - credentials that do not parse, certificates that do not parse or whose
//!   key does not match, and credentials that would switch authentication off
//!   are refused: the previous ones stay in force and the refusal is logged
//!   and counted (`tidemark_config_reloads_total{outcome="refused"}`).
//!
//! Calls in flight and open connections are not disturbed: a new credential
//! set applies to the next call, a new certificate to the next handshake.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::auth::{AuthConfig, SharedAuth};
use crate::tls::{SharedTls, TlsSettings};

/// Where the credentials come from: a file, plus inline text that cannot
/// change (an environment variable).
#[derive(Debug, Clone, Default)]
pub struct AuthSource {
    /// The credentials file.
    pub file: Option<PathBuf>,
    /// The same TOML given inline, e.g. `TIDEMARK_AUTH`.
    pub inline: Option<String>,
    /// Require credentials for reflection too.
    pub reflection_requires_auth: bool,
    /// Whether the server asks clients for certificates (mutual TLS):
    /// without it, certificate rules could never match and are refused.
    pub mutual_tls: bool,
}

impl AuthSource {
    /// Reads and parses the credentials.
    pub fn load(&self) -> Result<AuthConfig, String> {
        let text = match &self.file {
            Some(path) => Some(read_text(path)?),
            None => None,
        };
        self.parse(text.as_deref())
    }

    fn parse(&self, file_text: Option<&str>) -> Result<AuthConfig, String> {
        let mut config = AuthConfig::default();
        if let (Some(path), Some(text)) = (&self.file, file_text) {
            config = config.merge(AuthConfig::parse(text, &path.display().to_string())?)?;
        }
        if let Some(text) = &self.inline
            && !text.trim().is_empty()
        {
            config = config.merge(AuthConfig::parse(text, "TIDEMARK_AUTH")?)?;
        }
        config.reflection_requires_auth = self.reflection_requires_auth;
        if config.has_certificate_rules() && !self.mutual_tls {
            return Err(
                "[[certificate]] rules need mutual TLS, which is off: give the CA that signs client certificates \
                 (--tls-client-ca), or remove the rules"
                    .to_owned(),
            );
        }
        Ok(config)
    }
}

/// Where the TLS material comes from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM).
    pub key: PathBuf,
    /// Client CA (PEM), for mutual TLS.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// Reads the material.
    pub fn load(&self) -> Result<TlsSettings, String> {
        Ok(TlsSettings {
            cert_pem: read_bytes(&self.cert)?,
            key_pem: read_bytes(&self.key)?,
            client_ca_pem: self.client_ca.as_ref().map(read_bytes).transpose()?,
        })
    }
}

fn read_bytes(path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn read_text(path: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// What [`watch`] keeps up to date.
#[derive(Debug, Clone)]
pub struct ReloadSettings {
    /// How often the files are read; zero reads them only when triggered.
    pub interval: Duration,
    /// Read at once when notified (SIGHUP).
    pub trigger: Arc<Notify>,
    /// The credentials' source, when credentials come from a file.
    pub auth: Option<AuthSource>,
    /// The TLS files, when TLS is on.
    pub tls: Option<TlsFiles>,
}

/// One watched input: the bytes in force, and the bytes last seen.
#[derive(Debug, Default)]
struct Watched {
    in_force: Option<Vec<u8>>,
    seen: Option<Vec<u8>>,
    refused: Option<Vec<u8>>,
}

impl Watched {
    /// The bytes to try now, if they changed and have settled (or `now`).
    fn candidate(&mut self, read: Vec<u8>, now: bool) -> Option<Vec<u8>> {
        if self.in_force.as_ref() == Some(&read) {
            self.seen = None;
            return None;
        }
        if self.refused.as_ref() == Some(&read) && !now {
            return None;
        }
        let settled = self.seen.as_ref() == Some(&read);
        self.seen = Some(read.clone());
        (settled || now).then_some(read)
    }
}

/// Keeps `auth` and `tls` in step with their files until `stop`.
pub async fn watch(settings: ReloadSettings, auth: SharedAuth, tls: Option<SharedTls>, stop: CancellationToken) {
    let mut auth_state = Watched::default();
    let mut tls_state = Watched::default();
    // What is in force now is what was read at start-up.
    if let Some(source) = &settings.auth {
        auth_state.in_force = read_auth_bytes(source);
    }
    if let Some(files) = &settings.tls {
        tls_state.in_force = read_tls_bytes(files);
    }
    loop {
        let now = tokio::select! {
            () = stop.cancelled() => return,
            () = settings.trigger.notified() => true,
            () = sleep_or_forever(settings.interval) => false,
        };
        if now {
            tracing::info!("reloading credentials and certificates (signal)");
        }
        if let Some(source) = &settings.auth
            && let Some(bytes) = read_auth_bytes(source)
            && let Some(bytes) = auth_state.candidate(bytes, now)
        {
            match apply_auth(source, &bytes, &auth) {
                Ok((tokens, certificates)) => {
                    tracing::info!(tokens, certificates, "credentials reloaded");
                    crate::metrics::config_reload("auth", "applied");
                    auth_state.in_force = Some(bytes);
                    auth_state.refused = None;
                }
                Err(e) => {
                    tracing::error!("credentials NOT reloaded, the previous ones stay in force: {e}");
                    crate::metrics::config_reload("auth", "refused");
                    auth_state.refused = Some(bytes);
                }
            }
        }
        if let (Some(files), Some(shared)) = (&settings.tls, &tls)
            && let Some(bytes) = read_tls_bytes(files)
            && let Some(bytes) = tls_state.candidate(bytes, now)
        {
            // The material applied is the bytes that settled, not the
            // files read again now (they may have moved on since).
            match tls_material(&bytes, files.client_ca.is_some()).and_then(|material| shared.replace(&material)) {
                Ok(()) => {
                    tracing::info!("TLS certificate reloaded: new connections get it");
                    crate::metrics::config_reload("tls", "applied");
                    tls_state.in_force = Some(bytes);
                    tls_state.refused = None;
                }
                Err(e) => {
                    tracing::error!("TLS material NOT reloaded, the previous certificate stays in force: {e}");
                    crate::metrics::config_reload("tls", "refused");
                    tls_state.refused = Some(bytes);
                }
            }
        }
    }
}

async fn sleep_or_forever(interval: Duration) {
    if interval.is_zero() {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(interval).await;
}

fn read_auth_bytes(source: &AuthSource) -> Option<Vec<u8>> {
    let path = source.file.as_ref()?;
    match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            // A Secret being swapped can vanish for an instant; try again.
            tracing::debug!("cannot read {}: {e}", path.display());
            None
        }
    }
}

/// The three TLS files as one input, so a certificate and its key are taken
/// together or not at all.
fn read_tls_bytes(files: &TlsFiles) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    for path in std::iter::once(&files.cert)
        .chain(std::iter::once(&files.key))
        .chain(files.client_ca.iter())
    {
        let bytes = std::fs::read(path).ok()?;
        all.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        all.extend_from_slice(&bytes);
    }
    Some(all)
}

/// The TLS material [`read_tls_bytes`] read, back from its bytes.
fn tls_material(bytes: &[u8], client_ca: bool) -> Result<TlsSettings, String> {
    let mut rest = bytes;
    let mut next = || -> Result<Vec<u8>, String> {
        let malformed = || "the TLS files changed while they were read".to_owned();
        let (length, tail) = rest.split_first_chunk::<8>().ok_or_else(malformed)?;
        let length = usize::try_from(u64::from_le_bytes(*length)).map_err(|_| malformed())?;
        if tail.len() < length {
            return Err(malformed());
        }
        let (file, tail) = tail.split_at(length);
        rest = tail;
        Ok(file.to_vec())
    };
    Ok(TlsSettings {
        cert_pem: next()?,
        key_pem: next()?,
        client_ca_pem: if client_ca { Some(next()?) } else { None },
    })
}

fn apply_auth(source: &AuthSource, bytes: &[u8], shared: &SharedAuth) -> Result<(usize, usize), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the credentials file is not UTF-8".to_owned())?;
    let config = source.parse(Some(text))?;
    if !config.is_enabled() && shared.current().is_enabled() {
        return Err("the new credentials are empty; that would switch authentication off".to_owned());
    }
    let counts = config.counts();
    shared.replace(config);
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_taken_once_two_reads_agree() {
        let mut w = Watched {
            in_force: Some(b"a".to_vec()),
            ..Watched::default()
        };
        assert_eq!(w.candidate(b"a".to_vec(), false), None, "unchanged");
        assert_eq!(w.candidate(b"ab".to_vec(), false), None, "first sight of a change");
        assert_eq!(w.candidate(b"abc".to_vec(), false), None, "still being written");
        assert_eq!(w.candidate(b"abc".to_vec(), false), Some(b"abc".to_vec()), "settled");
        assert_eq!(
            w.candidate(b"xyz".to_vec(), true),
            Some(b"xyz".to_vec()),
            "a signal takes it at once"
        );
        w.refused = Some(b"bad".to_vec());
        assert_eq!(w.candidate(b"bad".to_vec(), false), None);
        assert_eq!(
            w.candidate(b"bad".to_vec(), false),
            None,
            "a refused file is not retried"
        );
    }

    #[test]
    fn the_tls_material_applied_is_the_bytes_that_settled() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: Some(dir.path().join("ca.crt")),
        };
        std::fs::write(&files.cert, b"certificate A").unwrap();
        std::fs::write(&files.key, b"key A").unwrap();
        std::fs::write(files.client_ca.as_ref().unwrap(), b"").unwrap();
        let settled = read_tls_bytes(&files).unwrap();
        // The files move on after the bytes settled (a rotation half done).
        std::fs::write(&files.cert, b"certificate B").unwrap();
        let material = tls_material(&settled, true).unwrap();
        assert_eq!(material.cert_pem, b"certificate A");
        assert_eq!(material.key_pem, b"key A");
        assert_eq!(material.client_ca_pem.as_deref(), Some(&b""[..]));
        assert!(tls_material(&settled[..settled.len() - 1], true).is_err(), "cut short");
    }

    #[test]
    fn credentials_that_switch_authentication_off_are_refused() {
        let source = AuthSource {
            file: Some(PathBuf::from("auth.toml")),
            ..AuthSource::default()
        };
        let hash = crate::auth::hex(&crate::auth::hash_token("t"));
        let good = format!("[[token]]\nname = \"a\"\nsha256 = \"{hash}\"\nroles = [\"worker\"]\n");
        let shared = SharedAuth::new(source.parse(Some(&good)).unwrap());
        assert!(apply_auth(&source, b"", &shared).unwrap_err().contains("empty"));
        assert!(apply_auth(&source, b"[[token]]\nname = \"a\"\nsha2", &shared).is_err());
        assert!(shared.current().authenticate_token("t").is_some(), "the old ones stay");
    }
}
