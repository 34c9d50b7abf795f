//! `tidemark serve`: its flags, and wiring the store, credentials, TLS,
//! metrics and signals into the server.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tidemark_core::LeasePolicy;
use tidemark_server::ServerConfig;
use tidemark_server::auth::SharedAuth;
use tidemark_server::reload::{AuthSource, ReloadSettings, TlsFiles};
use tidemark_store::{Store, redact};

use crate::database::DatabaseArgs;
use crate::flags::HumanDuration;

mod connections;
mod signals;

use connections::{ConnectionArgs, MetricsListen};
use signals::{reload_on_sighup, shutdown_signal};

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to serve gRPC on.
    #[arg(long, env = "TIDEMARK_LISTEN", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    #[command(flatten)]
    database: DatabaseArgs,
    /// Do not apply migrations at start-up (run `tidemark migrate` first).
    #[arg(long, env = "TIDEMARK_NO_MIGRATE")]
    no_migrate: bool,
    /// Serve on a non-loopback address without authentication. Anyone who
    /// can reach the port can then move any consumer.
    #[arg(long, env = "TIDEMARK_INSECURE_NO_AUTH")]
    insecure_no_auth: bool,
    /// Credentials file (TOML: [[token]] and [[certificate]] entries with
    /// roles and table scopes; tokens as SHA-256). The environment variable
    /// TIDEMARK_AUTH may hold the same TOML inline (e.g. from a Kubernetes
    /// Secret), alone or added to the file. See docs/security.md.
    #[arg(long, env = "TIDEMARK_AUTH_FILE")]
    auth_file: Option<std::path::PathBuf>,
    /// Require credentials for server reflection too (health stays open).
    #[arg(long, env = "TIDEMARK_REFLECTION_REQUIRES_AUTH")]
    reflection_requires_auth: bool,
    /// Server certificate chain (PEM); with --tls-key, serves TLS.
    #[arg(long, env = "TIDEMARK_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// Server private key (PEM).
    #[arg(long, env = "TIDEMARK_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// CA (PEM) whose client certificates are accepted: mutual TLS, every
    /// client must present one.
    #[arg(long, env = "TIDEMARK_TLS_CLIENT_CA", requires = "tls_cert")]
    tls_client_ca: Option<std::path::PathBuf>,
    /// Also serve grpc.health.v1 alone, in plaintext, on this address (for
    /// Kubernetes probes when the gRPC port speaks TLS).
    #[arg(long, env = "TIDEMARK_HEALTH_LISTEN")]
    health_listen: Option<SocketAddr>,
    /// Shortest lease ttl granted (requests are clamped).
    #[arg(long, env = "TIDEMARK_MIN_LEASE_TTL", default_value_t = HumanDuration(LeasePolicy::default().min_ttl))]
    min_lease_ttl: HumanDuration,
    /// Longest lease ttl granted (requests are clamped).
    #[arg(long, env = "TIDEMARK_MAX_LEASE_TTL", default_value_t = HumanDuration(LeasePolicy::default().max_ttl))]
    max_lease_ttl: HumanDuration,
    /// Lease ttl granted when a request names none.
    #[arg(long, env = "TIDEMARK_DEFAULT_LEASE_TTL", default_value_t = HumanDuration(LeasePolicy::default().default_ttl))]
    default_lease_ttl: HumanDuration,
    /// Longest time one RPC may take.
    #[arg(long, env = "TIDEMARK_REQUEST_TIMEOUT", default_value_t = HumanDuration(ServerConfig::default().request_timeout))]
    request_timeout: HumanDuration,
    /// RPCs in flight across all connections; more are refused at once with
    /// RESOURCE_EXHAUSTED.
    #[arg(long, env = "TIDEMARK_MAX_IN_FLIGHT", default_value_t = ServerConfig::default().max_in_flight)]
    max_in_flight: usize,
    /// RPCs of one principal in flight at once (with credentials on); more
    /// are refused at once with RESOURCE_EXHAUSTED (PRINCIPAL_LIMIT), so one
    /// runaway credential cannot take every slot. 0: no limit.
    #[arg(long, env = "TIDEMARK_MAX_IN_FLIGHT_PER_PRINCIPAL", default_value_t = ServerConfig::default().max_in_flight_per_principal)]
    max_in_flight_per_principal: usize,
    /// RPCs in flight on one connection; more wait.
    #[arg(long, env = "TIDEMARK_PER_CONNECTION_LIMIT", default_value_t = ServerConfig::default().per_connection_limit)]
    per_connection_limit: usize,
    /// Largest request message accepted, in bytes.
    #[arg(long, env = "TIDEMARK_MAX_MESSAGE_BYTES", default_value_t = ServerConfig::default().max_message_bytes)]
    max_message_bytes: usize,
    /// On SIGTERM/SIGINT, keep serving this long after health turns
    /// NOT_SERVING (let load balancers notice).
    #[arg(long, env = "TIDEMARK_SHUTDOWN_DRAIN", default_value_t = HumanDuration(ServerConfig::default().shutdown_drain))]
    shutdown_drain: HumanDuration,
    /// Then wait at most this long for in-flight RPCs.
    #[arg(long, env = "TIDEMARK_SHUTDOWN_GRACE", default_value_t = HumanDuration(ServerConfig::default().shutdown_grace))]
    shutdown_grace: HumanDuration,
    /// An ExportState client that takes nothing for this long has its export
    /// ended (ABORTED, EXPORT_STALLED) and everything it held released.
    #[arg(long, env = "TIDEMARK_EXPORT_IDLE_TIMEOUT", default_value_t = HumanDuration(tidemark_server::ExportLimits::default().idle_timeout))]
    export_idle_timeout: HumanDuration,
    /// ExportState streams this replica runs at once; more are refused
    /// (RESOURCE_EXHAUSTED, TOO_MANY_EXPORTS).
    #[arg(long, env = "TIDEMARK_MAX_CONCURRENT_EXPORTS", default_value_t = tidemark_server::ExportLimits::default().max_concurrent)]
    max_concurrent_exports: usize,
    /// How often the database is pinged for the readiness health status.
    #[arg(long, env = "TIDEMARK_READINESS_INTERVAL", default_value_t = HumanDuration(ServerConfig::default().readiness_interval))]
    readiness_interval: HumanDuration,
    /// The operators' console: an address for its web pages, or "off". It
    /// follows the gRPC port's rules: open only on loopback without
    /// credentials; HTTPS when --tls-cert is set. See docs/operations.md.
    #[arg(long, env = "TIDEMARK_CONSOLE_LISTEN", default_value = "off")]
    console_listen: MetricsListen,
    /// How often console pages refresh themselves ("0s": never).
    #[arg(long, env = "TIDEMARK_CONSOLE_REFRESH", default_value_t = HumanDuration(tidemark_console::ConsoleSettings::default().refresh))]
    console_refresh: HumanDuration,
    /// Prometheus /metrics address ("off" to disable).
    #[arg(long, env = "TIDEMARK_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    metrics_listen: MetricsListen,
    /// How often the sweeper expires consumers and prunes history ("0s": off).
    #[arg(long, env = "TIDEMARK_SWEEP_INTERVAL", default_value_t = HumanDuration(ServerConfig::default().sweep_interval))]
    sweep_interval: HumanDuration,
    /// Most consumers one sweep expires.
    #[arg(long, env = "TIDEMARK_SWEEP_LIMIT", default_value_t = ServerConfig::default().sweep_limit)]
    sweep_limit: i64,
    /// How often consumer files of registered Paimon tables are brought up
    /// to date ("0s": off).
    #[arg(long, env = "TIDEMARK_MIRROR_INTERVAL", default_value_t = HumanDuration(ServerConfig::default().mirror_interval))]
    mirror_interval: HumanDuration,
    /// The keeper's interval: on tables whose schema sets Paimon's
    /// consumer.expiration-time, the files of kept consumers and full-scan
    /// pins stay younger than half of this (Paimon expires consumer files by
    /// modification time; keep this at most a third of that expiration time),
    /// and files changed from outside are put back within an eighth of it.
    #[arg(long, env = "TIDEMARK_MIRROR_REFRESH", default_value_t = HumanDuration(ServerConfig::default().mirror_refresh))]
    mirror_refresh: HumanDuration,
    /// How often the credentials file and the TLS files are read for
    /// changes ("0s": only on SIGHUP). A change takes effect once two reads
    /// agree, so within two intervals; SIGHUP takes it at once.
    #[arg(long, env = "TIDEMARK_RELOAD_INTERVAL", default_value = "5s")]
    reload_interval: HumanDuration,
    /// Connections older than this are asked to reconnect (HTTP/2 GOAWAY),
    /// so clients spread over the replicas there are now; calls in flight
    /// finish, within --request-timeout ("0s": never).
    #[arg(long, env = "TIDEMARK_MAX_CONNECTION_AGE", default_value_t = HumanDuration(ServerConfig::default().max_connection_age.unwrap_or_default()))]
    max_connection_age: HumanDuration,
    /// HTTP/2 pings on connections this often, to find dead clients ("0s":
    /// off).
    #[arg(long, env = "TIDEMARK_KEEPALIVE_INTERVAL", default_value_t = HumanDuration(ServerConfig::default().keepalive_interval.unwrap_or_default()))]
    keepalive_interval: HumanDuration,
    /// A ping not answered within this closes the connection.
    #[arg(long, env = "TIDEMARK_KEEPALIVE_TIMEOUT", default_value_t = HumanDuration(ServerConfig::default().keepalive_timeout))]
    keepalive_timeout: HumanDuration,
    /// How often gauges are computed: each replica's own, and the fleet's
    /// (lag, consumers and fences per branch, live leases, history) by the
    /// one replica holding the collector role ("0s": off).
    #[arg(long, env = "TIDEMARK_GAUGE_INTERVAL", default_value_t = HumanDuration(ServerConfig::default().gauge_interval))]
    gauge_interval: HumanDuration,
    /// Also export lag per consumer for this many most lagging consumers
    /// (tidemark_consumer_lag_snapshots_per_consumer); 0: per-branch
    /// maxima only.
    #[arg(long, env = "TIDEMARK_PER_CONSUMER_METRICS", default_value_t = ServerConfig::default().per_consumer_metrics,
          value_parser = clap::value_parser!(i64).range(0..=10_000))]
    per_consumer_metrics: i64,
    /// Do not record a commit in the history when it repeats its lease's
    /// previous batch end (an idle stream refreshing its position): the row
    /// of the batch that set the position stands for it, and the consumer's
    /// updated_at still moves. Cuts history growth from idle queries.
    #[arg(long, env = "TIDEMARK_COMPACT_REFRESH_HISTORY")]
    compact_refresh_history: bool,
    /// Table registrations may only point under these locations
    /// (comma-separated absolute paths, file:// or s3:// URLs); by default
    /// anywhere the server can reach. The server writes consumer files
    /// wherever a registration points.
    #[arg(long, env = "TIDEMARK_ALLOWED_TABLE_LOCATIONS", value_delimiter = ',')]
    allowed_table_locations: Vec<String>,
    /// Prune history rows older than this ("0s": keep forever).
    #[arg(long, env = "TIDEMARK_HISTORY_RETENTION", default_value_t = HumanDuration(ServerConfig::default().history_retention.unwrap_or_default()))]
    history_retention: HumanDuration,
    #[command(flatten)]
    connections: ConnectionArgs,
}

