//! TLS for the gRPC port: its material ([`TlsSettings`]), the rustls
//! configuration in force ([`SharedTls`], replaced by `crate::reload`), and
//! accepting connections with the certificate in force at each handshake.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tidemark_net::{Admission, Admitted};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The server's TLS material (PEM).
#[derive(Clone)]
pub struct TlsSettings {
    /// The server's certificate chain.
    pub cert_pem: Vec<u8>,
    /// The server's private key.
    pub key_pem: Vec<u8>,
    /// With a client CA, clients must present a certificate it signed
    /// (mutual TLS); the certificate's common name is their identity.
    pub client_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// The TLS configuration handed to the next handshake.
#[derive(Clone)]
pub struct SharedTls {
    current: Arc<ArcSwap<rustls::ServerConfig>>,
    /// The console's: the same certificate, HTTP/1.1, no client
    /// certificate asked for (browsers sign in with a token).
    console: Arc<ArcSwap<rustls::ServerConfig>>,
    mutual: bool,
}

impl std::fmt::Debug for SharedTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTls").field("mutual", &self.mutual).finish()
    }
}

impl SharedTls {
    /// A TLS configuration from PEM material; an error says what is wrong.
    pub fn new(settings: &TlsSettings) -> Result<Self, String> {
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(rustls_config(settings)?)),
            console: Arc::new(ArcSwap::from_pointee(console_rustls_config(settings)?)),
            mutual: settings.client_ca_pem.is_some(),
        })
    }

    /// The configuration for the next handshake.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        self.current.load_full()
    }

    /// The console's configuration for the next handshake.
    pub fn console(&self) -> Arc<rustls::ServerConfig> {
        self.console.load_full()
    }

    /// Puts new material in force for the next handshake, if it is valid.
    /// Mutual TLS cannot be switched on or off by a reload: that changes who
    /// may connect, which is a restart's decision.
    pub fn replace(&self, settings: &TlsSettings) -> Result<(), String> {
        if settings.client_ca_pem.is_some() != self.mutual {
            return Err("a reload cannot switch mutual TLS on or off; restart to do that".to_owned());
        }
        let (grpc, console) = (rustls_config(settings)?, console_rustls_config(settings)?);
        self.current.store(Arc::new(grpc));
        self.console.store(Arc::new(console));
        Ok(())
    }
}

/// A rustls server configuration (HTTP/2 only) from PEM material. Refuses a
/// key that does not belong to the certificate.
pub fn rustls_config(settings: &TlsSettings) -> Result<rustls::ServerConfig, String> {
    build_config(settings, settings.client_ca_pem.as_deref(), b"h2")
}

/// The console's rustls configuration: the server's certificate, HTTP/1.1,
/// and no client certificate requested even with mutual TLS on the gRPC
/// port (browsers sign in with a token; docs/operations.md, "Console").
pub fn console_rustls_config(settings: &TlsSettings) -> Result<rustls::ServerConfig, String> {
    build_config(settings, None, b"http/1.1")
}

fn build_config(settings: &TlsSettings, client_ca: Option<&[u8]>, alpn: &[u8]) -> Result<rustls::ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(ca, "the client CA")? {
                roots
                    .add(cert)
                    .map_err(|e| format!("TLS: the client CA is not usable: {e}"))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS: the client CA is not usable: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let chain = certificates(&settings.cert_pem, "the certificate")?;
    let key = PrivateKeyDer::from_pem_slice(&settings.key_pem)
        .map_err(|e| format!("TLS: the private key is not a PEM key (PKCS#8, PKCS#1 or SEC1): {e}"))?;
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS: the certificate and key cannot be used together: {e}"))?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("TLS: {what} is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("TLS: {what} holds no certificate"));
    }
    Ok(certs)
}

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections accepted on `listener` whose handshake succeeded, as tonic's
/// incoming stream. Handshakes run concurrently, so a slow client delays
/// nobody else; a failed one is logged at debug and dropped.
pub(crate) fn incoming(
    listener: TcpListener,
    admission: Admission,
    tls: SharedTls,
    stop: CancellationToken,
) -> ReceiverStream<Result<TlsStream<Admitted<TcpStream>>, std::io::Error>> {
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            // Within the cap (a connection mid-handshake holds its place);
            // accept errors are logged at most once a second.
            let (stream, peer) = tokio::select! {
                () = stop.cancelled() => return,
                accepted = admission.accept(&listener) => accepted,
            };
            let _ = stream.get_ref().set_nodelay(true);
            let acceptor = TlsAcceptor::from(tls.current());
            let sender = sender.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let _ = sender.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(receiver)
}
