//! The history checker. It starts a private durable Postgres, two
//! `tidemark serve` replicas on it behind loopback proxies, and simulated
//! workers as separate processes competing for a few consumers; injects
//! faults while they run (a worker SIGSTOPped past its ttl and resumed, a
//! replica SIGKILLed and restarted, Postgres crashed and restarted,
//! connections cut mid-RPC, latency); then reads back the server's own
//! history and checks everything recorded against the SPEC's invariants
//! (see `check.rs`). Exits non-zero on any violation.
//!
//!   cargo run -p tidemark-chaos                    # the CI run (~45 s)
//!   cargo run --release -p tidemark-chaos -- --soak   # 10 minutes, more workers
//!
//! With `--database-url` and `--cluster-control scripts/ha-cluster.sh` it
//! runs against a Patroni cluster instead, failing its primary over and
//! switching it over between the other faults (scripts/ha-chaos.sh).

#![allow(clippy::print_stdout)] // a report is the point

mod availability;
mod check;
mod cluster;
mod linearize;
mod proxy;
mod record;
mod worker;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_testkit::process::{ServerProcess, free_port, resolve_tidemark_binary, signal_pid};
use tidemark_testkit::{PgBouncer, PgCluster, PoolMode, StopMode};
use tonic::transport::Channel;

use crate::availability::ReadinessSample;
use crate::check::{Finals, History};
use crate::cluster::{Database, PrimaryChange};
use crate::proxy::Proxy;
use crate::record::{Fault, Record, now_us};
use crate::worker::{TABLE, WorkerArgs};

#[derive(Debug, Parser)]
#[command(about = "Checks tidemark's guarantees under faults from a recorded history")]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Internal: one simulated worker.
    Worker(WorkerArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// How long the workers run.
    #[arg(long, default_value = "40s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// A long run: 10 minutes (unless --duration says otherwise), 10 workers.
    #[arg(long)]
    soak: bool,
    /// Simulated workers (processes).
    #[arg(long)]
    workers: Option<u32>,
    /// Consumers they compete for.
    #[arg(long, default_value_t = 4)]
    keys: u32,
    /// Lease ttl the workers ask for.
    #[arg(long, default_value = "1500ms", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// Time between faults.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    fault_every: Duration,
    /// PRNG seed (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// The tidemark binary (default: next to this one, or TIDEMARK_BIN).
    #[arg(long)]
    tidemark_bin: Option<PathBuf>,
    /// Also write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Keep the recorded history here (default: a temporary directory).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// libfaketime's preload library (default: FAKETIME_LIB), which runs
    /// the second replica on a clock that jumps (scripts/test.sh fetches it).
    #[arg(long)]
    faketime_lib: Option<PathBuf>,
    /// Run without clock faults when libfaketime is missing (said at the
    /// start and in the report) instead of failing.
    #[arg(long)]
    no_clock_faults: bool,
    /// Only these fault kinds (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Run against this database instead of a private Postgres (its
    /// `db.chaos` consumers must not exist yet): say, the Patroni cluster
    /// behind HAProxy that scripts/ha-cluster.sh runs. The fault
    /// postgres-restart needs the private one.
    #[arg(long)]
    database_url: Option<String>,
    /// The cluster's control script (scripts/ha-cluster.sh): adds the
    /// fault kinds failover and switchover, every other fault.
    #[arg(long, requires = "database_url")]
    cluster_control: Option<PathBuf>,
    /// How far the database's clock may be from the workers' (default
    /// 5ms): more when a cluster member's clock is skewed, since a failover
    /// moves the database clock to it.
    #[arg(long, value_parser = humantime::parse_duration)]
    clock_slack: Option<Duration>,
    /// Search steps the linearizability check may take per key before it
    /// calls the key inconclusive (a wide --clock-slack needs more).
    #[arg(long, default_value_t = check::LINEARIZABILITY_BUDGET)]
    search_budget: u64,
    /// Put PgBouncer (PGBOUNCER, scripts/test.sh fetches it) in this pool
    /// mode between the replicas and the database: `session` or
    /// `transaction`. The replicas run with the same --db-pooler and
    /// migrate over a direct connection; the database proxy's faults cut
    /// and slow the replicas' connections to PgBouncer.
    #[arg(long, value_parser = ["session", "transaction"])]
    db_pooler: Option<String>,
}