/// Where the credentials come from: the file, plus TIDEMARK_AUTH (the same
/// TOML inline, for a Kubernetes Secret exposed as an environment variable).
fn auth_source(args: &ServeArgs) -> AuthSource {
    AuthSource {
        file: args.auth_file.clone(),
        inline: std::env::var("TIDEMARK_AUTH").ok(),
        reflection_requires_auth: args.reflection_requires_auth,
        mutual_tls: args.tls_client_ca.is_some(),
    }
}

fn tls_files(args: &ServeArgs) -> Option<TlsFiles> {
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        }),
        _ => None,
    }
}

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // First: every socket and file after this counts against it.
    tidemark_net::raise_open_files_limit();
    let auth_source = auth_source(&args);
    let auth = auth_source.load().map_err(anyhow::Error::msg)?;
    let tls_files = tls_files(&args);
    let tls = tls_files
        .as_ref()
        .map(TlsFiles::load)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if let Some(tls) = &tls {
        // Refuse unusable material now, before migrations, with its reason.
        tidemark_server::tls::rustls_config(tls).map_err(anyhow::Error::msg)?;
    }
    if let MetricsListen(Some(console)) = args.console_listen {
        if !auth.is_enabled() && !console.ip().is_loopback() && !args.insecure_no_auth {
            bail!(
                "refusing to serve the console on {console} without authentication: anyone who can reach it could \
                 read every consumer. Configure credentials (--auth-file or TIDEMARK_AUTH), use a loopback address, \
                 or pass --insecure-no-auth"
            );
        }
        if auth.is_enabled() && tls.is_none() && !console.ip().is_loopback() {
            tracing::warn!(
                %console,
                "the console is served over plain HTTP on a non-loopback address: browsers keep its Secure session \
                 cookie only over HTTPS (set --tls-cert, or put a TLS-terminating proxy in front)"
            );
        }
    }
    if !auth.is_enabled() {
        if !args.listen.ip().is_loopback() && !args.insecure_no_auth {
            bail!(
                "refusing to serve on {} without authentication: anyone who can reach it could move any consumer. \
                 Configure credentials (--auth-file or TIDEMARK_AUTH, see docs/security.md), listen on a loopback \
                 address, or pass --insecure-no-auth (TIDEMARK_INSECURE_NO_AUTH=true) if the network is otherwise \
                 protected",
                args.listen
            );
        }
        if args.listen.ip().is_loopback() {
            tracing::warn!("no credentials configured: serving without authentication, on loopback only");
        } else {
            tracing::warn!(listen = %args.listen, "serving WITHOUT authentication on a non-loopback address");
        }
    } else {
        let (tokens, certificates) = auth.counts();
        tracing::info!(
            tokens,
            certificates,
            reflection_requires_auth = auth.reflection_requires_auth,
            "authentication on"
        );
    }
    if let Some(tls) = &tls {
        tracing::info!(mutual = tls.client_ca_pem.is_some(), "TLS on");
        if args.health_listen.is_none() {
            tracing::warn!("TLS is on but --health-listen is not set: Kubernetes gRPC probes cannot speak TLS");
        }
    }
    let policy = lease_policy(&args);
    policy.validate().map_err(anyhow::Error::msg)?;
    let allowed_table_locations = if args.allowed_table_locations.is_empty() {
        None
    } else {
        let list = tidemark_paimon::LocationAllowList::new(&args.allowed_table_locations)
            .map_err(|e| anyhow::anyhow!("--allowed-table-locations: {e}"))?;
        tracing::info!(
            allowed = list.describe(),
            "table registrations limited to these locations"
        );
        Some(list)
    };

    // Before the database: a busy port stops the start before migrations
    // run, not after.
    if let MetricsListen(Some(address)) = args.metrics_listen {
        connections::serve_metrics(address, gauge_idle_timeout(&args), &args.connections).await?;
        tracing::info!("metrics on http://{address}/metrics");
    }

    // Behind a transaction pooler the gauge collector's claim is a row
    // lease renewed every round: three rounds without one hand it over.
    let backend = args
        .database
        .store_backend_with(tidemark_store::PostgresOptions {
            collector_lease: (args.gauge_interval.0 * 3).max(Duration::from_secs(1)),
            ..args.database.postgres_options()
        })
        .await?;
    if args.no_migrate {
        tracing::info!("skipping migrations (--no-migrate)");
        args.database.check_schema(backend.as_ref()).await?;
    } else {
        args.database.migrate(backend.as_ref()).await?;
    }
    tracing::info!(database = %redact(&args.database.database_url), backend = backend.name(), "database ready");
    let refreshes = if args.compact_refresh_history {
        tidemark_core::RefreshHistory::Compact
    } else {
        tidemark_core::RefreshHistory::Full
    };
    let store = Store::new(backend.clone(), policy).with_refresh_history(refreshes);

    let listener = tokio::net::TcpListener::bind(args.listen).await.with_context(|| {
        format!(
            "cannot listen on {} (choose another address with --listen)",
            args.listen
        )
    })?;
    let health_listener = match args.health_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?,
        ),
        None => None,
    };
    let console_listener = match args.console_listen {
        MetricsListen(Some(address)) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address} (choose another with --console-listen)"))?,
        ),
        MetricsListen(None) => None,
    };
    // Logged once every port is bound: tools wait for these lines.
    if let Some(console) = &console_listener {
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!("console on {scheme}://{}/", console.local_addr()?);
    }
    if let Some(health) = &health_listener {
        tracing::info!("health (plaintext) listening on {}", health.local_addr()?);
    }
    tracing::info!("listening on {}", listener.local_addr()?);

    let trigger = std::sync::Arc::new(tokio::sync::Notify::new());
    let reload = (args.auth_file.is_some() || tls_files.is_some()).then(|| ReloadSettings {
        interval: args.reload_interval.0,
        trigger: std::sync::Arc::clone(&trigger),
        auth: args.auth_file.is_some().then_some(auth_source),
        tls: tls_files,
    });
    if reload.is_some() {
        tokio::spawn(reload_on_sighup(trigger));
    }
    let config = ServerConfig {
        allowed_table_locations,
        auth: SharedAuth::new(auth),
        tls,
        reload,
        ..server_config(&args)
    };
    // The console is its own crate: the server hands it the application,
    // the credentials and TLS it shares, and when to stop.
    let console = tidemark_console::ConsoleSettings {
        refresh: args.console_refresh.0,
        limits: args.connections.console(),
        page_deadline: args.request_timeout.0,
    };
    let front_door = console_listener.map(|listener| -> tidemark_server::FrontDoor {
        Box::new(move |shared| {
            tidemark_console::start(
                listener,
                &console,
                shared.app,
                shared.auth,
                shared.tls,
                shared.errors,
                shared.stop,
            )
        })
    });
    let listeners = tidemark_server::Listeners {
        grpc: listener,
        health: health_listener,
        front_door,
    };
    tidemark_server::serve_listeners(config, store, listeners, shutdown_signal()).await?;
    // Bounded: a database that stopped answering must not hold the exit
    // (its sessions end with the process anyway).
    if tokio::time::timeout(Duration::from_secs(2), backend.close())
        .await
        .is_err()
    {
        tracing::warn!("the database did not answer while closing its connections; exiting anyway");
    }
    Ok(())
}

