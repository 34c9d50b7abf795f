//! The gauge collector: every `interval`, each replica reports its own
//! figures (build, connection pool, whether it collects), and the one
//! replica holding the collector role computes the fleet's gauges — lag,
//! consumers, fences per branch, live leases, history size and age — so
//! every gauge has a single writer and a stopped query's lag keeps growing.
//! Gauges a replica stops writing (it lost the role, a consumer left the
//! per-consumer top) vanish after the exporter's idle timeout (three
//! intervals), so `max()` across replicas reads the current collector.

use std::sync::Arc;
use std::time::Duration;

use tidemark_core::state::lag;
use tidemark_core::{BranchName, TableName};
use tidemark_store::Store;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::metrics;
use crate::tables::{Tables, waited_since};

/// Most branches reported per round.
const BRANCH_LIMIT: i64 = 1000;

/// The collector's settings.
#[derive(Debug, Clone)]
pub struct GaugeSettings {
    /// How often gauges are computed; zero turns the collector off.
    pub interval: Duration,
    /// Per-consumer lag series for this many most lagging consumers.
    pub per_consumer: i64,
    /// History retention (the oldest row is looked for around it).
    pub history_retention: Option<Duration>,
    /// The sweeper's interval (pruning reads about that much history).
    pub sweep_interval: Duration,
}

/// How long the collector's claim may wait for its session.
const CLAIM_LIMIT: Duration = Duration::from_secs(10);
/// How long a round of fleet gauges may take.
const COLLECT_LIMIT: Duration = Duration::from_secs(30);

pub(crate) async fn run(store: Store, tables: Arc<Tables>, settings: GaugeSettings, stop: CancellationToken) {
    if settings.interval.is_zero() {
        return;
    }
    loop {
        // Client-side limits: a statement on a connection left half-open
        // by a failover never returns (TCP notices after ~15 minutes); cut
        // short, its connection is dropped and the next round connects
        // afresh, to the new primary.
        let collecting = match tokio::time::timeout(CLAIM_LIMIT, store.claim_collector()).await {
            Ok(Ok(claimed)) => claimed,
            Ok(Err(e)) => {
                tracing::debug!("cannot claim the gauge collector role: {e}");
                false
            }
            Err(_) => {
                tracing::warn!(limit = ?CLAIM_LIMIT, "the gauge collector's claim did not answer in time");
                false
            }
        };
        metrics::replica(collecting, store.pool_stats());
        if collecting {
            let span = tracing::debug_span!("fleet gauges", otel.name = "tidemark.fleet_gauges");
            match tokio::time::timeout(COLLECT_LIMIT, collect(&store, &tables, &settings).instrument(span)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("fleet gauges not computed this round: {e}"),
                Err(_) => {
                    tracing::warn!(limit = ?COLLECT_LIMIT, "fleet gauges not computed this round: no answer in time")
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}

async fn collect(
    store: &Store,
    tables: &Arc<Tables>,
    settings: &GaugeSettings,
) -> Result<(), tidemark_store::StoreError> {
    let window = (settings.sweep_interval * 2).max(Duration::from_secs(60));
    let stats = store
        .fleet_stats(BRANCH_LIMIT, settings.per_consumer, settings.history_retention, window)
        .await?;
    for branch in &stats.branches {
        let names = TableName::parse(&branch.table, "table")
            .ok()
            .zip(BranchName::parse(&branch.branch, "branch").ok());
        // A registered table's directory knows its latest snapshot.
        let directory_latest = names
            .as_ref()
            .and_then(|(table, _)| tables.last_known_latest(table, &branch.branch));
        // The higher of the two (`None` is below every snapshot).
        let latest = directory_latest.max(branch.reported_latest);
        let fences = match &names {
            Some((table, name)) => {
                let fence = store.fence(table, name, false, 1).await?;
                Some((fence.fences.snapshot, fence.fences.changelog))
            }
            None => None,
        };
        let fence_lag = match (fences.and_then(|(snapshot, _)| snapshot), latest) {
            (Some(fence), Some(latest)) => lag(fence, latest),
            _ => None,
        };
        // Lag in time, for registered tables: how long the lowest
        // position's snapshot has waited.
        let lag_seconds = match (&names, directory_latest) {
            (Some((table, _)), Some(known)) if branch.min_next <= known => tables
                .snapshot_millis(table, &branch.branch, branch.min_next)
                .await
                .map(|millis| waited_since(millis, stats.now)),
            (Some(_), Some(_)) => Some(Duration::ZERO),
            _ => None,
        };
        metrics::branch_gauges(&metrics::BranchGauges {
            table: &branch.table,
            branch: &branch.branch,
            consumers: branch.consumers,
            lag: latest.and_then(|latest| lag(branch.min_next, latest)),
            lag_seconds,
            behind_idle: branch
                .oldest_behind
                .map_or(Duration::ZERO, |since| since.until(stats.now)),
            fence: fences,
            fence_lag,
        });
    }
    for consumer in &stats.worst {
        let directory_latest = TableName::parse(&consumer.table, "table")
            .ok()
            .and_then(|table| tables.last_known_latest(&table, &consumer.branch));
        let latest = directory_latest.unwrap_or(0).max(consumer.branch_latest);
        if let Some(lag) = lag(consumer.next_snapshot, latest) {
            metrics::consumer_lag(&consumer.table, &consumer.branch, &consumer.consumer_id, lag);
        }
    }
    metrics::fleet(
        stats.live_leases,
        stats.history_rows,
        stats.history_oldest.map(|oldest| oldest.until(stats.now)),
    );
    Ok(())
}
