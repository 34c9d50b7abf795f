//! The checker's command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::check;
use crate::worker::WorkerArgs;

#[derive(Debug, Parser)]
#[command(about = "Checks tidemark's guarantees under faults from a recorded history")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Sub>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Sub {
    /// Internal: one simulated worker.
    Worker(WorkerArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// How long the workers run.
    #[arg(long, default_value = "40s", value_parser = humantime::parse_duration)]
    pub(crate) duration: Duration,
    /// A long run: 10 minutes (unless --duration says otherwise), 10 workers.
    #[arg(long)]
    pub(crate) soak: bool,
    /// Simulated workers (processes).
    #[arg(long)]
    pub(crate) workers: Option<u32>,
    /// Consumers they compete for.
    #[arg(long, default_value_t = 4)]
    pub(crate) keys: u32,
    /// Lease ttl the workers ask for.
    #[arg(long, default_value = "1500ms", value_parser = humantime::parse_duration)]
    pub(crate) ttl: Duration,
    /// Time between faults.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub(crate) fault_every: Duration,
    /// PRNG seed (default: from the clock).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// The tidemark binary (default: next to this one, or TIDEMARK_BIN).
    #[arg(long)]
    pub(crate) tidemark_bin: Option<PathBuf>,
    /// Also write the report as JSON.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Keep the recorded history here (default: a temporary directory).
    #[arg(long)]
    pub(crate) keep: Option<PathBuf>,
    /// libfaketime's preload library (default: FAKETIME_LIB), which runs
    /// the second replica on a clock that jumps (scripts/test.sh fetches it).
    #[arg(long)]
    pub(crate) faketime_lib: Option<PathBuf>,
    /// Run without clock faults when libfaketime is missing (said at the
    /// start and in the report) instead of failing.
    #[arg(long)]
    pub(crate) no_clock_faults: bool,
    /// Only these fault kinds (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    pub(crate) faults: Vec<String>,
    /// Run against this database instead of a private Postgres (its
    /// `db.chaos` consumers must not exist yet): say, the Patroni cluster
    /// behind HAProxy that scripts/ha-cluster.sh runs. The fault
    /// postgres-restart needs the private one.
    #[arg(long)]
    pub(crate) database_url: Option<String>,
    /// The cluster's control script (scripts/ha-cluster.sh): adds the
    /// fault kinds failover and switchover, every other fault.
    #[arg(long, requires = "database_url")]
    pub(crate) cluster_control: Option<PathBuf>,
    /// How far the database's clock may be from the workers' (default
    /// 5ms): more when a cluster member's clock is skewed, since a failover
    /// moves the database clock to it.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) clock_slack: Option<Duration>,
    /// Search steps the linearizability check may take per key before it
    /// calls the key inconclusive (a wide --clock-slack needs more).
    #[arg(long, default_value_t = check::LINEARIZABILITY_BUDGET)]
    pub(crate) search_budget: u64,
    /// Put PgBouncer (PGBOUNCER, scripts/test.sh fetches it) in this pool
    /// mode between the replicas and the database: `session` or
    /// `transaction`. The replicas run with the same --db-pooler and
    /// migrate over a direct connection; the database proxy's faults cut
    /// and slow the replicas' connections to PgBouncer.
    #[arg(long, value_parser = ["session", "transaction"])]
    pub(crate) db_pooler: Option<String>,
    /// Run rollouts (scripts/rollout.sh): this previous release's binary
    /// serves first, on two replicas; the current one (--tidemark-bin)
    /// replaces them one by one, migrating first, then a rollback brings
    /// the previous one back on the migrated schema. Faults that touch no
    /// replica's process are injected during every step; the run lasts as
    /// long as the rollouts take (--duration does not apply).
    #[arg(long)]
    pub(crate) previous_bin: Option<PathBuf>,
    /// With --previous-bin: rollouts, each followed by a rollback.
    #[arg(long, default_value_t = 1)]
    pub(crate) rollouts: u32,
    /// Proof that a rollout catches a contract step (scripts/rollout.sh
    /// --prove): this SQL runs on the private Postgres once the current
    /// build first served, as a migration that contracts what the previous
    /// release reads would; the run must then fail.
    #[arg(long, requires = "previous_bin")]
    pub(crate) contract_sql: Option<String>,
}