/// The lease policy from the command line.
fn lease_policy(args: &ServeArgs) -> LeasePolicy {
    LeasePolicy {
        min_ttl: args.min_lease_ttl.0,
        max_ttl: args.max_lease_ttl.0,
        default_ttl: args.default_lease_ttl.0,
    }
}

/// The server's settings from the command line (credentials and TLS are
/// loaded apart).
fn server_config(args: &ServeArgs) -> ServerConfig {
    ServerConfig {
        request_timeout: args.request_timeout.0,
        max_in_flight: args.max_in_flight,
        max_in_flight_per_principal: args.max_in_flight_per_principal,
        per_connection_limit: args.per_connection_limit,
        max_connections: args.connections.max_connections,
        max_message_bytes: args.max_message_bytes,
        shutdown_drain: args.shutdown_drain.0,
        shutdown_grace: args.shutdown_grace.0,
        readiness_interval: args.readiness_interval.0.max(Duration::from_millis(100)),
        sweep_interval: args.sweep_interval.0,
        sweep_limit: args.sweep_limit.max(1),
        mirror_interval: args.mirror_interval.0,
        mirror_refresh: args.mirror_refresh.0,
        history_retention: (!args.history_retention.0.is_zero()).then_some(args.history_retention.0),
        max_connection_age: (!args.max_connection_age.0.is_zero()).then_some(args.max_connection_age.0),
        keepalive_interval: (!args.keepalive_interval.0.is_zero()).then_some(args.keepalive_interval.0),
        keepalive_timeout: args.keepalive_timeout.0,
        gauge_interval: args.gauge_interval.0,
        per_consumer_metrics: args.per_consumer_metrics,
        exports: tidemark_server::ExportLimits {
            idle_timeout: args.export_idle_timeout.0.max(Duration::from_millis(100)),
            max_concurrent: args.max_concurrent_exports.max(1),
        },
        ..ServerConfig::default()
    }
}

/// How long a gauge nobody updates stays exported: three gauge rounds (so
/// a replica that lost the collector role, or a consumer that left the
/// per-consumer top, stops being reported), and at least as long as the
/// mirror keeper's passes take to come round.
fn gauge_idle_timeout(args: &ServeArgs) -> Duration {
    (args.gauge_interval.0 * 3)
        .max(args.mirror_refresh.0 / 2)
        .max(Duration::from_secs(60))
}

#[cfg(test)]
mod tests;