/// The replicas' readiness interval, and how long a ping may take before
/// it counts as failed (the server's floor): together, how long a replica
/// may say SERVING after its database stopped answering.
const READINESS_INTERVAL: Duration = Duration::from_millis(250);
const READINESS_PING_LIMIT: Duration = Duration::from_millis(500);
/// How soon a broken readiness stream is opened again.
const READINESS_REWATCH_AFTER: Duration = Duration::from_millis(100);

/// A replica: its process, arguments (to restart it identically) and the
/// proxy in front of it.
struct Replica {
    name: String,
    process: Option<ServerProcess>,
    args: Vec<String>,
    /// Its environment (libfaketime's, for the replica whose clock jumps).
    env: Vec<(String, String)>,
    proxy: Proxy,
}

impl Replica {
    fn restart(&mut self, binary: &Path, dir: &Path) -> anyhow::Result<()> {
        self.process = Some(ServerProcess::start_with_env(
            binary, &self.args, &self.env, dir, &self.name,
        )?);
        Ok(())
    }
}

/// The file libfaketime reads the second replica's clock offset from.
fn clock_file(dir: &Path) -> PathBuf {
    dir.join("replica-1.clock")
}

/// Sets the second replica's clock offset (libfaketime's format: `+30`,
/// `-30`, seconds); libfaketime rereads it within a second.
fn set_replica_clock(dir: &Path, offset: &str) -> anyhow::Result<()> {
    std::fs::write(clock_file(dir), format!("{offset}\n"))?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cli.command {
        Some(Sub::Worker(args)) => runtime.block_on(worker::run(args)),
        None => runtime.block_on(orchestrate(cli.run)),
    }
}

