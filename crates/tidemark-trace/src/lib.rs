//! Trace context for tidemark: what every crate needs to take part in a
//! trace, without knowing whether or where spans are exported.
//!
//! The binary installs an OTLP exporter (when `OTEL_EXPORTER_OTLP_*` asks
//! for one) and then calls [`enable`]. Until then every function here is a
//! relaxed atomic load and nothing more, so tracing costs nothing when it is
//! off.
//!
//! - A call's span takes the caller's W3C `traceparent` as its parent
//!   ([`set_remote_parent`]); clients send theirs with [`inject`].
//! - A statement shared by many callers (group commit, group reads) gets a
//!   span of its own, linked to the span of every caller it serves
//!   ([`caller`], [`statement`]).

use std::sync::atomic::{AtomicBool, Ordering};

pub use opentelemetry::trace::SpanContext;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The tracing target of database statement spans.
pub const STATEMENT_TARGET: &str = "tidemark::db";

/// Turns trace context on: call once an OpenTelemetry layer is installed.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether spans are exported (and so worth linking and propagating).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Makes `span` a child of the span the request's `traceparent` names (and
/// carries its `tracestate`), when tracing is on and the header is valid.
pub fn set_remote_parent(span: &Span, headers: &http::HeaderMap) {
    if !enabled() || !headers.contains_key("traceparent") {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&Headers(headers));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Adds the current span's `traceparent` to outgoing headers, when the
/// application has a current span with a valid context.
pub fn inject(headers: &mut http::HeaderMap) {
    let context = Span::current().context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut HeadersMut(headers));
    }
}

/// The current span's context, to link a shared statement to; `None` when
/// tracing is off or there is no span.
pub fn caller() -> Option<SpanContext> {
    if !enabled() {
        return None;
    }
    let context = Span::current().context();
    let span = context.span().span_context().clone();
    span.is_valid().then_some(span)
}

/// A span for one database statement (`operation`, on `system`: the
/// backend's name) serving `size` callers, linked to each caller's span; a
/// disabled span when tracing is off.
pub fn statement<'a>(
    system: &'static str,
    operation: &'static str,
    size: usize,
    callers: impl IntoIterator<Item = &'a SpanContext>,
) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::debug_span!(
        target: STATEMENT_TARGET,
        "db.statement",
        otel.name = operation,
        db.system = system,
        db.operation = operation,
        batch.size = i64::try_from(size).unwrap_or(i64::MAX),
    );
    for caller in callers {
        span.add_link(caller.clone());
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn context_goes_out_and_comes_back_in() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            // Off: nothing is linked or propagated in.
            assert!(caller().is_none());
            enable();
            let outer = tracing::info_span!("client call");
            let _entered = outer.enter();
            let mut headers = http::HeaderMap::new();
            inject(&mut headers);
            let sent = headers
                .get("traceparent")
                .expect("traceparent")
                .to_str()
                .unwrap()
                .to_owned();
            let trace_id = outer.context().span().span_context().trace_id();
            assert!(sent.contains(&trace_id.to_string()), "{sent}");
            let me = caller().expect("a caller context");
            assert_eq!(me.trace_id(), trace_id);
            drop(_entered);

            let server = tracing::info_span!("rpc");
            set_remote_parent(&server, &headers);
            assert_eq!(server.context().span().span_context().trace_id(), trace_id);
            let shared = statement("postgres", "commit", 1, [&me]);
            assert!(!shared.is_disabled());
        });
    }
}
