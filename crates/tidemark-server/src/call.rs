//! Running one RPC: its span, time limit, metrics, error mapping and request
//! id — the same for every service.

use std::future::Future;
use std::time::{Duration, Instant};

use tidemark_core::CoreError;
use tidemark_service::store::{CallContext, StoreError, UnavailableSignal};
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
    headers: &http::HeaderMap,
    body: F,
) -> Result<Response<T>, Status>
where
    F: Future<Output = Result<T, StoreError>>,
{
    // The worker protocol is the hot path: its span is debug level, so at the
    // default (info) it costs nothing; what it logs above debug names the
    // request id itself. Operator calls are rare and keep an info span.
    let span = if service == "Coordinator" {
        tracing::debug_span!(
            "rpc",
            method,
            request_id = %ctx.request_id,
            principal = %ctx.principal,
            otel.name = %format_args!("tidemark.v1.{service}/{method}"),
            otel.kind = "server",
            rpc.system = "grpc",
        )
    } else {
        tracing::info_span!(
            "rpc",
            method,
            request_id = %ctx.request_id,
            principal = %ctx.principal,
            otel.name = %format_args!("tidemark.v1.{service}/{method}"),
            otel.kind = "server",
            rpc.system = "grpc",
        )
    };
    // With traces exported, the call joins the caller's trace.
    tidemark_trace::set_remote_parent(&span, headers);
    let started = Instant::now();
    // The table stores' calls are bounded by what is left of this deadline,
    // so a store that does not answer is TABLE_LOCATION_UNREADABLE, not a
    // timed-out call.
    let deadline = tokio::time::Instant::now() + timeout;
    let bounded = tidemark_service::paimon::within_deadline(deadline, body.instrument(span.clone()));
    let result = tokio::time::timeout_at(deadline, bounded).await;
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
    /// When a bulk operation answering `request` must stop applying
    /// changes so its answer (what it did, and what it did not reach) still
    /// arrives: well before the call's limit, the server's or the client's
    /// (`grpc-timeout`), whichever is first.
    pub(crate) fn bulk_deadline<T>(&self, request: &Request<T>) -> Instant {
        let limit = client_timeout(request).map_or(self.timeout, |client| client.min(self.timeout));
        // A fifth of the time (at most 5 s) is left for the answer.
        let margin = (limit / 5).min(Duration::from_secs(5));
        Instant::now() + limit.saturating_sub(margin)
    }

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
        let (metadata, _, req) = request.into_parts();
        run(
            self.service,
            method,
            self.timeout,
            &self.unavailable,
            ctx.clone(),
            metadata.as_ref(),
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

/// The client's `grpc-timeout` (`<digits><unit>`, unit one of H M S m u n).
fn client_timeout<T>(request: &Request<T>) -> Option<Duration> {
    let value = request.metadata().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod bulk_deadline_tests {
    use super::*;

    fn request_with(timeout: Option<&str>) -> Request<()> {
        let mut request = Request::new(());
        if let Some(t) = timeout {
            request.metadata_mut().insert("grpc-timeout", t.parse().unwrap());
        }
        request
    }

    #[test]
    fn the_clients_grpc_timeout_is_read_in_every_unit() {
        assert_eq!(client_timeout(&request_with(Some("2S"))), Some(Duration::from_secs(2)));
        assert_eq!(
            client_timeout(&request_with(Some("1500m"))),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(client_timeout(&request_with(Some("1M"))), Some(Duration::from_secs(60)));
        assert_eq!(
            client_timeout(&request_with(Some("7u"))),
            Some(Duration::from_micros(7))
        );
        assert_eq!(client_timeout(&request_with(Some("x"))), None);
        assert_eq!(client_timeout(&request_with(None)), None);
    }
}