async fn orchestrate(mut args: RunArgs) -> anyhow::Result<()> {
    if args.soak && args.duration == Duration::from_secs(40) {
        args.duration = Duration::from_secs(600);
    }
    let workers = args.workers.unwrap_or(if args.soak { 10 } else { 6 });
    let seed = args.seed.unwrap_or_else(|| now_us().unsigned_abs());
    let binary = resolve_tidemark_binary(args.tidemark_bin.as_deref())?;
    let temp = tempfile::tempdir()?;
    let dir = args.keep.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    println!(
        "history checker: {workers} workers on {} consumers, ttl {:?}, {:?}, a fault every {:?}, seed {seed}",
        args.keys, args.ttl, args.duration, args.fault_every
    );

    // The second replica runs on a clock that jumps (a host whose clock is
    // stepped): with Postgres, tidemark judges time by the database's
    // clock alone, so nothing may change. Monotonic time stays true, as an
    // NTP step leaves it.
    let faketime = args
        .faketime_lib
        .clone()
        .or_else(|| std::env::var_os("FAKETIME_LIB").map(PathBuf::from))
        .filter(|lib| lib.exists());
    let clock_env: Vec<(String, String)> = match &faketime {
        Some(lib) => {
            set_replica_clock(&dir, "+0")?;
            vec![
                ("LD_PRELOAD".into(), lib.display().to_string()),
                ("FAKETIME_TIMESTAMP_FILE".into(), clock_file(&dir).display().to_string()),
                ("FAKETIME_CACHE_DURATION".into(), "1".into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            ]
        }
        None if args.no_clock_faults => {
            println!("no libfaketime: the replicas' clocks do not jump in this run (--no-clock-faults)");
            Vec::new()
        }
        None => bail!(
            "libfaketime is needed to jump a replica's clock: set FAKETIME_LIB or --faketime-lib (scripts/test.sh \
             fetches it), or pass --no-clock-faults"
        ),
    };
    let mut postgres = match &args.database_url {
        Some(url) => Database::External {
            url: url.clone(),
            control: args.cluster_control.clone(),
        },
        None => Database::Private(PgCluster::start().context("no PostgreSQL binaries")?),
    };
    // The database-side mutant (see tidemark-core's mutant.rs): a server that
    // acknowledges commits before their WAL is flushed, so a crash loses
    // acknowledged commits. The checker must notice.
    if std::env::var("TIDEMARK_MUTANT").as_deref() == Ok("database_acks_before_flush") {
        let private = postgres
            .private()
            .context("mutant database_acks_before_flush needs the private Postgres")?;
        private.set("synchronous_commit", "off");
        println!("mutant database_acks_before_flush: Postgres runs with synchronous_commit=off");
    }
    // The replicas reach Postgres through a proxy too, so the connection
    // between them can be cut (a commit's answer lost on its way back from
    // the database) or slowed.
    let direct_url = postgres.url_through(postgres.address()?)?;
    let bouncer = args.db_pooler.as_deref().map(|mode| {
        let mode = match mode {
            "session" => PoolMode::Session,
            _ => PoolMode::Transaction,
        };
        println!(
            "the replicas reach the database through PgBouncer in {} mode",
            mode.as_str()
        );
        PgBouncer::start(mode, &direct_url)
    });
    let database = match &bouncer {
        Some(bouncer) => Proxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], bouncer.port()))).await?,
        None => Proxy::start(postgres.address()?).await?,
    };
    let database_url = postgres.url_through(database.addr)?;
    let mut replicas = Vec::new();
    let mut metrics_ports = Vec::new();
    for i in 0..2 {
        let port = free_port();
        let metrics_port = free_port();
        metrics_ports.push(metrics_port);
        let name = format!("replica-{i}");
        let server_args: Vec<String> = [
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            &database_url,
            "--metrics-listen",
            &format!("127.0.0.1:{metrics_port}"),
            "--wait-for-database",
            "60s",
            "--db-acquire-timeout",
            "1s",
            "--min-lease-ttl",
            "500ms",
            "--shutdown-drain",
            "0s",
            "--readiness-interval",
            &humantime::format_duration(READINESS_INTERVAL).to_string(),
            "--log",
            "warn,tidemark=info",
        ]
        .map(String::from)
        .to_vec();
        let mut server_args = server_args;
        if let Some(mode) = &args.db_pooler {
            server_args.extend(["--db-pooler".to_owned(), mode.clone()]);
            server_args.extend(["--migrate-database-url".to_owned(), direct_url.clone()]);
        }
        let env = if i == 1 { clock_env.clone() } else { Vec::new() };
        let process = ServerProcess::start_with_env(&binary, &server_args, &env, &dir, &name)?;
        let proxy = Proxy::start(process.addr).await?;
        replicas.push(Replica {
            name,
            process: Some(process),
            args: server_args,
            env,
            proxy,
        });
    }

    // Workers: separate processes, so a pause is a real SIGSTOP.
    let until = now_us() + i64::try_from(args.duration.as_micros()).unwrap_or(i64::MAX);
    let endpoints: Vec<String> = replicas.iter().map(|r| r.proxy.url()).collect();
    let shared: Vec<String> = (0..args.keys).map(|k| format!("k{k}")).collect();
    let keys: Vec<String> = shared.iter().cloned().chain((0..workers).map(own_key)).collect();
    let me = std::env::current_exe()?;
    let mut children: Vec<Child> = Vec::new();
    for id in 0..workers {
        children.push(
            Command::new(&me)
                .arg("worker")
                .args(["--id", &id.to_string()])
                .args(["--endpoints", &endpoints.join(",")])
                .args(["--keys", &shared.join(",")])
                .args(["--own-key", &own_key(id)])
                .args(["--ttl", &humantime::format_duration(args.ttl).to_string()])
                .args(["--until-us", &until.to_string()])
                .args(["--out", &dir.join(format!("worker-{id}.jsonl")).display().to_string()])
                .args(["--seed", &(seed ^ u64::from(id) << 32).to_string()])
                .stdin(Stdio::null())
                .spawn()?,
        );
    }

    // Group commit's counters, scraped from both replicas every second
    // (summed across their restarts).
    let batching = GroupCommitTally::default();
    let scraper = tokio::spawn(batching.clone().scrape(metrics_ports, until));
    let readiness = ReadinessLog::default();
    let watchers = readiness.watch(
        replicas
            .iter()
            .filter_map(|r| r.process.as_ref())
            .map(ServerProcess::url)
            .collect(),
    );
    let (faults, primary_changes) = inject_faults(
        &args,
        seed,
        until,
        &mut replicas,
        &mut postgres,
        &database,
        &children,
        &binary,
        &dir,
    )
    .await?;

    for mut child in children {
        // A worker stopped at the very end must not hang the run.
        signal_pid(child.id(), "CONT");
        let status = child.wait()?;
        if !status.success() {
            bail!("a worker failed: {status}");
        }
    }
    // Everything up again before reading the server's history back.
    if let Some(control) = postgres.control() {
        cluster::wait_healthy(control).await?;
    }
    for replica in &mut replicas {
        let down = replica.process.as_mut().is_none_or(ServerProcess::exited);
        if down {
            replica.restart(&binary, &dir)?;
        }
    }
    let records = read_records(&dir, workers)?;
    let url = replicas[0].process.as_ref().context("replica 0 is down")?.url();
    let (history, finals) = server_state(&url, &keys).await?;
    let panics: usize = replicas
        .iter()
        .filter_map(|r| r.process.as_ref())
        .map(|p| p.log_lines().iter().filter(|l| l.contains("panicked")).count())
        .sum();

    scraper.abort();
    watchers.iter().for_each(tokio::task::JoinHandle::abort);
    let settings = check::Settings {
        clock_slack_us: args
            .clock_slack
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
        search_budget: args.search_budget,
    };
    let mut report = check::check(&records, &faults, &history, &finals, &settings);
    report.group_commit = batching.totals();
    report.primary_changes = availability::outages(&primary_changes, &records, &readiness.samples());
    let detection_ms = (READINESS_INTERVAL + READINESS_PING_LIMIT).as_secs_f64() * 1000.0;
    for violation in availability::violations(&report.primary_changes, detection_ms) {
        report.violations.push(violation);
    }
    if panics > 0 {
        report.violations.push(format!("{panics} panics in the replicas' logs"));
    }
    print_report(&report, seed);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    if args.keep.is_some() {
        std::fs::write(dir.join("faults.json"), serde_json::to_vec_pretty(&faults)?)?;
        println!("history kept in {}", dir.display());
    }
    if !report.violations.is_empty() {
        bail!("{} invariant violations", report.violations.len());
    }
    if report.acknowledged_commits == 0 {
        bail!("no commit was acknowledged: the run checked nothing");
    }
    Ok(())
}

