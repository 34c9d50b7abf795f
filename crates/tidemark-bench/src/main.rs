//! tidemark against the peers a user would otherwise pick, side by side in
//! one run on one machine:
//!
//! - **commit**: CommitBatch through tidemark vs the same durable effect as
//!   one raw SQL statement (lease-epoch-guarded update + history row) vs an
//!   etcd transaction (compare the lease epoch key, write the position);
//! - **recover**: GetRecoveryPosition vs a primary-key read;
//! - **churn**: acquire/renew/release cycles vs the same in raw SQL;
//! - **fence**: GetRetentionFence on a branch of 100k consumers vs a raw
//!   `min()` over an index;
//! - **sqlite**: the commit scenario on the embedded SQLite store;
//! - **memory**: the server's resident memory with 100k consumers and 10k
//!   live leases;
//! - **keeper**: what keeping 100k Paimon consumer files alive costs.
//!
//! Run with `scripts/bench.sh` (builds in release mode, fetches etcd);
//! `--quick` for a smoke run, `--json FILE` for machine-readable results.

#![allow(clippy::print_stdout)] // a report is the point

mod etcd {
    // Generated code.
    #![allow(
        clippy::all,
        missing_debug_implementations,
        missing_docs,
        unreachable_pub,
        unused_qualifications
    )]
    tonic::include_proto!("etcdserverpb");
    pub use kv_client::KvClient;
}
mod keeper;
mod procs;
mod work;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use serde::Serialize;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_proto::v1::retention_client::RetentionClient;

use crate::procs::{Etcd, Tidemark};
use crate::work::{Batches, Recorder, Window};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Scenario {
    Commit,
    Recover,
    Churn,
    Fence,
    Sqlite,
    Memory,
    Keeper,
}

#[derive(Debug, Parser)]
#[command(about = "tidemark against raw Postgres and etcd, side by side")]
struct Args {
    /// A few seconds a scenario: a smoke run.
    #[arg(long)]
    quick: bool,
    /// Measured time per scenario and concurrency (default 10s; 2s quick).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Warm-up before measuring (default 2s; 500ms quick).
    #[arg(long, value_parser = humantime::parse_duration)]
    warmup: Option<Duration>,
    /// Worker counts.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    concurrency: Vec<usize>,
    /// Scenarios to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "commit,recover,churn,fence,sqlite,memory,keeper"
    )]
    scenarios: Vec<Scenario>,
    /// A Postgres to use (its CPU is not measured unless it is local and
    /// ours); default: a private durable cluster from the installed binaries.
    #[arg(long, env = "BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// Connections each of tidemark and the raw-SQL peer may use.
    #[arg(long, default_value_t = 16)]
    db_connections: u32,
    /// Consumers on the branch for the fence and memory scenarios.
    #[arg(long, default_value_t = 100_000)]
    fence_consumers: usize,
    /// Live leases for the memory scenario.
    #[arg(long, default_value_t = 10_000)]
    live_leases: usize,
    /// Consumers on the registered table of the keeper scenario (default
    /// 100,000; 5,000 quick).
    #[arg(long)]
    keeper_consumers: Option<usize>,
    /// The keeper scenario's --mirror-refresh (files must stay younger than
    /// half of it).
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    keeper_refresh: Duration,
    /// The tidemark binary (default: next to this one).
    #[arg(long, env = "TIDEMARK_BIN")]
    tidemark_bin: Option<PathBuf>,
    /// The etcd binary (default: .tools/etcd/usr/bin/etcd, then PATH).
    #[arg(long, env = "ETCD_BIN")]
    etcd_bin: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One measured (scenario, system, concurrency).
#[derive(Debug, Serialize)]
struct Row {
    scenario: Scenario,
    system: String,
    concurrency: usize,
    ops: usize,
    errors: u64,
    throughput: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// CPU seconds per 1,000 operations, by process.
    cpu_per_1k: BTreeMap<String, f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: BTreeMap<String, String>,
    rows: Vec<Row>,
    memory: Option<Memory>,
    keeper: Option<keeper::KeeperFigures>,
}

