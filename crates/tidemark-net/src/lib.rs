//! Sockets under pressure. A container on a systemd host starts with 1024
//! open files (soft) however high the hard limit is (containerd 2.0 no
//! longer raises it), so a fleet's idle worker connections, or a slowloris
//! on the console, would leave no descriptor for gRPC's `accept`, a new
//! Postgres connection or an S3 socket. Here:
//!
//! - [`raise_open_files_limit`]: the soft limit raised to the hard one at
//!   start, as Go's runtime does for Go servers;
//! - [`Admission`]: a cap on the connections one listener holds, beyond
//!   which a connection is accepted and closed at once (a clean refusal
//!   the client sees at once, rather than a backlog it waits in), with
//!   accept errors and refusals logged at most once a second;
//! - [`IdleTimeout`] and [`serve_http1`]: HTTP/1 connections (the console,
//!   metrics) that may neither trickle their headers nor idle forever.

mod admission;
mod http;
mod idle;

pub use admission::{Admission, Admitted, incoming};
pub use http::{HttpLimits, TlsSource, serve_http1};
pub use idle::IdleTimeout;

/// The open-files limits at start, and the soft limit now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit the process started with.
    pub soft_at_start: Option<u64>,
    /// The soft limit now.
    pub soft: Option<u64>,
    /// The hard limit (`None`: unlimited).
    pub hard: Option<u64>,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs both. A
/// failure leaves the limit as it was (logged, never fatal).
pub fn raise_open_files_limit() -> OpenFiles {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    if before.current != before.maximum {
        let raised = rustix::process::Rlimit {
            current: before.maximum,
            maximum: before.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(soft = ?before.current, hard = ?before.maximum, error = %e, "cannot raise the open-files limit");
        }
    }
    let now = getrlimit(Resource::Nofile);
    tracing::info!(
        soft_at_start = ?before.current, soft = ?now.current, hard = ?now.maximum,
        "open-files limit (RLIMIT_NOFILE)"
    );
    OpenFiles {
        soft_at_start: before.current,
        soft: now.current,
        hard: now.maximum,
    }
}

/// Runs `log` at most once a second per `last` (an accept loop that fails
/// every call would otherwise log thousands of lines a second).
pub(crate) fn now_and_then(
    last: &std::sync::Mutex<Option<std::time::Instant>>,
    log: impl FnOnce(u64),
    missed: &std::sync::atomic::AtomicU64,
) {
    use std::sync::atomic::Ordering;
    let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if last.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1)) {
        *last = Some(std::time::Instant::now());
        log(missed.swap(0, Ordering::Relaxed));
    } else {
        missed.fetch_add(1, Ordering::Relaxed);
    }
}