/// Group commit's counters over a run.
#[derive(Debug, Clone, Default)]
struct GroupCommitTally(std::sync::Arc<std::sync::Mutex<Tally>>);

#[derive(Debug, Default)]
struct Tally {
    /// Per replica: the counters last scraped.
    last: BTreeMap<u16, check::GroupCommit>,
    total: check::GroupCommit,
}

impl GroupCommitTally {
    async fn scrape(self, ports: Vec<u16>, until: i64) {
        loop {
            for &port in &ports {
                if let Some(now) = scrape_group_commit(port).await {
                    let mut tally = self.0.lock().expect("not poisoned");
                    let last = tally.last.get(&port).copied().unwrap_or_default();
                    // A counter that went down: the replica restarted.
                    let since = if now.statements < last.statements {
                        now
                    } else {
                        now.minus(last)
                    };
                    tally.total = tally.total.plus(since);
                    tally.last.insert(port, now);
                }
            }
            if now_us() > until {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn totals(&self) -> check::GroupCommit {
        self.0.lock().expect("not poisoned").total
    }
}

/// A replica's group-commit counters from its metrics endpoint.
async fn scrape_group_commit(port: u16) -> Option<check::GroupCommit> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::time::timeout(
        Duration::from_millis(500),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    .ok()?
    .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut body))
        .await
        .ok()?
        .ok()?;
    let value = |name: &str| {
        body.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    Some(check::GroupCommit {
        statements: value("tidemark_commit_statements_total"),
        writes: value("tidemark_commit_statement_writes_total"),
        alone: value("tidemark_commit_writes_alone_total"),
    })
}

/// The consumer only worker `id` uses.
fn own_key(id: u32) -> String {
    format!("own-w{id}")
}

/// Cycles through the fault kinds until `until`; returns what was done.
#[allow(clippy::too_many_arguments)]
async fn inject_faults(
    args: &RunArgs,
    seed: u64,
    until: i64,
    replicas: &mut [Replica],
    postgres: &mut Database,
    database: &Proxy,
    workers: &[Child],
    binary: &Path,
    dir: &Path,
) -> anyhow::Result<(Vec<Fault>, Vec<(String, PrimaryChange)>)> {
    const ALL: [&str; 12] = [
        "pause-worker",
        "kill-replica",
        "cut-connections",
        "postgres-restart",
        "slow-network",
        "cut-database-connections",
        "slow-database",
        "pause-replica",
        "pause-replica-and-cut-database",
        "jump-replica-clock",
        "failover",
        "switchover",
    ];
    const PRIMARY_CHANGES: [&str; 2] = ["failover", "switchover"];
    let clock_faults = !replicas[1].env.is_empty();
    let control = postgres.control().map(Path::to_path_buf);
    let private = postgres.private().is_some();
    let available = |k: &&str| match *k {
        "jump-replica-clock" => clock_faults,
        "postgres-restart" => private,
        "failover" | "switchover" => control.is_some(),
        _ => true,
    };
    if let Some(unknown) = args.faults.iter().find(|f| !ALL.contains(&f.as_str())) {
        bail!("unknown fault kind {unknown} (known: {})", ALL.join(", "));
    }
    if let Some(impossible) = args.faults.iter().map(String::as_str).find(|f| !available(f)) {
        bail!("fault kind {impossible} is not possible in this run (see --help)");
    }
    let chosen = |k: &&str| args.faults.is_empty() || args.faults.iter().any(|f| f == k);
    // With a cluster, every other fault changes its primary.
    let changes: Vec<&str> = PRIMARY_CHANGES.into_iter().filter(available).filter(chosen).collect();
    let kinds: Vec<&str> = ALL
        .into_iter()
        .filter(|k| !PRIMARY_CHANGES.contains(k))
        .filter(available)
        .filter(chosen)
        .collect();
    anyhow::ensure!(!kinds.is_empty() || !changes.is_empty(), "no fault kind left to inject");

    let mut faults = Vec::new();
    let mut primary_changes = Vec::new();
    let mut n = seed as usize;
    let mut changes_done = 0;
    // Let the workers get going first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    while now_us() + 4_000_000 < until {
        // A change of primary takes a while (a failover waits out Patroni's
        // ttl); start one only with time left to see the workers recover.
        let change_fits = now_us() + PRIMARY_CHANGE_ROOM_US < until;
        let kind = if !changes.is_empty() && change_fits && (kinds.is_empty() || faults.len() % 2 == 0) {
            changes_done += 1;
            changes[(changes_done - 1) % changes.len()]
        } else if kinds.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        } else {
            kinds[n % kinds.len()]
        };
        let t0 = now_us();
        let mut resumed = None;
        let target = match kind {
            "pause-worker" => {
                // Preferably one in the middle of streaming with a lease.
                let index = streaming_worker(dir, workers.len(), n).unwrap_or(n / kinds.len() % workers.len());
                let worker = &workers[index];
                signal_pid(worker.id(), "STOP");
                // Past its ttl: its lease expires and others may take it.
                tokio::time::sleep(args.ttl * 2 + Duration::from_millis(500)).await;
                // The fault ends when the worker may run again.
                resumed = Some(now_us());
                signal_pid(worker.id(), "CONT");
                format!("w{index}")
            }
            "kill-replica" => {
                let replica = &mut replicas[n / kinds.len() % 2];
                if let Some(mut process) = replica.process.take() {
                    process.kill();
                }
                tokio::time::sleep(Duration::from_millis(800)).await;
                replica.restart(binary, dir)?;
                replica.name.clone()
            }
            "cut-connections" => {
                cut_burst(|| replicas.iter().for_each(|r| r.proxy.cut())).await;
                "all".into()
            }
            "cut-database-connections" => {
                cut_burst(|| database.cut()).await;
                "postgres".into()
            }
            "slow-database" => {
                database.set_delay(Duration::from_millis(100));
                tokio::time::sleep(Duration::from_secs(2)).await;
                database.set_delay(Duration::ZERO);
                "postgres".into()
            }
            "jump-replica-clock" => {
                // Ahead (leases look expired to a replica that trusted its
                // own clock), then behind (they look live), then back.
                for offset in ["+30", "-30", "+0"] {
                    set_replica_clock(dir, offset)?;
                    tokio::time::sleep(Duration::from_millis(2_500)).await;
                }
                replicas[1].name.clone()
            }
            "pause-replica" | "pause-replica-and-cut-database" => {
                // SIGSTOPped with whatever it has in flight (a group-commit
                // statement queued or sent), resumed once the leases it was
                // serving have expired; optionally with the database's
                // connections cut meanwhile (two faults at once).
                let replica = &replicas[n / kinds.len() % 2];
                let pid = replica.process.as_ref().map(ServerProcess::pid);
                if let Some(pid) = pid {
                    signal_pid(pid, "STOP");
                }
                if kind == "pause-replica-and-cut-database" {
                    cut_burst(|| database.cut()).await;
                }
                tokio::time::sleep(args.ttl * 2 + Duration::from_millis(500)).await;
                if let Some(pid) = pid {
                    signal_pid(pid, "CONT");
                }
                replica.name.clone()
            }
            "postgres-restart" => {
                let private = postgres
                    .private()
                    .context("postgres-restart needs the private Postgres")?;
                private.stop(StopMode::Immediate);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                private.start_again();
                "postgres".into()
            }
            "failover" | "switchover" => {
                let control = control.as_deref().context("no cluster control script")?;
                let change = cluster::change_primary(control, kind).await?;
                println!(
                    "{kind} {}: routed to the new primary after {} ms",
                    change.members, change.routed_ms
                );
                let members = change.members.clone();
                primary_changes.push((kind.to_owned(), change));
                members
            }
            _ => {
                let replica = &replicas[n / kinds.len() % 2];
                replica.proxy.set_delay(Duration::from_millis(150));
                tokio::time::sleep(Duration::from_secs(2)).await;
                replica.proxy.set_delay(Duration::ZERO);
                replica.name.clone()
            }
        };
        faults.push(Fault {
            kind: kind.into(),
            target,
            t0,
            t1: resumed.unwrap_or_else(now_us),
        });
        n += 1;
        tokio::time::sleep(args.fault_every).await;
    }
    // Past the end of the run.
    while now_us() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((faults, primary_changes))
}

