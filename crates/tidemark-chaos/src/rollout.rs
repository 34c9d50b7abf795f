//! Rollouts and rollbacks (scripts/rollout.sh), as a Kubernetes Deployment
//! with two replicas, a surge of one and none unavailable makes them: of
//! three replica slots (fixed ports, each behind its proxy; the workers
//! call all three), two run one build and one is empty. A step starts the
//! other build in the empty slot and waits until it is ready (the first
//! start of the current build migrates the schema), or drains a replica of
//! the old build (SIGTERM: not ready, then in-flight calls finish) and
//! waits for it to exit. A rollout replaces the previous release's two
//! replicas this way; a rollback the current build's. One fault that
//! touches no replica's process runs alongside every step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use tidemark_testkit::process::ServerProcess;

use crate::args::RunArgs;
use crate::cluster::Database;
use crate::faults::common_fault;
use crate::proxy::Proxy;
use crate::record::{Fault, Record, RolloutLog, now_us};
use crate::replica::Replica;

/// The faults a rollout injects, in turn, one per step.
const FAULTS: [&str; 6] = [
    "cut-connections",
    "postgres-restart",
    "slow-database",
    "cut-database-connections",
    "pause-worker",
    "slow-network",
];

/// How long a starting replica may take to be ready (migrations included),
/// and a drained one to exit.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// Which build a slot runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Build {
    Previous,
    Current,
}

/// The two binaries.
#[derive(Debug, Clone)]
pub(crate) struct Builds {
    pub(crate) previous: PathBuf,
    pub(crate) current: PathBuf,
}

impl Builds {
    fn path(&self, build: Build) -> &Path {
        match build {
            Build::Previous => &self.previous,
            Build::Current => &self.current,
        }
    }
}

/// The rollout run: `rollouts` rollouts, each followed by a rollback, over
/// `replicas` (slots 0 and 1 run the previous release at the start, slot 2
/// is empty). Returns the faults injected and what was done.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    args: &RunArgs,
    seed: u64,
    replicas: &mut [Replica],
    builds: &Builds,
    postgres: &mut Database,
    database: &Proxy,
    workers: &[Child],
    dir: &Path,
) -> anyhow::Result<(Vec<Fault>, RolloutLog)> {
    anyhow::ensure!(replicas.len() == 3, "a rollout runs three replica slots");
    let mut running = [Some(Build::Previous), Some(Build::Previous), None];
    let mut faults = Vec::new();
    let mut log = RolloutLog::default();
    let mut n = seed as usize;
    let mut contract = args.contract_sql.as_deref();
    // Let the workers get going first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for round in 1..=args.rollouts {
        for (from, to) in [(Build::Previous, Build::Current), (Build::Current, Build::Previous)] {
            let olds: Vec<usize> = (0..3).filter(|&s| running[s] == Some(from)).collect();
            for old in olds {
                let empty = (0..3).find(|&s| running[s].is_none()).context("no empty slot")?;
                for step in [Step::Start(empty, to), Step::Drain(old)] {
                    let kind = FAULTS[n % FAULTS.len()];
                    n += 1;
                    let t0 = now_us();
                    let server_args = replicas[step.slot()].args.clone();
                    let (done, fault) = {
                        let (processes, proxies): (Vec<&mut Option<ServerProcess>>, Vec<&Proxy>) =
                            replicas.iter_mut().map(|r| (&mut r.process, &r.proxy)).unzip();
                        let mut processes = processes;
                        let slot = step.slot();
                        let launch = Launch {
                            label: format!("replica-{slot}/{}", label(to)),
                            binary: builds.path(to).to_path_buf(),
                            args: server_args,
                        };
                        tokio::join!(
                            step.run(&mut *processes[slot], proxies[slot], launch, dir, &mut log),
                            common_fault(kind, n, args, &proxies, database, postgres, workers, dir)
                        )
                    };
                    done.with_context(|| format!("round {round}: {step:?}"))?;
                    // The step itself, as an event the checks can line
                    // calls up with.
                    faults.push(Fault {
                        kind: step.kind().into(),
                        target: format!("replica-{}", step.slot()),
                        t0,
                        t1: now_us(),
                    });
                    let (target, resumed) = fault?.context("a rollout fault touched a replica")?;
                    faults.push(Fault {
                        kind: kind.into(),
                        target,
                        t0,
                        t1: resumed.unwrap_or_else(now_us),
                    });
                    if let (Step::Start(_, Build::Current), Some(sql)) = (step, contract.take()) {
                        postgres
                            .private()
                            .context("--contract-sql needs the private Postgres")?
                            .sql(sql);
                        println!("a contract step, as a migration would make it: {sql}");
                    }
                    running[step.slot()] = match step {
                        Step::Start(_, build) => Some(build),
                        Step::Drain(_) => None,
                    };
                    tokio::time::sleep(args.fault_every).await;
                }
            }
            match to {
                Build::Current => log.rollouts += 1,
                Build::Previous => log.rollbacks += 1,
            }
            println!(
                "round {round}: {} done ({} rollouts, {} rollbacks so far)",
                if to == Build::Current { "rollout" } else { "rollback" },
                log.rollouts,
                log.rollbacks
            );
        }
    }
    Ok((faults, log))
}

