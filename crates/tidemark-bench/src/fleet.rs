//! **fleet**: a realistic fleet rather than a closed loop. Every consumer
//! holds a live lease, renews it every third of its TTL and commits a
//! micro-batch end every `commit_every` (each at its own phase), and the
//! consumers share a fixed number of client connections (HTTP/2, spread
//! evenly), as many streaming queries on many executors would. The load is
//! open-loop: each operation is timed from when it was due, so a server that
//! falls behind shows it in the latency instead of slowing the fleet down.
//!
//! Per fleet size (a fresh server each, on a database of its own): commit and
//! renew rates, commit p50/p99, errors, tidemark's and Postgres' CPU per
//! 1,000 consumers (percent of one core) and tidemark's resident memory.
//! Sizes step up until the fleet is overloaded (an operation fails, or the
//! commit p99 passes four times the bound); the largest size whose p99
//! stayed within the bound is reported.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use sqlx::PgPool;
use tidemark_proto::v1 as pb;
use tokio::sync::Semaphore;

use crate::procs::{self, Tidemark, Watched};
use crate::work::{self, Batches, Recorder, Window};

/// The fleet's shape.
#[derive(Debug, Clone)]
pub(crate) struct FleetPlan {
    /// Fleet sizes, smallest first; the run stops at the first that is
    /// overloaded (errors, or a p99 four times the bound).
    pub sizes: Vec<usize>,
    /// Client connections the consumers share.
    pub connections: usize,
    /// How often each consumer commits.
    pub commit_every: Duration,
    /// Each lease's TTL (renewed every third of it).
    pub ttl: Duration,
    /// How long each size is measured, after a warm-up of one commit
    /// interval and one renewal interval (every consumer at its cadence).
    pub measure: Duration,
    /// The commit p99 a size must stay under to hold.
    pub p99_bound: Duration,
}

/// One fleet size's figures.
#[derive(Debug, Serialize)]
pub(crate) struct FleetStep {
    pub consumers: usize,
    pub connections: usize,
    pub seconds: f64,
    pub commits_per_second: f64,
    pub renewals_per_second: f64,
    pub commit_p50_ms: f64,
    pub commit_p99_ms: f64,
    pub renew_p99_ms: f64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Percent of one core per 1,000 consumers, by process (`client` is the
    /// benchmark driving the fleet).
    pub cpu_percent_per_1k_consumers: std::collections::BTreeMap<String, f64>,
    pub tidemark_rss_mib: f64,
    pub tidemark_peak_rss_mib: f64,
    pub held: bool,
}

/// The scenario's figures.
#[derive(Debug, Serialize)]
pub(crate) struct FleetFigures {
    pub commit_every_seconds: f64,
    pub ttl_seconds: f64,
    pub p99_bound_ms: f64,
    pub db_connections: u32,
    pub steps: Vec<FleetStep>,
    /// The largest size whose p99 stayed within the bound.
    pub largest_held: Option<usize>,
}

/// Runs the sizes in turn on a database of its own on the bench's Postgres.
pub(crate) async fn run(
    binary: &Path,
    database_url: &str,
    postgres: &Watched,
    db_connections: u32,
    plan: &FleetPlan,
) -> anyhow::Result<FleetFigures> {
    ensure_open_files(plan.connections)?;
    let mut steps = Vec::new();
    let mut largest_held = None;
    for &consumers in &plan.sizes {
        let step = run_size(binary, database_url, postgres, db_connections, plan, consumers).await?;
        print_step(&step);
        // A size that failed by a little may be noise (a median over runs
        // decides, docs/performance.md); one that errs or is far past the
        // bound is overload, and larger ones only more so.
        let overloaded = step.errors > 0 || step.commit_p99_ms > 4.0 * plan.p99_bound.as_secs_f64() * 1000.0;
        if step.held && largest_held.is_none_or(|held| held < consumers) {
            largest_held = Some(consumers);
        }
        steps.push(step);
        if overloaded {
            break;
        }
    }
    Ok(FleetFigures {
        commit_every_seconds: plan.commit_every.as_secs_f64(),
        ttl_seconds: plan.ttl.as_secs_f64(),
        p99_bound_ms: plan.p99_bound.as_secs_f64() * 1000.0,
        db_connections,
        steps,
        largest_held,
    })
}

/// Each connection is a socket in this process and in the server's: the
/// soft open-file limit must leave room for both ends and the rest.
fn ensure_open_files(connections: usize) -> anyhow::Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(soft) = soft {
        anyhow::ensure!(
            soft >= connections + 1024,
            "the open-file limit ({soft}) is too low for {connections} connections: raise it (ulimit -n; \
             scripts/bench.sh raises it to the hard limit)"
        );
    }
    Ok(())
}

