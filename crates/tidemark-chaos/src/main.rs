//! The history checker. It starts a private durable Postgres, two
//! `tidemark serve` replicas on it behind loopback proxies, and simulated
//! workers as separate processes competing for a few consumers; injects
//! faults while they run (a worker SIGSTOPped past its ttl and resumed, a
//! replica SIGKILLed and restarted, Postgres crashed and restarted,
//! connections cut mid-RPC, latency); then reads back the server's own
//! history and checks everything recorded against the SPEC's invariants
//! (see `check/mod.rs`). Exits non-zero on any violation.
//!
//!   cargo run -p tidemark-chaos                    # the CI run (~45 s)
//!   cargo run --release -p tidemark-chaos -- --soak   # 10 minutes, more workers
//!
//! With `--database-url` and `--cluster-control scripts/ha-cluster.sh` it
//! runs against a Patroni cluster instead, failing its primary over and
//! switching it over between the other faults (scripts/ha-chaos.sh).

#![allow(clippy::print_stdout)] // a report is the point

mod args;
mod availability;
mod check;
mod cluster;
mod faults;
mod linearize;
mod proxy;
mod readiness;
mod record;
mod replica;
mod report;
mod rollout;
mod tally;
mod worker;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_testkit::process::{ServerProcess, free_port, resolve_tidemark_binary, signal_pid};
use tidemark_testkit::{PgBouncer, PgCluster, PoolMode};
use tonic::transport::Channel;