/// Room a change of primary needs before the end of the run (µs): a
/// failover waits out Patroni's 20 s ttl, then the workers recover.
const PRIMARY_CHANGE_ROOM_US: i64 = 35_000_000;

/// Every replica's readiness through the run, as the replicas push it:
/// one `Health/Watch` stream each (every change of status, however brief,
/// none missed between polls), reopened at once when it breaks (a killed
/// or restarting replica), which is recorded as "no answer".
#[derive(Debug, Clone, Default)]
struct ReadinessLog(std::sync::Arc<std::sync::Mutex<Vec<ReadinessSample>>>);

impl ReadinessLog {
    fn watch(&self, urls: Vec<String>) -> Vec<tokio::task::JoinHandle<()>> {
        urls.into_iter()
            .enumerate()
            .map(|(replica, url)| tokio::spawn(self.clone().watch_one(replica, url)))
            .collect()
    }

    async fn watch_one(self, replica: usize, url: String) {
        use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};
        loop {
            let stream = async {
                let channel = tonic::transport::Endpoint::from_shared(url.clone())?
                    .connect_timeout(Duration::from_secs(1))
                    .connect()
                    .await?;
                let request = HealthCheckRequest {
                    service: "readiness".into(),
                };
                anyhow::Ok(HealthClient::new(channel).watch(request).await?.into_inner())
            };
            if let Ok(mut stream) = stream.await {
                while let Ok(Some(answer)) = stream.message().await {
                    self.push(replica, Some(answer.status() == ServingStatus::Serving));
                }
            }
            self.push(replica, None);
            tokio::time::sleep(READINESS_REWATCH_AFTER).await;
        }
    }

    fn push(&self, replica: usize, serving: Option<bool>) {
        let sample = ReadinessSample {
            t: now_us(),
            replica,
            serving,
        };
        self.0.lock().expect("not poisoned").push(sample);
    }

    fn samples(&self) -> Vec<ReadinessSample> {
        self.0.lock().expect("not poisoned").clone()
    }
}

