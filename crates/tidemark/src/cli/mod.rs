//! Operator subcommands: talk gRPC to a tidemark server, print readable
//! tables (or `--output json`, the proto3 JSON mapping grpcurl prints).
//! Every mutating command is a plan unless `--execute`. One file per
//! command family; `render` prints.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use tidemark_client::{AdminClient, ApiError, AuthChannel, ClientOptions, ClientTls, RetentionClient};

mod consumers;
mod history;
mod options;
pub(crate) mod port_hint;
mod render;
mod retention;
mod state;
mod tables;

pub(crate) use consumers::{ConsumersCommand, consumers};
pub(crate) use history::{HistoryArgs, history};
pub(crate) use options::{OptionsCommand, options};
pub(crate) use retention::{FenceArgs, fence};
pub(crate) use state::{StateCommand, state};
pub(crate) use tables::{TablesCommand, tables};

/// Where the server is, how to authenticate, and how to print.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// The tidemark server: `host:port` as grpcurl takes it (TLS when a CA
    /// or client certificate is given), or `http://…` / `https://…`.
    #[arg(
        long,
        env = "TIDEMARK_SERVER",
        default_value = "http://127.0.0.1:50051",
        global = true,
        help_heading = "Connection"
    )]
    server: String,
    /// Bearer token.
    #[arg(
        long,
        env = "TIDEMARK_TOKEN",
        hide_env_values = true,
        global = true,
        help_heading = "Connection",
        conflicts_with = "token_file"
    )]
    token: Option<String>,
    /// A file holding the bearer token (e.g. a mounted Secret), so it stays
    /// out of the shell's history and the process list.
    #[arg(long, env = "TIDEMARK_TOKEN_FILE", global = true, help_heading = "Connection")]
    token_file: Option<std::path::PathBuf>,
    /// Longest time one call may take (the server's own limit still
    /// applies).
    #[arg(
        long,
        env = "TIDEMARK_TIMEOUT",
        default_value = "30s",
        global = true,
        help_heading = "Connection"
    )]
    timeout: crate::flags::HumanDuration,
    /// CA certificate (PEM) that signed the server's certificate.
    #[arg(long, env = "TIDEMARK_TLS_CA", global = true, help_heading = "Connection")]
    tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM), for mutual TLS.
    #[arg(
        long,
        env = "TIDEMARK_CLIENT_CERT",
        global = true,
        help_heading = "Connection",
        requires = "tls_key"
    )]
    tls_cert: Option<std::path::PathBuf>,
    /// Client private key (PEM), for mutual TLS.
    #[arg(
        long,
        env = "TIDEMARK_CLIENT_KEY",
        global = true,
        help_heading = "Connection",
        requires = "tls_cert"
    )]
    tls_key: Option<std::path::PathBuf>,
    /// Name to verify in the server's certificate (default: the server's host).
    #[arg(long, env = "TIDEMARK_TLS_DOMAIN", global = true, help_heading = "Connection")]
    tls_domain: Option<String>,
    /// Output format.
    #[arg(
        long,
        short = 'o',
        value_enum,
        default_value = "table",
        global = true,
        help_heading = "Output"
    )]
    pub(crate) output: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    Table,
    Json,
}

impl Connection {
    async fn channel(&self) -> anyhow::Result<AuthChannel> {
        let read = |path: &Option<std::path::PathBuf>| -> anyhow::Result<Option<Vec<u8>>> {
            path.as_ref()
                .map(|p| std::fs::read(p).with_context(|| format!("cannot read {}", p.display())))
                .transpose()
        };
        let tls_wanted = self.server.starts_with("https://") || self.tls_ca.is_some() || self.tls_cert.is_some();
        let token = match &self.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the token file {}", path.display()))?
                    .trim()
                    .to_owned(),
            ),
            None => self.token.clone(),
        };
        let tls = if tls_wanted {
            let identity = match (read(&self.tls_cert)?, read(&self.tls_key)?) {
                (Some(cert), Some(key)) => Some((cert, key)),
                _ => None,
            };
            Some(ClientTls {
                ca_pem: read(&self.tls_ca)?,
                identity,
                domain: self.tls_domain.clone(),
            })
        } else {
            None
        };
        let options = ClientOptions {
            endpoint: endpoint_url(&self.server, tls.is_some()),
            token,
            tls,
            connect_timeout: Some(Duration::from_secs(5)),
            request_timeout: Some(self.timeout.0),
            resolve: None,
        };
        Ok(tidemark_client::connect(&options).await?)
    }

    pub(crate) async fn admin(&self) -> anyhow::Result<AdminClient<AuthChannel>> {
        Ok(AdminClient::new(self.channel().await?))
    }

    pub(crate) async fn retention(&self) -> anyhow::Result<RetentionClient<AuthChannel>> {
        Ok(RetentionClient::new(self.channel().await?))
    }
}

