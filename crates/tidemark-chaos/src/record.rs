//! What the harness records: every request a worker made, with its answer
//! and wall-clock times (one host, so all processes share the clock), and
//! every fault the orchestrator injected.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// One request and its answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The worker.
    pub worker: u32,
    /// acquire, renew, release, commit or recover.
    pub op: String,
    /// The consumer id (table and branch are fixed).
    pub key: String,
    /// The lease presented or granted.
    pub lease: String,
    /// Its epoch.
    pub epoch: i64,
    /// Commits: the batch id and end offset (snapshot, index, total).
    pub batch: i64,
    pub end: (i64, i64, i64),
    /// When the request was sent and its answer received.
    pub t0: i64,
    pub t1: i64,
    /// The gRPC code ("Ok", "Unavailable", ...) and ErrorInfo reason.
    pub code: String,
    pub reason: String,
    /// An error's message (to tell a client-side transport error, which
    /// no server sent, from a server's answer).
    #[serde(default)]
    pub message: String,
    /// Commits: the outcome and the position after; recover: the start
    /// snapshot and its source.
    pub outcome: String,
    pub next: Option<i64>,
    /// Time left on the lease as answered (acquire, renew, commit), µs.
    pub ttl_us: i64,
}

impl Record {
    /// Whether the server answered OK.
    pub(crate) fn ok(&self) -> bool {
        self.code == "Ok"
    }

    /// Whether the error was made by the client's gRPC stack, not sent by a
    /// server: the connection ended under the call (cut, drained, closed
    /// for the client's own silence) or the client's deadline passed.
    pub(crate) fn client_side(&self) -> bool {
        const MADE_BY_THE_CLIENT: [&str; 6] = [
            "h2 protocol error",
            "Timeout expired",
            "transport error",
            "operation was canceled",
            "error trying to connect",
            "connection error",
        ];
        !self.ok() && self.reason.is_empty() && MADE_BY_THE_CLIENT.iter().any(|m| self.message.contains(m))
    }
}

/// A fault the orchestrator injected.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Fault {
    pub kind: String,
    pub target: String,
    pub t0: i64,
    pub t1: i64,
}

/// What a rollout run did (see `rollout.rs`).
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct RolloutLog {
    pub(crate) rollouts: u32,
    pub(crate) rollbacks: u32,
    /// Milliseconds from a replica's start to its first SERVING, by build.
    pub(crate) ready_ms: BTreeMap<String, Vec<f64>>,
    /// Milliseconds from SIGTERM to exit.
    pub(crate) drain_ms: Vec<f64>,
    /// Drained replicas that exited other than cleanly, and panics in the
    /// logs of replicas that are gone.
    pub(crate) problems: Vec<String>,
}
