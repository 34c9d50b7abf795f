//! What wraps every page: the security headers and the page deadline.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::CONTENT_SECURITY_POLICY;

/// Every answer: the policy, no sniffing, no referrer to other sites (with
/// none at all, browsers post forms with `Origin: null`), no caching.
pub(super) async fn secure_headers(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A page within its deadline: the table stores' calls are bounded by
/// what is left of it (as an RPC's are), and a page that still runs past it
/// is answered 503 with Retry-After, never left hanging.
pub(super) async fn page_deadline(
    State(deadline): State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let at = tokio::time::Instant::now() + deadline;
    let page = tidemark_service::paimon::within_deadline(at, next.run(request));
    match tokio::time::timeout_at(at, page).await {
        Ok(response) => response,
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, HeaderValue::from_static("5"))],
            format!("This page took longer than {deadline:?}; try again shortly."),
        )
            .into_response(),
    }
}