/// `host:port` (as grpcurl takes it) becomes a URL: `https://` with TLS,
/// `http://` without; a URL stays as it is.
fn endpoint_url(server: &str, tls: bool) -> String {
    if server.contains("://") {
        server.to_owned()
    } else if tls {
        format!("https://{server}")
    } else {
        format!("http://{server}")
    }
}

/// `tidemark version`: this binary's version, and the server's from the
/// `x-tidemark-version` header every answer carries.
#[allow(clippy::print_stdout)] // printing is what the command is for
pub(crate) async fn version(connection: &Connection) -> anyhow::Result<()> {
    println!("client: tidemark {}", env!("CARGO_PKG_VERSION"));
    let channel = connection.channel().await?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = health
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .map_err(call_error)?;
    let server = answer
        .metadata()
        .get(tidemark_server::VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown (older than 0.1.0, or not tidemark)");
    println!("server: tidemark {server} ({})", connection.server);
    Ok(())
}

/// The exit codes of SPEC §11.
pub(crate) mod exit {
    /// The table `--help` prints under every command.
    pub(crate) const TABLE: &str = "\
Exit codes:
  0  success (a plan is a success too)
  1  any other error
  2  bad usage, or INVALID_ARGUMENT
  3  NOT_FOUND, or a table or consumer tidemark has never seen (with the name most likely meant)
  4  refused by a precondition (FAILED_PRECONDITION: a live lease, an expected position that differs),
     also when a bulk change (reset, clear, a reset from a file) left any selected consumer alone
  5  UNAVAILABLE or DEADLINE_EXCEEDED (the server could not be reached included)
  6  PERMISSION_DENIED or UNAUTHENTICATED";

    /// Bad usage or INVALID_ARGUMENT.
    pub(crate) const USAGE: u8 = 2;
    /// NOT_FOUND.
    pub(crate) const NOT_FOUND: u8 = 3;
    /// Refused by a precondition (FAILED_PRECONDITION: lease held,
    /// expected value differs, ...).
    pub(crate) const REFUSED: u8 = 4;
    /// UNAVAILABLE or DEADLINE_EXCEEDED (the server could not be reached
    /// included).
    pub(crate) const UNAVAILABLE: u8 = 5;
    /// PERMISSION_DENIED or UNAUTHENTICATED.
    pub(crate) const DENIED: u8 = 6;
    /// Any other error.
    pub(crate) const OTHER: u8 = 1;

    /// The exit code for an error.
    pub(crate) fn code_of(error: &anyhow::Error) -> u8 {
        if let Some(failed) = error.downcast_ref::<super::CallFailed>() {
            return for_code(failed.code);
        }
        if error.downcast_ref::<tidemark_client::ConnectError>().is_some()
            || error.downcast_ref::<super::port_hint::NotGrpc>().is_some()
        {
            return UNAVAILABLE;
        }
        if error.downcast_ref::<super::UsageError>().is_some() {
            return USAGE;
        }
        if error.downcast_ref::<super::UnknownName>().is_some() {
            return NOT_FOUND;
        }
        if error.downcast_ref::<super::Skipped>().is_some() {
            return REFUSED;
        }
        OTHER
    }

    /// The exit code for a gRPC code.
    pub(crate) fn for_code(code: tonic::Code) -> u8 {
        use tonic::Code;
        match code {
            Code::Ok => 0,
            Code::InvalidArgument => USAGE,
            Code::NotFound => NOT_FOUND,
            Code::FailedPrecondition => REFUSED,
            Code::Unavailable | Code::DeadlineExceeded => UNAVAILABLE,
            Code::PermissionDenied | Code::Unauthenticated => DENIED,
            _ => OTHER,
        }
    }
}

/// An error as the CLI prints it: `Error:` and what failed with its causes
/// on one line, then what to do about it when that is known. With `debug`,
/// anyhow's full report instead (every cause on its own line, and a
/// backtrace when RUST_BACKTRACE asks for one).
pub(crate) fn explain(error: &anyhow::Error, debug: bool) -> String {
    if debug {
        return format!("Error: {error:?}");
    }
    let mut text = format!("Error: {error:#}");
    if let Some(failed) = error.downcast_ref::<tidemark_client::ConnectError>() {
        use tidemark_client::ConnectFailure;
        let hint = match failed.kind() {
            ConnectFailure::Refused => Some(
                "nothing listens at that address: give the server with --server HOST:PORT or TIDEMARK_SERVER \
                 (the default is 127.0.0.1:50051)",
            ),
            ConnectFailure::NameResolution => Some("the host name does not resolve: check --server / TIDEMARK_SERVER"),
            ConnectFailure::Tls => Some(
                "the TLS handshake failed: check --tls-ca (the CA that signed the server's certificate), \
                 --tls-domain, and that both sides use TLS (https:// or a CA means TLS)",
            ),
            ConnectFailure::Timeout => Some(
                "no answer in time: check --server / TIDEMARK_SERVER and that this machine can reach it \
                 (from a laptop: kubectl port-forward, see docs/deploy.md)",
            ),
            ConnectFailure::Configuration | ConnectFailure::Other => None,
        };
        if let Some(hint) = hint {
            text.push_str("\nhint: ");
            text.push_str(hint);
        }
    }
    text
}

/// Every table argument of the CLI goes through here: a name with upper
/// case or whitespace is accepted (an engine may mean it) but said on
/// stderr with the spelling a Hive-backed catalog would use, since the two
/// spellings are different keys to tidemark. Malformed names are left to
/// the server, which names the field.
#[allow(clippy::unnecessary_wraps)] // clap's value_parser signature
pub(crate) fn table_arg(value: &str) -> Result<String, std::convert::Infallible> {
    if let Ok(table) = tidemark_core::TableName::parse(value, "table")
        && let Some(warning) = table.spelling_warning()
    {
        render::warn(&warning);
    }
    Ok(value.to_owned())
}

/// A call the server refused or could not answer, with its gRPC code (for
/// the exit code) and the readable text.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub(crate) struct CallFailed {
    pub(crate) code: tonic::Code,
    text: String,
    /// Made by the client's gRPC stack, not sent by a server: the
    /// connection failed under the call (say, it reached an HTTP port).
    pub(crate) transport: bool,
}

