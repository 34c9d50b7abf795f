//! OTLP trace export from the real binary to a receiver the test runs
//! (the collector's trace service over gRPC, and its HTTP endpoint for
//! `http/protobuf`): each call's span joins the caller's W3C trace, and
//! the group-commit statement's span links to every caller it served.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tidemark_proto::v1 as pb;
use tidemark_testkit::load::{acquire, coordinator, key, register_table, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tidemark_testkit::process::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_tidemark");

type Received = Arc<Mutex<Vec<Span>>>;

#[derive(Clone, Default)]
struct Receiver(Received);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn keep(received: &Received, request: ExportTraceServiceRequest) {
    let mut spans = received.lock().unwrap();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            spans.extend(scope.spans);
        }
    }
}

/// A gRPC receiver on a free port: its endpoint and what it received.
async fn grpc_receiver() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = Receiver::default();
    let received = Arc::clone(&receiver.0);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (format!("http://{addr}"), received)
}

/// An HTTP receiver of `POST /v1/traces` (binary protobuf).
async fn http_receiver() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let kept = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                match ExportTraceServiceRequest::decode(body) {
                    Ok(request) => {
                        keep(&kept, request);
                        (
                            http::StatusCode::OK,
                            ExportTraceServiceResponse::default().encode_to_vec(),
                        )
                    }
                    Err(_) => (http::StatusCode::BAD_REQUEST, Vec::new()),
                }
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), received)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Each worker's own trace: a trace id and the caller's span id.
fn caller(i: usize) -> ([u8; 16], [u8; 8]) {
    let mut trace = [0u8; 16];
    trace[0] = 0x7d;
    trace[15] = u8::try_from(i + 1).unwrap();
    let mut span = [0u8; 8];
    span[0] = 0x5a;
    span[7] = u8::try_from(i + 1).unwrap();
    (trace, span)
}

/// The binary on `database_url`, exporting every span to `endpoint` over
/// `protocol` within 100 ms, with `extra` arguments and `settings` (more
/// OpenTelemetry variables).
fn exporting_server(
    database_url: &str,
    dir: &std::path::Path,
    protocol: &str,
    endpoint: &str,
    extra: &[&str],
    settings: &[(&str, &str)],
) -> ServerProcess {
    let args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--database-url",
        database_url,
    ]
    .iter()
    .chain(extra)
    .map(|a| (*a).to_owned())
    .collect();
    let env: Vec<(String, String)> = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
    ]
    .iter()
    .chain(settings)
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    ServerProcess::start_with_env(std::path::Path::new(BIN), &args, &env, dir, "tidemark").expect("tidemark starts")
}

const WORKERS: usize = 16;
const ROUNDS: i64 = 4;

