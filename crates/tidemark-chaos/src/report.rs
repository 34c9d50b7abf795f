//! The run's report as printed.

use std::collections::BTreeMap;

use crate::{availability, check};

pub(crate) fn print_report(report: &check::Report, seed: u64) {
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

pub(crate) fn print_primary_changes(outages: &[availability::Outage]) {
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

/// A rollout run's steps and the workers' errors by code.
pub(crate) fn print_rollout(log: &crate::record::RolloutLog, by_code: &BTreeMap<String, u64>) {
    println!("rollouts: {}; rollbacks: {}", log.rollouts, log.rollbacks);
    for (build, times) in &log.ready_ms {
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        if let (Some(median), Some(max)) = (sorted.get(sorted.len() / 2), sorted.last()) {
            println!(
                "  {build} build: a started replica was ready after {median:.0} ms (median of {}; max {max:.0} ms)",
                sorted.len()
            );
        }
    }
    let mut drains = log.drain_ms.clone();
    drains.sort_by(f64::total_cmp);
    if let (Some(median), Some(max)) = (drains.get(drains.len() / 2), drains.last()) {
        println!(
            "  a drained replica exited {median:.0} ms after SIGTERM (median of {}; max {max:.0} ms)",
            drains.len()
        );
    }
    let total: u64 = by_code.values().sum();
    println!("worker-visible errors by code: {total}");
    for (code, n) in by_code {
        println!("  {code:<45} {n:>7}");
    }
}
