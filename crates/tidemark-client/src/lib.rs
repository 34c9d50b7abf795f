//! Rust client SDK for tidemark.
//!
//! Re-exports the generated `tidemark.v1` clients, connects them with a bearer
//! token and TLS ([`ClientOptions`]), and adds [`ApiError`], which exposes a
//! failed call's `google.rpc.ErrorInfo` reason and details and its
//! `BadRequest` field violations.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod client;
pub mod connector;
mod keeper;
pub mod retry;

pub use client::{Client, duration_from_pb, duration_to_pb};
pub use keeper::{LeaseKeeper, LeaseState};
pub use retry::RetryPolicy;

pub use tidemark_proto::v1 as proto;
pub use tidemark_proto::v1::admin_client::AdminClient;
pub use tidemark_proto::v1::coordinator_client::CoordinatorClient;
pub use tidemark_proto::v1::retention_client::RetentionClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic_types::StatusExt;

/// The name and version this SDK leads its user-agent with: the server
/// records it on the leases it grants, so an operator can tell which client
/// holds one.
pub const USER_AGENT: &str = concat!("tidemark-rust/", env!("CARGO_PKG_VERSION"));

/// Connects a Coordinator client to `endpoint` (e.g. `http://127.0.0.1:50051`)
/// without credentials.
pub async fn connect_coordinator(endpoint: impl Into<String>) -> Result<CoordinatorClient<Channel>, ConnectError> {
    let endpoint: String = endpoint.into();
    let channel = Endpoint::from_shared(endpoint.clone())
        .map_err(|e| ConnectError::configuration(e.to_string()))?
        .user_agent(USER_AGENT)
        .map_err(|e| ConnectError::configuration(e.to_string()))?
        .connect()
        .await
        .map_err(|e| ConnectError::transport(&endpoint, &e))?;
    Ok(CoordinatorClient::new(channel))
}

/// How to reach a tidemark server.
#[derive(Clone, Default)]
pub struct ClientOptions {
    /// `http://host:port`, or `https://host:port` with TLS.
    pub endpoint: String,
    /// A bearer token, sent as `authorization: Bearer <token>`.
    pub token: Option<String>,
    /// TLS settings (required for `https://`).
    pub tls: Option<ClientTls>,
    /// How long connecting may take (default 5 s).
    pub connect_timeout: Option<Duration>,
    /// Longest time one call may take on this channel (default: none; the
    /// retried worker calls set their own deadlines).
    pub request_timeout: Option<Duration>,
    /// How the endpoint's host is resolved for each new connection (default:
    /// the system resolver). Every connection picks one of the addresses at
    /// random; see [`connector`].
    pub resolve: Option<connector::Resolve>,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("resolve", &self.resolve.as_ref().map(|_| "custom"))
            .finish()
    }
}

/// TLS settings of a client (PEM).
#[derive(Clone, Default)]
pub struct ClientTls {
    /// CA certificate(s) to trust; `None`: the system's roots are not used,
    /// so give the CA that signed the server's certificate.
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate and key, for mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name to verify in the server's certificate (default: the
    /// endpoint's host).
    pub domain: Option<String>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.ca_pem.is_some())
            .field("client_certificate", &self.identity.is_some())
            .field("domain", &self.domain)
            .finish()
    }
}

/// Adds the bearer token to every call, and the W3C `traceparent` of the
/// application's current span when it has one (an OpenTelemetry layer in
/// its tracing subscriber), so the server's spans join the caller's trace.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    authorization: Option<MetadataValue<Ascii>>,
}

impl Credentials {
    /// Credentials sending `token` (none when `None`).
    pub fn new(token: Option<&str>) -> Result<Self, ConnectError> {
        let authorization = token
            .map(|t| {
                format!("Bearer {t}")
                    .parse::<MetadataValue<Ascii>>()
                    .map_err(|_| ConnectError::configuration("the token must be printable ASCII".into()))
            })
            .transpose()?;
        Ok(Self { authorization })
    }
}

impl Interceptor for Credentials {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.authorization {
            request.metadata_mut().insert("authorization", value.clone());
        }
        let mut trace = http::HeaderMap::new();
        tidemark_trace::inject(&mut trace);
        for (name, value) in &trace {
            if let (Ok(value), Ok(key)) = (
                MetadataValue::<Ascii>::try_from(value.as_bytes()),
                tonic::metadata::MetadataKey::from_bytes(name.as_str().as_bytes()),
            ) {
                request.metadata_mut().insert(key, value);
            }
        }
        Ok(request)
    }
}

/// A channel that sends the configured credentials on every call.
pub type AuthChannel = InterceptedService<Channel, Credentials>;

