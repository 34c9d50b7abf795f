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

/// A request's headers as the propagator reads them, with `traceparent`
/// read the W3C way (see [`known_flags_only`]).
struct Headers<'a> {
    map: &'a http::HeaderMap,
    traceparent: Option<String>,
}

impl<'a> Headers<'a> {
    fn new(map: &'a http::HeaderMap) -> Self {
        let traceparent = map
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(known_flags_only);
        Headers { map, traceparent }
    }
}

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        if key == "traceparent" {
            return self.traceparent.as_deref();
        }
        self.map.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.map.keys().map(http::HeaderName::as_str).collect()
    }
}

/// A version-00 `traceparent` with only the flags this version defines
/// (sampled): W3C Trace Context says a receiver "will only parse the
/// trace-flags values supported by this version … and ignore all other
/// values", and Level 2 adds the random flag (0x02), which OpenTelemetry
/// Python sets on every root. opentelemetry_sdk 0.31's propagator instead
/// refuses a version-00 header whose flags exceed 0x02, which would drop the
/// caller's trace, so the unknown bits are cleared before it parses.
fn known_flags_only(header: &str) -> String {
    let header = header.trim();
    let parts: Vec<&str> = header.split('-').collect();
    if let [version @ "00", trace_id, parent_id, flags] = parts[..]
        && flags.len() == 2
        && flags.bytes().all(|b| b.is_ascii_hexdigit())
        && let Ok(bits) = u8::from_str_radix(flags, 16)
    {
        return format!("{version}-{trace_id}-{parent_id}-{:02x}", bits & 0x01);
    }
    header.to_owned()
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
    let parent = TraceContextPropagator::new().extract(&Headers::new(headers));
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

    #[test]
    fn a_level_two_traceparent_with_the_random_flag_is_still_the_parent() {
        const TRACE: &str = "75a0dff06fc1372cdddb640ce7475251";
        assert_eq!(
            known_flags_only(&format!("00-{TRACE}-44f2db724d1897db-03")),
            format!("00-{TRACE}-44f2db724d1897db-01")
        );
        assert_eq!(
            known_flags_only(&format!("00-{TRACE}-44f2db724d1897db-02")),
            format!("00-{TRACE}-44f2db724d1897db-00")
        );
        // Not a version-00 header with hex flags: left for the propagator to judge.
        for odd in [
            format!("00-{TRACE}-44f2db724d1897db-zz"),
            format!("01-{TRACE}-44f2db724d1897db-03-x"),
        ] {
            assert_eq!(known_flags_only(&odd), odd);
        }

        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            enable();
            let mut headers = http::HeaderMap::new();
            headers.insert(
                "traceparent",
                http::HeaderValue::from_str(&format!("00-{TRACE}-44f2db724d1897db-03")).unwrap(),
            );
            let server = tracing::info_span!("rpc");
            set_remote_parent(&server, &headers);
            let context = server.context();
            let parent = context.span().span_context().clone();
            assert_eq!(parent.trace_id().to_string(), TRACE, "the caller's trace is kept");
            assert!(parent.is_sampled());
        });
    }
}
