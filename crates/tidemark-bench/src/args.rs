//! The bench's command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scenario {
    Commit,
    Recover,
    Churn,
    Burst,
    Fence,
    Sqlite,
    Memory,
    Keeper,
    History,
    Fleet,
}

#[derive(Debug, Parser)]
#[command(about = "tidemark against raw Postgres and etcd, side by side")]
pub(crate) struct Args {
    /// A few seconds a scenario: a smoke run.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Measured time per scenario and concurrency (default 10s; 2s quick).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Warm-up before measuring (default 2s; 500ms quick).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) warmup: Option<Duration>,
    /// Worker counts.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub(crate) concurrency: Vec<usize>,
    /// Scenarios to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "commit,recover,churn,burst,fence,sqlite,memory,keeper,history,fleet"
    )]
    pub(crate) scenarios: Vec<Scenario>,
    /// A Postgres to use (its CPU is not measured unless it is local and
    /// ours); default: a private durable cluster from the installed binaries.
    #[arg(long, env = "BENCH_DATABASE_URL")]
    pub(crate) database_url: Option<String>,
    /// Confine the bench's own Postgres (postmaster and every backend) to
    /// this many cores with a CPU cgroup, as a deployment's shared database
    /// is the bound resource; its CPU is then read from the cgroup's
    /// accounting. Needs a writable CPU cgroup (root here).
    #[arg(long, conflicts_with = "database_url")]
    pub(crate) db_cpu: Option<f64>,
    /// Connections each of tidemark and the raw-SQL peer may use.
    #[arg(long, default_value_t = 16)]
    pub(crate) db_connections: u32,
    /// Consumers on the branch for the fence and memory scenarios.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) fence_consumers: usize,
    /// Live leases for the memory scenario.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) live_leases: usize,
    /// Consumers on the registered table of the keeper scenario (default
    /// 100,000; 5,000 quick).
    #[arg(long)]
    pub(crate) keeper_consumers: Option<usize>,
    /// The keeper scenario's --mirror-refresh (files must stay younger than
    /// half of it).
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub(crate) keeper_refresh: Duration,
    /// Fleet sizes for the fleet scenario, smallest first; it stops at the
    /// first that is overloaded (errors, or a commit p99 past 200 ms) and
    /// reports the largest whose p99 stayed within 50 ms (default
    /// 2000,4000,6000,8000,10000,12000; 300 quick).
    #[arg(long, value_delimiter = ',')]
    pub(crate) fleet_sizes: Option<Vec<usize>>,
    /// Client connections the fleet shares (default 1000; 30 quick).
    #[arg(long)]
    pub(crate) fleet_connections: Option<usize>,
    /// How often each consumer of the fleet commits.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub(crate) fleet_commit_every: Duration,
    /// The fleet's lease TTL (renewed every third of it; default 30s, 6s quick).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) fleet_ttl: Option<Duration>,
    /// How long each fleet size is measured (default 20s; 2s quick).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) fleet_measure: Option<Duration>,
    /// Also measure commit points against tidemark as deployed
    /// (`tidemark-prod`): two replicas on the one Postgres, a bearer token
    /// on every call, the metrics exporter on and scraped every second.
    #[arg(long)]
    pub(crate) production: bool,
    /// The tidemark binary (default: next to this one).
    #[arg(long, env = "TIDEMARK_BIN")]
    pub(crate) tidemark_bin: Option<PathBuf>,
    /// The etcd binary (default: .tools/etcd/usr/bin/etcd, then PATH).
    #[arg(long, env = "ETCD_BIN")]
    pub(crate) etcd_bin: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}
