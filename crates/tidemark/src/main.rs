//! `tidemark`: the recovery coordination service for streaming readers of
//! snapshot-based tables.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use tidemark_core::LeasePolicy;
use tidemark_server::auth::AuthConfig;
use tidemark_server::{ServerConfig, TlsSettings};
use tidemark_store::{DEFAULT_DATABASE_URL, PostgresOptions, Store, open_backend, redact};

mod ops;

#[derive(Debug, Parser)]
#[command(
    name = "tidemark",
    version,
    about = "Recovery coordination for streaming readers of snapshot-based tables"
)]
struct Cli {
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the gRPC API.
    Serve(Box<ServeArgs>),
    /// Apply the database migrations and exit (safe when several replicas
    /// run it at once).
    Migrate(DatabaseArgs),
    /// Operators: list, describe, reset, delete, clear, revoke and expire
    /// consumers (talks gRPC to a server; changes are plans unless --execute).
    Consumers {
        #[command(flatten)]
        connection: ops::Connection,
        #[command(subcommand)]
        command: ops::ConsumersCommand,
    },
    /// Operators: a table's consumer options (consumer.expiration-time, ...).
    Options {
        #[command(flatten)]
        connection: ops::Connection,
        #[command(subcommand)]
        command: ops::OptionsCommand,
    },
    /// Operators: Paimon tables whose consumer files tidemark mirrors
    /// (register, unregister, list, import existing consumers).
    Tables {
        #[command(flatten)]
        connection: ops::Connection,
        #[command(subcommand)]
        command: ops::TablesCommand,
    },
    /// Operators: a branch's retention fences (--explain: everything holding
    /// retention back).
    Fence {
        #[command(flatten)]
        connection: ops::Connection,
        #[command(flatten)]
        args: ops::FenceArgs,
    },
    /// Credentials: mint a token (printing its configuration entry) or hash
    /// one for the credentials file.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Operators: the history of a consumer or a table, newest first.
    History {
        #[command(flatten)]
        connection: ops::Connection,
        #[command(flatten)]
        args: ops::HistoryArgs,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a random token; prints it once, with the [[token]] entry (its
    /// SHA-256) to add to the credentials file.
    Mint {
        /// The token's name (the principal in history and logs).
        #[arg(long)]
        name: String,
        /// Roles: worker, maintainer, viewer, operator.
        #[arg(long = "role", required = true)]
        roles: Vec<String>,
        /// Table globs it may touch (default: all).
        #[arg(long = "table")]
        tables: Vec<String>,
    },
    /// Print the SHA-256 (hex) of a token read from standard input.
    Hash,
}

#[derive(Debug, Args)]
struct LogArgs {
    /// Log format.
    #[arg(long, env = "TIDEMARK_LOG_FORMAT", value_enum, default_value = "text", global = true)]
    log_format: LogFormat,
    /// Log filter (tracing env-filter syntax, e.g. "info" or "tidemark=debug").
    #[arg(long, env = "TIDEMARK_LOG", default_value = "info", global = true)]
    log: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct DatabaseArgs {
    /// Database URL: postgres://user:pass@host/db, or sqlite://path/to/file.db.
    /// Defaults to an SQLite file in the working directory.
    #[arg(long, env = "TIDEMARK_DATABASE_URL", default_value = DEFAULT_DATABASE_URL, hide_env_values = true)]
    database_url: String,
    /// Most Postgres connections this process opens.
    #[arg(long, env = "TIDEMARK_DB_MAX_CONNECTIONS", default_value_t = 16)]
    db_max_connections: u32,
    /// How long a call waits for a free database connection before failing
    /// with UNAVAILABLE.
    #[arg(long, env = "TIDEMARK_DB_ACQUIRE_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    db_acquire_timeout: Duration,
    /// Server-side limit on one database statement.
    #[arg(long, env = "TIDEMARK_DB_STATEMENT_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    db_statement_timeout: Duration,
    /// Group commit on Postgres: concurrent commits share at most this many
    /// statements in flight, each carrying every commit that queued while
    /// the others ran (0: one statement per commit).
    #[arg(long, env = "TIDEMARK_DB_GROUP_COMMIT", default_value_t = tidemark_store::postgres::DEFAULT_GROUP_COMMIT)]
    db_group_commit: usize,
    /// At start-up, keep retrying an unreachable database (and the
    /// migrations) this long before giving up; 0 fails at once.
    #[arg(long, env = "TIDEMARK_WAIT_FOR_DATABASE", default_value = "60s", value_parser = humantime::parse_duration)]
    wait_for_database: Duration,
}

#[derive(Debug, Args)]
struct ServeArgs {
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
    /// roles and table scopes; tokens as SHA-256). See docs/security.md.
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
    #[arg(long, env = "TIDEMARK_MIN_LEASE_TTL", default_value = "5s", value_parser = humantime::parse_duration)]
    min_lease_ttl: Duration,
    /// Longest lease ttl granted (requests are clamped).
    #[arg(long, env = "TIDEMARK_MAX_LEASE_TTL", default_value = "10m", value_parser = humantime::parse_duration)]
    max_lease_ttl: Duration,
    /// Lease ttl granted when a request names none.
    #[arg(long, env = "TIDEMARK_DEFAULT_LEASE_TTL", default_value = "30s", value_parser = humantime::parse_duration)]
    default_lease_ttl: Duration,
    /// Longest time one RPC may take.
    #[arg(long, env = "TIDEMARK_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
    /// RPCs in flight across all connections; more are refused at once with
    /// RESOURCE_EXHAUSTED.
    #[arg(long, env = "TIDEMARK_MAX_IN_FLIGHT", default_value_t = 1024)]
    max_in_flight: usize,
    /// RPCs in flight on one connection; more wait.
    #[arg(long, env = "TIDEMARK_PER_CONNECTION_LIMIT", default_value_t = 256)]
    per_connection_limit: usize,
    /// Largest request message accepted, in bytes.
    #[arg(long, env = "TIDEMARK_MAX_MESSAGE_BYTES", default_value_t = 1024 * 1024)]
    max_message_bytes: usize,
    /// On SIGTERM/SIGINT, keep serving this long after health turns
    /// NOT_SERVING (let load balancers notice).
    #[arg(long, env = "TIDEMARK_SHUTDOWN_DRAIN", default_value = "0s", value_parser = humantime::parse_duration)]
    shutdown_drain: Duration,
    /// Then wait at most this long for in-flight RPCs.
    #[arg(long, env = "TIDEMARK_SHUTDOWN_GRACE", default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// How often the database is pinged for the readiness health status.
    #[arg(long, env = "TIDEMARK_READINESS_INTERVAL", default_value = "2s", value_parser = humantime::parse_duration)]
    readiness_interval: Duration,
    /// Prometheus /metrics address ("off" to disable).
    #[arg(long, env = "TIDEMARK_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    metrics_listen: MetricsListen,
    /// How often the sweeper expires consumers and prunes history ("0s": off).
    #[arg(long, env = "TIDEMARK_SWEEP_INTERVAL", default_value = "60s", value_parser = humantime::parse_duration)]
    sweep_interval: Duration,
    /// Most consumers one sweep expires.
    #[arg(long, env = "TIDEMARK_SWEEP_LIMIT", default_value_t = 1000)]
    sweep_limit: i64,
    /// How often consumer files of registered Paimon tables are brought up
    /// to date ("0s": off).
    #[arg(long, env = "TIDEMARK_MIRROR_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    mirror_interval: Duration,
    /// The keeper's interval: on tables whose schema sets Paimon's
    /// consumer.expiration-time, the files of kept consumers and full-scan
    /// pins stay younger than half of this (Paimon expires consumer files by
    /// modification time; keep this at most a third of that expiration time),
    /// and files changed from outside are put back within an eighth of it.
    #[arg(long, env = "TIDEMARK_MIRROR_REFRESH", default_value = "1m", value_parser = humantime::parse_duration)]
    mirror_refresh: Duration,
    /// Prune history rows older than this ("0s": keep forever).
    #[arg(long, env = "TIDEMARK_HISTORY_RETENTION", default_value = "30days", value_parser = humantime::parse_duration)]
    history_retention: Duration,
}

impl DatabaseArgs {
    async fn store_backend(&self) -> anyhow::Result<std::sync::Arc<dyn tidemark_store::Backend>> {
        let options = PostgresOptions {
            max_connections: self.db_max_connections,
            acquire_timeout: self.db_acquire_timeout,
            statement_timeout: Some(self.db_statement_timeout),
            schema: None,
            group_commit: self.db_group_commit,
        };
        open_backend(&self.database_url, &options)
            .await
            .with_context(|| format!("cannot open the database {}", redact(&self.database_url)))
    }

    /// Applies the migrations, retrying with backoff while the database is
    /// unreachable for up to --wait-for-database (a pod may start before its
    /// database). Concurrent runs are safe: the migrator takes a lock.
    async fn migrate(&self, backend: &dyn tidemark_store::Backend) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let mut backoff = Duration::from_millis(200);
        loop {
            match backend.migrate().await {
                Ok(()) => return Ok(()),
                Err(error) if started.elapsed() + backoff < self.wait_for_database => {
                    tracing::warn!(
                        database = %redact(&self.database_url),
                        retry_in = ?backoff,
                        "migrations failed ({error}); waiting for the database"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                Err(error) => {
                    return Err(anyhow::Error::new(error)).with_context(|| {
                        format!(
                            "migration failed (gave up after {:?}; see --wait-for-database)",
                            self.wait_for_database
                        )
                    });
                }
            }
        }
    }
}

fn init_logging(args: &LogArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log).context("invalid --log filter")?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(&cli.log)?;
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Consumers { connection, command } => ops::consumers(&connection, command).await,
        Command::Options { connection, command } => ops::options(&connection, command).await,
        Command::Tables { connection, command } => ops::tables(&connection, command).await,
        Command::Fence { connection, args } => ops::fence(&connection, args).await,
        Command::History { connection, args } => ops::history(&connection, args).await,
        Command::Token(command) => token(command),
        Command::Migrate(args) => {
            let backend = args.store_backend().await?;
            args.migrate(backend.as_ref()).await?;
            tracing::info!(database = %redact(&args.database_url), "migrations applied");
            backend.close().await;
            Ok(())
        }
    }
}

/// The credentials: the file, plus TIDEMARK_AUTH (the same TOML inline, for
/// a Kubernetes Secret exposed as an environment variable).
fn load_auth(args: &ServeArgs) -> anyhow::Result<AuthConfig> {
    let mut config = AuthConfig::default();
    if let Some(path) = &args.auth_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        config = config
            .merge(AuthConfig::parse(&text, &path.display().to_string()).map_err(anyhow::Error::msg)?)
            .map_err(anyhow::Error::msg)?;
    }
    if let Ok(text) = std::env::var("TIDEMARK_AUTH")
        && !text.trim().is_empty()
    {
        config = config
            .merge(AuthConfig::parse(&text, "TIDEMARK_AUTH").map_err(anyhow::Error::msg)?)
            .map_err(anyhow::Error::msg)?;
    }
    config.reflection_requires_auth = args.reflection_requires_auth;
    Ok(config)
}

fn load_tls(args: &ServeArgs) -> anyhow::Result<Option<TlsSettings>> {
    let read = |p: &std::path::PathBuf| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(TlsSettings {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            client_ca_pem: args.tls_client_ca.as_ref().map(read).transpose()?,
        })),
        _ => Ok(None),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let auth = load_auth(&args)?;
    let tls = load_tls(&args)?;
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
    let policy = LeasePolicy {
        min_ttl: args.min_lease_ttl,
        max_ttl: args.max_lease_ttl,
        default_ttl: args.default_lease_ttl,
    };
    policy.validate().map_err(anyhow::Error::msg)?;