async fn run_size(
    binary: &Path,
    database_url: &str,
    postgres: &Watched,
    db_connections: u32,
    plan: &FleetPlan,
    consumers: usize,
) -> anyhow::Result<FleetStep> {
    let url = work::fresh_database(database_url, "bench_fleet").await?;
    let dir = tempfile::tempdir()?;
    let tidemark = Tidemark::start(binary, &url, db_connections, dir.path())?;
    let connections = plan.connections.min(consumers).max(1);
    let mut channels = Vec::with_capacity(connections);
    for _ in 0..connections {
        channels.push(work::channel(&tidemark.url()).await?);
    }

    // Every consumer takes its lease first, a bounded number at a time.
    let acquiring = Arc::new(Semaphore::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..consumers {
        let client = work::coordinator(channels[i % connections].clone(), work::Bearer::default());
        let acquiring = Arc::clone(&acquiring);
        let ttl = plan.ttl;
        tasks.spawn(async move {
            let _slot = acquiring.acquire_owned().await?;
            let mut client = client;
            let lease = acquire(&mut client, work::key("bench.fleet", &format!("c{i}")), ttl).await?;
            anyhow::Ok((i, client, lease))
        });
    }
    let mut leased = Vec::with_capacity(consumers);
    while let Some(joined) = tasks.join_next().await {
        leased.push(joined??);
    }

    // As at every commit point: no size pays for WAL an earlier one wrote.
    let pool = PgPool::connect(&url).await?;
    sqlx::query("CHECKPOINT").execute(&pool).await?;
    pool.close().await;

    let renew_every = plan.ttl / 3;
    let warmup = plan.commit_every.max(renew_every) + Duration::from_secs(1);
    let window = Window::starting_in(warmup, plan.measure);
    let start = Instant::now();
    let mut fleet = tokio::task::JoinSet::new();
    for (i, client, lease) in leased {
        // Phases spread evenly, so the fleet's load is steady.
        let commit_phase = plan.commit_every.mul_f64(i as f64 / consumers as f64);
        let renew_phase = renew_every.mul_f64(((i * 7919) % consumers) as f64 / consumers as f64);
        let commit_every = plan.commit_every;
        fleet.spawn(consumer(
            client,
            lease,
            window,
            start + commit_phase,
            commit_every,
            start + renew_phase,
            renew_every,
        ));
    }
    let watched = Watched {
        tidemark: Some(tidemark.pid()),
        tidemark_replica: None,
        etcd: None,
        ..postgres.clone()
    };
    tokio::time::sleep_until(window.measure_from.into()).await;
    let before = watched.sample();
    tokio::time::sleep_until(window.until.into()).await;
    let after = watched.sample();
    let memory = procs::memory_kib(tidemark.pid()).unwrap_or_default();

    let (mut commits, mut renewals) = (Recorder::default(), Recorder::default());
    while let Some(joined) = fleet.join_next().await {
        let (c, r) = joined?;
        merge(&mut commits, c);
        merge(&mut renewals, r);
    }
    drop(tidemark);
    let seconds = (window.until - window.measure_from).as_secs_f64();
    let per_1k = consumers as f64 / 1000.0;
    let cpu_percent_per_1k_consumers = after
        .iter()
        .filter_map(|(name, end)| {
            let start = before.get(name)?;
            Some((name.clone(), (end - start) / seconds * 100.0 / per_1k))
        })
        .collect();
    let errors = commits.errors + renewals.errors;
    let first_error = commits.first_error.clone().or_else(|| renewals.first_error.clone());
    let commit_p99_ms = quantile_ms(&mut commits.latencies_us, 0.99);
    Ok(FleetStep {
        consumers,
        connections,
        seconds,
        commits_per_second: commits.latencies_us.len() as f64 / seconds,
        renewals_per_second: renewals.latencies_us.len() as f64 / seconds,
        commit_p50_ms: quantile_ms(&mut commits.latencies_us, 0.5),
        commit_p99_ms,
        renew_p99_ms: quantile_ms(&mut renewals.latencies_us, 0.99),
        errors,
        first_error,
        cpu_percent_per_1k_consumers,
        tidemark_rss_mib: memory.0 as f64 / 1024.0,
        tidemark_peak_rss_mib: memory.1 as f64 / 1024.0,
        held: errors == 0 && !commits.latencies_us.is_empty() && commit_p99_ms <= plan.p99_bound.as_secs_f64() * 1000.0,
    })
}

/// One consumer's life in the window: commits and renewals at their own
/// cadences, each timed from when it was due.
async fn consumer(
    mut client: work::Coordinator,
    lease: pb::Lease,
    window: Window,
    mut next_commit: Instant,
    commit_every: Duration,
    mut next_renew: Instant,
    renew_every: Duration,
) -> (Recorder, Recorder) {
    let (mut commits, mut renewals) = (Recorder::default(), Recorder::default());
    let mut batches = Batches::new();
    loop {
        let due = next_commit.min(next_renew);
        if due >= window.until {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        if due == next_commit {
            let result = work::tidemark_commit(&mut client, &lease, &mut batches).await;
            commits.record(&window, due, result);
            next_commit += commit_every;
        } else {
            let result = work::tidemark_renew(&mut client, &lease).await;
            renewals.record(&window, due, result);
            next_renew += renew_every;
        }
    }
    (commits, renewals)
}

async fn acquire(client: &mut work::Coordinator, key: pb::ConsumerKey, ttl: Duration) -> anyhow::Result<pb::Lease> {
    let response = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key),
            holder: "fleet".into(),
            ttl: Some(prost_types::Duration::try_from(ttl)?),
        })
        .await?;
    response.into_inner().lease.context("no lease")
}