/// Cuts in a burst, so some land mid-call (mid-statement, mid-answer).
async fn cut_burst(cut: impl Fn()) {
    for _ in 0..8 {
        cut();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A worker whose latest record is an acknowledged commit (it holds a
/// lease right now), if any.
fn streaming_worker(dir: &Path, workers: usize, start: usize) -> Option<usize> {
    (0..workers).map(|i| (i + start) % workers).find(|id| {
        let text = std::fs::read_to_string(dir.join(format!("worker-{id}.jsonl"))).unwrap_or_default();
        text.lines()
            .last()
            .and_then(|line| serde_json::from_str::<Record>(line).ok())
            .is_some_and(|r| r.op == "commit" && r.ok())
    })
}

fn read_records(dir: &Path, workers: u32) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    for id in 0..workers {
        let path = dir.join(format!("worker-{id}.jsonl"));
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        for line in std::io::BufReader::new(file).lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            records.push(serde_json::from_str(&line).with_context(|| format!("{}: {line}", path.display()))?);
        }
    }
    Ok(records)
}

/// Every key's full history and final position, through the Admin API.
async fn server_state(url: &str, keys: &[String]) -> anyhow::Result<(History, Finals)> {
    let channel = Channel::from_shared(url.to_owned())?.connect().await?;
    let mut admin = AdminClient::new(channel);
    let mut history = BTreeMap::new();
    let mut finals = BTreeMap::new();
    for key in keys {
        let consumer = Some(pb::ConsumerKey {
            table: TABLE.into(),
            branch: "main".into(),
            consumer_id: key.clone(),
        });
        let mut rows = Vec::new();
        let mut token = String::new();
        loop {
            let page = admin
                .list_history(pb::ListHistoryRequest {
                    consumer: consumer.clone(),
                    page_size: 1000,
                    page_token: token.clone(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            rows.extend(page.entries);
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        history.insert(key.clone(), rows);
        let described = admin
            .describe_consumer(pb::DescribeConsumerRequest {
                consumer,
                ..Default::default()
            })
            .await;
        let position = described
            .ok()
            .and_then(|d| d.into_inner().info)
            .and_then(|i| i.consumer)
            .map(|c| c.next_snapshot);
        finals.insert(key.clone(), position);
    }
    Ok((history, finals))
}

fn print_report(report: &check::Report, seed: u64) {
    println!("operations checked: {}", report.operations_total);
    for (op, n) in &report.operations {
        println!("  {op:<45} {n:>7}");
    }
    println!("faults injected: {:?}", report.faults);
    println!("server history rows checked: {}", report.history_rows);
    println!(
        "acknowledged commits: {} (lost: {}); fenced commits refused: {}",
        report.acknowledged_commits, report.acknowledged_commits_lost, report.fenced_commits_refused
    );
    let mut learned = report.fenced_learned_ms.clone();
    learned.sort_by(f64::total_cmp);
    if !learned.is_empty() {
        println!(
            "a paused worker learned it lost its lease {:.1} ms after resuming (median of {}; max {:.1} ms)",
            learned[learned.len() / 2],
            learned.len(),
            learned[learned.len() - 1]
        );
    }
    let g = &report.group_commit;
    println!(
        "group commit: {} writes in {} statements (mean batch {:.2}); {} writes sent alone (row locked or batch \
         failed)",
        g.writes,
        g.statements,
        if g.statements > 0 {
            g.writes as f64 / g.statements as f64
        } else {
            0.0
        },
        g.alone
    );
    println!("what each check examined:");
    for (check, n) in &report.examined {
        println!("  {check:<70} {n:>8}");
    }
    let l = &report.linearizability;
    println!(
        "linearizability (per key, {} search steps each at most): {} keys checked, {} passed, {} failed, {} \
         inconclusive ({} steps)",
        l.budget_per_key, l.keys_checked, l.passed, l.failed, l.inconclusive, l.steps
    );
    if !report.primary_changes.is_empty() {
        print_primary_changes(&report.primary_changes);
    }
    println!("invariant violations: {}", report.violations.len());
    for (kind, n) in check::violation_kinds(&report.violations) {
        println!("  {n:>6} x {kind}");
    }
    for v in report.violations.iter().take(100) {
        println!("  VIOLATION {v}");
    }
    if report.violations.len() > 100 {
        println!(
            "  ... and {} more (all of them in --json)",
            report.violations.len() - 100
        );
    }
    println!("seed {seed}");
}

fn print_primary_changes(outages: &[availability::Outage]) {
    let failed: BTreeMap<&str, u64> =
        outages
            .iter()
            .flat_map(|o| &o.failed_calls)
            .fold(BTreeMap::new(), |mut sum, (code, n)| {
                *sum.entry(code.as_str()).or_default() += n;
                sum
            });
    println!(
        "primary changes: {} ({} failovers, {} switchovers); calls failed meanwhile: {failed:?}",
        outages.len(),
        outages.iter().filter(|o| o.kind == "failover").count(),
        outages.iter().filter(|o| o.kind == "switchover").count(),
    );
    for kind in ["failover", "switchover"] {
        if let Some((median, max, n)) = availability::spread(outages, kind) {
            println!("  {kind}: no commit acknowledged for {median:.0} ms (median of {n}; max {max:.0} ms)");
        }
    }
    let span = |range: Option<(f64, f64)>| range.map_or("none".to_owned(), |(a, b)| format!("+{a:.0}..+{b:.0} ms"));
    for o in outages {
        println!(
            "  {:<10} {:<12} routed after {:>6} ms, no commit acknowledged for {:>8} ms, NOT_SERVING seen: {}",
            o.kind,
            o.members,
            o.routed_ms,
            o.unavailable_ms.map_or("ever".to_owned(), |ms| format!("{ms:.0}")),
            o.not_ready_seen
        );
        let readiness: Vec<String> = o
            .readiness_ms
            .iter()
            .map(|(serving, not_serving, unanswered)| format!("{serving:.0}/{not_serving:.0}/{unanswered:.0}"))
            .collect();
        println!(
            "  {:<23} silence {}; readiness meanwhile, ms SERVING/NOT_SERVING/unanswered: {}",
            "",
            span(o.silence_ms),
            readiness.join(", ")
        );
    }
}
