//! Per-call context: the request id and the principal, for logs and the
//! audit trail.

use tidemark_core::Caller;
use tidemark_service::store::CallContext;

use crate::auth::{Authenticated, Role};
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};

/// The metadata key a caller may set to correlate its requests; the server
/// echoes it (or the id it generated) in every response.
pub(crate) const REQUEST_ID_HEADER: &str = "x-request-id";

const MAX_REQUEST_ID: usize = 128;

/// The call context of a request: the caller's request id when it is
/// sensible (printable ASCII, at most 128 bytes), else a fresh UUIDv7.
pub(crate) fn call_context<T>(request: &Request<T>) -> CallContext {
    let request_id = request
        .metadata()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|id| !id.is_empty() && id.len() <= MAX_REQUEST_ID && id.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned);
    let mut ctx = match request.extensions().get::<Authenticated>() {
        // No credentials configured (or an open method): unrestricted.
        None => CallContext::new("anonymous", request_id),
        Some(Authenticated(grant)) => CallContext {
            principal: grant.principal.clone(),
            request_id,
            scope: grant.scope.clone(),
            any_lease: grant.roles.contains(&Role::Operator),
            caller: Caller::UNKNOWN,
            reason: None,
        },
    };
    ctx.caller = caller(request);
    ctx
}

/// Where a request came from: the peer address as this server sees it
/// (behind a proxy, the proxy's) and the client's user-agent (gRPC stacks
/// append their own name to the application's: `tidemark-python/0.1.0
/// grpc-python/1.71.0 grpc-c/46.0.0 (linux; chttp2)`).
fn caller<T>(request: &Request<T>) -> Caller {
    let client = request.metadata().get("user-agent").and_then(|v| v.to_str().ok());
    Caller::new(request.remote_addr().map(|a| a.to_string()), client)
}

/// A response carrying the request id.
pub(crate) fn respond<T>(ctx: &CallContext, body: T) -> Response<T> {
    let mut response = Response::new(body);
    if let Ok(value) = MetadataValue::try_from(ctx.request_id.as_str()) {
        response.metadata_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// An error status carrying the request id.
pub(crate) fn with_request_id(ctx: &CallContext, mut status: Status) -> Status {
    if let Ok(value) = MetadataValue::try_from(ctx.request_id.as_str()) {
        status.metadata_mut().insert(REQUEST_ID_HEADER, value);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_id_is_taken_from_metadata_when_sane() {
        let mut request = Request::new(());
        request
            .metadata_mut()
            .insert(REQUEST_ID_HEADER, "abc-123".parse().unwrap());
        assert_eq!(call_context(&request).request_id, "abc-123");
        assert_eq!(call_context(&request).principal, "anonymous");

        let mut request = Request::new(());
        request
            .metadata_mut()
            .insert(REQUEST_ID_HEADER, "x".repeat(300).parse().unwrap());
        let generated = call_context(&request).request_id;
        assert!(uuid::Uuid::try_parse(&generated).is_ok(), "{generated}");
    }
}
