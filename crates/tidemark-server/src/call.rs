//! Running one RPC: its span, time limit, metrics, error mapping and request
//! id — the same for every service.

use std::future::Future;
use std::time::{Duration, Instant};

use tidemark_core::CoreError;
use tidemark_core::validate::Violations;
use tidemark_store::{CallContext, StoreError};
use tonic::{Response, Status};
use tracing::Instrument;

use crate::context::{respond, with_request_id};
use crate::metrics;
use crate::status::{store_status, timeout_status};

/// Runs `body` as the RPC `service/method`: bounded by `timeout`
/// (DEADLINE_EXCEEDED), logged under a span with the request id and
/// principal, counted in the RPC metrics, and answered with the request id.
pub(crate) async fn run<T, F>(
    service: &'static str,
    method: &'static str,
    timeout: Duration,
    ctx: CallContext,
    body: F,
) -> Result<Response<T>, Status>
where
    F: Future<Output = Result<T, StoreError>>,
{
    // The worker protocol is the hot path: its span is debug level, so at the
    // default (info) it costs nothing; what it logs above debug names the
    // request id itself. Operator calls are rare and keep an info span.
    let span = if service == "Coordinator" {
        tracing::debug_span!("rpc", method, request_id = %ctx.request_id, principal = %ctx.principal)
    } else {
        tracing::info_span!("rpc", method, request_id = %ctx.request_id, principal = %ctx.principal)
    };
    let started = Instant::now();
    let result = tokio::time::timeout(timeout, body.instrument(span.clone())).await;
    let _entered = span.enter();
    let answer = match result {
        Err(_) => {
            tracing::warn!(method, request_id = %ctx.request_id, ?timeout, "call timed out");
            Err(with_request_id(&ctx, timeout_status(timeout)))
        }
        Ok(Ok(body)) => Ok(respond(&ctx, body)),
        Ok(Err(err)) => {
            if let StoreError::Rule(rule) = &err {
                if matches!(rule, CoreError::LeaseHeld { .. }) {
                    metrics::lease_conflict();
                }
                tracing::info!(method, request_id = %ctx.request_id, reason = rule.reason(), "refused: {rule}");
            }
            Err(with_request_id(&ctx, store_status(err, &ctx.request_id)))
        }
    };
    let code = match &answer {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    };
    metrics::rpc(service, method, code, started.elapsed());
    answer
}

/// The violations collected while parsing a request, as its error.
pub(crate) fn invalid(v: Violations) -> StoreError {
    StoreError::Rule(CoreError::InvalidArgument(v.into_vec()))
}

/// Refuses a table outside the caller's scope, before any database work.
pub(crate) fn in_scope(ctx: &CallContext, table: &tidemark_core::TableName) -> Result<(), StoreError> {
    Ok(ctx.access().table(table)?)
}

/// Refuses a call spanning every table to a caller scoped to some.
pub(crate) fn all_tables(ctx: &CallContext, what: &str) -> Result<(), StoreError> {
    Ok(ctx.access().every_table(what)?)
}
