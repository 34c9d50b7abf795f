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
//! - **keeper**: what keeping 100k Paimon consumer files alive costs;
//! - **fleet**: 10,000 consumers and more, each with a live lease renewed
//!   every third of its TTL and a commit every couple of seconds, over
//!   1,000 connections: CPU per 1,000 consumers, p99, memory, and the
//!   largest fleet one replica sustains.
//!
//! Run with `scripts/bench.sh` (builds in release mode, fetches etcd);
//! `--quick` for a smoke run, `--json FILE` for machine-readable results.

#![allow(clippy::print_stdout)] // a report is the point

mod args;
mod cgroup;
mod etcd;
mod fleet;
mod history;
mod keeper;
mod procs;
mod report;
mod scenarios;
mod work;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use sqlx::postgres::PgPoolOptions;

use crate::args::{Args, Scenario};
use crate::procs::{Etcd, Tidemark, Watched};
use crate::report::{Report, print_summary};
use crate::scenarios::Bench;

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

    // Made before Postgres starts, so a machine without a writable CPU
    // cgroup fails at once.
    let db_cpu = args.db_cpu.map(cgroup::CpuLimit::create).transpose()?;
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
    if let Some(limit) = &db_cpu {
        let pid = postgres_pid.context("--db-cpu: the bench's Postgres has no postmaster.pid")?;
        let moved = limit.add_tree(pid, || procs::children(pid))?;
        println!("postgres confined to {} ({moved} processes moved in)", limit.describe());
    }
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
    machine.insert(
        "postgres_cpu_limit".to_owned(),
        db_cpu.as_ref().map_or_else(
            || "none (shares the machine's cores)".to_owned(),
            |l| l.describe().to_owned(),
        ),
    );
    if let Some(limit) = &db_cpu {
        machine.insert("postgres_cpu_limit_cores".to_owned(), limit.cores().to_string());
    }
    // The servers inherit the bench's environment: an A/B run of a setting
    // (`TIDEMARK_DB_GROUP_COMMIT_WAIT=1ms`, say) is recorded with its figures.
    let settings: Vec<String> = std::env::vars()
        .filter(|(name, _)| name.starts_with("TIDEMARK_") && !name.contains("URL") && !name.contains("TOKEN"))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    machine.insert(
        "tidemark_env".to_owned(),
        if settings.is_empty() {
            "(defaults)".to_owned()
        } else {
            settings.join(" ")
        },
    );
    for (name, value) in &machine {
        println!("{name}: {value}");
    }

    let watched = Watched {
        tidemark: Some(tidemark.pid()),
        tidemark_replica: None,
        postgres: postgres_pid,
        postgres_cgroup: db_cpu.as_ref().map(cgroup::CpuLimit::usage),
        etcd: None,
        wal: Some(peer.clone()),
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
        production: None,
        args,
    };
    if bench.args.production {
        bench.production = Some(scenarios::Production::start(
            &binary,
            &bench.database_url,
            bench.args.db_connections,
        )?);
    }
    let mut rows = Vec::new();
    let mut memory = None;
    let mut keeper = None;
    let mut history = None;
    let mut fleet = None;
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
            Scenario::Burst => {
                for &c in &concurrency {
                    bench.burst(&mut rows, c).await?;
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
            Scenario::History => {
                let figures = history::run(&binary, &bench.database_url, bench.args.quick).await?;
                history::print(&figures);
                history = Some(figures);
            }
            Scenario::Fleet => {
                let quick = bench.args.quick;
                let plan = fleet::FleetPlan {
                    sizes: bench.args.fleet_sizes.clone().unwrap_or_else(|| {
                        if quick {
                            vec![300]
                        } else {
                            vec![2_000, 4_000, 6_000, 8_000, 10_000, 12_000]
                        }
                    }),
                    connections: bench.args.fleet_connections.unwrap_or(if quick { 30 } else { 1000 }),
                    commit_every: bench.args.fleet_commit_every,
                    ttl: bench
                        .args
                        .fleet_ttl
                        .unwrap_or(Duration::from_secs(if quick { 6 } else { 30 })),
                    measure: bench
                        .args
                        .fleet_measure
                        .unwrap_or(Duration::from_secs(if quick { 2 } else { 20 })),
                    p99_bound: Duration::from_millis(50),
                };
                let figures = fleet::run(
                    &binary,
                    &bench.database_url,
                    &bench.watched,
                    bench.args.db_connections,
                    &plan,
                )
                .await?;
                fleet = Some(figures);
            }
        }
    }
    print_summary(&rows);
    let report = Report {
        machine,
        rows,
        memory,
        keeper,
        history,
        fleet,
    };
    if let Some(path) = &bench.args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("results written to {}", path.display());
    }
    bench.peer.close().await;
    drop(bench);
    drop(cluster);
    drop(db_cpu);
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
    // The fleet's first size must run clean; a larger one may fail (that is
    // where the search stops).
    if let Some(first) = report.fleet.as_ref().and_then(|f| f.steps.first()) {
        anyhow::ensure!(
            first.errors == 0 && first.commits_per_second > 0.0,
            "the fleet of {} failed: {} errors, first: {:?}",
            first.consumers,
            first.errors,
            first.first_error
        );
    }
    Ok(())
}
