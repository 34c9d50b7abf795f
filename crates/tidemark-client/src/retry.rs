//! Retries with jittered exponential backoff, only where retrying is safe.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use tonic::Code;

use crate::ApiError;

/// The one retry and deadline policy of every worker call: each attempt
/// has its own deadline, and transient failures are retried with jittered
/// exponential backoff until `budget` has passed since the first attempt
/// (or `max_attempts` attempts). The default budget rides out a tidemark
/// restart and a Postgres failover (about 20 s with Patroni's smallest
/// ttl, measured in docs/reliability.md).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all (1 = no retry); usually the budget ends retrying first.
    pub max_attempts: u32,
    /// How long a call keeps retrying, from its first attempt.
    pub budget: Duration,
    /// Each attempt's deadline (also sent to the server as `grpc-timeout`).
    pub call_timeout: Duration,
    /// First backoff.
    pub initial_backoff: Duration,
    /// Longest backoff.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: u32::MAX,
            budget: Duration::from_secs(30),
            call_timeout: Duration::from_secs(5),
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The backoff before retry `attempt` (1-based): exponential, capped,
    /// with full jitter so clients that failed together spread out.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_backoff);
        let nanos = u64::try_from(exp.as_nanos()).unwrap_or(u64::MAX).max(1);
        Duration::from_nanos(jitter() % nanos)
    }
}

fn jitter() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::Instant::now())
}

/// Whether a failed call may be retried. Only transient failures where the
/// call either did not happen or is safe to repeat: the server was
/// unreachable or overloaded, the call timed out, or the server asked for a
/// retry (ABORTED/CONTENTION: nothing was changed), or the connection went
/// away under the call: a server ending a connection at its max age or on
/// shutdown (HTTP/2 GOAWAY) makes tonic fail calls racing it with CANCELLED
/// or INTERNAL "h2 protocol error", with no server reason (tidemark's own
/// INTERNAL always carries one); gRPC's transparent retry of such calls is
/// missing from tonic. Never a refusal such as FAILED_PRECONDITION (a fenced
/// lease must stop, not retry).
pub fn is_retryable(err: &ApiError) -> bool {
    match err.code {
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted => true,
        Code::Cancelled => err.reason.is_empty(),
        Code::Internal => err.reason.is_empty() && err.message.starts_with("h2 protocol error"),
        Code::Aborted => err.reason == "CONTENTION",
        _ => false,
    }
}

/// Runs `call(deadline)` until it succeeds, fails with a non-retryable
/// error, or runs out of budget (or attempts); `until` ends the retrying
/// earlier (say, at a lease's deadline). Each attempt is given, and held to,
/// its own deadline. Use only for idempotent calls.
pub async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    until: Option<Instant>,
    mut call: F,
) -> Result<T, ApiError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, ApiError>>,
{
    let started = Instant::now();
    let end = until.map_or(started + policy.budget, |until| until.min(started + policy.budget));
    let mut attempt = 1;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let deadline = policy.call_timeout.min(left);
        if deadline.is_zero() {
            return Err(no_answer(what));
        }
        let outcome = match tokio::time::timeout(deadline, call(deadline)).await {
            Ok(outcome) => outcome,
            // The server never answered (a hung process, dropped replies).
            Err(_) => Err(no_answer(what)),
        };
        match outcome {
            Ok(value) => return Ok(value),
            Err(err) => {
                let wait = policy.backoff(attempt);
                if attempt >= policy.max_attempts || !is_retryable(&err) || Instant::now() + wait >= end {
                    return Err(err);
                }
                tracing::debug!(what, attempt, ?wait, code = ?err.code, "retrying after a transient failure");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        }
    }
}

