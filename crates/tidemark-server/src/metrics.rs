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
    /// Counter: calls refused before their handler (unknown, missing or
    /// insufficient credentials).
    pub const AUTH_DENIED: &str = "tidemark_auth_denied_total";
    /// Counter: reloads of credentials and TLS material, by what
    /// (auth/tls) and outcome (applied/refused).
    pub const CONFIG_RELOADS: &str = "tidemark_config_reloads_total";
    /// The names of the metrics the application records (lag, fences,
    /// the sweeper, the mirror).
    pub use tidemark_service::metrics::names::*;
    /// Counters of Postgres group commit (recorded by the store).
    pub use tidemark_service::store::group_commit_metrics::{
        STATEMENT_WRITES as COMMIT_STATEMENT_WRITES, STATEMENTS as COMMIT_STATEMENTS,
        WRITES_ALONE as COMMIT_WRITES_ALONE,
    };
    /// Counters of Postgres group reads (recorded by the store).
    pub use tidemark_service::store::group_read_metrics::{
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

pub(crate) fn auth_denied() {
    metrics::counter!(names::AUTH_DENIED).increment(1);
}

/// A reload of credentials or TLS material, applied or refused.
pub(crate) fn config_reload(what: &'static str, outcome: &'static str) {
    metrics::counter!(names::CONFIG_RELOADS, "what" => what, "outcome" => outcome).increment(1);
}
