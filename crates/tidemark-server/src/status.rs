//! The one mapping from tidemark errors to gRPC statuses (SPEC §7).
//!
//! Every status carries a `google.rpc.ErrorInfo` (domain "tidemark", a
//! reason, details as metadata); invalid input also carries a
//! `google.rpc.BadRequest` naming each field. The match is exhaustive on
//! purpose: a new error variant must be mapped here before it compiles.
//! Internal errors are logged and replaced by a generic message, so no SQL
//! text ever reaches a client.
//!
//! One room: the exhaustive match is the point, and every arm is checked
//! against SPEC §7's codes and reasons in one reading.

use std::collections::HashMap;
use std::time::Duration;

use tidemark_core::CoreError;
use tidemark_service::store::StoreError;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The `ErrorInfo` domain of every tidemark error.
pub const ERROR_DOMAIN: &str = "tidemark";

/// Reasons that are not domain rules.
pub mod reason {
    /// The database could not be reached; retry later.
    pub const STORE_UNAVAILABLE: &str = "STORE_UNAVAILABLE";
    /// The database cancelled a statement at its statement timeout; retry.
    pub const STORE_TIMEOUT: &str = "STORE_TIMEOUT";
    /// A database lock was not available in time; retry.
    pub const STORE_BUSY: &str = "STORE_BUSY";
    /// This replica's queues are full; retry, ideally elsewhere.
    pub const OVERLOADED: &str = "OVERLOADED";
    /// An export's client took nothing for the idle timeout; the export
    /// was ended and everything it held released.
    pub const EXPORT_STALLED: &str = "EXPORT_STALLED";
    /// This replica already runs as many exports as it allows.
    pub const TOO_MANY_EXPORTS: &str = "TOO_MANY_EXPORTS";
    /// A request larger than the server's --max-message-bytes.
    pub const MESSAGE_TOO_LARGE: &str = "MESSAGE_TOO_LARGE";
    /// Too many concurrent writers on one key; retry.
    pub const CONTENTION: &str = "CONTENTION";
    /// A bug; see the server log for the request id.
    pub const INTERNAL: &str = "INTERNAL";
    /// The call took longer than the server's request timeout.
    pub const TIMEOUT: &str = "TIMEOUT";
}

/// The canonical name of a gRPC code (`FAILED_PRECONDITION`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The gRPC code of a domain error.
pub fn code_of(err: &CoreError) -> Code {
    match err {
        CoreError::InvalidArgument(_) => Code::InvalidArgument,
        CoreError::LeaseHeld { .. } => Code::FailedPrecondition,
        CoreError::LeaseNotHeld { .. } => Code::FailedPrecondition,
        CoreError::BatchConflict { .. } => Code::FailedPrecondition,
        CoreError::PositionRegression { .. } => Code::FailedPrecondition,
        CoreError::PositionExpired { .. } => Code::DataLoss,
        CoreError::PositionAheadOfTable { .. } | CoreError::ResetAheadOfTable { .. } => Code::FailedPrecondition,
        CoreError::ReplayScanMismatch { .. } => Code::FailedPrecondition,
        CoreError::ReplayRangeExpired { .. } => Code::FailedPrecondition,
        CoreError::NextSnapshotMismatch { .. } => Code::FailedPrecondition,
        CoreError::ConsumerNotFound { .. } => Code::NotFound,
        CoreError::LeaseMismatch { .. } => Code::FailedPrecondition,
        CoreError::TableLocationEmpty { .. } => Code::FailedPrecondition,
        CoreError::TableLocationUnreadable { .. } => Code::Unavailable,
        CoreError::TableIdentityChanged { .. } => Code::FailedPrecondition,
        CoreError::TableNotRegistered { .. } => Code::FailedPrecondition,
        CoreError::NotInPlan { .. } => Code::FailedPrecondition,
        CoreError::NotReached { .. } => Code::Aborted,
        CoreError::EpochExhausted { .. } => Code::FailedPrecondition,
    }
}

/// Limits on what an error echoes back. A status travels in HTTP/2
/// trailers, which clients cap (grpc-core at 8 KiB, hyper at 16 KiB): an
/// error quoting a huge input would otherwise become a protocol error.
const MAX_MESSAGE: usize = 768;
const MAX_FIELD: usize = 100;
const MAX_DESCRIPTION: usize = 160;
const MAX_METADATA_VALUE: usize = 256;
const MAX_VIOLATIONS: usize = 8;

