//! Metrics that stay true (issue 19), with two `tidemark serve` replicas on
//! one Postgres: exactly one replica computes the fleet gauges; a stopped
//! query's lag keeps growing while others commit; per-consumer series only
//! when asked, and capped; when the collecting replica dies, the other takes
//! over within a few rounds.

mod support;

use std::time::{Duration, Instant};

use support::Served;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::load::{coordinator, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tonic::transport::Channel;

/// The Prometheus text a metrics port serves now.
async fn scrape(port: u16) -> String {
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return String::new();
        };
        let _ = write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );
        let mut body = String::new();
        let _ = stream.read_to_string(&mut body);
        body
    })
    .await
    .unwrap()
}

/// The value of the sample `line_start` (metric and labels), if exported.
fn sample(body: &str, line_start: &str) -> Option<f64> {
    body.lines()
        .find(|line| line.starts_with(line_start))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls until `check` holds for the scrapes of `ports`, or panics with them.
async fn until(ports: &[u16], what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut bodies = Vec::new();
        for port in ports {
            bodies.push(scrape(*port).await);
        }
        if check(&bodies) {
            return bodies;
        }
        assert!(
            Instant::now() < deadline,
            "{what}; scrapes:\n{}",
            bodies.join("\n----\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Takes consumer `id`'s lease for holder `q-<id>`.
async fn take_lease(client: &mut CoordinatorClient<Channel>, id: &str) -> pb::Lease {
    tidemark_testkit::load::acquire(client, id, &format!("q-{id}")).await
}

const LAG: &str = r#"tidemark_consumer_lag_snapshots{table="db.orders",branch="main"}"#;
const COLLECTOR: &str = "tidemark_gauge_collector ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_collects_a_stopped_querys_lag_grows_and_another_takes_over() {
    let Some(db) = FreshDatabase::create().await else {
        panic!("this test needs Postgres (DATABASE_URL); scripts/test.sh starts one");
    };
    let dir = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port()];
    let mut replicas: Vec<Served> = ports
        .iter()
        .map(|port| {
            let metrics = format!("127.0.0.1:{port}");
            Served::start(
                &[
                    "--database-url",
                    &db.url,
                    "--metrics-listen",
                    &metrics,
                    "--gauge-interval",
                    "200ms",
                    "--per-consumer-metrics",
                    "1",
                    "--sweep-interval",
                    "0s",
                ],
                dir.path(),
            )
        })
        .collect();

    // A query that commits once and stops: snapshots up to 4 read, 10 the
    // latest, so 5 to 10 are left.
    let mut stopped = coordinator(&replicas[0].url(), Duration::from_secs(5));
    let lease = take_lease(&mut stopped, "stopped").await;
    stopped
        .commit_batch(snapshot_commit(&lease, 3, Some(10)))
        .await
        .unwrap();
    let bodies = until(&ports, "the stopped query's lag is 6, from one replica", |bodies| {
        bodies.iter().filter_map(|b| sample(b, LAG)).collect::<Vec<_>>() == [6.0]
    })
    .await;
    let collector = bodies.iter().position(|b| sample(b, COLLECTOR) == Some(1.0)).unwrap();
    assert_eq!(
        bodies.iter().filter(|b| sample(b, COLLECTOR) == Some(1.0)).count(),
        1,
        "exactly one replica collects"
    );

    // Another query on the branch reports snapshot 40 as the latest: the
    // stopped query's lag grows though it sends nothing.
    let mut running = coordinator(&replicas[1].url(), Duration::from_secs(5));
    let other = take_lease(&mut running, "running").await;
    for batch in 1..=30 {
        running
            .commit_batch(snapshot_commit(&other, batch, Some(40)))
            .await
            .unwrap();
    }
    until(&ports, "the stopped query's lag grows to 36", |bodies| {
        bodies.iter().filter_map(|b| sample(b, LAG)).collect::<Vec<_>>() == [36.0]
    })
    .await;
    // Per consumer: only the worst one, as asked (--per-consumer-metrics 1).
    let bodies = until(&ports, "one per-consumer series", |bodies| {
        bodies[collector].contains(
            r#"tidemark_consumer_lag_snapshots_per_consumer{table="db.orders",branch="main",consumer_id="stopped"} 36"#,
        )
    })
    .await;
    assert!(
        !bodies[collector].contains(r#"consumer_id="running""#),
        "capped at one series"
    );

    // The collector dies: its advisory lock goes with its connection, and
    // the other replica takes over.
    replicas[collector].signal("KILL");
    let survivor = 1 - collector;
    until(&ports[survivor..=survivor], "the survivor collects", |bodies| {
        sample(&bodies[0], COLLECTOR) == Some(1.0)
            && sample(&bodies[0], LAG) == Some(36.0)
            && sample(&bodies[0], "tidemark_history_oldest_age_seconds ").is_some()
    })
    .await;
    drop(replicas.remove(0));
    drop(replicas);
    db.drop_now().await;
}
