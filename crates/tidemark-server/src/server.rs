//! Assembles and runs the gRPC server: the tidemark services, health,
//! reflection, tower layers, readiness tracking and graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tidemark_proto::v1::admin_server::AdminServer;
use tidemark_proto::v1::coordinator_server::CoordinatorServer;
use tidemark_proto::v1::retention_server::RetentionServer;
use tidemark_service::App;
use tidemark_service::store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tower::limit::GlobalConcurrencyLimitLayer;

use crate::admin::AdminService;
use crate::auth::AuthLayer;
use crate::config::ServerConfig;

/// Connections the health port holds at once (kubelet probes, a few per
/// pod; a flood on it refused beyond this).
const HEALTH_MAX_CONNECTIONS: usize = 256;
use crate::coordinator::CoordinatorService;
use crate::front_door::{Listeners, SharedWithFrontDoor, front_door_error};
use crate::readiness::{READINESS_SERVICE, track_readiness};
use crate::retention::RetentionService;
use crate::tls::SharedTls;

/// The response header naming the server's version on every answer
/// (`tidemark version` reads it; `grpcurl -v` shows it).
pub const VERSION_HEADER: &str = "x-tidemark-version";

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
            // Bounded on its own: a flood on the gRPC port never takes the
            // probes' connections, nor they its.
            let incoming = tidemark_net::incoming(
                health_listener,
                tidemark_net::Admission::new("health", HEALTH_MAX_CONNECTIONS),
                stop_accepting.clone(),
            );
            let health_only = Server::builder()
                .add_service(health.clone())
                .add_service(health_reflection)
                .serve_with_incoming_shutdown(incoming, stop_accepting.clone().cancelled_owned());
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
    // Every connection counts against --max-connections; more are
    // refused at once.
    let admission = tidemark_net::Admission::new("grpc", config.max_connections);
    let mut server = match tls {
        // TLS handshakes happen here rather than in tonic, so every
        // handshake takes the certificate in force at that moment.
        Some(tls) => {
            let incoming = crate::tls::incoming(listener, admission, tls, stop_accepting.clone());
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, stop_accepting.clone().cancelled_owned()))
        }
        None => {
            let incoming = tidemark_net::incoming(listener, admission, stop_accepting.clone());
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, stop_accepting.clone().cancelled_owned()))
        }
    };
    tracing::info!(address = ?local, "serving gRPC");

    // Everything else that runs until the stop: readiness, the background
    // jobs, reloads, the health port and the console.
    let mut tasks: Vec<tokio::task::JoinHandle<()>> = vec![readiness, background];
    tasks.extend(reload);
    tasks.extend(health_task.map(|task| tokio::spawn(async move { drop(task.await) })));
    tasks.extend(console_task);

    tokio::select! {
        result = &mut server => {
            stop_accepting.cancel();
            finish(tasks, config.shutdown_grace).await;
            return flatten(result);
        }
        () = shutdown => {}
    }

    tracing::info!(drain = ?config.shutdown_drain, "shutting down: health is NOT_SERVING, draining");
    set_all(&reporter, ServingStatus::NotServing).await;
    tokio::time::sleep(config.shutdown_drain).await;
    tracing::info!("no longer accepting calls; waiting for in-flight RPCs");
    end_health_watches(&reporter).await;
    stop_accepting.cancel();
    // In-flight RPCs and the rest wind down together, all within the grace:
    // nothing (a background statement on a half-open connection, a table
    // store that does not answer) holds the process past it.
    let grace_ends = tokio::time::Instant::now() + config.shutdown_grace;
    let finished = tokio::time::timeout_at(grace_ends, &mut server).await;
    finish(tasks, grace_ends.saturating_duration_since(tokio::time::Instant::now())).await;
    match finished {
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

/// Waits up to `within` for `tasks` (already told to stop), then aborts
/// what is left.
async fn finish(tasks: Vec<tokio::task::JoinHandle<()>>, within: Duration) {
    let aborts: Vec<_> = tasks.iter().map(tokio::task::JoinHandle::abort_handle).collect();
    if tokio::time::timeout(within, futures_join_all(tasks)).await.is_err() {
        tracing::warn!(?within, "background work did not stop in time; abandoning it");
        for abort in aborts {
            abort.abort();
        }
    }
}

async fn futures_join_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        let _ = task.await;
    }
}

fn flatten(result: Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>) -> Result<(), ServeError> {
    match result {
        Ok(result) => result.map_err(ServeError::from),
        Err(join) => Err(ServeError::Task(join.to_string())),
    }
}

/// Ends every `Health/Watch` stream (on both ports) once the drain is over:
/// each is a call in flight that never ends by itself, and would hold the
/// process until the grace runs out. Watchers have seen NOT_SERVING by then;
/// their streams end with OK, and a `Check` answers NOT_FOUND.
async fn end_health_watches(reporter: &HealthReporter) {
    let mut reporter = reporter.clone();
    for service in [
        "",
        READINESS_SERVICE,
        <CoordinatorServer<CoordinatorService> as tonic::server::NamedService>::NAME,
    ] {
        reporter.clear_service_status(service).await;
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
