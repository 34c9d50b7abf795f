//! Prometheus metrics (SPEC §7): RPC latency and codes, commits by outcome,
//! lease conflicts and takeovers, consumer lag, fence positions, sweeper
//! runs. Recorded through the `metrics` facade; the binary installs the
//! exporter on its own port.

use std::time::Duration;

use tidemark_core::CommitOutcome;

/// Metric names, for the exporter's configuration and the docs.
pub mod names {
    /// Counter: RPCs by service, method and gRPC code.
    pub const RPC_REQUESTS: &str = "tidemark_rpc_requests_total";
    /// Histogram: RPC latency in seconds by service and method.
    pub const RPC_DURATION: &str = "tidemark_rpc_duration_seconds";
    /// Counter: commits by outcome.
    pub const COMMITS: &str = "tidemark_commits_total";
    /// Counter: lease grants, by whether they took over an unreleased lease.
    pub const LEASE_ACQUISITIONS: &str = "tidemark_lease_acquisitions_total";
    /// Counter: acquisitions and operator changes refused with LEASE_HELD.
    pub const LEASE_CONFLICTS: &str = "tidemark_lease_conflicts_total";
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
    /// Gauge: 1 while this replica's readiness check reaches a writable
    /// database, else 0.
    pub const DATABASE_READY: &str = "tidemark_database_ready";
    /// Counter: failed calls by method, gRPC code and `ErrorInfo` reason
    /// (including calls refused before their handler and calls shed).
    pub const ERRORS: &str = "tidemark_errors_total";
    /// Counter: calls shed at once because `--max-in-flight` calls were
    /// running, by method.
    pub const CALLS_SHED: &str = "tidemark_calls_shed_total";
    /// Counter: calls that ran out of `--request-timeout`, by method.
    pub const CALLS_TIMED_OUT: &str = "tidemark_calls_timed_out_total";
    /// Counter: sweeper runs by result (ok/error).
    pub const SWEEPER_RUNS: &str = "tidemark_sweeper_runs_total";
    /// Counter: consumers the sweeper expired.
    pub const CONSUMERS_EXPIRED: &str = "tidemark_consumers_expired_total";
    /// Counter: history rows pruned by age.
    pub const HISTORY_PRUNED: &str = "tidemark_history_pruned_total";
    /// Counter: calls refused before their handler (unknown, missing or
    /// insufficient credentials).
    pub const AUTH_DENIED: &str = "tidemark_auth_denied_total";
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
    /// Counter: reloads of credentials and TLS material, by what
    /// (auth/tls) and outcome (applied/refused).
    pub const CONFIG_RELOADS: &str = "tidemark_config_reloads_total";
    /// Counters of Postgres group commit (recorded by the store).
    pub use tidemark_store::group_commit_metrics::{
        STATEMENT_WRITES as COMMIT_STATEMENT_WRITES, STATEMENTS as COMMIT_STATEMENTS,
        WRITES_ALONE as COMMIT_WRITES_ALONE,
    };
    /// Counters of Postgres group reads (recorded by the store).
    pub use tidemark_store::group_read_metrics::{
        STATEMENT_READS as READ_STATEMENT_READS, STATEMENTS as READ_STATEMENTS,
    };
}

/// Latency buckets for RPCs, in seconds (a commit is ~1-10 ms).
pub const RPC_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

pub(crate) fn rpc(service: &'static str, method: &'static str, code: tonic::Code, elapsed: Duration) {
    metrics::counter!(names::RPC_REQUESTS, "service" => service, "method" => method, "code" => crate::status::code_name(code))
        .increment(1);
    metrics::histogram!(names::RPC_DURATION, "service" => service, "method" => method).record(elapsed.as_secs_f64());
}

pub(crate) fn commit(outcome: CommitOutcome) {
    metrics::counter!(names::COMMITS, "outcome" => outcome.as_str()).increment(1);
}

pub(crate) fn lease_acquired(takeover: bool) {
    let kind = if takeover { "takeover" } else { "acquire" };
    metrics::counter!(names::LEASE_ACQUISITIONS, "kind" => kind).increment(1);
}

pub(crate) fn lease_conflict() {
    metrics::counter!(names::LEASE_CONFLICTS).increment(1);
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

pub(crate) fn database_ready(ready: bool) {
    metrics::gauge!(names::DATABASE_READY).set(if ready { 1.0 } else { 0.0 });
}

/// A failed call. `method` is a known method's name (never a path a client
/// made up: labels must stay bounded).
pub(crate) fn error(method: &'static str, code: tonic::Code, reason: &str) {
    metrics::counter!(
        names::ERRORS,
        "method" => method,
        "code" => crate::status::code_name(code),
        "reason" => bounded_reason(reason)
    )
    .increment(1);
}

/// Reasons are this server's own (a few dozen); they are interned once, and
/// past a bound (which only a bug could reach) counted as OTHER, so labels
/// stay bounded.
fn bounded_reason(reason: &str) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    static SEEN: LazyLock<Mutex<HashMap<String, &'static str>>> = LazyLock::new(Mutex::default);
    if reason.is_empty() {
        return "";
    }
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(interned) = seen.get(reason) {
        return interned;
    }
    if seen.len() >= 256 {
        return "OTHER";
    }
    let interned: &'static str = Box::leak(reason.to_owned().into_boxed_str());
    seen.insert(reason.to_owned(), interned);
    interned
}

pub(crate) fn shed(method: &'static str) {
    metrics::counter!(names::CALLS_SHED, "method" => method).increment(1);
    error(method, tonic::Code::ResourceExhausted, "");
}

pub(crate) fn timed_out(method: &'static str) {
    metrics::counter!(names::CALLS_TIMED_OUT, "method" => method).increment(1);
}

/// The method name of a request path when it names a method this server
/// serves, else "unknown" (a client can send any path).
pub(crate) fn method_of(path: &str) -> &'static str {
    use std::collections::HashMap;
    use std::sync::LazyLock;
    static METHODS: LazyLock<HashMap<String, &'static str>> = LazyLock::new(|| {
        use prost::Message;
        let mut methods = HashMap::new();
        for set in [
            tidemark_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
        ] {
            let Ok(files) = prost_types::FileDescriptorSet::decode(set) else {
                continue;
            };
            for file in files.file {
                for service in &file.service {
                    for method in &service.method {
                        let path = format!("/{}.{}/{}", file.package(), service.name(), method.name());
                        methods.insert(path, &*Box::leak(method.name().to_owned().into_boxed_str()));
                    }
                }
            }
        }
        methods
    });
    METHODS.get(path).copied().unwrap_or("unknown")
}

pub(crate) fn sweeper_run(ok: bool, expired: usize, pruned: u64) {
    metrics::counter!(names::SWEEPER_RUNS, "result" => if ok { "ok" } else { "error" }).increment(1);
    metrics::counter!(names::CONSUMERS_EXPIRED).increment(expired as u64);
    metrics::counter!(names::HISTORY_PRUNED).increment(pruned);
}

pub(crate) fn auth_denied() {
    metrics::counter!(names::AUTH_DENIED).increment(1);
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

/// A reload of credentials or TLS material, applied or refused.
pub(crate) fn config_reload(what: &'static str, outcome: &'static str) {
    metrics::counter!(names::CONFIG_RELOADS, "what" => what, "outcome" => outcome).increment(1);
}