/// 16 workers commit four batches each, all at once, every call carrying
/// its worker's `traceparent`; then the received spans are checked.
async fn commits_are_traced(protocol: &str, endpoint: String, received: Received) {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = exporting_server(
        &db.url,
        dir.path(),
        protocol,
        &endpoint,
        &["--sweep-interval", "0s"],
        &[],
    );
    assert!(
        server.logs().contains("exporting traces over OTLP"),
        "{}",
        server.logs()
    );
    let url = server.url();
    let barrier = Arc::new(tokio::sync::Barrier::new(WORKERS));
    let mut tasks = Vec::new();
    for i in 0..WORKERS {
        let (url, barrier) = (url.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            let (trace, span) = caller(i);
            let traceparent: tonic::metadata::MetadataValue<_> =
                format!("00-{}-{}-01", hex(&trace), hex(&span)).parse().unwrap();
            let mut client = coordinator(&url, Duration::from_secs(10));
            let mut acquire = tonic::Request::new(pb::AcquireLeaseRequest {
                consumer: Some(key(&format!("traced-{i}"))),
                holder: format!("query-{i}"),
                ttl: None,
            });
            acquire.metadata_mut().insert("traceparent", traceparent.clone());
            let lease = client.acquire_lease(acquire).await.unwrap().into_inner().lease.unwrap();
            for batch in 0..ROUNDS {
                barrier.wait().await;
                let mut commit = tonic::Request::new(snapshot_commit(&lease, batch, Some(batch + 5)));
                commit.metadata_mut().insert("traceparent", traceparent.clone());
                client.commit_batch(commit).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    let callers: HashMap<Vec<u8>, Vec<u8>> = (0..WORKERS)
        .map(|i| {
            let (trace, span) = caller(i);
            (trace.to_vec(), span.to_vec())
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let expected_commits = WORKERS * usize::try_from(ROUNDS).unwrap();
    loop {
        let spans = received.lock().unwrap().clone();
        let commits: Vec<&Span> = spans
            .iter()
            .filter(|s| s.name == "tidemark.v1.Coordinator/CommitBatch")
            .collect();
        let linked: HashSet<Vec<u8>> = spans
            .iter()
            .filter(|s| s.name == "group commit" || s.name == "commit alone")
            .flat_map(|s| s.links.iter().map(|l| l.trace_id.clone()))
            .collect();
        if commits.len() >= expected_commits && linked.len() >= WORKERS {
            for span in &commits {
                let parent = callers.get(&span.trace_id).expect("a commit span in a caller's trace");
                assert_eq!(&span.parent_span_id, parent, "the call's span is the caller's child");
            }
            let statements: Vec<&Span> = spans.iter().filter(|s| s.name == "group commit").collect();
            assert!(!statements.is_empty(), "no group-commit statement span");
            for statement in &statements {
                assert_eq!(
                    statement.links.len(),
                    statement_size(statement),
                    "one link per caller served"
                );
                for link in &statement.links {
                    assert!(callers.contains_key(&link.trace_id), "a link to a stranger's trace");
                    // The link names the write inside a call: a span of
                    // that trace whose parent is the call's span.
                    let linked = spans
                        .iter()
                        .find(|s| s.span_id == link.span_id && s.trace_id == link.trace_id)
                        .expect("the linked span was exported");
                    assert!(
                        spans
                            .iter()
                            .any(|c| c.span_id == linked.parent_span_id
                                && c.name.starts_with("tidemark.v1.Coordinator/")),
                        "the linked span {:?} is not inside a call",
                        linked.name
                    );
                }
            }
            assert!(
                statements.iter().any(|s| s.links.len() >= 2),
                "no statement served two callers: {:?}",
                statements.iter().map(|s| s.links.len()).collect::<Vec<_>>()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{protocol}: {} commit spans of {expected_commits}, {} callers linked; received {:?}",
            commits.len(),
            linked.len(),
            spans.iter().map(|s| s.name.as_str()).collect::<HashSet<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(server);
    db.drop_now().await;
}

/// The `batch.size` attribute of a statement span.
fn statement_size(span: &Span) -> usize {
    int_attribute(span, "batch.size")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or_else(|| panic!("no batch.size attribute: {:?}", span.attributes))
}

/// A span's integer attribute `key`.
fn int_attribute(span: &Span, key: &str) -> Option<i64> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
        .and_then(|v| match v {
            Value::IntValue(n) => Some(*n),
            _ => None,
        })
}

#[tokio::test]
async fn over_grpc_commits_join_their_callers_traces_and_statements_link_them() {
    let (endpoint, received) = grpc_receiver().await;
    commits_are_traced("grpc", endpoint, received).await;
}

#[tokio::test]
async fn over_http_protobuf_the_same_spans_arrive() {
    let (endpoint, received) = http_receiver().await;
    commits_are_traced("http/protobuf", endpoint, received).await;
}

/// Names of the store's statement spans that the operator calls and the
/// sweep below run (see `Store::statement`).
const FENCE_VIEW: &str = "fence view";
const HISTORY_PAGE: &str = "history page";
const EXPIRED_KEYS: &str = "expired keys";
const PRUNE: &str = "prune";
const MIRROR_DONE: &str = "mirror done";

/// Every database statement shows in the trace of the work it serves: an
/// operator's fence and history calls (in the caller's trace), each sweep
/// (a trace of its own, its search for expired consumers and its history
/// prune inside) and each consumer file the mirror writes (the file's
/// write and the record of it inside). A statement serving nothing — the mirror's and
/// the gauges' polls of an idle replica — exports no span at all.
#[tokio::test]
async fn operator_calls_and_sweeps_trace_their_statements_and_idle_polls_export_none() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let (endpoint, received) = grpc_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let server = exporting_server(
        &db.url,
        dir.path(),
        "grpc",
        &endpoint,
        &[
            "--sweep-interval",
            "300ms",
            "--history-retention",
            "1h",
            "--mirror-interval",
            "100ms",
            "--gauge-interval",
            "200ms",
        ],
        &[],
    );
    let url = server.url();
    let started = Instant::now();

    // A registered table, so the mirror writes the consumer's file.
    let location = dir.path().join("lake/db.db/orders");
    tidemark_testkit::paimon_table_dir(&location, 10, 1, "");
    register_table(&url, "db.orders", &location).await;
    // A consumer with history, so the history call reads rows.
    let mut client = coordinator(&url, Duration::from_secs(10));
    let lease = acquire(&mut client, "traced-admin", "query-1").await;
    client.commit_batch(snapshot_commit(&lease, 0, Some(5))).await.unwrap();

    let (trace, span) = caller(0);
    let traceparent: tonic::metadata::MetadataValue<_> =
        format!("00-{}-{}-01", hex(&trace), hex(&span)).parse().unwrap();
    let mut retention = tidemark_proto::v1::retention_client::RetentionClient::connect(url.clone())
        .await
        .unwrap();
    let mut fence = tonic::Request::new(pb::GetRetentionFenceRequest {
        table: "db.orders".into(),
        branch: "main".into(),
        changelog_decoupled: false,
    });
    fence.metadata_mut().insert("traceparent", traceparent.clone());
    retention.get_retention_fence(fence).await.unwrap();
    let mut admin = tidemark_proto::v1::admin_client::AdminClient::connect(url.clone())
        .await
        .unwrap();
    let mut history = tonic::Request::new(pb::ListHistoryRequest {
        consumer: Some(key("traced-admin")),
        ..Default::default()
    });
    history.metadata_mut().insert("traceparent", traceparent);
    assert!(
        !admin
            .list_history(history)
            .await
            .unwrap()
            .into_inner()
            .entries
            .is_empty()
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let spans = received.lock().unwrap().clone();
        let by_id = |id: &[u8]| spans.iter().find(|s| s.span_id == id);
        let in_call = |statement: &str, call: &str| {
            spans.iter().any(|s| {
                s.name == statement
                    && s.trace_id == trace
                    && by_id(&s.parent_span_id).is_some_and(|p| p.name == call && p.parent_span_id == span)
            })
        };
        let in_sweep = |statement: &str| {
            spans
                .iter()
                .any(|s| s.name == statement && by_id(&s.parent_span_id).is_some_and(|p| p.name == "tidemark.sweep"))
        };
        let in_mirror = |child: &str| {
            spans.iter().any(|s| {
                s.name == child && by_id(&s.parent_span_id).is_some_and(|p| p.name == "tidemark.mirror_consumer")
            })
        };
        let done = in_call(FENCE_VIEW, "tidemark.v1.Retention/GetRetentionFence")
            && in_mirror("paimon.write_consumer_file")
            && in_mirror(MIRROR_DONE)
            && in_call(HISTORY_PAGE, "tidemark.v1.Admin/ListHistory")
            && in_sweep(EXPIRED_KEYS)
            && in_sweep(PRUNE)
            // A sweep's span says what it did: nothing had expired, and
            // the history is younger than its hour of retention.
            && spans.iter().any(|s| {
                s.name == "tidemark.sweep"
                    && int_attribute(s, "expired") == Some(0)
                    && int_attribute(s, "pruned") == Some(0)
            });
        if done && started.elapsed() > Duration::from_secs(2) {
            // Two seconds of 100 ms mirror polls and 200 ms gauge rounds:
            // none of their statements was exported. (A shared statement
            // has no parent but links to every call it served.)
            let orphans: Vec<&str> = spans
                .iter()
                .filter(|s| s.parent_span_id.is_empty() && s.links.is_empty() && !s.name.starts_with("tidemark."))
                .map(|s| s.name.as_str())
                .collect();
            assert!(orphans.is_empty(), "statement spans serving no work: {orphans:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "received {:?}",
            spans
                .iter()
                .map(|s| (s.name.as_str(), by_id(&s.parent_span_id).map(|p| p.name.as_str())))
                .collect::<HashSet<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(server);
    db.drop_now().await;
}

/// A collector that takes connections and never answers (a stalled
/// network path, a collector stuck on its own backend): its endpoint, and
/// the connections it holds open.
async fn stalled_receiver() -> (String, Arc<Mutex<Vec<tokio::net::TcpStream>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let holding = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            holding.lock().unwrap().push(stream);
        }
    });
    (format!("http://{addr}"), held)
}

/// Export to a collector that never answers costs the calls nothing: every
/// commit of 16 workers is acknowledged without waiting on the exporter
/// (whose timeout is 2 s here; spans wait in a bounded queue and are dropped
/// when it is full), and SIGTERM still ends the process cleanly within the
/// SDK's 5 s limit on the last export (measured: about 4 s; 5 s with the
/// default 10 s export timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_slows_no_call_and_no_shutdown() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let (endpoint, held) = stalled_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    for protocol in ["grpc", "http/protobuf"] {
        let settings = [
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "256"),
        ];
        let mut server = exporting_server(&db.url, dir.path(), protocol, &endpoint, &[], &settings);
        let url = server.url();
        let mut tasks = Vec::new();
        for i in 0..WORKERS {
            let url = url.clone();
            let protocol = protocol.replace('/', "-");
            tasks.push(tokio::spawn(async move {
                let mut client = coordinator(&url, Duration::from_secs(10));
                let lease = acquire(&mut client, &format!("stalled-{protocol}-{i}"), "q").await;
                let mut slowest = Duration::ZERO;
                for batch in 0..20 {
                    let sent = Instant::now();
                    client
                        .commit_batch(snapshot_commit(&lease, batch, Some(batch + 5)))
                        .await
                        .expect("a commit while the collector is stalled");
                    slowest = slowest.max(sent.elapsed());
                }
                slowest
            }));
        }
        let mut slowest = Duration::ZERO;
        for task in tasks {
            slowest = slowest.max(task.await.unwrap());
        }
        assert!(
            !held.lock().unwrap().is_empty(),
            "{protocol}: the exporter never reached the collector"
        );
        // The exporter's timeout is 2 s: a call that waited on it would
        // take that long; 1 s is well over any commit here.
        assert!(
            slowest < Duration::from_secs(1),
            "{protocol}: a commit took {slowest:?}"
        );
        server.signal("TERM");
        let (exited, took) = server.wait_exit(Duration::from_secs(30)).await;
        assert!(
            exited,
            "{protocol}: still running 30 s after SIGTERM\n{}",
            server.logs()
        );
        // opentelemetry_sdk gives a provider's shutdown 5 s; 2x that.
        assert!(
            took < Duration::from_secs(10),
            "{protocol}: SIGTERM took {took:?}\n{}",
            server.logs()
        );
        assert_eq!(
            server.exit_status().and_then(|s| s.code()),
            Some(0),
            "{}",
            server.logs()
        );
        eprintln!("{protocol}: slowest commit {slowest:?}, SIGTERM to exit {took:?}");
    }
    db.drop_now().await;
}

/// Two replicas on one database, each exporting to a receiver of its own,
/// with no traffic and the sweeper and mirror off: only the replica that
/// holds the gauge-collector role sends anything (its gauge rounds, each
/// with its statements inside); the other, idle, sends no span at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_idle_replicas_only_the_gauge_collector_exports_spans() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let quiet = [
        "--sweep-interval",
        "0s",
        "--mirror-interval",
        "0s",
        "--gauge-interval",
        "200ms",
    ];
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let (endpoint, received) = grpc_receiver().await;
        let server = exporting_server(&db.url, dir.path(), "grpc", &endpoint, &quiet, &[]);
        replicas.push((server, received));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen: Vec<Vec<Span>> = replicas.iter().map(|(_, r)| r.lock().unwrap().clone()).collect();
        let rounds = |spans: &[Span]| spans.iter().filter(|s| s.name == "tidemark.fleet_gauges").count();
        if let Some(collector) = seen.iter().position(|spans| rounds(spans) >= 5) {
            let collected = &seen[collector];
            assert!(
                collected.iter().any(|s| s.name == "fleet stats"
                    && collected
                        .iter()
                        .any(|p| p.span_id == s.parent_span_id && p.name == "tidemark.fleet_gauges")),
                "a gauge round without its statement"
            );
            let idle = &seen[1 - collector];
            assert!(
                idle.is_empty(),
                "the idle replica exported {:?}",
                idle.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gauge rounds per replica: {:?}",
            seen.iter().map(|s| rounds(s)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(replicas);
    db.drop_now().await;
}