    let backend = args.database.store_backend().await?;
    if args.no_migrate {
        tracing::info!("skipping migrations (--no-migrate)");
    } else {
        args.database.migrate(backend.as_ref()).await?;
    }
    tracing::info!(database = %redact(&args.database.database_url), backend = backend.name(), "database ready");
    let store = Store::new(backend.clone(), policy);

    if let MetricsListen(Some(address)) = args.metrics_listen {
        install_metrics(address)?;
        tracing::info!("metrics on http://{address}/metrics");
    }

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let health_listener = match args.health_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?,
        ),
        None => None,
    };
    // Logged once every port is bound: tools wait for these lines.
    if let Some(health) = &health_listener {
        tracing::info!("health (plaintext) listening on {}", health.local_addr()?);
    }
    tracing::info!("listening on {}", listener.local_addr()?);

    let config = ServerConfig {
        auth: std::sync::Arc::new(auth),
        tls,
        ..server_config(&args)
    };
    tidemark_server::serve_with_health(config, store, listener, health_listener, shutdown_signal()).await?;
    backend.close().await;
    Ok(())
}

/// `--metrics-listen`: an address, or "off"; checked when the command line
/// is parsed, like every other flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MetricsListen(Option<SocketAddr>);

impl std::str::FromStr for MetricsListen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.eq_ignore_ascii_case("off") {
            return Ok(Self(None));
        }
        text.parse()
            .map(|address| Self(Some(address)))
            .map_err(|e| format!("{e}: expected an address such as 127.0.0.1:9464, or \"off\""))
    }
}

