//! What `tidemark serve` takes from outside the server: SIGHUP (reload
//! credentials and certificates) and SIGINT/SIGTERM (drain and stop).

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