/// A name tidemark does not know (exit code 3): a typo never reads as
/// "nothing here" (issue 55).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UnknownName(pub(crate) String);

/// The one check every command that names a table runs on the server's
/// answer: `table_known` false (the server has never seen the table) or a
/// `did_you_mean` for a consumer is an error naming what was most likely
/// meant. An answer without those fields (an older server) passes.
pub(crate) fn check_known(asked: &str, table_known: Option<bool>, did_you_mean: &str) -> anyhow::Result<()> {
    let hint = |what: String| match did_you_mean {
        "" => what,
        name => format!("{what}; did you mean {name}?"),
    };
    if table_known == Some(false) {
        return Err(UnknownName(hint(format!("tidemark has never seen table {asked}"))).into());
    }
    if !did_you_mean.is_empty() {
        return Err(UnknownName(hint(format!("tidemark has no consumer {asked}"))).into());
    }
    Ok(())
}

/// A bulk change left selected consumers alone (exit code 4, as the
/// single form refused by the same precondition).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Skipped(pub(crate) String);

/// The command line asked for something impossible (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub(crate) String);

/// Turns a failed call into a readable error: code, reason, message, and
/// each bad field.
pub(crate) fn call_error(status: tonic::Status) -> anyhow::Error {
    let err = ApiError::from(status);
    let mut text = tidemark_server::status::code_name(err.code).to_owned();
    if !err.reason.is_empty() && err.reason != text {
        let _ = write!(text, " {}", err.reason);
    }
    let _ = write!(text, ": {}", err.message);
    // Each bad field on its own line, unless the message already says it.
    for (field, why) in &err.field_violations {
        if !err.message.contains(&format!("{field}: {why}")) {
            let _ = write!(text, "\n  {field}: {why}");
        }
    }
    match err.reason.as_str() {
        "LEASE_HELD" => text.push_str(
            "\nhint: stop the query that holds the lease, or pass --force to revoke it (that query is then fenced)",
        ),
        "NEXT_SNAPSHOT_MISMATCH" => text.push_str("\nhint: describe the consumer and retry with the current position"),
        _ => {}
    }
    let transport = err.reason.is_empty()
        && matches!(
            err.code,
            tonic::Code::Cancelled | tonic::Code::Unknown | tonic::Code::Internal | tonic::Code::Unavailable
        );
    anyhow::Error::new(CallFailed {
        code: err.code,
        text,
        transport,
    })
}