/// The server's settings from the command line (credentials and TLS are
/// loaded apart).
fn server_config(args: &ServeArgs) -> ServerConfig {
    ServerConfig {
        request_timeout: args.request_timeout,
        max_in_flight: args.max_in_flight,
        per_connection_limit: args.per_connection_limit,
        max_message_bytes: args.max_message_bytes,
        shutdown_drain: args.shutdown_drain,
        shutdown_grace: args.shutdown_grace,
        readiness_interval: args.readiness_interval.max(Duration::from_millis(100)),
        sweep_interval: args.sweep_interval,
        sweep_limit: args.sweep_limit.max(1),
        mirror_interval: args.mirror_interval,
        mirror_refresh: args.mirror_refresh,
        history_retention: (!args.history_retention.is_zero()).then_some(args.history_retention),
        ..ServerConfig::default()
    }
}

/// Serves Prometheus metrics on `address`; stale per-consumer gauges vanish
/// after an hour without updates.
fn install_metrics(address: SocketAddr) -> anyhow::Result<()> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    use metrics_util::MetricKindMask;
    PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(
            Matcher::Full(tidemark_server::metrics::names::RPC_DURATION.to_owned()),
            &tidemark_server::metrics::RPC_BUCKETS,
        )?
        .idle_timeout(MetricKindMask::GAUGE, Some(Duration::from_secs(3600)))
        .install()
        .with_context(|| format!("cannot serve metrics on {address}"))
}

