//! OTLP trace export for `tidemark serve`, on when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//! set. `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`
//! choose `http/protobuf` (OpenTelemetry's default) or `grpc`; the SDK reads
//! the standard sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`),
//! resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), header and
//! timeout variables itself. See docs/operations.md, "Traces".

use std::time::Duration;

use anyhow::{Context, bail};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

/// Spans of these targets are exported (database statements, calls and
/// Paimon file writes are debug spans: exported, never logged at info).
const EXPORTED_TARGETS: [&str; 6] = [
    "tidemark",
    "tidemark_server",
    "tidemark_service",
    "tidemark_store",
    "tidemark_paimon",
    tidemark_trace::STATEMENT_TARGET,
];

/// Whether the environment asks for trace export.
pub(crate) fn requested() -> bool {
    ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"]
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()))
}

/// The protocol asked for: the traces variable first, then the general one.
fn protocol() -> anyhow::Result<&'static str> {
    let asked = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    match asked.trim() {
        "" | "http/protobuf" => Ok("http/protobuf"),
        "grpc" => Ok("grpc"),
        other => bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported: use \"http/protobuf\" (the default) or \"grpc\""
        ),
    }
}

/// An exporter whose calls run on a runtime of its own: the SDK's batch
/// processor exports from a plain thread, and the OTLP clients (tonic,
/// hyper) need a Tokio reactor to run on.
#[derive(Debug)]
struct OnRuntime<E> {
    inner: E,
    runtime: tokio::runtime::Runtime,
}

impl<E: SpanExporter> SpanExporter for OnRuntime<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.runtime.block_on(self.inner.export(batch))
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporting provider, shut down (and its last spans sent) on drop of
/// the guard's owner through [`Traces::shutdown`].
#[derive(Debug)]
pub(crate) struct Traces {
    provider: SdkTracerProvider,
    pub(crate) protocol: &'static str,
}

impl Traces {
    /// Sends what is left and stops the exporter (off the async threads:
    /// the SDK blocks while it flushes).
    pub(crate) async fn shutdown(self) {
        let provider = self.provider;
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

/// The layer that exports spans, and its provider; `None` when no endpoint
/// is configured.
pub(crate) fn layer<S>() -> anyhow::Result<Option<(impl tracing_subscriber::Layer<S>, Traces)>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    if !requested() {
        return Ok(None);
    }
    let protocol = protocol()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()
        .context("cannot start the trace exporter's runtime")?;
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let provider = {
        let _entered = runtime.enter();
        match protocol {
            "grpc" => {
                let exporter = builder.with_tonic().build().context("OTLP (grpc) exporter")?;
                provider_on(exporter, runtime)
            }
            _ => {
                let exporter = builder
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .build()
                    .context("OTLP (http/protobuf) exporter")?;
                provider_on(exporter, runtime)
            }
        }
    };
    let filter = EXPORTED_TARGETS
        .iter()
        .fold(tracing_subscriber::filter::Targets::new(), |targets, target| {
            targets.with_target(*target, tracing::Level::DEBUG)
        });
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("tidemark"))
        .with_filter(filter);
    tidemark_trace::enable();
    Ok(Some((layer, Traces { provider, protocol })))
}

/// A batching provider whose exporter runs on `runtime` (see [`OnRuntime`]).
fn provider_on<E: SpanExporter + 'static>(exporter: E, runtime: tokio::runtime::Runtime) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_batch_exporter(OnRuntime {
            inner: exporter,
            runtime,
        })
        .with_resource(resource())
        .build()
}

fn resource() -> opentelemetry_sdk::Resource {
    let builder = opentelemetry_sdk::Resource::builder();
    let builder = if std::env::var("OTEL_SERVICE_NAME").is_ok() {
        builder
    } else {
        builder.with_service_name("tidemark")
    };
    builder
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}
