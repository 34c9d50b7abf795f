//! What `tidemark serve` takes from outside the server: the metrics
//! exporter's port, SIGHUP (reload credentials and certificates) and
//! SIGINT/SIGTERM (drain and stop).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;

/// Serves Prometheus metrics on `address`; gauges not updated within
/// `idle` vanish.
pub(super) fn install_metrics(address: SocketAddr, idle: Duration) -> anyhow::Result<()> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    use metrics_util::MetricKindMask;
    PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(
            Matcher::Full(tidemark_server::metrics::names::RPC_DURATION.to_owned()),
            &tidemark_server::metrics::RPC_BUCKETS,
        )?
        .idle_timeout(MetricKindMask::GAUGE, Some(idle))
        .install()
        .with_context(|| {
            format!(
                "cannot serve metrics on {address} (is another process on that port? choose another with \
                 --metrics-listen ADDR, or --metrics-listen off)"
            )
        })
}

/// Asks for a reload of credentials and certificates on every SIGHUP.
pub(super) async fn reload_on_sighup(trigger: std::sync::Arc<tokio::sync::Notify>) {
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(mut hangup) => {
            while hangup.recv().await.is_some() {
                trigger.notify_one();
            }
        }
        Err(e) => tracing::error!("cannot listen for SIGHUP: {e}"),
    }
    #[cfg(not(unix))]
    let _ = trigger;
}

/// Completes on SIGINT or SIGTERM.
pub(super) async fn shutdown_signal() {
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
