//! The background sweeper (SPEC E3, A5): expires consumers whatever the
//! table's writers do, and prunes old history. Every replica runs it; each
//! expiry is a compare-and-set, so a consumer is expired exactly once.

use std::time::Duration;

use tidemark_store::{CallContext, Store};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::metrics;

/// The sweeper's own settings (from `ServerConfig`).
#[derive(Debug, Clone, Copy)]
pub struct SweeperSettings {
    /// How often it sweeps; zero turns it off.
    pub interval: Duration,
    /// Most consumers one sweep expires.
    pub limit: i64,
    /// Prune history older than this (`None`: keep it).
    pub history_retention: Option<Duration>,
}

/// History rows one prune statement deletes: each batch is a short
/// transaction of its own; a sweep runs batches until it has caught up.
const PRUNE_BATCH: i64 = 10_000;

/// How long one sweep may spend pruning: half its interval, so a backlog
/// (a retention shortened, a replica that was down) drains over a few
/// sweeps without a sweep running into the next.
fn prune_budget(interval: Duration) -> Duration {
    (interval / 2).max(Duration::from_secs(1))
}

/// The pause between sweeps while a backlog of expired consumers drains.
/// Expired consumers below a fence cost every fence read a row each (the
/// fence looks past them), so a mass expiry (a table's expiration time
/// shortened, the service down for a day) is drained in capped sweeps that
/// follow each other closely, not one cap per interval.
fn catch_up_pause(interval: Duration) -> Duration {
    interval.min(Duration::from_millis(250))
}

/// What a sweep may take beyond its pruning budget (the expiry's search
/// and writes).
const SWEEP_MARGIN: Duration = Duration::from_secs(30);

/// Sweeps every `settings.interval` until `stop`; while a sweep finds more
/// expired consumers than its cap, the next follows after a short pause.
pub(crate) async fn run(store: Store, settings: SweeperSettings, stop: CancellationToken) {
    if settings.interval.is_zero() {
        tracing::info!("consumer sweeper disabled");
        return;
    }
    let mut backlog = false;
    loop {
        let wait = if backlog {
            catch_up_pause(settings.interval)
        } else {
            // Replicas drift apart so they do not all sweep at the same instant.
            let jitter = Duration::from_millis(u64::from(uuid::Uuid::new_v4().as_u128() as u16) % 1000);
            settings.interval + jitter
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        // A span per sweep: its statements (the expiry's search, each
        // expiry's write, the prune batches) make one trace.
        let span = tracing::debug_span!(
            "sweep",
            otel.name = "tidemark.sweep",
            expired = tracing::field::Empty,
            pruned = tracing::field::Empty,
        );
        // Client-side: a statement on a half-open connection never returns.
        let limit = prune_budget(settings.interval) + SWEEP_MARGIN;
        backlog = match tokio::time::timeout(limit, sweep(&store, settings).instrument(span)).await {
            Ok(swept) => swept == Swept::CapReached,
            Err(_) => {
                tracing::warn!(?limit, "a sweep did not finish in time; the next goes on");
                false
            }
        };
    }
}

/// What one sweep's expiry found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Swept {
    /// Fewer expired consumers found than the cap (or the sweep failed):
    /// wait a whole interval.
    CaughtUp,
    /// As many found as the cap (whoever expired them): there may be more.
    CapReached,
}

/// One sweep: expire (at most `settings.limit` consumers), then prune.
pub(crate) async fn sweep(store: &Store, settings: SweeperSettings) -> Swept {
    let ctx = CallContext::new("sweeper", format!("sweep-{}", uuid::Uuid::now_v7()));
    let mut found = 0;
    let expired = match store
        .expire_consumers_counted(&ctx, None, None, settings.limit, true)
        .await
    {
        Ok(run) => {
            for e in &run.expired {
                tracing::info!(consumer = %e.key, next_snapshot = e.next_snapshot, idle = ?e.idle, "consumer expired");
            }
            found = run.found;
            Ok(run.expired.len())
        }
        Err(e) => Err(e),
    };
    let pruned = match settings.history_retention {
        Some(age) => store
            .prune_until_caught_up(age, PRUNE_BATCH, prune_budget(settings.interval))
            .await
            .map(|run| {
                if !run.caught_up {
                    tracing::warn!(
                        pruned = run.history,
                        batches = run.batches,
                        "history pruning has not caught up within its budget; it goes on next sweep"
                    );
                }
                run.history
            }),
        None => Ok(0),
    };
    // Judged by what the sweep found, not by what it won: replicas racing
    // one backlog each expire part of the same candidates, and each must
    // still see that more are waiting.
    let swept = match &expired {
        Ok(_) if i64::try_from(found).unwrap_or(i64::MAX) >= settings.limit => Swept::CapReached,
        _ => Swept::CaughtUp,
    };
    if swept == Swept::CapReached {
        tracing::info!(
            cap = settings.limit,
            "sweep reached its cap; the next one follows shortly"
        );
    }
    match (expired, pruned) {
        (Ok(expired), Ok(pruned)) => {
            // On the sweep's span (see `run`), for its trace: as i64, which
            // OpenTelemetry exports as a number (u64 goes as a string).
            let span = tracing::Span::current();
            span.record("expired", i64::try_from(expired).unwrap_or(i64::MAX));
            span.record("pruned", i64::try_from(pruned).unwrap_or(i64::MAX));
            metrics::sweeper_run(true, expired, pruned);
        }
        (expired, pruned) => {
            tracing::warn!(expired = ?expired.err(), pruned = ?pruned.err(), "sweep failed; retrying next interval");
            metrics::sweeper_run(false, 0, 0);
        }
    }
    swept
}
