//! Prometheus metrics (SPEC §7): RPC latency and codes, commits by outcome,
//! lease conflicts and takeovers, consumer lag, fence positions, sweeper
//! runs. Recorded through the `metrics` facade; the binary installs the
//! exporter on its own port.

use std::time::Duration;

use tidemark_core::{CommitOutcome, ConsumerKey};

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
    /// Gauge: snapshots not yet consumed, per consumer, from its last commit
    /// that reported the latest snapshot (on the replica that served it).
    pub const CONSUMER_LAG: &str = "tidemark_consumer_lag_snapshots";
    /// Gauge: the last computed fence per table, branch and kind
    /// (snapshot/changelog); -1 when nothing fences.
    pub const RETENTION_FENCE: &str = "tidemark_retention_fence";
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

pub(crate) fn consumer_lag(key: &ConsumerKey, lag: i64) {
    metrics::gauge!(
        names::CONSUMER_LAG,
        "table" => key.table.as_str().to_owned(),
        "branch" => key.branch.as_str().to_owned(),
        "consumer_id" => key.consumer_id.as_str().to_owned()
    )
    .set(lag as f64);
}

pub(crate) fn fence(table: &str, branch: &str, kind: &'static str, position: Option<i64>) {
    metrics::gauge!(names::RETENTION_FENCE, "table" => table.to_owned(), "branch" => branch.to_owned(), "kind" => kind)
        .set(position.map_or(-1.0, |p| p as f64));
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

/// A reload of credentials or TLS material, applied or refused.
pub(crate) fn config_reload(what: &'static str, outcome: &'static str) {
    metrics::counter!(names::CONFIG_RELOADS, "what" => what, "outcome" => outcome).increment(1);
}