/// `text` cut to at most `max` bytes on a character boundary, saying so.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(24);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn error_info(details: &mut ErrorDetails, reason: &str, metadata: Vec<(&'static str, String)>) {
    let metadata: HashMap<String, String> = metadata
        .into_iter()
        .map(|(k, v)| (k.to_owned(), bounded(&v, MAX_METADATA_VALUE)))
        .collect();
    details.set_error_info(reason, ERROR_DOMAIN, metadata);
}

/// How long a caller should wait before retrying a table directory that
/// could not be read.
const TABLE_RETRY_DELAY: Duration = Duration::from_secs(1);

/// A domain error as a status.
pub fn rule_status(err: &CoreError) -> Status {
    let mut details = ErrorDetails::new();
    error_info(&mut details, err.reason(), err.metadata());
    match err {
        CoreError::InvalidArgument(violations) => {
            for v in violations.iter().take(MAX_VIOLATIONS) {
                details
                    .add_bad_request_violation(bounded(&v.field, MAX_FIELD), bounded(&v.description, MAX_DESCRIPTION));
            }
        }
        CoreError::LeaseHeld { remaining, .. } => {
            details.set_retry_info(Some(*remaining));
        }
        CoreError::TableLocationUnreadable { .. } => {
            details.set_retry_info(Some(TABLE_RETRY_DELAY));
        }
        CoreError::LeaseNotHeld { .. }
        | CoreError::BatchConflict { .. }
        | CoreError::PositionRegression { .. }
        | CoreError::PositionExpired { .. }
        | CoreError::PositionAheadOfTable { .. }
        | CoreError::ResetAheadOfTable { .. }
        | CoreError::ReplayScanMismatch { .. }
        | CoreError::ReplayRangeExpired { .. }
        | CoreError::NextSnapshotMismatch { .. }
        | CoreError::ConsumerNotFound { .. }
        | CoreError::LeaseMismatch { .. }
        | CoreError::TableLocationEmpty { .. }
        | CoreError::TableIdentityChanged { .. }
        | CoreError::TableNotRegistered { .. }
        | CoreError::NotInPlan { .. }
        | CoreError::NotReached { .. }
        | CoreError::EpochExhausted { .. } => {}
    }
    Status::with_error_details(code_of(err), bounded(&err.to_string(), MAX_MESSAGE), details)
}

/// A storage error as a status; `request_id` lets an operator find the log
/// line of an internal error.
pub fn store_status(err: StoreError, request_id: &str) -> Status {
    match err {
        StoreError::Rule(rule) => rule_status(&rule),
        StoreError::Unavailable(why) => {
            tracing::warn!(request_id, error = %why, "database unavailable");
            retry_later(
                reason::STORE_UNAVAILABLE,
                Duration::from_secs(1),
                "the tidemark database is unavailable; retry with backoff",
            )
        }
        StoreError::Timeout(why) => {
            tracing::warn!(request_id, error = %why, "database statement timed out");
            retry_later(
                reason::STORE_TIMEOUT,
                Duration::from_millis(500),
                "the tidemark database cancelled a statement at its statement timeout (a lock held elsewhere or an \
                 overloaded database); nothing was changed, retry with backoff",
            )
        }
        StoreError::Busy(why) => {
            tracing::warn!(request_id, error = %why, "database lock not available");
            retry_later(
                reason::STORE_BUSY,
                Duration::from_millis(500),
                "a lock in the tidemark database was not available in time; nothing was changed, retry with backoff",
            )
        }
        StoreError::Overloaded(why) => {
            tracing::debug!(request_id, error = %why, "overloaded");
            retry_later(
                reason::OVERLOADED,
                Duration::from_millis(200),
                &format!("this tidemark replica is overloaded ({why}); the call was not started, retry with backoff"),
            )
        }
        StoreError::Denied(denied) => {
            let (reason, message) = (denied.reason(), denied.to_string());
            tracing::info!(request_id, reason, "permission denied: {message}");
            let mut details = ErrorDetails::new();
            error_info(&mut details, reason, Vec::new());
            Status::with_error_details(Code::PermissionDenied, bounded(&message, MAX_MESSAGE), details)
        }
        StoreError::Contention => {
            let mut details = ErrorDetails::new();
            error_info(&mut details, reason::CONTENTION, Vec::new());
            details.set_retry_info(Some(Duration::from_millis(50)));
            Status::with_error_details(
                Code::Aborted,
                "too many concurrent changes to this consumer; nothing was changed, retry",
                details,
            )
        }
        StoreError::Internal(why) => {
            tracing::error!(request_id, error = %why, "internal error");
            let mut details = ErrorDetails::new();
            error_info(
                &mut details,
                reason::INTERNAL,
                vec![("request_id", request_id.to_owned())],
            );
            Status::with_error_details(
                Code::Internal,
                format!("internal error; the server log has the details under request id {request_id}"),
                details,
            )
        }
    }
}

