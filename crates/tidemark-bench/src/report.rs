//! Measuring a scenario (throughput, latency quantiles, CPU per operation
//! by process) and printing the figures with their ratio to the peer.

use std::collections::BTreeMap;
use std::future::Future;

use serde::Serialize;

use crate::args::Scenario;
use crate::keeper;
use crate::procs::{DatabaseCounters, Watched};
use crate::work::{Recorder, Window};

/// One measured (scenario, system, concurrency).
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) scenario: Scenario,
    pub(crate) system: String,
    pub(crate) concurrency: usize,
    pub(crate) ops: usize,
    pub(crate) errors: u64,
    pub(crate) throughput: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    /// CPU seconds per 1,000 operations, by process.
    pub(crate) cpu_per_1k: BTreeMap<String, f64>,
    /// WAL bytes Postgres wrote per operation (cluster-wide, so background
    /// work counts too); absent without Postgres.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wal_bytes_per_op: Option<f64>,
    /// Postgres transactions that wrote, per operation (cluster-wide):
    /// one for a peer's commit, one over the batch size for tidemark's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) write_transactions_per_op: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) machine: BTreeMap<String, String>,
    pub(crate) rows: Vec<Row>,
    pub(crate) memory: Option<Memory>,
    pub(crate) keeper: Option<keeper::KeeperFigures>,
    pub(crate) history: Option<crate::history::HistoryFigures>,
    pub(crate) fleet: Option<crate::fleet::FleetFigures>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Memory {
    pub(crate) consumers: usize,
    pub(crate) live_leases: usize,
    pub(crate) rss_mib: f64,
    pub(crate) peak_rss_mib: f64,
}

/// Runs the workers, samples CPU over the window, merges what they saw.
pub(crate) async fn measure<F>(
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
    let (before, db_before) = (watched.sample(), watched.database_counters().await);
    tokio::time::sleep_until(window.until.into()).await;
    let (after, db_after) = (watched.sample(), watched.database_counters().await);
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
        wal_bytes_per_op: per_op(db_before, db_after, ops, |c| c.wal_bytes),
        write_transactions_per_op: per_op(db_before, db_after, ops, |c| c.write_transactions),
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

/// A counter's growth over the window, per operation.
fn per_op(
    before: Option<DatabaseCounters>,
    after: Option<DatabaseCounters>,
    ops: usize,
    counter: impl Fn(&DatabaseCounters) -> f64,
) -> Option<f64> {
    match (before, after) {
        (Some(before), Some(after)) if ops > 0 => Some((counter(&after) - counter(&before)) / ops as f64),
        _ => None,
    }
}

pub(crate) fn print_summary(rows: &[Row]) {
    println!();
    println!(
        "{:<8} {:<16} {:>4} {:>10} {:>9} {:>9}  {:<44} {:>8} {:>8} {:>13}",
        "scenario",
        "system",
        "conc",
        "ops/s",
        "p50 ms",
        "p99 ms",
        "CPU-s per 1k ops (by process)",
        "WAL B/op",
        "xact/op",
        "vs peer"
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
        let wal = row
            .wal_bytes_per_op
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.0}"));
        let transactions = row
            .write_transactions_per_op
            .map_or_else(|| "-".to_owned(), |t| format!("{t:.3}"));
        println!(
            "{:<8} {:<16} {:>4} {:>10.0} {:>9.2} {:>9.2}  {:<44} {:>8} {:>8} {:>13}",
            format!("{:?}", row.scenario).to_lowercase(),
            row.system,
            row.concurrency,
            row.throughput,
            row.p50_ms,
            row.p99_ms,
            cpu,
            wal,
            transactions,
            ratio
        );
    }
    println!(
        "(\"xact/op\": Postgres transactions that wrote, per operation; \"vs peer\": throughput ratio / p99 ratio against raw SQL at the same concurrency)"
    );
}
