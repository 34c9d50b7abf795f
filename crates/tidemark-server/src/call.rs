//! Running one RPC: its span, time limit, metrics, error mapping and request
//! id — the same for every service.

use std::future::Future;
use std::time::{Duration, Instant};

use tidemark_core::CoreError;
use tidemark_store::{CallContext, StoreError, UnavailableSignal};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::context::{call_context, respond, with_request_id};
use crate::metrics;
use crate::request::{Parse, Scoped, Touches};
use crate::status::{store_status, timeout_status};

/// Runs `body` as the RPC `service/method`: bounded by `timeout`
/// (DEADLINE_EXCEEDED), logged under a span with the request id and
/// principal, counted in the RPC metrics, and answered with the request id.
/// A call that found the database unavailable, or timed out, tells
/// `unavailable` (readiness looks again at once).
pub(crate) async fn run<T, F>(
    service: &'static str,
    method: &'static str,
    timeout: Duration,
    unavailable: &UnavailableSignal,
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
            unavailable.report();
            metrics::timed_out(method);
            tracing::warn!(method, request_id = %ctx.request_id, ?timeout, "call timed out");
            Err(with_request_id(&ctx, timeout_status(timeout)))
        }
        Ok(Ok(body)) => Ok(respond(&ctx, body)),
        Ok(Err(err)) => {
            if err.concerns_the_database() {
                unavailable.report();
            }
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
        Err(status) => {
            use tonic_types::StatusExt;
            let reason = status
                .get_details_error_info()
                .map(|info| info.reason)
                .unwrap_or_default();
            metrics::error(method, status.code(), &reason);
            status.code()
        }
    };
    metrics::rpc(service, method, code, started.elapsed());
    answer
}

/// A service's RPCs: its name and time limit, and the prologue every
/// handler shares.
#[derive(Debug, Clone)]
pub(crate) struct Rpcs {
    service: &'static str,
    timeout: Duration,
    unavailable: UnavailableSignal,
}

impl Rpcs {
    /// The RPCs of `service`, each bounded by `timeout`, reporting an
    /// unavailable database to `unavailable`.
    pub(crate) fn new(service: &'static str, timeout: Duration, unavailable: UnavailableSignal) -> Self {
        Self {
            service,
            timeout,
            unavailable,
        }
    }

    /// A handler's prologue: the call context, the request parsed, the
    /// caller's scope checked against what it touches before any work —
    /// then `body` on the parsed request, run as `service/method` by
    /// [`run`].
    pub(crate) async fn handle<Req, T, Fut>(
        &self,
        method: &'static str,
        request: Request<Req>,
        body: impl FnOnce(CallContext, Req::Parsed) -> Fut,
    ) -> Result<Response<T>, Status>
    where
        Req: Parse,
        Req::Parsed: Scoped,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let ctx = call_context(&request);
        let req = request.into_inner();
        run(
            self.service,
            method,
            self.timeout,
            &self.unavailable,
            ctx.clone(),
            async move {
                let parsed = req.parse()?;
                let access = ctx.access();
                match parsed.touches() {
                    Touches::Table(table) | Touches::TableOrAll(Some(table), _) => access.table(table)?,
                    Touches::TableOrAll(None, what) => access.every_table(what)?,
                    Touches::Lease | Touches::Filtered => {}
                }
                body(ctx, parsed).await
            },
        )
        .await
    }
}
