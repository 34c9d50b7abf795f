//! Fuzzes every request decoder and validator of tidemark through a real
//! `tidemark serve` process: mutated protobuf bytes (see [`wire`]) are sent
//! to every method, and every answer is checked:
//!
//! - no panic (the server log never says `panicked`) and no hang (each call
//!   has a deadline), and the server still answers at the end;
//! - no `INTERNAL`, `UNKNOWN`, `UNAVAILABLE` or `UNIMPLEMENTED` answer;
//! - every `INVALID_ARGUMENT` carries `ErrorInfo{reason INVALID_ARGUMENT,
//!   domain tidemark}`, every other refusal an ErrorInfo in domain
//!   tidemark, and no message leaks SQL.
//!
//! libFuzzer (cargo-fuzz) needs a nightly toolchain, which this machine
//! does not have; this harness needs none. Seeds: the committed corpus
//! under `fuzz/corpus/<Service>.<Method>/` plus live requests built at
//! start. A failing input is saved under `--artifacts` and replays with
//! `--replay FILE --method Service.Method`.
//!
//!   cargo run -p tidemark-fuzz -- --duration 10s     # a CI smoke run
//!   cargo run --release -p tidemark-fuzz -- --duration 30m --concurrency 8

#![allow(clippy::print_stdout)] // a report is the point

mod seeds;
mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use http::uri::PathAndQuery;
use serde::Serialize;
use tidemark_proto::v1 as pb;
use tidemark_testkit::process::{ServerProcess, resolve_tidemark_binary};
use tidemark_testkit::raw::RawCodec;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::wire::Rng;

#[derive(Debug, Parser)]
#[command(about = "Fuzzes tidemark's request decoders and validators through a real server")]
struct Args {
    /// How long to fuzz.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Concurrent callers.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// PRNG seed (default: from the clock; printed for replay).
    #[arg(long)]
    seed: Option<u64>,
    /// The committed seed corpus.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus"))]
    corpus: PathBuf,
    /// Where failing inputs are saved.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/fuzz-artifacts"))]
    artifacts: PathBuf,
    /// Rewrite the committed corpus from the built-in seeds, then exit.
    #[arg(long)]
    write_corpus: bool,
    /// Send one saved input (with --method) and print the answer.
    #[arg(long, requires = "method")]
    replay: Option<PathBuf>,
    /// The method of --replay, e.g. Coordinator.CommitBatch.
    #[arg(long)]
    method: Option<String>,
    /// The tidemark binary (default: next to this one, or TIDEMARK_BIN).
    #[arg(long)]
    tidemark_bin: Option<PathBuf>,
    /// Serve from this Postgres database (group commit on, admin SQL,
    /// Postgres' own limits on text) instead of a fresh SQLite file.
    #[arg(long)]
    database_url: Option<String>,
    /// Also write the results as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// How long one call may take before it counts as a hang.
const CALL_DEADLINE: Duration = Duration::from_secs(10);

/// Sends `bytes` to `path`.
async fn call(channel: &Channel, path: &'static str, bytes: Vec<u8>) -> Result<Vec<u8>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("channel not ready: {e}")))?;
    let mut request = tonic::Request::new(bytes);
    request.set_timeout(CALL_DEADLINE);
    let answer = tokio::time::timeout(
        CALL_DEADLINE + Duration::from_secs(1),
        grpc.unary(request, PathAndQuery::from_static(path), RawCodec),
    )
    .await
    .map_err(|_| Status::deadline_exceeded("no answer (client-side timeout)"))?;
    answer.map(tonic::Response::into_inner)
}

/// What an answer says about the server: fine, or a finding.
fn judge(answer: &Result<Vec<u8>, Status>) -> Result<String, String> {
    let status = match answer {
        Ok(_) => return Ok("OK".into()),
        Err(status) => status,
    };
    let code = status.code();
    let info = status.get_details_error_info();
    let label = format!("{code:?}/{}", info.as_ref().map_or("-", |i| i.reason.as_str()));
    let message = status.message();
    for leak in [
        "SELECT ",
        "INSERT ",
        "UPDATE ",
        "sqlx",
        "syntax error",
        "SQLSTATE",
        "panicked",
    ] {
        if message.contains(leak) {
            return Err(format!("{label}: message leaks {leak:?}: {message}"));
        }
    }
    match code {
        Code::Internal
        | Code::Unknown
        | Code::Unavailable
        | Code::Unimplemented
        | Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Unauthenticated => Err(format!("{label}: {message}")),
        _ => match info {
            None => Err(format!("{label}: no ErrorInfo: {message}")),
            Some(i) if i.domain != "tidemark" => Err(format!("{label}: domain {:?}: {message}", i.domain)),
            Some(i) if code == Code::InvalidArgument && i.reason != "INVALID_ARGUMENT" => {
                Err(format!("{label}: INVALID_ARGUMENT with reason {}: {message}", i.reason))
            }
            Some(_) => Ok(label),
        },
    }
}

#[derive(Debug, Default, Serialize)]
struct Report {
    seed: u64,
    seconds: f64,
    executions: u64,
    executions_per_second: f64,
    /// Per method: answers by code/reason.
    answers: BTreeMap<String, BTreeMap<String, u64>>,
    /// Inputs that broke a rule (saved under the artifacts directory).
    crashes: Vec<Finding>,
    server_panics: usize,
    server_alive: bool,
}

#[derive(Debug, Clone, Serialize)]
struct Finding {
    method: String,
    problem: String,
    artifact: String,
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn method_path(short: &str) -> anyhow::Result<&'static str> {
    seeds::METHODS
        .iter()
        .copied()
        .find(|m| seeds::short(m) == short)
        .with_context(|| format!("unknown method {short}; e.g. Coordinator.CommitBatch"))
}

/// The committed seeds of every method (files under `corpus/<method>/`).
fn load_corpus(corpus: &Path) -> anyhow::Result<BTreeMap<&'static str, Vec<Vec<u8>>>> {
    let mut loaded = BTreeMap::new();
    for method in seeds::METHODS {
        let dir = corpus.join(seeds::short(method));
        let mut files = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries {
                files.push(std::fs::read(entry?.path())?);
            }
        }
        loaded.insert(method, files);
    }
    Ok(loaded)
}

