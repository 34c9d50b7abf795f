//! Assembles and runs the gRPC server: the tidemark services, health,
//! reflection, tower layers, readiness tracking and graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tidemark_proto::v1::admin_server::AdminServer;
use tidemark_proto::v1::coordinator_server::CoordinatorServer;
use tidemark_proto::v1::retention_server::RetentionServer;
use tidemark_service::App;
use tidemark_service::store::{Store, StoreError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tower::limit::GlobalConcurrencyLimitLayer;

use crate::admin::AdminService;
use crate::auth::{AuthConfig, AuthLayer, SharedAuth};
use crate::coordinator::CoordinatorService;
use crate::reload::ReloadSettings;
use crate::retention::RetentionService;
use crate::tls::{SharedTls, TlsSettings};

/// The health service name whose status tracks the database: SERVING while
/// the database answers. Kubernetes readiness probes ask for it; liveness
/// probes ask for "" (the process), which never depends on the database.
pub const READINESS_SERVICE: &str = "readiness";

/// The response header naming the server's version on every answer
/// (`tidemark version` reads it; `grpcurl -v` shows it).
pub const VERSION_HEADER: &str = "x-tidemark-version";

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

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The reflection service could not be built from the descriptors.
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The TLS material is not usable.
    #[error("{0}")]
    Tls(String),
    /// The transport failed.
    #[error("gRPC transport error: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The server task panicked.
    #[error("the server task failed: {0}")]
    Task(String),
}

/// Serves the tidemark API on `listener` until `shutdown` completes, then
/// drains: health turns NOT_SERVING, the server keeps answering for
/// `shutdown_drain`, stops accepting calls and waits up to `shutdown_grace`
/// for in-flight RPCs.
pub async fn serve(
    config: ServerConfig,
    store: Store,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_with_health(config, store, listener, None, shutdown).await
}

/// [`serve`], plus `grpc.health.v1` alone in plaintext on `health_listener`
/// (Kubernetes gRPC probes speak neither TLS nor credentials).
pub async fn serve_with_health(
    config: ServerConfig,
    store: Store,
    listener: TcpListener,
    health_listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let listeners = Listeners {
        grpc: listener,
        health: health_listener,
        front_door: None,
    };
    serve_listeners(config, store, listeners, shutdown).await
}

/// The ports a replica serves.
pub struct Listeners {
    /// The gRPC API.
    pub grpc: TcpListener,
    /// `grpc.health.v1` alone, in plaintext.
    pub health: Option<TcpListener>,
    /// Another front door on the same application, such as the operators'
    /// console (`tidemark-console`), which owns its own listener.
    pub front_door: Option<FrontDoor>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners")
            .field("grpc", &self.grpc)
            .field("health", &self.health)
            .field("front_door", &self.front_door.is_some())
            .finish()
    }
}

/// A front door served beside the gRPC API (the console): started once the
/// replica's application exists, with what it shares with the gRPC API;
/// it ends when `stop` is cancelled (the replica stops accepting calls),
/// and the replica waits for it before it exits. The server knows nothing
/// else of it, so it depends on no front door's crate.
pub type FrontDoor = Box<dyn FnOnce(SharedWithFrontDoor) -> tokio::task::JoinHandle<()> + Send>;

/// What a front door shares with the gRPC API.
pub struct SharedWithFrontDoor {
    /// The replica's one application (its registered tables and caches).
    pub app: App,
    /// The credentials in force, reloaded with the gRPC API's.
    pub auth: SharedAuth,
    /// The TLS configuration to serve HTTPS with, as it stands at each
    /// handshake (reloaded with the gRPC API's); `None`: plaintext.
    pub tls: Option<Arc<dyn Fn() -> Arc<tokio_rustls::rustls::ServerConfig> + Send + Sync>>,
    /// How the gRPC API answers an error: its code number and message (the
    /// one mapping, [`crate::status::store_status`]).
    pub errors: fn(StoreError) -> (i32, String),
    /// Cancelled when the replica stops accepting calls.
    pub stop: CancellationToken,
}

impl std::fmt::Debug for SharedWithFrontDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWithFrontDoor")
            .field("app", &self.app)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// The gRPC API's answer to `err`, for a front door: the code's number and
/// the message (never SQL text).
fn front_door_error(err: StoreError) -> (i32, String) {
    let status = crate::status::store_status(err, "front door");
    (status.code() as i32, status.message().to_owned())
}

