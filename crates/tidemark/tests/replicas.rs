//! Several `tidemark serve` processes sharing one Postgres, as on
//! Kubernetes: leases and fencing hold across replicas, load survives a
//! replica killed with SIGKILL, and a replica stopped with SIGTERM finishes
//! its in-flight RPCs before it exits.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::Served;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::load::{self, coordinator, is_transport_failure, key, run_worker, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tidemark_testkit::process::health;
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;

fn start_replicas(n: usize, database_url: &str, dir: &std::path::Path, extra: &[&str]) -> Vec<Served> {
    let mut args = vec![
        "--database-url",
        database_url,
        "--readiness-interval",
        "200ms",
        "--sweep-interval",
        "0s",
    ];
    args.extend_from_slice(extra);
    // Started together: the migrations race, as pods of a new Deployment do.
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            let dir = dir.to_owned();
            std::thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Served::start(&args, &dir)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("replica started"))
        .collect()
}

fn reason(status: &tonic::Status) -> String {
    tidemark_client::ApiError::from(status.clone()).reason
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_and_fencing_hold_across_replicas() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let replicas = start_replicas(3, &db.url, dir.path(), &[]);
    let clients: Vec<_> = replicas
        .iter()
        .map(|r| coordinator(&r.url(), Duration::from_secs(10)))
        .collect();
    let acquire = |replica: usize, holder: &str| {
        let mut client = clients[replica].clone();
        let holder = holder.to_owned();
        async move {
            client
                .acquire_lease(pb::AcquireLeaseRequest {
                    consumer: Some(key("fenced")),
                    holder,
                    ttl: None,
                })
                .await
        }
    };

    let first = acquire(0, "query-1").await.unwrap().into_inner().lease.unwrap();
    clients[1]
        .clone()
        .commit_batch(snapshot_commit(&first, 0, None))
        .await
        .expect("a lease from replica 0 commits through replica 1");

    // Another holder is refused by every replica while the lease lives.
    for replica in 0..3 {
        let refused = acquire(replica, "query-2").await.unwrap_err();
        assert_eq!(reason(&refused), "LEASE_HELD", "replica {replica}");
    }

    // The same holder restarts and takes over through replica 2 ...
    let second = acquire(2, "query-1").await.unwrap().into_inner();
    assert!(second.takeover);
    let second = second.lease.unwrap();
    assert!(second.epoch > first.epoch);

    // ... and its previous incarnation is fenced on every replica.
    for (replica, client) in clients.iter().enumerate() {
        let fenced = client
            .clone()
            .commit_batch(snapshot_commit(&first, 1, None))
            .await
            .unwrap_err();
        assert_eq!(fenced.code(), Code::FailedPrecondition);
        assert_eq!(reason(&fenced), "LEASE_NOT_HELD", "replica {replica}");
    }
    let done = clients[0]
        .clone()
        .commit_batch(snapshot_commit(&second, 1, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.next_snapshot, Some(3));
    for replica in &replicas {
        assert_eq!(load::position(&replica.url(), "fenced").await, Some(3));
    }
    drop(replicas);
    db.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_goes_on_when_a_replica_is_killed() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut replicas = start_replicas(3, &db.url, dir.path(), &[]);
    let urls: Vec<String> = replicas.iter().map(|r| r.url()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..12)
        .map(|i| {
            tokio::spawn(run_worker(
                format!("w{i}"),
                urls.clone(),
                i,
                Arc::clone(&stop),
                is_transport_failure,
            ))
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed_at = Instant::now();
    replicas[0].kill();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    stop.store(true, Ordering::Relaxed);

    let mut after_kill = [0u64; 3];
    let mut acked_total = 0;
    for (i, worker) in workers.into_iter().enumerate() {
        let report = worker.await.unwrap();
        assert!(report.unexpected.is_empty(), "worker {i}: {:?}", report.unexpected);
        acked_total += report.acked_by_replica.values().sum::<u64>();
        // What the survivors acknowledged is in the database, read through
        // either of them.
        let acked = report.acked_next_snapshot.expect("every worker committed");
        for url in &urls[1..] {
            let stored = load::position(url, &format!("w{i}")).await.unwrap();
            assert!(stored >= acked, "worker {i}: acked {acked}, stored {stored}");
        }
        for attempt in report.attempts.iter().filter(|a| a.ok && a.at > killed_at) {
            after_kill[attempt.replica] += 1;
        }
        assert!(
            report.attempts.iter().any(|a| a.ok && a.at > killed_at),
            "worker {i} kept committing after the kill"
        );
    }
    assert_eq!(after_kill[0], 0, "nothing is acknowledged by a dead replica");
    assert!(
        after_kill[1] > 0 && after_kill[2] > 0,
        "both survivors served: {after_kill:?}"
    );
    eprintln!(
        "3 replicas, 12 workers, replica 0 SIGKILLed after 1.5 s: {acked_total} commits acknowledged in 3.5 s, \
         {after_kill:?} per replica after the kill"
    );
    for replica in &replicas[1..] {
        assert_eq!(health(replica.url(), "readiness").await, Some(ServingStatus::Serving));
    }
    drop(replicas);
    db.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigtermed_replica_drains_and_finishes_in_flight_rpcs() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut replicas = start_replicas(2, &db.url, dir.path(), &["--shutdown-drain", "500ms"]);
    let leaving = coordinator(&replicas[0].url(), Duration::from_secs(20));
    let staying = coordinator(&replicas[1].url(), Duration::from_secs(20));

    // Three commits in flight on the leaving replica, held by a row lock.
    let leases = acquire_all(&leaving, "drain", 3).await;
    let lock = lock_every_key(&db.url).await;
    let in_flight: Vec<_> = leases
        .iter()
        .map(|lease| {
            let mut client = leaving.clone();
            let request = snapshot_commit(lease, 0, None);
            tokio::spawn(async move { client.commit_batch(request).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(in_flight.iter().all(|c| !c.is_finished()), "the commits are in flight");

    let sigterm = Instant::now();
    replicas[0].signal("TERM");
    let mut saw_not_serving = false;
    while sigterm.elapsed() < Duration::from_millis(450) {
        if health(replicas[0].url(), "readiness").await == Some(ServingStatus::NotServing) {
            saw_not_serving = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_not_serving, "readiness turned NOT_SERVING during the drain");

    // The database lets the commits through well after the drain delay.
    tokio::time::sleep(Duration::from_millis(1000).saturating_sub(sigterm.elapsed())).await;
    lock.rollback().await.unwrap();
    for (i, commit) in in_flight.into_iter().enumerate() {
        let done = commit
            .await
            .unwrap()
            .unwrap_or_else(|s| panic!("in-flight commit {i} failed: {s:?}"));
        assert_eq!(done.into_inner().next_snapshot, Some(2));
    }
    let (clean, _) = replicas[0].wait_exit(Duration::from_secs(10)).await;
    let drained_in = sigterm.elapsed();
    assert!(clean, "exit status:\n{}", replicas[0].logs());
    assert!(drained_in < Duration::from_secs(5), "drained in {drained_in:?}");
    eprintln!("SIGTERM to exit: {drained_in:?} (drain delay 500 ms, in-flight commits held 1 s)");

    // The other replica saw the drained replica's commits and goes on.
    for (i, lease) in leases.iter().enumerate() {
        assert_eq!(load::position(&replicas[1].url(), &format!("drain-{i}")).await, Some(2));
        let done = staying
            .clone()
            .commit_batch(snapshot_commit(lease, 1, None))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(done.next_snapshot, Some(3));
    }
    // New calls to the stopped replica fail as a transport error, which
    // clients treat as "try another replica".
    let refused = leaving
        .clone()
        .commit_batch(snapshot_commit(&leases[0], 2, None))
        .await
        .unwrap_err();
    assert!(is_transport_failure(&refused), "{refused:?}");
    drop(replicas);
    db.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_connection_pool_answers_unavailable_instead_of_hanging() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let replicas = start_replicas(
        1,
        &db.url,
        dir.path(),
        &["--db-max-connections", "1", "--db-acquire-timeout", "300ms"],
    );
    let client = coordinator(&replicas[0].url(), Duration::from_secs(10));
    let leases = acquire_all(&client, "pool", 2).await;
    // The first commit takes the only connection and waits on a row lock.
    let lock = lock_every_key(&db.url).await;
    let blocked = {
        let mut client = client.clone();
        let request = snapshot_commit(&leases[0], 0, None);
        tokio::spawn(async move { client.commit_batch(request).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!blocked.is_finished());

    let started = Instant::now();
    let refused = client
        .clone()
        .commit_batch(snapshot_commit(&leases[1], 0, None))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(!is_transport_failure(&refused), "the server answered");
    assert!(!refused.message().contains("SELECT"), "no SQL in messages");
    assert!(waited < Duration::from_secs(2), "answered in {waited:?}");

    lock.rollback().await.unwrap();
    blocked.await.unwrap().expect("the blocked commit completes");
    client
        .clone()
        .commit_batch(snapshot_commit(&leases[1], 0, None))
        .await
        .expect("a retry succeeds once a connection is free");
    drop(replicas);
    db.drop_now().await;
}

/// Leases `n` consumers `<prefix>-<i>` for holder "q".
async fn acquire_all(client: &CoordinatorClient<Channel>, prefix: &str, n: usize) -> Vec<pb::Lease> {
    let mut leases = Vec::new();
    for i in 0..n {
        leases.push(load::acquire(&mut client.clone(), &format!("{prefix}-{i}"), "q").await);
    }
    leases
}

/// A transaction holding a row lock on every consumer key, so writes to
/// them wait (commit or drop it to let them through).
async fn lock_every_key(url: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM consumer_keys FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    lock
}

/// A client watching readiness (`Health/Watch`, a stream that never ends by
/// itself) must not hold a SIGTERMed replica until its grace runs out: the
/// watcher sees NOT_SERVING during the drain, then its stream ends, and the
/// replica exits soon after the drain (a rollout waits on every replica it
/// replaces; Kubernetes SIGKILLs at the pod's grace period).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigtermed_replica_ends_readiness_watches_instead_of_waiting_out_its_grace() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let dir = tempfile::tempdir().unwrap();
    let mut replica = Served::start(&["--shutdown-drain", "500ms", "--shutdown-grace", "20s"], dir.path());
    let channel = Channel::from_shared(replica.url()).unwrap().connect().await.unwrap();
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: "readiness".into(),
        })
        .await
        .unwrap()
        .into_inner();
    // Ready first (a loaded machine may answer NOT_SERVING until the first
    // readiness check has run).
    tokio::time::timeout(Duration::from_secs(20), async {
        while watch.message().await.unwrap().unwrap().status() != ServingStatus::Serving {}
    })
    .await
    .expect("the replica became ready");

    let sigterm = Instant::now();
    replica.signal("TERM");
    let mut seen = Vec::new();
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(25), watch.message()).await {
            Ok(Ok(Some(answer))) => seen.push(answer.status()),
            Ok(Ok(None)) => break Ok(()),
            Ok(Err(status)) => break Err(format!("{status:?}")),
            Err(_) => break Err("still open 25 s after SIGTERM".to_owned()),
        }
    };
    let ended_after = sigterm.elapsed();
    assert!(
        seen.contains(&ServingStatus::NotServing),
        "no NOT_SERVING before the end: {seen:?}"
    );
    assert_eq!(
        ended,
        Ok(()),
        "the watch did not end cleanly ({ended_after:?} after SIGTERM)"
    );
    let (clean, _) = replica.wait_exit(Duration::from_secs(30)).await;
    let exited_after = sigterm.elapsed();
    eprintln!("watch ended {ended_after:?}, process exited {exited_after:?} after SIGTERM (drain 500 ms, grace 20 s)");
    assert!(clean, "exit status:\n{}", replica.logs());
    // Twice the drain plus the time to stop, far below the 20 s grace.
    assert!(
        exited_after < Duration::from_secs(5),
        "exited {exited_after:?} after SIGTERM"
    );
}
