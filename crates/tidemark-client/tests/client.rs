//! The SDK against a real server (SQLite): the lease keeper renews, reports a
//! loss at once and stops, releases on request; worker calls survive a
//! server that comes up late; errors expose their reason.

use std::time::Duration;

use tidemark_client::{Client, ClientOptions, LeaseState};
use tidemark_core::{ConsumerKey, LeasePolicy};
use tidemark_proto::v1 as pb;
use tidemark_server::ServerConfig;
use tidemark_store::{CallContext, Store};
use tidemark_testkit::{Kind, TestDb};

struct Running {
    url: String,
    store: Store,
    _db: TestDb,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start_on(listener: tokio::net::TcpListener) -> Running {
    let db = TestDb::new(Kind::Sqlite).await.unwrap();
    let policy = LeasePolicy {
        min_ttl: Duration::from_millis(100),
        ..LeasePolicy::default()
    };
    let store = Store::new(db.backend().await, policy);
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = store.clone();
    tokio::spawn(async move {
        tidemark_server::serve(ServerConfig::default(), serving, listener, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Running {
        url,
        store,
        _db: db,
        _stop: stop,
    }
}

async fn start() -> Running {
    start_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()).await
}

fn key(id: &str) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: "db.t".into(),
        branch: "main".into(),
        consumer_id: id.into(),
    }
}

async fn client(url: &str) -> Client {
    Client::connect(&ClientOptions {
        endpoint: url.to_owned(),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn lease(client: &Client, id: &str, ttl_ms: u64) -> pb::Lease {
    client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key(id)),
            holder: "q".into(),
            ttl: Some(tidemark_client::duration_to_pb(Duration::from_millis(ttl_ms))),
        })
        .await
        .unwrap()
        .lease
        .unwrap()
}

#[tokio::test]
async fn the_keeper_keeps_a_short_lease_alive() {
    let server = start().await;
    let client = client(&server.url).await;
    let lease = lease(&client, "kept", 300).await;
    let keeper = client.keep_lease(lease.clone());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(keeper.is_held());
    let committed = client
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            batch_id: 0,
            end: Some(pb::Offset {
                snapshot_id: 3,
                index: 0,
                scan_snapshot: false,
                total_splits: Some(1),
            }),
            latest_snapshot: None,
        })
        .await
        .expect("four ttls later the lease still holds");
    assert_eq!(committed.next_snapshot, Some(4));
    assert!(keeper.release().await.unwrap(), "it was live until released");
}

#[tokio::test]
async fn the_keeper_reports_a_loss_at_once_and_stops() {
    let server = start().await;
    let client = client(&server.url).await;
    let lease = lease(&client, "lost", 600).await;
    let keeper = client.keep_lease(lease);
    let mut watch = keeper.watch();
    let key = ConsumerKey::parse("db.t", "main", "lost", "").unwrap();
    server
        .store
        .revoke(&CallContext::internal("test"), &key, "test", true)
        .await
        .map(|planned| planned.change)
        .unwrap();
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(2), keeper.lost())
        .await
        .expect("the loss is reported within one renewal interval");
    assert_eq!(err.reason, "LEASE_NOT_HELD");
    assert_eq!(err.metadata["state"], "revoked");
    assert!(started.elapsed() < Duration::from_millis(600));
    assert!(!keeper.is_held());
    assert!(matches!(*watch.borrow_and_update(), LeaseState::Lost(_)));
    // No further renewals: the state stays Lost.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(matches!(*keeper.watch().borrow(), LeaseState::Lost(_)));
}

#[tokio::test]
async fn worker_calls_wait_for_a_server_that_comes_up_late() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    // Connect lazily: the channel exists before the server does.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    // Backoff has full jitter, so give the retries a budget (~2 s on
    // average) that comfortably outlasts the server's late start.
    let client = Client::from_channel(tonic::service::interceptor::InterceptedService::new(
        channel,
        tidemark_client::Credentials::default(),
    ))
    .with_retry(tidemark_client::RetryPolicy {
        max_attempts: 40,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..tidemark_client::RetryPolicy::default()
    });
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        start_on(tokio::net::TcpListener::bind(addr).await.unwrap()).await
    });
    let acquired = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("late")),
            holder: "q".into(),
            ttl: None,
        })
        .await
        .expect("retried until the server answered");
    assert_eq!(acquired.lease.unwrap().epoch, 1);
    drop(late.await.unwrap());
}

#[tokio::test]
async fn refusals_are_not_retried_and_carry_their_reason() {
    let server = start().await;
    let client = client(&server.url).await;
    lease(&client, "held", 30_000).await;
    let started = std::time::Instant::now();
    let err = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("held")),
            holder: "other".into(),
            ttl: None,
        })
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "no backoff on a refusal"
    );
    assert!(err.is("LEASE_HELD"));
    assert_eq!(err.metadata["holder"], "q");
}

/// A server that accepts connections and never answers (a hung process, a
/// network dropping replies): the keeper reports the lease lost by the
/// lease's own deadline, counted from when the acquire request left.
#[tokio::test]
async fn a_black_holed_server_costs_the_keeper_its_lease_within_the_ttl() {
    let server = start().await;
    let real = client(&server.url).await;
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = hole.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((connection, _)) = hole.accept().await {
            connections.push(connection); // held open, never read or answered
        }
    });
    let hung = Client::from_channel(tonic::service::interceptor::InterceptedService::new(
        tonic::transport::Endpoint::from_shared(format!("http://{hole_addr}"))
            .unwrap()
            .connect_lazy(),
        tidemark_client::Credentials::default(),
    ));

    let ttl = Duration::from_millis(1000);
    let sent_at = tokio::time::Instant::now();
    let granted = lease(&real, "hole", 1000).await;
    let keeper = hung.keep_lease_sent_at(granted, sent_at);
    let lost = tokio::time::timeout(2 * ttl, keeper.lost())
        .await
        .expect("the loss is reported by the lease's deadline");
    let reported_after = sent_at.elapsed();
    eprintln!("black hole: the Rust keeper reported the loss {reported_after:?} after the acquire (ttl {ttl:?})");
    assert_eq!(lost.code, tonic::Code::DeadlineExceeded, "{lost:?}");
    // The bound is the ttl; the margin is the suite's usual 2x.
    assert!(reported_after <= 2 * ttl, "{reported_after:?}");
    held.abort();
}
