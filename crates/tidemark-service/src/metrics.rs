//! The metrics the application records (SPEC §7): consumer lag, fence
//! positions and fleet figures from the gauge collector, sweeper runs, and
//! the mirror's writes and repairs. Recorded through the `metrics` facade;
//! the server lists these names beside its own.

use std::time::Duration;

/// Metric names, for the exporter's configuration and the docs.
pub mod names {
    /// Gauge: the most snapshots any consumer of a branch has not consumed
    /// yet, per table and branch: from the branch's latest snapshot (the
    /// table's directory for a registered table, else the highest any of
    /// its consumers reported) down to the lowest position. Computed every
    /// `--gauge-interval` by the one collecting replica, so a stopped
    /// query's lag keeps growing.
    pub const CONSUMER_LAG: &str = "tidemark_consumer_lag_snapshots";
    /// Gauge (SPEC §11 A8): for a registered table, how long the oldest
    /// snapshot its most lagging consumer has not read has waited, in
    /// seconds (0 when none is behind), per table and branch.
    pub const CONSUMER_LAG_SECONDS: &str = "tidemark_consumer_lag_seconds";
    /// Gauge: the same per consumer, for the `--per-consumer-metrics` most
    /// lagging consumers only (off by default: 100,000 consumers must not
    /// become 100,000 series).
    pub const CONSUMER_LAG_PER_CONSUMER: &str = "tidemark_consumer_lag_snapshots_per_consumer";
    /// Gauge: consumers per table and branch.
    pub const CONSUMERS: &str = "tidemark_consumers";
    /// Gauge: how long the most idle consumer of a branch that still has
    /// snapshots to read has not moved, in seconds (0 when none is behind).
    pub const CONSUMER_BEHIND_IDLE: &str = "tidemark_consumer_behind_idle_seconds";
    /// Gauge: the fence per table, branch and kind (snapshot/changelog),
    /// computed periodically; -1 when nothing fences.
    pub const RETENTION_FENCE: &str = "tidemark_retention_fence";
    /// Gauge: snapshots from the snapshot fence to the branch's latest: what
    /// the fence keeps from expiring.
    pub const RETENTION_FENCE_LAG: &str = "tidemark_retention_fence_lag_snapshots";
    /// Gauge: leases live now (whole fleet).
    pub const LEASES_LIVE: &str = "tidemark_leases_live";
    /// Gauge: history rows (Postgres: the planner's estimate).
    pub const HISTORY_ROWS: &str = "tidemark_history_rows";
    /// Gauge: age of the oldest history row, in seconds (with a history
    /// retention set).
    pub const HISTORY_OLDEST_AGE: &str = "tidemark_history_oldest_age_seconds";
    /// Gauge: 1 on the replica computing the fleet gauges above, else 0.
    pub const GAUGE_COLLECTOR: &str = "tidemark_gauge_collector";
    /// Gauge: 1, labelled with the version.
    pub const BUILD_INFO: &str = "tidemark_build_info";
    /// Gauge: database connections of this replica, by state (open/idle).
    pub const DB_POOL_CONNECTIONS: &str = "tidemark_db_pool_connections";
    /// Gauge: the most database connections this replica may open.
    pub const DB_POOL_MAX: &str = "tidemark_db_pool_max_connections";
    /// Counter: sweeper runs by result (ok/error).
    pub const SWEEPER_RUNS: &str = "tidemark_sweeper_runs_total";
    /// Counter: consumers the sweeper expired.
    pub const CONSUMERS_EXPIRED: &str = "tidemark_consumers_expired_total";
    /// Counter: history rows pruned by age.
    pub const HISTORY_PRUNED: &str = "tidemark_history_pruned_total";
    /// Gauge: Paimon consumer files of registered tables found stale in the
    /// mirror's last round (the mirror's lag, in files).
    pub const MIRROR_BACKLOG: &str = "tidemark_mirror_backlog";
    /// Counter: consumer files written or deleted by the mirror, by result.
    pub const MIRROR_WRITES: &str = "tidemark_mirror_writes_total";
    /// Counter: consumer files found changed, deleted or unreadable (changed
    /// from outside) and written back, and pin files without a live pin
    /// deleted, by cause.
    pub const MIRROR_REPAIRS: &str = "tidemark_mirror_repairs_total";
    /// Gauge: registered branches whose directory is gone (dropped); the
    /// keeper writes nothing there.
    pub const MIRROR_BRANCHES_MISSING: &str = "tidemark_mirror_branches_missing";
    /// Gauge: how long the mirror keeper's last pass took, in seconds.
    pub const MIRROR_KEEPER_PASS: &str = "tidemark_mirror_keeper_pass_seconds";
}