fn merge(into: &mut Recorder, from: Recorder) {
    into.latencies_us.extend(from.latencies_us);
    into.errors += from.errors;
    if into.first_error.is_none() {
        into.first_error = from.first_error;
    }
}

fn quantile_ms(latencies_us: &mut [u32], q: f64) -> f64 {
    latencies_us.sort_unstable();
    let n = latencies_us.len();
    latencies_us
        .get(((n as f64 - 1.0) * q).round().max(0.0) as usize)
        .map_or(f64::NAN, |&us| f64::from(us) / 1000.0)
}

pub(crate) fn print_step(s: &FleetStep) {
    let cpu: Vec<String> = s
        .cpu_percent_per_1k_consumers
        .iter()
        .map(|(name, pct)| format!("{name} {pct:.1}%"))
        .collect();
    println!(
        "  fleet {:>6} consumers over {:>4} connections: {:>7.0} commits/s, {:>6.0} renewals/s, commit p50 {:.2} ms \
         p99 {:.2} ms, renew p99 {:.2} ms, {} errors; CPU per 1,000 consumers: {}; tidemark RSS {:.1} MiB (peak \
         {:.1}): {}",
        s.consumers,
        s.connections,
        s.commits_per_second,
        s.renewals_per_second,
        s.commit_p50_ms,
        s.commit_p99_ms,
        s.renew_p99_ms,
        s.errors,
        cpu.join(", "),
        s.tidemark_rss_mib,
        s.tidemark_peak_rss_mib,
        if s.held { "held" } else { "DID NOT HOLD" }
    );
    if let Some(error) = &s.first_error {
        println!("    first error: {error}");
    }
}