fn write_corpus(corpus: &Path) -> anyhow::Result<()> {
    // A lease id the server never granted: the committed seeds exercise the
    // "unknown lease" paths; live seeds built at start cover the rest.
    let unknown = ("0196a3b2-7c3d-7000-8000-000000000001".to_owned(), 1);
    let leases = seeds::Leases {
        committer: unknown.clone(),
        spare: unknown,
        batch: 5,
    };
    for method in seeds::METHODS {
        let dir = corpus.join(seeds::short(method));
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in seeds::seeds(method, &leases).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}.bin")), seed)?;
        }
    }
    println!(
        "wrote seeds for {} methods under {}",
        seeds::METHODS.len(),
        corpus.display()
    );
    Ok(())
}

fn fuzz_key(id: &str) -> Option<pb::ConsumerKey> {
    Some(pb::ConsumerKey {
        table: "db.fuzz".into(),
        branch: "main".into(),
        consumer_id: id.into(),
    })
}

/// Takes (or takes over) the lease of consumer `id` for holder "fuzz".
async fn lease(channel: &Channel, id: &str) -> anyhow::Result<(String, i64)> {
    let acquired = pb::coordinator_client::CoordinatorClient::new(channel.clone())
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: fuzz_key(id),
            holder: "fuzz".into(),
            ttl: Some(prost_types::Duration {
                seconds: 3600,
                nanos: 0,
            }),
        })
        .await?
        .into_inner();
    let lease = acquired.lease.context("no lease")?;
    Ok((lease.lease_id, lease.epoch))
}

/// The leases the live seeds use, with c1 committed once so commits and
/// recovery meet a real consumer.
async fn prepare(channel: &Channel) -> anyhow::Result<seeds::Leases> {
    let committer = lease(channel, "c1").await?;
    pb::coordinator_client::CoordinatorClient::new(channel.clone())
        .commit_batch(pb::CommitBatchRequest {
            lease_id: committer.0.clone(),
            epoch: committer.1,
            batch_id: 4,
            end: Some(pb::Offset {
                snapshot_id: 6,
                index: 2,
                scan_snapshot: false,
                total_splits: Some(3),
            }),
            latest_snapshot: Some(8),
        })
        .await?;
    Ok(seeds::Leases {
        committer,
        spare: lease(channel, "c2").await?,
        batch: 5,
    })
}