use crate::args::{Cli, RunArgs, Sub};
use crate::check::{Finals, History};
use crate::cluster::Database;
use crate::faults::inject_faults;
use crate::proxy::Proxy;
use crate::readiness::{READINESS_INTERVAL, READINESS_PING_LIMIT, ReadinessLog};
use crate::record::{Record, now_us};
use crate::replica::{Replica, clock_file, set_replica_clock};
use crate::report::print_report;
use crate::tally::GroupCommitTally;
use crate::worker::TABLE;

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
    // A rollout: the previous release first, this build replacing it.
    let rollout = match &args.previous_bin {
        Some(previous) => Some(rollout::Builds {
            previous: std::fs::canonicalize(previous)
                .with_context(|| format!("the previous release's binary {}", previous.display()))?,
            current: binary.clone(),
        }),
        None => None,
    };
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
        .filter(|_| rollout.is_none())
        .or_else(|| {
            std::env::var_os("FAKETIME_LIB")
                .map(PathBuf::from)
                .filter(|_| rollout.is_none())
        })
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
        None if rollout.is_some() => {
            println!(
                "a rollout of {} over {}: {} rollouts, each followed by a rollback",
                binary.display(),
                args.previous_bin.as_deref().unwrap_or(Path::new("?")).display(),
                args.rollouts
            );
            Vec::new()
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
    let mut replica_urls = Vec::new();
    let slots = if rollout.is_some() { 3 } else { 2 };
    for i in 0..slots {
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
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        replica_urls.push(format!("http://{address}"));
        let process = match &rollout {
            // A rollout's replicas drain as a pod's do: not ready, then the
            // calls in flight finish. Its third slot starts empty.
            Some(builds) => {
                if let Some(at) = server_args.iter().position(|a| a == "--shutdown-drain") {
                    server_args[at + 1] = "1s".into();
                }
                (i < 2)
                    .then(|| ServerProcess::start(&builds.previous, &server_args, &dir, &format!("{name}/previous")))
                    .transpose()?
            }
            None => Some(ServerProcess::start_with_env(&binary, &server_args, &env, &dir, &name)?),
        };
        // A slot without a replica refuses connections, as a Service with
        // no ready endpoint does.
        let proxy = Proxy::start_as(address, process.is_some()).await?;
        replicas.push(Replica {
            name,
            process,
            args: server_args,
            env,
            proxy,
        });
    }

    // Workers: separate processes, so a pause is a real SIGSTOP.
    // A rollout's workers stop when it ends (its length is not known).
    let run_for = if rollout.is_some() {
        Duration::from_secs(24 * 3600)
    } else {
        args.duration
    };
    let until = now_us() + i64::try_from(run_for.as_micros()).unwrap_or(i64::MAX);
    let stop_file = dir.join("workers.stop");
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
                .args(["--stop-file", &stop_file.display().to_string()])
                .stdin(Stdio::null())
                .spawn()?,
        );
    }

    // Group commit's counters, scraped from both replicas every second
    // (summed across their restarts).
    let batching = GroupCommitTally::default();
    let scraper = tokio::spawn(batching.clone().scrape(metrics_ports, until));
    let readiness = ReadinessLog::default();
    // A rollout probes as Kubernetes does (Check, in its steps): a Watch
    // stream is a call in flight, which the previous release let hold a
    // drained replica until its grace ran out.
    let watchers = readiness.watch(if rollout.is_some() { Vec::new() } else { replica_urls });
    let (faults, primary_changes, rolled) = match &rollout {
        Some(builds) => {
            let (faults, log) = rollout::run(
                &args,
                seed,
                &mut replicas,
                builds,
                &mut postgres,
                &database,
                &children,
                &dir,
            )
            .await?;
            std::fs::write(&stop_file, b"")?;
            (faults, Vec::new(), Some(log))
        }
        None => {
            let (faults, changes) = inject_faults(
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
            (faults, changes, None)
        }
    };

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
    for replica in replicas.iter_mut().filter(|_| rollout.is_none()) {
        let down = replica.process.as_mut().is_none_or(ServerProcess::exited);
        if down {
            replica.restart(&binary, &dir)?;
        }
    }
    let records = read_records(&dir, workers)?;
    let url = replicas
        .iter()
        .find_map(|r| r.process.as_ref())
        .context("every replica is down")?
        .url();
    // A server that cannot answer for its state is a finding, reported with
    // the rest (every acknowledged commit then counts as lost).
    let (history, finals, unreadable) = match server_state(&url, &keys).await {
        Ok((history, finals)) => (history, finals, None),
        Err(e) => (
            History::new(),
            Finals::new(),
            Some(format!("the final state could not be read: {e:#}")),
        ),
    };
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
    report.violations.extend(unreadable);
    if let Some(log) = &rolled {
        let (by_code, unexpected) = rollout::worker_errors(&records, &faults);
        report::print_rollout(log, &by_code);
        report.violations.extend(unexpected);
        report.violations.extend(log.problems.iter().cloned());
        report.rollout = Some(log.clone());
        report.worker_errors = by_code;
        if log.rollouts < args.rollouts || log.rollbacks < args.rollouts {
            report.violations.push(format!(
                "{} rollouts and {} rollbacks of {} each",
                log.rollouts, log.rollbacks, args.rollouts
            ));
        }
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

/// The consumer only worker `id` uses.
fn own_key(id: u32) -> String {
    format!("own-w{id}")
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

/// A read of the final state, retried while tidemark answers UNAVAILABLE
/// (as every client does: a fault just before the run ended, such as a
/// database restart behind PgBouncer, leaves pooled connections that fail
/// their first use retryably), for up to about ten seconds.
async fn read_retrying<T, F, Fut>(mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let mut waited = Duration::ZERO;
    loop {
        match call().await {
            Err(status) if status.code() == tonic::Code::Unavailable && waited < Duration::from_secs(10) => {
                let pause = Duration::from_millis(250);
                tokio::time::sleep(pause).await;
                waited += pause;
            }
            answer => return answer,
        }
    }
}

/// Every key's full history and final position, through the Admin API.
async fn server_state(url: &str, keys: &[String]) -> anyhow::Result<(History, Finals)> {
    let channel = Channel::from_shared(url.to_owned())?.connect().await?;
    let admin = AdminClient::new(channel);
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
            let request = pb::ListHistoryRequest {
                consumer: consumer.clone(),
                page_size: 1000,
                page_token: token.clone(),
                ..Default::default()
            };
            let page = read_retrying(|| {
                let mut admin = admin.clone();
                let request = request.clone();
                async move { admin.list_history(request).await }
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
        let described = read_retrying(|| {
            let mut admin = admin.clone();
            let request = pb::DescribeConsumerRequest {
                consumer: consumer.clone(),
                ..Default::default()
            };
            async move { admin.describe_consumer(request).await }
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