fn no_answer(what: &str) -> ApiError {
    ApiError::from(tonic::Status::deadline_exceeded(format!(
        "{what}: no answer before the deadline"
    )))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn err(code: Code, reason: &str) -> ApiError {
        ApiError {
            code,
            reason: reason.into(),
            domain: "tidemark".into(),
            metadata: Default::default(),
            field_violations: Vec::new(),
            message: String::new(),
        }
    }

    #[test]
    fn only_transient_failures_are_retryable() {
        assert!(is_retryable(&err(Code::Unavailable, "STORE_UNAVAILABLE")));
        assert!(is_retryable(&err(Code::DeadlineExceeded, "TIMEOUT")));
        assert!(is_retryable(&err(Code::ResourceExhausted, "")));
        assert!(is_retryable(&err(Code::Aborted, "CONTENTION")));
        assert!(
            is_retryable(&err(Code::Cancelled, "")),
            "a connection gone away under the call"
        );
        let goaway = ApiError {
            message: "h2 protocol error: http2 error".into(),
            ..err(Code::Internal, "")
        };
        assert!(is_retryable(&goaway), "a call racing a GOAWAY");
        for (code, reason) in [
            (Code::FailedPrecondition, "LEASE_NOT_HELD"),
            (Code::FailedPrecondition, "LEASE_HELD"),
            (Code::InvalidArgument, "INVALID_ARGUMENT"),
            (Code::PermissionDenied, "ROLE_NOT_ALLOWED"),
            (Code::Unauthenticated, "MISSING_CREDENTIALS"),
            (Code::DataLoss, "POSITION_EXPIRED"),
            (Code::Internal, "INTERNAL"),
            (Code::Aborted, "SOMETHING_ELSE"),
        ] {
            assert!(!is_retryable(&err(code, reason)), "{code:?} {reason}");
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let p = RetryPolicy::default();
        for attempt in 1..20 {
            let cap = p
                .initial_backoff
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(p.max_backoff);
            assert!(p.backoff(attempt) <= cap);
        }
        let samples: std::collections::HashSet<Duration> = (0..20).map(|_| p.backoff(5)).collect();
        assert!(samples.len() > 1, "jittered");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_failures_then_gives_up() {
        let calls = AtomicU32::new(0);
        let five = RetryPolicy {
            max_attempts: 5,
            ..RetryPolicy::default()
        };
        let result: Result<(), ApiError> = retry(&five, "t", None, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(err(Code::Unavailable, "")) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_the_budget_is_spent() {
        let policy = RetryPolicy::default();
        let started = Instant::now();
        let calls = AtomicU32::new(0);
        let result: Result<(), ApiError> = retry(&policy, "t", None, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(err(Code::Unavailable, "")) }
        })
        .await;
        assert!(result.is_err());
        let spent = started.elapsed();
        assert!(spent <= policy.budget, "{spent:?}");
        assert!(
            spent + policy.max_backoff * 2 >= policy.budget,
            "retried for the whole budget: {spent:?}"
        );
        assert!(calls.load(Ordering::SeqCst) > 5);
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_never_answers_is_cut_at_its_deadline_and_the_call_at_until() {
        let policy = RetryPolicy::default();
        let started = Instant::now();
        let until = started + Duration::from_secs(7);
        let deadlines = std::sync::Mutex::new(Vec::new());
        let result: Result<(), ApiError> = retry(&policy, "t", Some(until), |deadline| {
            deadlines.lock().unwrap().push(deadline);
            std::future::pending()
        })
        .await;
        assert_eq!(result.unwrap_err().code, Code::DeadlineExceeded);
        assert!(started.elapsed() <= Duration::from_secs(7));
        let deadlines = deadlines.into_inner().unwrap();
        assert_eq!(deadlines[0], policy.call_timeout);
        assert!(
            deadlines[1] < policy.call_timeout,
            "the last attempt gets what is left before until"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_a_refusal() {
        let calls = AtomicU32::new(0);
        let result: Result<(), ApiError> = retry(&RetryPolicy::default(), "t", None, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(err(Code::FailedPrecondition, "LEASE_NOT_HELD")) }
        })
        .await;
        assert_eq!(result.unwrap_err().reason, "LEASE_NOT_HELD");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn succeeds_after_a_transient_failure() {
        let calls = AtomicU32::new(0);
        let result = retry(&RetryPolicy::default(), "t", None, |_| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move { if n < 2 { Err(err(Code::Unavailable, "")) } else { Ok(n) } }
        })
        .await;
        assert_eq!(result.unwrap(), 2);
    }
}