/// A retryable `UNAVAILABLE` with `reason` and a `RetryInfo` of `delay`.
fn retry_later(reason: &str, delay: Duration, message: &str) -> Status {
    let mut details = ErrorDetails::new();
    error_info(&mut details, reason, Vec::new());
    details.set_retry_info(Some(delay));
    Status::with_error_details(Code::Unavailable, message, details)
}

/// An export whose client took nothing for `idle`.
pub fn export_stalled(idle: Duration) -> Status {
    let mut details = ErrorDetails::new();
    error_info(
        &mut details,
        reason::EXPORT_STALLED,
        vec![(
            "idle_timeout_ms",
            tidemark_core::time::duration_millis(idle).to_string(),
        )],
    );
    Status::with_error_details(
        Code::Aborted,
        format!(
            "the export was ended: the client took nothing for {idle:?} (--export-idle-timeout); what was received \
             has no trailer, so an import refuses it. Export again, reading as it arrives"
        ),
        details,
    )
}

/// An export refused because `limit` already run on this replica.
pub fn too_many_exports(limit: usize) -> Status {
    let mut details = ErrorDetails::new();
    error_info(
        &mut details,
        reason::TOO_MANY_EXPORTS,
        vec![("limit", limit.to_string())],
    );
    details.set_retry_info(Some(Duration::from_secs(5)));
    Status::with_error_details(
        Code::ResourceExhausted,
        format!("this replica already runs {limit} exports (--max-concurrent-exports); retry when one has finished"),
        details,
    )
}