/// Keeps the seeds' leases held: mutated calls release, revoke and take
/// them over all the time, and seeds on lost leases only reach the
/// LEASE_NOT_HELD paths.
async fn keep_leases(channel: Channel, leases: Arc<std::sync::RwLock<seeds::Leases>>, deadline: Instant) {
    let mut coordinator = pb::coordinator_client::CoordinatorClient::new(channel.clone());
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let current = leases.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        for (id, (lease_id, epoch)) in [("c1", &current.committer), ("c2", &current.spare)] {
            let held = coordinator
                .renew_lease(pb::RenewLeaseRequest {
                    lease_id: lease_id.clone(),
                    epoch: *epoch,
                    ttl: None,
                })
                .await
                .is_ok();
            if !held && let Ok(fresh) = lease(&channel, id).await {
                let mut leases = leases.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                if id == "c1" {
                    leases.committer = fresh;
                } else {
                    leases.spare = fresh;
                }
            }
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.write_corpus {
        return write_corpus(&args.corpus);
    }
    let binary = resolve_tidemark_binary(args.tidemark_bin.as_deref())?;
    let dir = tempfile::tempdir()?;
    let server_args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--max-lease-ttl",
        "1h",
        "--log",
        "warn,tidemark=info",
    ]
    .map(String::from)
    .to_vec();
    let mut server_args = server_args;
    if let Some(url) = &args.database_url {
        server_args.extend(["--database-url".to_owned(), url.clone()]);
    }
    let mut server = ServerProcess::start(&binary, &server_args, dir.path(), "tidemark")
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let channel = Channel::from_shared(server.url())?.connect().await?;

    if let Some(file) = &args.replay {
        let path = method_path(args.method.as_deref().unwrap_or_default())?;
        let answer = call(&channel, path, std::fs::read(file)?).await;
        println!("{answer:?}\njudged: {:?}", judge(&answer));
        return Ok(());
    }

    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let leases = Arc::new(std::sync::RwLock::new(prepare(&channel).await?));
    let corpus = load_corpus(&args.corpus)?;
    let committed: usize = corpus.values().map(Vec::len).sum();
    if committed == 0 {
        bail!(
            "no seed corpus under {} (run with --write-corpus)",
            args.corpus.display()
        );
    }
    let corpus = Arc::new(corpus);
    let all_seeds: Arc<Vec<Vec<u8>>> = Arc::new(corpus.values().flatten().cloned().collect());
    println!(
        "fuzzing {} methods for {:?} with {} callers, seed {seed} ({committed} committed seeds)",
        seeds::METHODS.len(),
        args.duration,
        args.concurrency
    );

    let report = Arc::new(Mutex::new(Report {
        seed,
        ..Report::default()
    }));
    std::fs::create_dir_all(&args.artifacts)?;
    let started = Instant::now();
    let deadline = started + args.duration;
    let keeper = tokio::spawn(keep_leases(channel.clone(), Arc::clone(&leases), deadline));
    let batches = Arc::new(std::sync::atomic::AtomicI64::new(5));
    let mut tasks = Vec::new();
    for worker in 0..args.concurrency {
        let batches = Arc::clone(&batches);
        let (channel, corpus, all_seeds, report, leases) = (
            channel.clone(),
            Arc::clone(&corpus),
            Arc::clone(&all_seeds),
            Arc::clone(&report),
            Arc::clone(&leases),
        );
        let artifacts = args.artifacts.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            while Instant::now() < deadline {
                let method = *rng.pick(&seeds::METHODS);
                // Live seeds (on the leases held now) three times in four.
                let inputs = if rng.one_in(4) {
                    corpus[method].clone()
                } else {
                    let mut live = leases.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                    live.batch = batches.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
                    seeds::seeds(method, &live)
                };
                let input = if rng.one_in(20) {
                    // pure noise now and then
                    (0..rng.below(64)).map(|_| rng.next() as u8).collect()
                } else {
                    {
                        let chosen: &Vec<u8> = rng.pick(&inputs);
                        wire::mutate(chosen, &mut rng, &all_seeds)
                    }
                };
                let answer = call(&channel, method, input.clone()).await;
                let verdict = judge(&answer);
                let mut report = report.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                report.executions += 1;
                let label = match &verdict {
                    Ok(label) => label.clone(),
                    Err(problem) => {
                        let file = artifacts.join(format!("{}-{:016x}.bin", seeds::short(method), fnv(&input)));
                        let _ = std::fs::write(&file, &input);
                        eprintln!("FINDING {}: {problem} (input {})", seeds::short(method), file.display());
                        report.crashes.push(Finding {
                            method: seeds::short(method),
                            problem: problem.clone(),
                            artifact: file.display().to_string(),
                        });
                        "FINDING".into()
                    }
                };
                *report
                    .answers
                    .entry(seeds::short(method))
                    .or_default()
                    .entry(label)
                    .or_default() += 1;
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    keeper.await?;
    let elapsed = started.elapsed();

    // Still alive and answering?
    let alive = !server.exited()
        && pb::admin_client::AdminClient::new(channel.clone())
            .get_table_options(pb::GetTableOptionsRequest {
                table: "db.fuzz".into(),
            })
            .await
            .is_ok();
    let panics = server.log_lines().iter().filter(|l| l.contains("panicked")).count();
    let mut report = Arc::try_unwrap(report)
        .map_err(|_| anyhow::anyhow!("workers still hold the report"))?
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    report.seconds = elapsed.as_secs_f64();
    report.executions_per_second = report.executions as f64 / report.seconds;
    report.server_alive = alive;
    report.server_panics = panics;

    println!("method                              answers (code/reason: count)");
    for (method, answers) in &report.answers {
        let total: u64 = answers.values().sum();
        let parts: Vec<String> = answers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        println!("{method:<35} {total:>7}  {}", parts.join(", "));
    }
    println!(
        "store {}: executions {} in {:.1}s ({:.0}/s), seed {}; crashes {}, server panics {}, server alive {}",
        if args.database_url.is_some() {
            "postgres"
        } else {
            "sqlite"
        },
        report.executions,
        report.seconds,
        report.executions_per_second,
        report.seed,
        report.crashes.len(),
        report.server_panics,
        report.server_alive
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    drop(server);
    if !report.crashes.is_empty() || report.server_panics > 0 || !report.server_alive {
        bail!("the fuzzer found problems (inputs under {})", args.artifacts.display());
    }
    Ok(())
}