/// Connects to a server with a token and TLS as configured. Build any client
/// on the result: `CoordinatorClient::new(channel)`.
pub async fn connect(options: &ClientOptions) -> Result<AuthChannel, ConnectError> {
    let mut endpoint = Endpoint::from_shared(options.endpoint.clone())
        .map_err(|e| ConnectError::configuration(format!("invalid endpoint {:?}: {e}", options.endpoint)))?
        .connect_timeout(options.connect_timeout.unwrap_or(Duration::from_secs(5)))
        .user_agent(USER_AGENT)
        .map_err(|e| ConnectError::configuration(e.to_string()))?;
    if let Some(timeout) = options.request_timeout {
        endpoint = endpoint.timeout(timeout);
    }
    if let Some(tls) = &options.tls {
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &tls.ca_pem {
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &tls.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(domain) = &tls.domain {
            config = config.domain_name(domain.clone());
        }
        endpoint = endpoint
            .tls_config(config)
            .map_err(|e| ConnectError::configuration(format!("TLS configuration: {e}")))?;
    }
    let resolve = options.resolve.clone().unwrap_or_else(connector::system_resolver);
    let channel = endpoint
        .connect_with_connector(tower::service_fn(move |uri| {
            connector::connect(Arc::clone(&resolve), uri)
        }))
        .await
        .map_err(|e| ConnectError::transport(&options.endpoint, &e))?;
    Ok(InterceptedService::new(
        channel,
        Credentials::new(options.token.as_deref())?,
    ))
}

/// The server could not be reached (or the options are invalid): what
/// failed, with every cause the transport gave, and which kind of failure
/// it was.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to tidemark: {message}")]
pub struct ConnectError {
    message: String,
    kind: ConnectFailure,
}

/// Why a connection failed, for a caller that says what to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// The options are wrong (an endpoint that is no URL, a bad token, TLS
    /// material that does not load).
    Configuration,
    /// Nothing listens at the address.
    Refused,
    /// The host name does not resolve.
    NameResolution,
    /// The TLS handshake failed (an unknown CA, a name mismatch, plaintext
    /// on one side).
    Tls,
    /// No answer in time.
    Timeout,
    /// Anything else the transport reported.
    Other,
}

impl ConnectError {
    fn configuration(message: String) -> Self {
        Self {
            message,
            kind: ConnectFailure::Configuration,
        }
    }

    /// A transport failure reaching `endpoint`, with its causes.
    fn transport(endpoint: &str, error: &(dyn std::error::Error + 'static)) -> Self {
        let mut message = format!("{endpoint}: {error}");
        let mut source = error.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        let lower = message.to_lowercase();
        let kind = if lower.contains("connection refused") {
            ConnectFailure::Refused
        } else if lower.contains("resolves to no address")
            || lower.contains("failed to lookup address")
            || lower.contains("name or service not known")
            || lower.contains("name resolution")
        {
            ConnectFailure::NameResolution
        } else if lower.contains("tls") || lower.contains("certificate") || lower.contains("handshake") {
            ConnectFailure::Tls
        } else if lower.contains("timed out") || lower.contains("timeout") {
            ConnectFailure::Timeout
        } else {
            ConnectFailure::Other
        };
        Self { message, kind }
    }

    /// Which kind of failure it was.
    pub fn kind(&self) -> ConnectFailure {
        self.kind
    }
}

/// A failed call, with tidemark's error details decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code:?} {reason}: {message}")]
pub struct ApiError {
    /// The gRPC code.
    pub code: tonic::Code,
    /// The `ErrorInfo` reason (e.g. `LEASE_NOT_HELD`); empty when the status
    /// carries none (e.g. a transport error).
    pub reason: String,
    /// The `ErrorInfo` domain ("tidemark").
    pub domain: String,
    /// The `ErrorInfo` metadata (e.g. `current_epoch`, `holder`).
    pub metadata: HashMap<String, String>,
    /// `BadRequest` field violations: (field path, description).
    pub field_violations: Vec<(String, String)>,
    /// The status message.
    pub message: String,
}

impl ApiError {
    /// An error raised on the client side (no server answer).
    pub fn local(message: impl Into<String>) -> Self {
        Self {
            code: tonic::Code::Unknown,
            reason: String::new(),
            domain: String::new(),
            metadata: HashMap::new(),
            field_violations: Vec::new(),
            message: message.into(),
        }
    }

    /// Whether the error's reason is `reason`.
    pub fn is(&self, reason: &str) -> bool {
        self.reason == reason
    }

    /// The fields named by `BadRequest` violations.
    pub fn fields(&self) -> Vec<&str> {
        self.field_violations.iter().map(|(f, _)| f.as_str()).collect()
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        let details = status.get_error_details();
        let (reason, domain, metadata) = details
            .error_info()
            .map(|i| (i.reason.clone(), i.domain.clone(), i.metadata.clone()))
            .unwrap_or_default();
        let field_violations = details
            .bad_request()
            .map(|b| {
                b.field_violations
                    .iter()
                    .map(|v| (v.field.clone(), v.description.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            code: local_code(&status),
            reason,
            domain,
            metadata,
            field_violations,
            message: status.message().to_owned(),
        }
    }
}

/// The status's code, except that a call cut off by the channel's own
/// request timeout (tonic reports CANCELLED, with the message of its
/// `TimeoutExpired` and nothing else to tell it by) is DEADLINE_EXCEEDED,
/// which is what happened.
fn local_code(status: &tonic::Status) -> tonic::Code {
    let timed_out =
        status.code() == tonic::Code::Cancelled && status.message() == tonic::TimeoutExpired(()).to_string();
    if timed_out {
        tonic::Code::DeadlineExceeded
    } else {
        status.code()
    }
}

#[cfg(test)]
mod local_code_tests {
    use super::*;

    #[test]
    fn a_channel_timeout_is_a_deadline_not_a_cancellation() {
        let timed_out = tonic::Status::cancelled(tonic::TimeoutExpired(()).to_string());
        assert_eq!(ApiError::from(timed_out).code, tonic::Code::DeadlineExceeded);
        let cancelled = tonic::Status::cancelled("operation was canceled");
        assert_eq!(ApiError::from(cancelled).code, tonic::Code::Cancelled);
    }
}
