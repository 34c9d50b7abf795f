//! The server's settings: limits, timeouts, intervals, credentials, TLS
//! and reloads, with the defaults every flag of `tidemark serve` starts from.

use std::time::Duration;

use crate::auth::{AuthConfig, SharedAuth};
use crate::reload::ReloadSettings;
use crate::tls::TlsSettings;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Longest time one RPC may take; slower calls fail with
    /// DEADLINE_EXCEEDED (reason TIMEOUT).
    pub request_timeout: Duration,
    /// RPCs in flight across all connections; more are shed at once with
    /// RESOURCE_EXHAUSTED instead of queueing.
    pub max_in_flight: usize,
    /// RPCs of one principal in flight at once (with authentication on);
    /// more are refused at once with RESOURCE_EXHAUSTED, reason
    /// PRINCIPAL_LIMIT. Zero: no per-principal limit.
    pub max_in_flight_per_principal: usize,
    /// RPCs in flight on one connection; more wait.
    pub per_connection_limit: usize,
    /// Most gRPC connections held at once (`--max-connections`); more are
    /// refused at once, so descriptors stay for the database and stores.
    pub max_connections: usize,
    /// Largest request message accepted.
    pub max_message_bytes: usize,
    /// How long to keep serving after turning NOT_SERVING on shutdown, so
    /// load balancers stop sending new calls first.
    pub shutdown_drain: Duration,
    /// How long in-flight RPCs may take to finish once the server stops
    /// accepting calls.
    pub shutdown_grace: Duration,
    /// How often the database is pinged for readiness.
    pub readiness_interval: Duration,
    /// How often the sweeper expires consumers and prunes history; zero
    /// turns it off.
    pub sweep_interval: Duration,
    /// Most consumers one sweep expires.
    pub sweep_limit: i64,
    /// How often the consumer mirror writes stale Paimon consumer files of
    /// registered tables (SPEC §9); zero turns it off.
    pub mirror_interval: Duration,
    /// A consumer refreshed this long after its file was written gets its
    /// file rewritten, so the file's modification time tracks updated_at.
    pub mirror_refresh: Duration,
    /// History rows (and stale lease grants) older than this are pruned;
    /// `None` keeps them forever.
    pub history_retention: Option<Duration>,
    /// How often gauges are computed (see `metrics`); zero turns the
    /// collector off.
    pub gauge_interval: Duration,
    /// Per-consumer lag series for this many most lagging consumers (0:
    /// none, only per-branch maxima).
    pub per_consumer_metrics: i64,
    /// Connections older than this are asked to go away (HTTP/2 GOAWAY),
    /// so clients reconnect and spread over the replicas there are now;
    /// calls in flight finish (each within `request_timeout`, the grace
    /// period). `None` keeps connections forever.
    pub max_connection_age: Option<Duration>,
    /// HTTP/2 pings on idle connections this often, to find dead peers.
    pub keepalive_interval: Option<Duration>,
    /// A ping not answered within this closes the connection.
    pub keepalive_timeout: Duration,
    /// Where table registrations may point; `None`: anywhere the server can
    /// reach.
    pub allowed_table_locations: Option<tidemark_service::paimon::LocationAllowList>,
    /// What this replica allows of ExportState streams.
    pub exports: crate::ExportLimits,
    /// Credentials and their roles; empty means no authentication.
    pub auth: SharedAuth,
    /// TLS for the gRPC port; `None` serves plaintext.
    pub tls: Option<TlsSettings>,
    /// Files to re-read for new credentials and certificates.
    pub reload: Option<ReloadSettings>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            max_in_flight: 1024,
            max_in_flight_per_principal: 512,
            per_connection_limit: 256,
            max_connections: 10_000,
            max_message_bytes: 1024 * 1024,
            shutdown_drain: Duration::ZERO,
            shutdown_grace: Duration::from_secs(30),
            readiness_interval: Duration::from_secs(2),
            sweep_interval: Duration::from_secs(60),
            sweep_limit: 1000,
            mirror_interval: Duration::from_secs(1),
            mirror_refresh: Duration::from_secs(60),
            history_retention: Some(Duration::from_secs(30 * 86_400)),
            gauge_interval: Duration::from_secs(15),
            per_consumer_metrics: 0,
            max_connection_age: Some(Duration::from_secs(300)),
            keepalive_interval: Some(Duration::from_secs(30)),
            keepalive_timeout: Duration::from_secs(10),
            allowed_table_locations: None,
            exports: crate::ExportLimits::default(),
            auth: SharedAuth::new(AuthConfig::default()),
            tls: None,
            reload: None,
        }
    }
}