#[derive(Debug, Serialize)]
struct Memory {
    consumers: usize,
    live_leases: usize,
    rss_mib: f64,
    peak_rss_mib: f64,
}

/// The processes whose CPU is measured.
#[derive(Debug, Clone, Default)]
struct Watched {
    tidemark: Option<u32>,
    postgres: Option<u32>,
    etcd: Option<u32>,
}

impl Watched {
    fn sample(&self) -> BTreeMap<String, f64> {
        let mut cpu = BTreeMap::new();
        if let Some(pid) = self.tidemark
            && let Some(s) = procs::cpu_seconds(pid)
        {
            cpu.insert("tidemark".to_owned(), s);
        }
        if let Some(pid) = self.postgres
            && let Some(s) = procs::cpu_seconds_with_children(pid)
        {
            cpu.insert("postgres".to_owned(), s);
        }
        if let Some(pid) = self.etcd
            && let Some(s) = procs::cpu_seconds(pid)
        {
            cpu.insert("etcd".to_owned(), s);
        }
        if let Some(s) = procs::cpu_seconds(std::process::id()) {
            cpu.insert("client".to_owned(), s);
        }
        cpu
    }
}

/// Runs the workers, samples CPU over the window, merges what they saw.
async fn measure<F>(
    scenario: Scenario,
    system: &str,
    concurrency: usize,
    window: Window,
    watched: &Watched,
    workers: Vec<F>,
) -> anyhow::Result<Row>
where
    F: Future<Output = Recorder> + Send + 'static,
{
    let handles: Vec<_> = workers.into_iter().map(tokio::spawn).collect();
    tokio::time::sleep_until(window.measure_from.into()).await;
    let before = watched.sample();
    tokio::time::sleep_until(window.until.into()).await;
    let after = watched.sample();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for handle in handles {
        let recorder = handle.await?;
        latencies.extend(recorder.latencies_us);
        errors += recorder.errors;
        if first_error.is_none() {
            first_error = recorder.first_error;
        }
    }
    if let Some(error) = first_error {
        eprintln!("  {system} x{concurrency}: {errors} errors, first: {error}");
    }
    latencies.sort_unstable();
    let ops = latencies.len();
    let seconds = (window.until - window.measure_from).as_secs_f64();
    let pick = |q: f64| {
        latencies
            .get(((ops as f64 - 1.0) * q).round().max(0.0) as usize)
            .map_or(f64::NAN, |&us| f64::from(us) / 1000.0)
    };
    let cpu_per_1k = after
        .iter()
        .filter_map(|(name, end)| {
            let start = before.get(name)?;
            (ops > 0).then(|| (name.clone(), (end - start) / ops as f64 * 1000.0))
        })
        .collect();
    let row = Row {
        scenario,
        system: system.to_owned(),
        concurrency,
        ops,
        errors,
        throughput: ops as f64 / seconds,
        p50_ms: pick(0.5),
        p99_ms: pick(0.99),
        cpu_per_1k,
    };
    println!(
        "  {:<8} {:<14} x{:<3} {:>9.0} ops/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
        format!("{scenario:?}").to_lowercase(),
        system,
        concurrency,
        row.throughput,
        row.p50_ms,
        row.p99_ms
    );
    Ok(row)
}

struct Bench {
    args: Args,
    warmup: Duration,
    duration: Duration,
    database_url: String,
    tidemark: Tidemark,
    peer: PgPool,
    etcd: Option<Etcd>,
    watched: Watched,
    big_loaded: bool,
}

impl Bench {
    fn window(&self) -> Window {
        Window::starting_in(self.warmup, self.duration)
    }

    fn watched_with_etcd(&self) -> Watched {
        Watched {
            etcd: self.etcd.as_ref().map(Etcd::pid),
            ..self.watched.clone()
        }
    }

