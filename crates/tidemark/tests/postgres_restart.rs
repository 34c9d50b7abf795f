//! Postgres goes away under load and comes back: tidemark says NOT_SERVING
//! meanwhile, fails calls quickly with UNAVAILABLE instead of hanging,
//! recovers by itself, and loses no acknowledged commit. Runs on a private
//! Postgres server (durable settings) so it can be stopped.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::Served;
use tidemark_testkit::load::{is_transport_failure, run_worker};
use tidemark_testkit::process::health;
use tidemark_testkit::{PgCluster, StopMode};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

/// Polls until every replica reports `want` for readiness; returns when.
async fn wait_readiness(replicas: &[Served], want: ServingStatus, limit: Duration) -> Instant {
    let started = Instant::now();
    loop {
        let mut all = true;
        for replica in replicas {
            if health(replica.url(), "readiness").await != Some(want) {
                all = false;
            }
        }
        if all {
            return Instant::now();
        }
        assert!(started.elapsed() < limit, "readiness never became {want:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A server-side UNAVAILABLE (the database is away) is expected here, and
/// so is nothing else.
fn database_away(status: &tonic::Status) -> bool {
    status.code() == Code::Unavailable && !is_transport_failure(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_under_load_loses_nothing_and_recovers_by_itself() {
    if std::env::var("TIDEMARK_SKIP_POSTGRES").is_ok_and(|v| v == "1") {
        return;
    }
    let mut cluster = PgCluster::start().expect("PostgreSQL binaries are installed");
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let replicas: Vec<Served> = (0..2)
        .map(|_| {
            Served::start(
                &[
                    "--database-url",
                    &url,
                    "--db-acquire-timeout",
                    "1s",
                    "--readiness-interval",
                    "200ms",
                    "--sweep-interval",
                    "0s",
                ],
                dir.path(),
            )
        })
        .collect();
    let urls: Vec<String> = replicas.iter().map(|r| r.url()).collect();
    wait_readiness(&replicas, ServingStatus::Serving, Duration::from_secs(10)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(run_worker(
                format!("w{i}"),
                urls.clone(),
                i,
                Arc::clone(&stop),
                database_away,
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // Crash Postgres (immediate stop: no shutdown checkpoint, WAL replay on
    // start) and keep it away for two seconds.
    let stopped_at = Instant::now();
    cluster.stop(StopMode::Immediate);
    let not_ready_at = wait_readiness(&replicas, ServingStatus::NotServing, Duration::from_secs(10)).await;
    let away_until = stopped_at + Duration::from_secs(2);
    tokio::time::sleep(away_until.saturating_duration_since(Instant::now())).await;
    let restarted_at = Instant::now();
    cluster.start_again();
    let up_at = Instant::now();
    let ready_at = wait_readiness(&replicas, ServingStatus::Serving, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);

    let mut first_ok_after: Vec<Duration> = Vec::new();
    let mut slowest_failure = Duration::ZERO;
    let mut failures = 0;
    for (i, worker) in workers.into_iter().enumerate() {
        let report = worker.await.unwrap();
        assert!(report.unexpected.is_empty(), "worker {i}: {:?}", report.unexpected);
        for attempt in report.attempts.iter().filter(|a| !a.ok) {
            failures += 1;
            slowest_failure = slowest_failure.max(attempt.latency);
        }
        let first_ok = report
            .attempts
            .iter()
            .find(|a| a.ok && a.at >= up_at)
            .unwrap_or_else(|| panic!("worker {i} never committed after the restart"));
        first_ok_after.push((first_ok.at + first_ok.latency).duration_since(up_at));
        // No acknowledged commit was lost in the crash.
        let acked = report.acked_next_snapshot.expect("committed");
        let stored = tidemark_testkit::load::position(&urls[i % 2], &format!("w{i}"))
            .await
            .unwrap();
        assert!(stored >= acked, "worker {i}: acknowledged {acked}, stored {stored}");
    }
    assert!(failures > 0, "the outage was seen by the workers");
    assert!(
        slowest_failure < Duration::from_secs(4),
        "calls fail fast while the database is away (slowest {slowest_failure:?})"
    );
    first_ok_after.sort();
    eprintln!(
        "Postgres crash: readiness NOT_SERVING {:?} after the stop; Postgres restarted after {:?} (pg_ctl -w took {:?}); \
         readiness SERVING {:?} after it accepted connections; first commit OK {:?} after, all 8 workers committing after {:?}; \
         {failures} failed attempts, slowest {slowest_failure:?}",
        not_ready_at - stopped_at,
        restarted_at - stopped_at,
        up_at - restarted_at,
        ready_at.saturating_duration_since(up_at),
        first_ok_after[0],
        first_ok_after[first_ok_after.len() - 1],
    );
    assert!(
        first_ok_after[first_ok_after.len() - 1] < Duration::from_secs(10),
        "tidemark recovered by itself"
    );
    drop(replicas);
    drop(cluster);
}
