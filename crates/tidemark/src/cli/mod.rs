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
mod render;
mod retention;
mod tables;

pub(crate) use consumers::{ConsumersCommand, consumers};
pub(crate) use history::{HistoryArgs, history};
pub(crate) use options::{OptionsCommand, options};
pub(crate) use retention::{FenceArgs, fence};
pub(crate) use tables::{TablesCommand, tables};

/// Where the server is, how to authenticate, and how to print.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// The tidemark server (`https://...` with TLS).
    #[arg(
        long,
        env = "TIDEMARK_SERVER",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    server: String,
    /// Bearer token.
    #[arg(long, env = "TIDEMARK_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// CA certificate (PEM) that signed the server's certificate.
    #[arg(long, env = "TIDEMARK_TLS_CA", global = true)]
    tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM), for mutual TLS.
    #[arg(long, env = "TIDEMARK_CLIENT_CERT", global = true, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// Client private key (PEM), for mutual TLS.
    #[arg(long, env = "TIDEMARK_CLIENT_KEY", global = true, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Name to verify in the server's certificate (default: the server's host).
    #[arg(long, env = "TIDEMARK_TLS_DOMAIN", global = true)]
    tls_domain: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "table", global = true)]
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
            endpoint: self.server.clone(),
            token: self.token.clone(),
            tls,
            connect_timeout: Some(Duration::from_secs(5)),
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

/// Turns a failed call into a readable error: code, reason, message, and
/// each bad field.
pub(crate) fn call_error(status: tonic::Status) -> anyhow::Error {
    let err = ApiError::from(status);
    let mut text = tidemark_server::status::code_name(err.code).to_owned();
    if !err.reason.is_empty() && err.reason != text {
        let _ = write!(text, " {}", err.reason);
    }
    let _ = write!(text, ": {}", err.message);
    for (field, why) in &err.field_violations {
        let _ = write!(text, "\n  {field}: {why}");
    }
    match err.reason.as_str() {
        "LEASE_HELD" => text.push_str(
            "\nhint: stop the query that holds the lease, or pass --force to revoke it (that query is then fenced)",
        ),
        "NEXT_SNAPSHOT_MISMATCH" => text.push_str("\nhint: describe the consumer and retry with the current position"),
        _ => {}
    }
    anyhow::Error::msg(text)
}