fn label(build: Build) -> &'static str {
    match build {
        Build::Previous => "previous",
        Build::Current => "current",
    }
}

/// What a start step runs: the build, its arguments (the slot's), its log
/// label.
struct Launch {
    label: String,
    binary: PathBuf,
    args: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// Start this build in this (empty) slot and wait until it is ready.
    Start(usize, Build),
    /// Drain the replica in this slot and wait for it to exit.
    Drain(usize),
}

impl Step {
    fn kind(self) -> &'static str {
        match self {
            Step::Start(..) => "start",
            Step::Drain(_) => "drain",
        }
    }

    fn slot(self) -> usize {
        match self {
            Step::Start(slot, _) | Step::Drain(slot) => slot,
        }
    }

    async fn run(
        self,
        process: &mut Option<ServerProcess>,
        endpoint: &Proxy,
        Launch { label, binary, args }: Launch,
        dir: &Path,
        log: &mut RolloutLog,
    ) -> anyhow::Result<()> {
        match self {
            Step::Start(slot, build) => {
                anyhow::ensure!(process.is_none(), "slot {slot} is not empty");
                let started = Instant::now();
                let dir = dir.to_path_buf();
                let label_for_start = label.clone();
                let spawned = tokio::task::spawn_blocking(move || {
                    ServerProcess::start_with_env(&binary, &args, &[], &dir, &label_for_start)
                })
                .await??;
                wait_ready(&spawned.url())
                    .await
                    .with_context(|| format!("{label} never became ready"))?;
                // Ready: the Service sends it new connections.
                endpoint.set_open(true);
                log.ready_ms
                    .entry(self::label(build).to_owned())
                    .or_default()
                    .push(started.elapsed().as_secs_f64() * 1000.0);
                *process = Some(spawned);
            }
            Step::Drain(slot) => {
                let mut drained = process.take().with_context(|| format!("slot {slot} is empty"))?;
                let started = Instant::now();
                // Terminating: out of the Service's endpoints (new
                // connections go elsewhere) while it drains.
                endpoint.set_open(false);
                drained.signal("TERM");
                let status = loop {
                    if let Some(status) = drained.exit_status() {
                        break status;
                    }
                    if started.elapsed() > STEP_LIMIT {
                        bail!("replica {slot} did not exit within {STEP_LIMIT:?} of SIGTERM");
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                log.drain_ms.push(started.elapsed().as_secs_f64() * 1000.0);
                if !status.success() {
                    log.problems
                        .push(format!("replica {slot} exited {status} after SIGTERM"));
                }
                let panics = drained.log_lines().iter().filter(|l| l.contains("panicked")).count();
                if panics > 0 {
                    log.problems.push(format!("{panics} panics in replica {slot}'s log"));
                }
            }
        }
        Ok(())
    }
}

/// Waits until the replica at `url` says SERVING on its readiness service.
async fn wait_ready(url: &str) -> anyhow::Result<()> {
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};
    let started = Instant::now();
    while started.elapsed() < STEP_LIMIT {
        let asked = async {
            let channel = tonic::transport::Endpoint::from_shared(url.to_owned())?
                .connect_timeout(Duration::from_secs(1))
                .timeout(Duration::from_secs(2))
                .connect()
                .await?;
            let request = HealthCheckRequest {
                service: "readiness".into(),
            };
            anyhow::Ok(HealthClient::new(channel).check(request).await?.into_inner().status())
        };
        if matches!(asked.await, Ok(status) if status == ServingStatus::Serving) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("not ready within {STEP_LIMIT:?}")
}

/// The answers workers saw other than OK, by code and reason; and those a
/// rollout may not cause: anything but UNAVAILABLE (retried), the lease
/// protocol's own refusals (another worker holds the lease, or took it
/// over), and a transport error while connections were being cut or the
/// worker itself was paused.
pub(crate) fn worker_errors(records: &[Record], faults: &[Fault]) -> (BTreeMap<String, u64>, Vec<String>) {
    let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
    let mut unexpected = Vec::new();
    // A client-side transport error (no server sent it) is explained by
    // connections being cut, a replica starting or draining (its
    // connections end), or this worker's own pause (its deadline passes,
    // or the server closes its silent connection, as it resumes).
    let explained = |r: &Record| {
        let own_pause = format!("w{}", r.worker);
        faults.iter().any(|f| {
            let overlaps = r.t1 >= f.t0 && r.t0 <= f.t1 + 1_000_000;
            let explains = match f.kind.as_str() {
                "cut-connections" | "drain" | "start" => true,
                "pause-worker" => f.target == own_pause,
                _ => false,
            };
            overlaps && explains
        })
    };
    for r in records.iter().filter(|r| !r.ok()) {
        *by_code.entry(format!("{}/{}", r.code, r.reason)).or_default() += 1;
        let allowed = match (r.code.as_str(), r.reason.as_str()) {
            ("Unavailable", _) => true,
            ("FailedPrecondition", "LEASE_HELD" | "LEASE_NOT_HELD") => true,
            _ if r.client_side() => explained(r),
            _ => false,
        };
        if !allowed {
            unexpected.push(format!(
                "w{} {} on {} answered {}/{} ({}) at {} µs: not a retried UNAVAILABLE",
                r.worker, r.op, r.key, r.code, r.reason, r.message, r.t1
            ));
        }
    }
    (by_code, unexpected)
}

#[cfg(test)]
mod tests {
    use super::worker_errors;
    use crate::record::{Fault, Record};

    fn answer(code: &str, reason: &str, t: i64) -> Record {
        let client_side = reason.is_empty() && code != "Ok" && code != "Unavailable" && code != "InvalidArgument";
        Record {
            code: code.into(),
            reason: reason.into(),
            message: if client_side {
                "h2 protocol error: stream reset".into()
            } else {
                String::new()
            },
            t0: t,
            t1: t + 10,
            ..Record::default()
        }
    }

    #[test]
    fn only_retried_unavailable_and_the_lease_protocol_pass() {
        let cut = Fault {
            kind: "cut-connections".into(),
            target: "all".into(),
            t0: 1_000,
            t1: 2_000,
        };
        let records = [
            answer("Ok", "", 0),
            answer("Unavailable", "STORE_UNAVAILABLE", 0),
            answer("Unavailable", "", 0),
            answer("FailedPrecondition", "LEASE_HELD", 0),
            answer("Unknown", "", 1_500),
        ];
        let (by_code, unexpected) = worker_errors(&records, std::slice::from_ref(&cut));
        assert!(unexpected.is_empty(), "{unexpected:?}");
        assert_eq!(by_code.values().sum::<u64>(), 4);
        let pause = Fault {
            kind: "pause-worker".into(),
            target: "w0".into(),
            t0: 5_000_000,
            t1: 6_000_000,
        };
        let mut resumed = answer("Cancelled", "", 5_900_000);
        assert!(
            worker_errors(std::slice::from_ref(&resumed), std::slice::from_ref(&pause))
                .1
                .is_empty()
        );
        resumed.worker = 1;
        assert_eq!(
            worker_errors(&[resumed], &[pause]).1.len(),
            1,
            "another worker's pause explains nothing"
        );
        for bad in [
            answer("Internal", "INTERNAL", 0),
            answer("FailedPrecondition", "SNAPSHOT_EXPIRED", 0),
            answer("InvalidArgument", "", 0),
            // A transport error with no connections being cut.
            answer("Unknown", "", 10_000_000),
        ] {
            let (_, unexpected) = worker_errors(std::slice::from_ref(&bad), std::slice::from_ref(&cut));
            assert_eq!(unexpected.len(), 1, "{} {} passed", bad.code, bad.reason);
        }
    }
}