/// tonic refuses a request over the decoding limit before any handler, as
/// OUT_OF_RANGE with only a text; this answers it as tidemark answers
/// every refusal: RESOURCE_EXHAUSTED with an `ErrorInfo` naming the limit,
/// the size received and the flag that sets it. Other answers pass as they
/// are.
pub(crate) fn explain_oversized(
    response: http::Response<tonic::body::Body>,
    limit: usize,
) -> http::Response<tonic::body::Body> {
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    const TONIC: &str = "decoded message length too large: found ";
    if status.code() != Code::OutOfRange || !status.message().contains(TONIC) {
        return response;
    }
    let received = status
        .message()
        .split(TONIC)
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("?")
        .to_owned();
    let mut details = ErrorDetails::new();
    error_info(
        &mut details,
        reason::MESSAGE_TOO_LARGE,
        vec![("limit_bytes", limit.to_string()), ("received_bytes", received.clone())],
    );
    let mut answer = Status::with_error_details(
        Code::ResourceExhausted,
        format!(
            "the request is {received} bytes, over this server's limit of {limit} bytes (--max-message-bytes, \
             TIDEMARK_MAX_MESSAGE_BYTES); send less per call (split a batch or an import by table) or raise the limit"
        ),
        details,
    )
    .into_http::<tonic::body::Body>();
    // Keep what the server adds to every answer (the version header).
    for (name, value) in response.headers() {
        if !name.as_str().starts_with("grpc-") && !answer.headers().contains_key(name) {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}

/// A call that exceeded the server's request timeout. Whether a write landed
/// is unknown, so the message says what is safe to do.
pub fn timeout_status(limit: Duration) -> Status {
    let mut details = ErrorDetails::new();
    error_info(
        &mut details,
        reason::TIMEOUT,
        vec![("timeout_ms", tidemark_core::time::duration_millis(limit).to_string())],
    );
    Status::with_error_details(
        Code::DeadlineExceeded,
        format!(
            "the call took longer than the server's request timeout ({limit:?}); it may or may not have been \
             applied. Retrying the same call is safe: commits are idempotent per batch"
        ),
        details,
    )
}

#[cfg(test)]
mod tests {
    use tidemark_core::{FieldViolation, LeaseLoss};
    use uuid::Uuid;

    use super::*;

    #[test]
    fn invalid_argument_names_every_field() {
        let err = CoreError::InvalidArgument(vec![
            FieldViolation::new("consumer.table", "bad"),
            FieldViolation::new("end.index", "worse"),
        ]);
        let status = rule_status(&err);
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        let fields: Vec<_> = details
            .bad_request()
            .unwrap()
            .field_violations
            .iter()
            .map(|v| v.field.as_str())
            .collect();
        assert_eq!(fields, ["consumer.table", "end.index"]);
        assert_eq!(details.error_info().unwrap().reason, "INVALID_ARGUMENT");
        assert_eq!(details.error_info().unwrap().domain, "tidemark");
    }

    #[test]
    fn errors_echoing_huge_input_stay_small() {
        let huge = "é".repeat(40_000);
        let violations = (0..50)
            .map(|i| FieldViolation::new(format!("options[{huge}{i}]"), format!("got {huge}")))
            .collect();
        let status = rule_status(&CoreError::InvalidArgument(violations));
        let details = status.get_error_details();
        let bad = details.bad_request().unwrap();
        assert_eq!(bad.field_violations.len(), MAX_VIOLATIONS);
        for v in &bad.field_violations {
            assert!(
                v.field.len() <= MAX_FIELD && v.field.starts_with("options[é"),
                "{}",
                v.field
            );
            assert!(v.description.len() <= MAX_DESCRIPTION && v.description.ends_with(" bytes)"));
        }
        assert!(status.message().len() <= MAX_MESSAGE);
        assert!(
            status.details().len() < 3584,
            "{} bytes of details",
            status.details().len()
        );
        assert_eq!(bounded("short", 10), "short");
    }

    #[test]
    fn lease_not_held_carries_reason_and_epoch() {
        let err = CoreError::LeaseNotHeld {
            lease_id: Uuid::nil(),
            loss: LeaseLoss::Superseded,
            current_epoch: Some(4),
        };
        let status = rule_status(&err);
        assert_eq!(status.code(), Code::FailedPrecondition);
        let info = status.get_error_details().error_info().cloned().unwrap();
        assert_eq!(info.reason, "LEASE_NOT_HELD");
        assert_eq!(info.metadata["current_epoch"], "4");
        assert_eq!(info.metadata["state"], "superseded");
    }

    #[test]
    fn position_expired_is_data_loss() {
        let status = rule_status(&CoreError::PositionExpired { next: 3, earliest: 5 });
        assert_eq!(status.code(), Code::DataLoss);
    }

    #[test]
    fn internal_errors_never_leak_their_text() {
        let status = store_status(
            StoreError::Internal("error returned from database: syntax error at or near SELECT".into()),
            "req-1",
        );
        assert_eq!(status.code(), Code::Internal);
        assert!(!status.message().contains("SELECT"));
        assert!(status.message().contains("req-1"));
    }

    #[test]
    fn unavailable_and_contention_are_retryable_codes() {
        assert_eq!(
            store_status(StoreError::Unavailable("down".into()), "r").code(),
            Code::Unavailable
        );
        assert_eq!(store_status(StoreError::Contention, "r").code(), Code::Aborted);
    }

    #[test]
    fn database_conditions_are_unavailable_with_their_reason_and_retry_info() {
        for (err, want) in [
            (StoreError::Unavailable("down".into()), "STORE_UNAVAILABLE"),
            (StoreError::Timeout("57014".into()), "STORE_TIMEOUT"),
            (StoreError::Busy("55P03".into()), "STORE_BUSY"),
            (StoreError::Overloaded("queue full".into()), "OVERLOADED"),
        ] {
            let status = store_status(err, "r");
            assert_eq!(status.code(), Code::Unavailable, "{want}");
            let details = status.get_error_details();
            assert_eq!(details.error_info().unwrap().reason, want);
            assert!(details.retry_info().is_some(), "{want} carries RetryInfo");
            assert!(!status.message().contains("5701"), "{}", status.message());
        }
    }
}