    async fn commit(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        // tidemark
        let mut workers = Vec::new();
        let mut ready = Vec::new();
        for i in 0..c {
            let mut client = CoordinatorClient::new(work::channel(&self.tidemark.url()).await?);
            let lease =
                work::tidemark_lease(&mut client, work::key("bench.commit", &format!("c{c}-w{i}")), "bench").await?;
            ready.push((client, lease));
        }
        let window = self.window();
        for (mut client, lease) in ready {
            let mut batches = Batches::new();
            workers.push(async move {
                closed_loop!(window, work::tidemark_commit(&mut client, &lease, &mut batches).await)
            });
        }
        rows.push(measure(Scenario::Commit, "tidemark", c, window, &self.watched, workers).await?);

        // raw SQL
        let mut workers = Vec::new();
        for i in 0..c {
            work::peer_consumer(&self.peer, "bench.commit", &format!("c{c}-w{i}")).await?;
        }
        let window = self.window();
        for i in 0..c {
            let pool = self.peer.clone();
            let id = format!("c{c}-w{i}");
            let mut batches = Batches::new();
            workers.push(async move {
                closed_loop!(
                    window,
                    work::peer_commit(&pool, "bench.commit", &id, &mut batches).await
                )
            });
        }
        rows.push(measure(Scenario::Commit, "raw-sql", c, window, &self.watched, workers).await?);

        // etcd
        if let Some(etcd) = &self.etcd {
            let mut ready = Vec::new();
            for i in 0..c {
                let mut client = etcd::KvClient::new(work::channel(&etcd.url).await?);
                let id = format!("c{c}-w{i}");
                work::etcd_consumer(&mut client, &id).await?;
                ready.push((client, id));
            }
            let window = self.window();
            let mut workers = Vec::new();
            for (mut client, id) in ready {
                let mut batches = Batches::new();
                workers
                    .push(async move { closed_loop!(window, work::etcd_commit(&mut client, &id, &mut batches).await) });
            }
            rows.push(measure(Scenario::Commit, "etcd", c, window, &self.watched_with_etcd(), workers).await?);
        }
        Ok(())
    }

    async fn recover(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        let mut ready = Vec::new();
        for i in 0..c {
            let mut client = CoordinatorClient::new(work::channel(&self.tidemark.url()).await?);
            let key = work::key("bench.recover", &format!("c{c}-w{i}"));
            let lease = work::tidemark_lease(&mut client, key.clone(), "bench").await?;
            work::tidemark_commit(&mut client, &lease, &mut Batches::new()).await?;
            ready.push((client, key));
        }
        let window = self.window();
        let workers: Vec<_> =
            ready
                .into_iter()
                .map(|(mut client, key)| async move {
                    closed_loop!(window, work::tidemark_recover(&mut client, &key).await)
                })
                .collect();
        rows.push(measure(Scenario::Recover, "tidemark", c, window, &self.watched, workers).await?);

        for i in 0..c {
            work::peer_consumer(&self.peer, "bench.recover", &format!("c{c}-w{i}")).await?;
        }
        let window = self.window();
        let workers: Vec<_> = (0..c)
            .map(|i| {
                let pool = self.peer.clone();
                let id = format!("c{c}-w{i}");
                async move { closed_loop!(window, work::peer_recover(&pool, "bench.recover", &id).await) }
            })
            .collect();
        rows.push(measure(Scenario::Recover, "raw-sql", c, window, &self.watched, workers).await?);
        Ok(())
    }