/// [`serve_with_health`], plus a front door (the console) on its own
/// listener.
pub async fn serve_listeners(
    config: ServerConfig,
    store: Store,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let Listeners {
        grpc: listener,
        health: health_listener,
        front_door,
    } = listeners;
    let (reporter, health) = tonic_health::server::health_reporter();
    set_all(&reporter, ServingStatus::Serving).await;
    // Ready only once the database has answered (the tracker's first ping).
    reporter
        .set_service_status(READINESS_SERVICE, ServingStatus::NotServing)
        .await;

    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(tidemark_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(tidemark_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;

    // One application per replica: every service shares its registered tables.
    let app = App::new(store)
        .with_mirror_refresh(config.mirror_refresh)
        .with_allowed_locations(config.allowed_table_locations.clone());
    let coordinator = CoordinatorServer::new(CoordinatorService::new(app.clone(), config.request_timeout))
        .max_decoding_message_size(config.max_message_bytes);
    let retention = RetentionServer::new(RetentionService::new(app.clone(), config.request_timeout))
        .max_decoding_message_size(config.max_message_bytes);
    let admin =
        AdminServer::new(AdminService::new(app.clone(), config.request_timeout).with_export_limits(config.exports))
            .max_decoding_message_size(config.max_message_bytes);

    let stop_accepting = CancellationToken::new();
    let readiness = tokio::spawn(track_readiness(
        reporter.clone(),
        app.clone(),
        config.readiness_interval,
        stop_accepting.clone(),
    ));
    // Each background job gets only its own settings.
    let background = tidemark_service::Background {
        mirror: tidemark_service::MirrorSettings {
            interval: config.mirror_interval,
            refresh: config.mirror_refresh,
        },
        sweeper: tidemark_service::SweeperSettings {
            interval: config.sweep_interval,
            limit: config.sweep_limit,
            history_retention: config.history_retention,
        },
        gauges: tidemark_service::GaugeSettings {
            interval: config.gauge_interval,
            per_consumer: config.per_consumer_metrics,
            history_retention: config.history_retention,
            sweep_interval: config.sweep_interval,
        },
    };
    let background = tokio::spawn({
        let (app, stop) = (app.clone(), stop_accepting.clone());
        async move { app.run_background(background, stop).await }
    });

    let tls = config
        .tls
        .as_ref()
        .map(SharedTls::new)
        .transpose()
        .map_err(ServeError::Tls)?;
    let reload = config.reload.clone().map(|settings| {
        tokio::spawn(crate::reload::watch(
            settings,
            config.auth.clone(),
            tls.clone(),
            stop_accepting.clone(),
        ))
    });

    // Outermost to innermost: the version header on every answer; then
    // authentication and each principal's share of calls, so unknown
    // callers and a runaway credential are turned away before they take
    // slots; then the global limit, shedding what is over it.
    let max_message_bytes = config.max_message_bytes;
    let version = tower::ServiceBuilder::new().map_response(move |response: http::Response<tonic::body::Body>| {
        let mut response = crate::status::explain_oversized(response, max_message_bytes);
        response.headers_mut().insert(
            VERSION_HEADER,
            http::HeaderValue::from_static(env!("CARGO_PKG_VERSION")),
        );
        response
    });
    let auth = AuthLayer::new(config.auth.clone()).with_principal_limit(config.max_in_flight_per_principal);
    let shedding = tower::ServiceBuilder::new()
        .layer(crate::shed::CountShedLayer)
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::new(config.max_in_flight));
    let mut builder = Server::builder()
        .http2_keepalive_interval(config.keepalive_interval)
        .http2_keepalive_timeout(Some(config.keepalive_timeout));
    if let Some(age) = config.max_connection_age {
        // No `max_connection_age_grace`: tonic 0.14 then skips the graceful
        // GOAWAY and closes the connection at age + grace, failing calls in
        // flight. Without it, calls in flight finish; each is bounded by the
        // request timeout, which is the grace.
        builder = builder.max_connection_age(age);
    }
    let console_task = front_door.map(|start| {
        start(SharedWithFrontDoor {
            app: app.clone(),
            auth: config.auth.clone(),
            tls: tls.clone().map(|tls| {
                let current: Arc<dyn Fn() -> Arc<tokio_rustls::rustls::ServerConfig> + Send + Sync> =
                    Arc::new(move || tls.console());
                current
            }),
            errors: front_door_error,
            stop: stop_accepting.clone(),
        })
    });
    let health_task = match health_listener {
        Some(health_listener) => {
            // Health, and reflection describing health only, so grpcurl works
            // against this port too.
            let health_reflection = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .build_v1alpha()?;
            let health_only = Server::builder()
                .add_service(health.clone())
                .add_service(health_reflection)
                .serve_with_incoming_shutdown(
                    TcpIncoming::from(health_listener),
                    stop_accepting.clone().cancelled_owned(),
                );
            Some(tokio::spawn(health_only))
        }
        None => None,
    };
    let router = builder
        // A backstop for every service (health, reflection); tidemark's own
        // calls time out first, with DEADLINE_EXCEEDED and a reason.
        .timeout(config.request_timeout + Duration::from_secs(1))
        .concurrency_limit_per_connection(config.per_connection_limit)
        .tcp_nodelay(true)
        .layer(version)
        .layer(auth)
        .layer(shedding)
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(coordinator)
        .add_service(retention)
        .add_service(admin);

    let local = listener.local_addr().ok();
    // The server runs as its own task so it keeps accepting and answering
    // while this function drains.
    let mut server = match tls {
        // TLS handshakes happen here rather than in tonic, so every
        // handshake takes the certificate in force at that moment.
        Some(tls) => {
            let incoming = crate::tls::incoming(listener, tls, stop_accepting.clone());
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, stop_accepting.clone().cancelled_owned()))
        }
        None => {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, stop_accepting.clone().cancelled_owned()))
        }
    };
    tracing::info!(address = ?local, "serving gRPC");

    tokio::select! {
        result = &mut server => {
            stop_accepting.cancel();
            let _ = readiness.await;
            let _ = background.await;
            if let Some(task) = reload {
                let _ = task.await;
            }
            if let Some(task) = health_task {
                let _ = task.await;
            }
            if let Some(task) = console_task {
                let _ = task.await;
            }
            return flatten(result);
        }
        () = shutdown => {}
    }

    tracing::info!(drain = ?config.shutdown_drain, "shutting down: health is NOT_SERVING, draining");
    set_all(&reporter, ServingStatus::NotServing).await;
    tokio::time::sleep(config.shutdown_drain).await;
    tracing::info!("no longer accepting calls; waiting for in-flight RPCs");
    stop_accepting.cancel();
    let _ = readiness.await;
    let _ = background.await;
    if let Some(task) = reload {
        let _ = task.await;
    }
    if let Some(task) = health_task {
        let _ = task.await;
    }
    if let Some(task) = console_task {
        let _ = task.await;
    }
    match tokio::time::timeout(config.shutdown_grace, &mut server).await {
        Ok(result) => {
            tracing::info!("all in-flight RPCs finished; stopped");
            flatten(result)
        }
        Err(_) => {
            server.abort();
            tracing::warn!(grace = ?config.shutdown_grace, "in-flight RPCs did not finish in time; stopping anyway");
            Ok(())
        }
    }
}