#[allow(clippy::print_stdout)] // printing the token is the point
fn token(command: TokenCommand) -> anyhow::Result<()> {
    use tidemark_server::auth::{hash_token, hex, mint_token};
    match command {
        TokenCommand::Mint { name, roles, tables } => {
            let token = mint_token().map_err(anyhow::Error::msg)?;
            let quote = |items: &[String]| items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(", ");
            let entry = format!(
                "[[token]]\nname = {name:?}\nsha256 = \"{}\"\nroles = [{}]\n{}",
                hex(&hash_token(&token)),
                quote(&roles),
                if tables.is_empty() {
                    String::new()
                } else {
                    format!("tables = [{}]\n", quote(&tables))
                }
            );
            // Check the entry parses before showing it.
            AuthConfig::parse(&entry, "the new entry").map_err(anyhow::Error::msg)?;
            println!("token (shown once; give it to the client, e.g. as TIDEMARK_TOKEN):\n{token}\n");
            println!("add to the server's credentials file:\n{entry}");
            Ok(())
        }
        TokenCommand::Hash => {
            let mut token = String::new();
            std::io::stdin().read_line(&mut token)?;
            println!("{}", hex(&hash_token(token.trim())));
            Ok(())
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command, MetricsListen, server_config};

    /// The defaults users get from the command line are the ones
    /// `ServerConfig::default()` gives the tests and embedders: one set of
    /// defaults, checked here so the two cannot drift apart again.
    #[test]
    fn command_line_defaults_are_the_server_defaults() {
        let cli = Cli::try_parse_from(["tidemark", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve parses as serve");
        };
        let from_cli = format!("{:?}", server_config(&args));
        let defaults = format!("{:?}", tidemark_server::ServerConfig::default());
        assert_eq!(from_cli, defaults);
    }

    #[test]
    fn metrics_listen_is_an_address_or_off() {
        assert_eq!("off".parse::<MetricsListen>(), Ok(MetricsListen(None)));
        assert_eq!("OFF".parse::<MetricsListen>(), Ok(MetricsListen(None)));
        let address = "127.0.0.1:9464".parse().unwrap();
        assert_eq!(
            "127.0.0.1:9464".parse::<MetricsListen>(),
            Ok(MetricsListen(Some(address)))
        );
        assert!("localhost".parse::<MetricsListen>().is_err());
        let refused = Cli::try_parse_from(["tidemark", "serve", "--metrics-listen", "nowhere"]).unwrap_err();
        assert_eq!(refused.kind(), clap::error::ErrorKind::ValueValidation, "{refused}");
    }
}
