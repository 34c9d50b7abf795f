//! Readiness: the `readiness` health service follows whether the database
//! can make a commit, looked at on an interval and at once when a call
//! finds it unavailable.

use std::time::Duration;

use tidemark_service::App;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The health service name whose status tracks the database: SERVING while
/// the database answers. Kubernetes readiness probes ask for it; liveness
/// probes ask for "" (the process), which never depends on the database.
pub const READINESS_SERVICE: &str = "readiness";

/// How soon after a look prompted by a failed call the next such look may
/// come: a storm of failures costs at most this many pings a second.
const RECHECK_SPACING: Duration = Duration::from_millis(100);

/// Keeps the readiness status in step with the database until `stop`: a
/// look every `every`, and one at once (while ready) when a call reports
/// the database unavailable.
pub(crate) async fn track_readiness(reporter: HealthReporter, app: App, every: Duration, stop: CancellationToken) {
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
