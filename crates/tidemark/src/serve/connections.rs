//! Descriptors and connections: the open-files limit raised at start, a
//! cap per listener, the console's header and idle timeouts, and the
//! metrics port served within the same bounds.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tidemark_net::HttpLimits;
use tokio_util::sync::CancellationToken;

use crate::flags::HumanDuration;

/// `tidemark serve`'s connection bounds.
#[derive(Debug, Clone, Args)]
pub(crate) struct ConnectionArgs {
    /// Most gRPC connections held at once; more are refused at once (a
    /// fleet's idle workers and a flood alike), so descriptors remain for
    /// the database and the table stores.
    #[arg(long, env = "TIDEMARK_MAX_CONNECTIONS", default_value_t = tidemark_server::ServerConfig::default().max_connections)]
    pub(crate) max_connections: usize,
    /// Most console connections held at once; more are refused.
    #[arg(long, env = "TIDEMARK_CONSOLE_MAX_CONNECTIONS", default_value_t = CONSOLE.max_connections)]
    console_max_connections: usize,
    /// How long a console request's headers (and TLS handshake) may take.
    #[arg(long, env = "TIDEMARK_CONSOLE_HEADER_TIMEOUT", default_value_t = HumanDuration(CONSOLE.header_timeout))]
    console_header_timeout: HumanDuration,
    /// How long a console connection may stay open with nothing sent.
    #[arg(long, env = "TIDEMARK_CONSOLE_IDLE_TIMEOUT", default_value_t = HumanDuration(CONSOLE.idle_timeout))]
    console_idle_timeout: HumanDuration,
    /// Most /metrics connections held at once; more are refused.
    #[arg(long, env = "TIDEMARK_METRICS_MAX_CONNECTIONS", default_value_t = 64)]
    metrics_max_connections: usize,
}

const CONSOLE: HttpLimits = HttpLimits {
    max_connections: 256,
    header_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(60),
};

impl ConnectionArgs {
    /// The console's bounds.
    pub(crate) fn console(&self) -> HttpLimits {
        HttpLimits {
            max_connections: self.console_max_connections,
            header_timeout: self.console_header_timeout.0,
            idle_timeout: self.console_idle_timeout.0,
        }
    }

    /// The metrics port's: scrapes are small and quick.
    fn metrics(&self) -> HttpLimits {
        HttpLimits {
            max_connections: self.metrics_max_connections,
            header_timeout: CONSOLE.header_timeout,
            idle_timeout: CONSOLE.idle_timeout,
        }
    }
}

/// Installs the Prometheus recorder and serves it on `address` within the
/// metrics bounds (bound now, so a busy port stops the start at once).
pub(super) async fn serve_metrics(address: SocketAddr, idle: Duration, args: &ConnectionArgs) -> anyhow::Result<()> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    use metrics_util::MetricKindMask;
    let listener = tokio::net::TcpListener::bind(address).await.with_context(|| {
        format!(
            "cannot serve metrics on {address} (is another process on that port? choose another with \
             --metrics-listen ADDR, or --metrics-listen off)"
        )
    })?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(tidemark_server::metrics::names::RPC_DURATION.to_owned()),
            &tidemark_server::metrics::RPC_BUCKETS,
        )?
        .idle_timeout(MetricKindMask::GAUGE, Some(idle))
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    // What the exporter's own listener did: drain histograms and forget
    // idle gauges now and then, not only when scraped.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let service = hyper::service::service_fn(move |_request| {
        let body = handle.render();
        async move {
            let mut response = hyper::Response::new(body);
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    tokio::spawn(tidemark_net::serve_http1(
        "metrics",
        listener,
        service,
        None,
        args.metrics(),
        CancellationToken::new(),
    ));
    Ok(())
}

/// `--metrics-listen` and `--console-listen`: an address, or "off"; checked
/// when the command line is parsed, like every other flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MetricsListen(pub(super) Option<SocketAddr>);

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
