//! The faults a run injects, one kind after another until its end.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use anyhow::{Context, bail};
use tidemark_testkit::StopMode;
use tidemark_testkit::process::{ServerProcess, signal_pid};

use crate::args::RunArgs;
use crate::cluster;
use crate::cluster::{Database, PrimaryChange};
use crate::proxy::Proxy;
use crate::record::{Fault, Record, now_us};
use crate::replica::{Replica, set_replica_clock};

/// Cycles through the fault kinds until `until`; returns what was done.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn inject_faults(
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
        let proxies: Vec<&Proxy> = replicas.iter().map(|r| &r.proxy).collect();
        let pick = n / kinds.len().max(1);
        let common = common_fault(kind, pick, args, &proxies, database, postgres, workers, dir).await?;
        let target = match (kind, common) {
            (_, Some((target, at))) => {
                resumed = at;
                target
            }
            ("kill-replica", None) => {
                let replica = &mut replicas[pick % 2];
                if let Some(mut process) = replica.process.take() {
                    process.kill();
                }
                tokio::time::sleep(Duration::from_millis(800)).await;
                replica.restart(binary, dir)?;
                replica.name.clone()
            }
            ("jump-replica-clock", None) => {
                // Ahead (leases look expired to a replica that trusted its
                // own clock), then behind (they look live), then back.
                for offset in ["+30", "-30", "+0"] {
                    set_replica_clock(dir, offset)?;
                    tokio::time::sleep(Duration::from_millis(2_500)).await;
                }
                replicas[1].name.clone()
            }
            ("pause-replica" | "pause-replica-and-cut-database", None) => {
                // SIGSTOPped with whatever it has in flight (a group-commit
                // statement queued or sent), resumed once the leases it was
                // serving have expired; optionally with the database's
                // connections cut meanwhile (two faults at once).
                let replica = &replicas[pick % 2];
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
            ("failover" | "switchover", None) => {
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
            (other, None) => bail!("fault kind {other} has no injection"),
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

/// The faults that touch neither a replica's process nor its clock (what
/// a rollout injects while it replaces replicas, see `rollout.rs`):
/// `Some((target, resumed))` when `kind` is one, else `None`. `pick`
/// chooses among workers and replicas.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn common_fault(
    kind: &str,
    pick: usize,
    args: &RunArgs,
    proxies: &[&Proxy],
    database: &Proxy,
    postgres: &mut Database,
    workers: &[Child],
    dir: &Path,
) -> anyhow::Result<Option<(String, Option<i64>)>> {
    let mut resumed = None;
    let target = match kind {
        "pause-worker" => {
            // Preferably one in the middle of streaming with a lease.
            let index = streaming_worker(dir, workers.len(), pick).unwrap_or(pick % workers.len());
            let worker = &workers[index];
            signal_pid(worker.id(), "STOP");
            // Past its ttl: its lease expires and others may take it.
            tokio::time::sleep(args.ttl * 2 + Duration::from_millis(500)).await;
            // The fault ends when the worker may run again.
            resumed = Some(now_us());
            signal_pid(worker.id(), "CONT");
            format!("w{index}")
        }
        "cut-connections" => {
            cut_burst(|| proxies.iter().for_each(|p| p.cut())).await;
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
        "postgres-restart" => {
            let private = postgres
                .private()
                .context("postgres-restart needs the private Postgres")?;
            private.stop(StopMode::Immediate);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            private.start_again();
            "postgres".into()
        }
        "slow-network" => {
            let index = pick % proxies.len();
            proxies[index].set_delay(Duration::from_millis(150));
            tokio::time::sleep(Duration::from_secs(2)).await;
            proxies[index].set_delay(Duration::ZERO);
            format!("replica-{index}")
        }
        _ => return Ok(None),
    };
    Ok(Some((target, resumed)))
}

/// Room a change of primary needs before the end of the run (µs): a
/// failover waits out Patroni's 20 s ttl, then the workers recover.
pub(crate) const PRIMARY_CHANGE_ROOM_US: i64 = 35_000_000;

/// Cuts in a burst, so some land mid-call (mid-statement, mid-answer).
pub(crate) async fn cut_burst(cut: impl Fn()) {
    for _ in 0..8 {
        cut();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A worker whose latest record is an acknowledged commit (it holds a
/// lease right now), if any.
pub(crate) fn streaming_worker(dir: &Path, workers: usize, start: usize) -> Option<usize> {
    (0..workers).map(|i| (i + start) % workers).find(|id| {
        let text = std::fs::read_to_string(dir.join(format!("worker-{id}.jsonl"))).unwrap_or_default();
        text.lines()
            .last()
            .and_then(|line| serde_json::from_str::<Record>(line).ok())
            .is_some_and(|r| r.op == "commit" && r.ok())
    })
}