    async fn churn(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        let mut clients = Vec::new();
        for _ in 0..c {
            clients.push(CoordinatorClient::new(work::channel(&self.tidemark.url()).await?));
        }
        let window = self.window();
        let workers: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut client)| {
                let key = work::key("bench.churn", &format!("c{c}-w{i}"));
                let holder = format!("holder-{i}");
                async move { closed_loop!(window, work::tidemark_churn(&mut client, &key, &holder).await) }
            })
            .collect();
        rows.push(measure(Scenario::Churn, "tidemark", c, window, &self.watched, workers).await?);

        for i in 0..c {
            work::peer_consumer(&self.peer, "bench.churn", &format!("c{c}-w{i}")).await?;
            sqlx::query("UPDATE peer_consumers SET lease_deadline = now() WHERE table_name = 'bench.churn' AND consumer_id = $1")
                .bind(format!("c{c}-w{i}"))
                .execute(&self.peer)
                .await?;
        }
        let window = self.window();
        let workers: Vec<_> = (0..c)
            .map(|i| {
                let pool = self.peer.clone();
                let id = format!("c{c}-w{i}");
                let holder = format!("holder-{i}");
                async move { closed_loop!(window, work::peer_churn(&pool, "bench.churn", &id, &holder).await) }
            })
            .collect();
        rows.push(measure(Scenario::Churn, "raw-sql", c, window, &self.watched, workers).await?);
        Ok(())
    }

    /// Loads the big branch (tidemark's table and the peer's) once.
    async fn load_big(&mut self) -> anyhow::Result<()> {
        if self.big_loaded {
            return Ok(());
        }
        let n = self.args.fence_consumers;
        let started = Instant::now();
        let pool = PgPool::connect(&self.database_url).await?;
        work::seed_consumers(&pool, "bench.big", n).await?;
        sqlx::query(
            "INSERT INTO peer_consumers (table_name, branch, consumer_id, epoch, next_snapshot, updated_at) \
             SELECT 'bench.big', 'main', 'consumer-' || i, 0, 1000 + (i * 7919) % 50000, now() \
             FROM generate_series(1, $1) AS i",
        )
        .bind(n as i64)
        .execute(&pool)
        .await?;
        sqlx::query("ANALYZE").execute(&pool).await?;
        pool.close().await;
        println!(
            "  loaded {n} consumers on branch bench.big@main in {:?}",
            started.elapsed()
        );
        self.big_loaded = true;
        Ok(())
    }

    async fn fence(&mut self, rows: &mut Vec<Row>) -> anyhow::Result<()> {
        self.load_big().await?;
        for c in [1, 4] {
            let mut clients = Vec::new();
            for _ in 0..c {
                clients.push(RetentionClient::new(work::channel(&self.tidemark.url()).await?));
            }
            let window = self.window();
            let workers: Vec<_> =
                clients
                    .into_iter()
                    .map(|mut client| async move {
                        closed_loop!(window, work::tidemark_fence(&mut client, "bench.big").await)
                    })
                    .collect();
            rows.push(measure(Scenario::Fence, "tidemark", c, window, &self.watched, workers).await?);
            let window = self.window();
            let workers: Vec<_> = (0..c)
                .map(|_| {
                    let pool = self.peer.clone();
                    async move { closed_loop!(window, work::peer_fence(&pool, "bench.big").await) }
                })
                .collect();
            rows.push(measure(Scenario::Fence, "raw-sql", c, window, &self.watched, workers).await?);
        }
        Ok(())
    }

    async fn sqlite(&self, rows: &mut Vec<Row>, binary: &std::path::Path) -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let server = Tidemark::start(binary, &url, 1, dir.path())?;
        let watched = Watched {
            tidemark: Some(server.pid()),
            ..Watched::default()
        };
        for &c in &self.args.concurrency {
            let mut ready = Vec::new();
            for i in 0..c {
                let mut client = CoordinatorClient::new(work::channel(&server.url()).await?);
                let lease =
                    work::tidemark_lease(&mut client, work::key("bench.commit", &format!("c{c}-w{i}")), "bench")
                        .await?;
                ready.push((client, lease));
            }
            let window = self.window();
            let workers: Vec<_> = ready
                .into_iter()
                .map(|(mut client, lease)| {
                    let mut batches = Batches::new();
                    async move { closed_loop!(window, work::tidemark_commit(&mut client, &lease, &mut batches).await) }
                })
                .collect();
            rows.push(measure(Scenario::Sqlite, "tidemark-sqlite", c, window, &watched, workers).await?);
        }
        Ok(())
    }

    async fn memory(&mut self) -> anyhow::Result<Memory> {
        self.load_big().await?;
        let n = self.args.live_leases.min(self.args.fence_consumers);
        let per_worker = n.div_ceil(16);
        let mut tasks = Vec::new();
        for w in 0..16 {
            let mut client = CoordinatorClient::new(work::channel(&self.tidemark.url()).await?);
            tasks.push(tokio::spawn(async move {
                for i in (w * per_worker + 1)..=((w + 1) * per_worker).min(n) {
                    let key = work::key("bench.big", &format!("consumer-{i}"));
                    work::tidemark_lease(&mut client, key, &format!("query-{i}")).await?;
                }
                anyhow::Ok(())
            }));
        }
        for task in tasks {
            task.await??;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (rss, peak) = procs::memory_kib(self.tidemark.pid()).context("tidemark's memory")?;
        let memory = Memory {
            consumers: self.args.fence_consumers,
            live_leases: n,
            rss_mib: rss as f64 / 1024.0,
            peak_rss_mib: peak as f64 / 1024.0,
        };
        println!(
            "  memory: {} consumers, {} live leases: tidemark RSS {:.1} MiB (peak {:.1} MiB)",
            memory.consumers, memory.live_leases, memory.rss_mib, memory.peak_rss_mib
        );
        Ok(memory)
    }
}