/// One branch's figures from the gauge collector.
pub(crate) struct BranchGauges<'a> {
    pub(crate) table: &'a str,
    pub(crate) branch: &'a str,
    pub(crate) consumers: i64,
    pub(crate) lag: Option<i64>,
    pub(crate) lag_seconds: Option<Duration>,
    pub(crate) behind_idle: Duration,
    pub(crate) fence: Option<(Option<i64>, Option<i64>)>,
    pub(crate) fence_lag: Option<i64>,
}

pub(crate) fn branch_gauges(g: &BranchGauges<'_>) {
    let labels = [("table", g.table.to_owned()), ("branch", g.branch.to_owned())];
    metrics::gauge!(names::CONSUMERS, &labels).set(g.consumers as f64);
    if let Some(lag) = g.lag {
        metrics::gauge!(names::CONSUMER_LAG, &labels).set(lag as f64);
    }
    if let Some(waited) = g.lag_seconds {
        metrics::gauge!(names::CONSUMER_LAG_SECONDS, &labels).set(waited.as_secs_f64());
    }
    metrics::gauge!(names::CONSUMER_BEHIND_IDLE, &labels).set(g.behind_idle.as_secs_f64());
    if let Some((snapshot, changelog)) = g.fence {
        fence(g.table, g.branch, "snapshot", snapshot);
        fence(g.table, g.branch, "changelog", changelog);
    }
    if let Some(lag) = g.fence_lag {
        metrics::gauge!(names::RETENTION_FENCE_LAG, &labels).set(lag as f64);
    }
}

pub(crate) fn consumer_lag(table: &str, branch: &str, consumer_id: &str, lag: i64) {
    metrics::gauge!(
        names::CONSUMER_LAG_PER_CONSUMER,
        "table" => table.to_owned(),
        "branch" => branch.to_owned(),
        "consumer_id" => consumer_id.to_owned()
    )
    .set(lag as f64);
}

fn fence(table: &str, branch: &str, kind: &'static str, position: Option<i64>) {
    metrics::gauge!(names::RETENTION_FENCE, "table" => table.to_owned(), "branch" => branch.to_owned(), "kind" => kind)
        .set(position.map_or(-1.0, |p| p as f64));
}

/// Fleet-wide figures from the gauge collector.
pub(crate) fn fleet(live_leases: i64, history_rows: Option<i64>, history_oldest_age: Option<Duration>) {
    metrics::gauge!(names::LEASES_LIVE).set(live_leases as f64);
    if let Some(rows) = history_rows {
        metrics::gauge!(names::HISTORY_ROWS).set(rows as f64);
    }
    if let Some(age) = history_oldest_age {
        metrics::gauge!(names::HISTORY_OLDEST_AGE).set(age.as_secs_f64());
    }
}

/// What every replica reports every round.
pub(crate) fn replica(collecting: bool, pool: tidemark_store::PoolStats) {
    metrics::gauge!(names::GAUGE_COLLECTOR).set(if collecting { 1.0 } else { 0.0 });
    metrics::gauge!(names::BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    metrics::gauge!(names::DB_POOL_CONNECTIONS, "state" => "open").set(f64::from(pool.open));
    metrics::gauge!(names::DB_POOL_CONNECTIONS, "state" => "idle").set(f64::from(pool.idle));
    metrics::gauge!(names::DB_POOL_MAX).set(f64::from(pool.max));
}

pub(crate) fn sweeper_run(ok: bool, expired: usize, pruned: u64) {
    metrics::counter!(names::SWEEPER_RUNS, "result" => if ok { "ok" } else { "error" }).increment(1);
    metrics::counter!(names::CONSUMERS_EXPIRED).increment(expired as u64);
    metrics::counter!(names::HISTORY_PRUNED).increment(pruned);
}

/// Consumer files the mirror found stale in its last round.
pub(crate) fn mirror_backlog(stale: usize) {
    metrics::gauge!(names::MIRROR_BACKLOG).set(stale as f64);
}

/// One consumer file put back, or a stale pin file deleted, by the keeper.
pub(crate) fn mirror_repair(cause: &'static str) {
    metrics::counter!(names::MIRROR_REPAIRS, "cause" => cause).increment(1);
}

/// Registered branches found without a directory in the keeper's last pass.
pub(crate) fn mirror_branches_missing(count: usize) {
    metrics::gauge!(names::MIRROR_BRANCHES_MISSING).set(count as f64);
}

/// How long a keeper pass took.
pub(crate) fn mirror_keeper_pass(elapsed: Duration) {
    metrics::gauge!(names::MIRROR_KEEPER_PASS).set(elapsed.as_secs_f64());
}

/// One consumer file written or deleted by the mirror.
pub(crate) fn mirror_write(ok: bool) {
    metrics::counter!(names::MIRROR_WRITES, "result" => if ok { "ok" } else { "error" }).increment(1);
}

/// A conditional write skipped because the object changed since it was
/// read (another replica's write, an outside change): read again next time.
pub(crate) fn mirror_write_conflict() {
    metrics::counter!(names::MIRROR_WRITES, "result" => "conflict").increment(1);
}
