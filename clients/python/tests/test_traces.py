"""The Python SDK joins tidemark's spans to the application's trace: with
OpenTelemetry installed and a span current, every call (the SDK's methods
and direct stub calls alike) carries W3C `traceparent`, and the server's
span for the call is that span's child. The server exports to an OTLP/HTTP
receiver run by the test, which decodes with OpenTelemetry's own protos."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import threading
import time

import pytest
from harness import TidemarkServer, free_port
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import TracerProvider

from conftest import database_url
from tidemark import Client, offset
from tidemark.v1 import admin_pb2, types_pb2

TOKEN = "tdm_trace_test_token"
TABLE = "trace.orders"


class OtlpReceiver:
    """`POST /v1/traces` (OTLP/HTTP protobuf): keeps every span it is sent."""

    def __init__(self):
        self.spans = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with receiver.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            receiver.spans.extend(scope.spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, name: str):
        with self.lock:
            return [span for span in self.spans if span.name == name]

    def wait_for(self, name: str, count: int, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while True:
            found = self.named(name)
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.1)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    directory = tmp_path_factory.mktemp("traces")
    auth = directory / "auth.toml"
    auth.write_text(
        "[[token]]\n"
        'name = "etl"\n'
        f'sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"\n'
        'roles = ["worker", "operator"]\n'
    )
    receiver = OtlpReceiver()
    server = TidemarkServer(
        database_url(directory),
        directory / "server.log",
        extra_args=["--auth-file", str(auth)],
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_TRACES_SAMPLER": "parentbased_always_on",
        },
    ).start()
    yield server, receiver
    server.stop()
    receiver.server.shutdown()


def test_calls_made_inside_a_span_are_its_children_on_the_server(traced, unique):
    server, receiver = traced
    tracer = TracerProvider().get_tracer("tidemark-test")
    consumer = unique("traced")
    with Client(server.endpoint, token=TOKEN, timeout=10.0) as client:
        with tracer.start_as_current_span("nightly etl") as etl:
            lease = client.acquire_lease(TABLE, consumer, holder="q1", ttl=30).lease
            client.commit_batch(lease, 0, offset(7, 0, False, 1), latest_snapshot=9)
            # A direct stub call with the SDK's metadata (the token) keeps the
            # token and gains the trace context.
            client.admin.DescribeConsumer(
                admin_pb2.DescribeConsumerRequest(
                    consumer=types_pb2.ConsumerKey(table=TABLE, branch="main", consumer_id=consumer)
                ),
                timeout=10.0,
                metadata=client.metadata,
            )
        outside = client.get_retention_fence(TABLE)
        assert outside is not None

    context = etl.get_span_context()
    for name in (
        "tidemark.v1.Coordinator/AcquireLease",
        "tidemark.v1.Coordinator/CommitBatch",
        "tidemark.v1.Admin/DescribeConsumer",
    ):
        spans = [s for s in receiver.wait_for(name, 1) if s.trace_id == context.trace_id.to_bytes(16, "big")]
        assert len(spans) == 1, f"{name}: no span in the caller's trace among {receiver.named(name)}"
        assert spans[0].parent_span_id == context.span_id.to_bytes(8, "big"), f"{name} is the caller's child"

    # The call made after the span ended starts a trace of its own.
    fences = receiver.wait_for("tidemark.v1.Retention/GetRetentionFence", 1)
    assert fences, "the untraced call's span arrives too"
    assert all(s.trace_id != context.trace_id.to_bytes(16, "big") for s in fences)
    assert all(s.parent_span_id == b"" for s in fences), "no parent without a current span"


def test_without_a_current_span_no_trace_context_is_sent(traced, unique):
    """The SDK invents nothing: a call outside any span is a root on the
    server, and every such root has a trace of its own."""
    server, receiver = traced
    consumer = unique("untraced")
    with Client(server.endpoint, token=TOKEN, timeout=10.0) as client:
        before = len(receiver.named("tidemark.v1.Coordinator/AcquireLease"))
        client.acquire_lease(TABLE, consumer, holder="q2", ttl=30)
        client.acquire_lease(TABLE, unique("untraced"), holder="q3", ttl=30)
    spans = receiver.wait_for("tidemark.v1.Coordinator/AcquireLease", before + 2)[before:]
    assert len(spans) == 2
    assert all(s.parent_span_id == b"" for s in spans)
    assert spans[0].trace_id != spans[1].trace_id