fn etcd_binary(args: &Args) -> Option<PathBuf> {
    if let Some(path) = &args.etcd_bin {
        return Some(path.clone());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tools = root.join(".tools/etcd/usr/bin/etcd");
    if tools.exists() {
        return Some(tools);
    }
    procs::which("etcd")
}

fn print_summary(rows: &[Row]) {
    println!();
    println!(
        "{:<8} {:<16} {:>4} {:>10} {:>9} {:>9}  {:<44} {:>13}",
        "scenario", "system", "conc", "ops/s", "p50 ms", "p99 ms", "CPU-s per 1k ops (by process)", "vs peer"
    );
    for row in rows {
        let cpu = row
            .cpu_per_1k
            .iter()
            .map(|(name, s)| format!("{name} {s:.3}"))
            .collect::<Vec<_>>()
            .join(", ");
        let peer = rows
            .iter()
            .find(|p| p.scenario == row.scenario && p.concurrency == row.concurrency && p.system == "raw-sql");
        let ratio = match peer {
            Some(peer) if row.system != "raw-sql" && peer.throughput > 0.0 => format!(
                "{:.2}x / p99 {:.2}x",
                row.throughput / peer.throughput,
                row.p99_ms / peer.p99_ms
            ),
            _ => String::new(),
        };
        println!(
            "{:<8} {:<16} {:>4} {:>10.0} {:>9.2} {:>9.2}  {:<44} {:>13}",
            format!("{:?}", row.scenario).to_lowercase(),
            row.system,
            row.concurrency,
            row.throughput,
            row.p50_ms,
            row.p99_ms,
            cpu,
            ratio
        );
    }
    println!("(\"vs peer\": throughput ratio / p99 ratio against raw SQL at the same concurrency)");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let duration = args.duration.unwrap_or(if args.quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(10)
    });
    let warmup = args.warmup.unwrap_or(if args.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(2)
    });

    let mut cluster = None;
    let database_url = match &args.database_url {
        Some(url) => url.clone(),
        None => {
            let started = tidemark_testkit::PgCluster::start().context("no PostgreSQL binaries to start one")?;
            let url = started.url();
            cluster = Some(started);
            url
        }
    };
    let postgres_pid = cluster.as_ref().and_then(tidemark_testkit::PgCluster::postmaster_pid);
    let binary = args
        .tidemark_bin
        .clone()
        .or_else(|| procs::sibling_binary("tidemark"))
        .context(
            "the tidemark binary was not found; build it (cargo build --release -p tidemark) or pass --tidemark-bin",
        )?;
    let dir = tempfile::tempdir()?;
    let tidemark = Tidemark::start(&binary, &database_url, args.db_connections, dir.path())?;
    let max_concurrency = args.concurrency.iter().copied().max().unwrap_or(1) as u32;
    // Configured as tidemark's own pool is: no ping before each statement.
    let peer = PgPoolOptions::new()
        .max_connections(max_concurrency.min(args.db_connections))
        .test_before_acquire(false)
        .connect(&database_url)
        .await?;
    for statement in work::PEER_SCHEMA.split(';') {
        sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
            .execute(&peer)
            .await?;
    }
    let etcd = match etcd_binary(&args) {
        Some(path) => Some(Etcd::start(&path)?),
        None => {
            println!("etcd not found (scripts/bench.sh fetches it): the etcd peer is skipped");
            None
        }
    };

    let mut machine = BTreeMap::new();
    machine.insert(
        "cores".to_owned(),
        std::thread::available_parallelism()
            .map_or(0, std::num::NonZero::get)
            .to_string(),
    );
    let (version,): (String,) = sqlx::query_as("SELECT version()").fetch_one(&peer).await?;
    let (fsync,): (String,) = sqlx::query_as("SHOW fsync").fetch_one(&peer).await?;
    let (sync_commit,): (String,) = sqlx::query_as("SHOW synchronous_commit").fetch_one(&peer).await?;
    machine.insert("postgres".to_owned(), version);
    machine.insert("postgres_fsync".to_owned(), fsync);
    machine.insert("postgres_synchronous_commit".to_owned(), sync_commit);
    machine.insert("sqlite".to_owned(), "WAL, synchronous=FULL".to_owned());
    machine.insert("db_connections".to_owned(), args.db_connections.to_string());
    machine.insert("measure_seconds".to_owned(), duration.as_secs_f64().to_string());
    for (name, value) in &machine {
        println!("{name}: {value}");
    }

    let watched = Watched {
        tidemark: Some(tidemark.pid()),
        postgres: postgres_pid,
        etcd: None,
    };
    let mut bench = Bench {
        warmup,
        duration,
        database_url,
        tidemark,
        peer,
        etcd,
        watched,
        big_loaded: false,
        args,
    };
    let mut rows = Vec::new();
    let mut memory = None;
    let mut keeper = None;
    let scenarios = bench.args.scenarios.clone();
    let concurrency = bench.args.concurrency.clone();
    for scenario in scenarios {
        println!("{scenario:?}:");
        match scenario {
            Scenario::Commit => {
                for &c in &concurrency {
                    bench.commit(&mut rows, c).await?;
                }
            }
            Scenario::Recover => {
                for &c in &concurrency {
                    bench.recover(&mut rows, c).await?;
                }
            }
            Scenario::Churn => {
                for &c in &concurrency {
                    bench.churn(&mut rows, c).await?;
                }
            }
            Scenario::Fence => bench.fence(&mut rows).await?,
            Scenario::Sqlite => bench.sqlite(&mut rows, &binary).await?,
            Scenario::Memory => memory = Some(bench.memory().await?),
            Scenario::Keeper => {
                let figures = keeper::run(
                    &binary,
                    &bench.database_url,
                    bench
                        .args
                        .keeper_consumers
                        .unwrap_or(if bench.args.quick { 5_000 } else { 100_000 }),
                    bench.args.keeper_refresh,
                )
                .await?;
                keeper::print(&figures);
                keeper = Some(figures);
            }
        }
    }
    print_summary(&rows);
    let report = Report {
        machine,
        rows,
        memory,
        keeper,
    };
    if let Some(path) = &bench.args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("results written to {}", path.display());
    }
    bench.peer.close().await;
    drop(bench);
    drop(cluster);
    let failed: Vec<String> = report
        .rows
        .iter()
        .filter(|r| r.errors > 0 || r.ops == 0)
        .map(|r| format!("{:?}/{} x{}", r.scenario, r.system, r.concurrency))
        .collect();
    anyhow::ensure!(
        failed.is_empty(),
        "operations failed or none completed in: {}",
        failed.join(", ")
    );
    Ok(())
}