fn flatten(result: Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>) -> Result<(), ServeError> {
    match result {
        Ok(result) => result.map_err(ServeError::from),
        Err(join) => Err(ServeError::Task(join.to_string())),
    }
}

async fn set_all(reporter: &HealthReporter, status: ServingStatus) {
    reporter.set_service_status("", status).await;
    reporter.set_service_status(READINESS_SERVICE, status).await;
    match status {
        ServingStatus::Serving => reporter.set_serving::<CoordinatorServer<CoordinatorService>>().await,
        _ => {
            reporter
                .set_not_serving::<CoordinatorServer<CoordinatorService>>()
                .await
        }
    }
}

/// How soon after a look prompted by a failed call the next such look may
/// come: a storm of failures costs at most this many pings a second.
const RECHECK_SPACING: Duration = Duration::from_millis(100);

/// Keeps the readiness status in step with the database until `stop`: a
/// look every `every`, and one at once (while ready) when a call reports
/// the database unavailable.
async fn track_readiness(reporter: HealthReporter, app: App, every: Duration, stop: CancellationToken) {
    let unavailable = app.unavailable_signal();
    let mut ready = None;
    loop {
        // A ping stuck behind an unreachable host, or a commit that cannot
        // complete, counts as a failure as soon as the next check is due.
        let limit = every.clamp(Duration::from_millis(500), Duration::from_secs(5));
        let now_ready = matches!(tokio::time::timeout(limit, app.ping()).await, Ok(Ok(())));
        if ready != Some(now_ready) {
            let status = if now_ready {
                tracing::info!("database reachable and writable: ready");
                ServingStatus::Serving
            } else {
                tracing::warn!("database unreachable or not taking commits: not ready");
                ServingStatus::NotServing
            };
            reporter.set_service_status(READINESS_SERVICE, status).await;
            ready = Some(now_ready);
        }
        crate::metrics::database_ready(now_ready);
        let recheck_after = tokio::time::Instant::now() + RECHECK_SPACING;
        let reported = async {
            unavailable.reported().await;
            tokio::time::sleep_until(recheck_after).await;
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
            // Failures reported while not ready change nothing: the
            // interval's look finds the database back.
            () = reported, if now_ready => {}
        }
    }
}
