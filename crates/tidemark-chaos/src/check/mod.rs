//! The offline checker: the recorded history (every request and answer,
//! with times) and the server's own history (the append-only history table,
//! read back through the Admin API) against the SPEC's invariants.
//!
//! Answers lost to a fault (UNAVAILABLE, a cut connection, a timeout) are
//! ambiguous: the call may or may not have taken effect. They never count
//! as acknowledged, and nothing is concluded from them; the server's
//! history says what really happened.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use tidemark_proto::v1 as pb;

use crate::linearize::{SLACK_US, Verdict};
use crate::record::{Fault, Record};

/// Each key's server history (by consumer id).
pub(crate) type History = BTreeMap<String, Vec<pb::HistoryEntry>>;
/// Each key's stored position at the end.
pub(crate) type Finals = BTreeMap<String, Option<i64>>;

/// The verdict.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    /// Requests recorded, by operation and answer.
    pub operations: BTreeMap<String, u64>,
    pub operations_total: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Server history rows checked.
    pub history_rows: u64,
    /// Acknowledged commits that wrote a position.
    pub acknowledged_commits: u64,
    /// Acknowledged commits missing from the server's history or state.
    pub acknowledged_commits_lost: u64,
    /// Every invariant violation found, in words.
    pub violations: Vec<String>,
    /// For each paused worker that held a lease: ms from its resumption to
    /// the answer telling it the lease was lost.
    pub fenced_learned_ms: Vec<f64>,
    /// Commits refused with LEASE_NOT_HELD (fenced zombies).
    pub fenced_commits_refused: u64,
    /// The per-key linearizability check of the clients' view.
    pub linearizability: Linearizability,
    /// How many items each check examined (commits, grants, calls, ...).
    pub examined: BTreeMap<String, u64>,
    /// Group commit's work in the replicas.
    pub group_commit: GroupCommit,
    /// Each change of the database's primary, as the workers saw it.
    pub primary_changes: Vec<crate::availability::Outage>,
    /// A rollout run's steps (scripts/rollout.sh).
    pub rollout: Option<crate::record::RolloutLog>,
    /// Answers other than OK the workers saw, by code and reason.
    pub worker_errors: BTreeMap<String, u64>,
}

/// Group commit's counters (see tidemark-store's group_commit.rs).
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct GroupCommit {
    pub statements: u64,
    pub writes: u64,
    pub alone: u64,
}

impl GroupCommit {
    pub(crate) fn plus(self, other: Self) -> Self {
        Self {
            statements: self.statements + other.statements,
            writes: self.writes + other.writes,
            alone: self.alone + other.alone,
        }
    }

    pub(crate) fn minus(self, other: Self) -> Self {
        Self {
            statements: self.statements.saturating_sub(other.statements),
            writes: self.writes.saturating_sub(other.writes),
            alone: self.alone.saturating_sub(other.alone),
        }
    }
}

/// How the per-key linearizability check went.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Linearizability {
    pub keys_checked: u64,
    pub passed: u64,
    pub failed: u64,
    /// Keys whose search ran out of budget: neither passed nor failed.
    pub inconclusive: u64,
    /// Search steps over all keys, and the budget each key had.
    pub steps: u64,
    pub budget_per_key: u64,
}

/// Search steps each key may take by default (a history the search walks
/// straight through takes about one step per call).
pub(crate) const LINEARIZABILITY_BUDGET: u64 = 1_000_000;

/// How strict the checks are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// How far the database's clock may be from the clients' (µs; at least
    /// [`SLACK_US`]): lease deadlines are on the database's clock, which a
    /// failover moves to another host.
    pub clock_slack_us: i64,
    /// Search steps each key's linearizability check may take.
    pub search_budget: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            clock_slack_us: SLACK_US,
            search_budget: LINEARIZABILITY_BUDGET,
        }
    }
}

impl Report {
    /// Counts `n` items examined by `check`.
    fn examined(&mut self, check: &str, n: usize) {
        *self.examined.entry(check.to_owned()).or_default() += n as u64;
    }

    fn violation(&mut self, text: String) {
        if self.violations.len() < MAX_VIOLATIONS_KEPT {
            self.violations.push(text);
        }
    }
}

/// Violations kept in the report (a broken run can find millions).
const MAX_VIOLATIONS_KEPT: usize = 10_000;

/// Violations by kind: the text without its key, times, ids and numbers,
/// counted, most frequent first.
pub(crate) fn violation_kinds(violations: &[String]) -> Vec<(String, usize)> {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for v in violations {
        let text = v.split_once(": ").map_or(v.as_str(), |(_, rest)| rest);
        let mut kind = String::new();
        let mut depth = 0;
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth > 0 => {}
                c if c.is_ascii_digit() => {
                    if !kind.ends_with('N') {
                        kind.push('N');
                    }
                }
                c => kind.push(c),
            }
        }
        *kinds.entry(kind).or_default() += 1;
    }
    let mut kinds: Vec<(String, usize)> = kinds.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    kinds
}

fn writes_position(outcome: &str) -> bool {
    matches!(
        outcome,
        "COMMIT_OUTCOME_CREATED" | "COMMIT_OUTCOME_ADVANCED" | "COMMIT_OUTCOME_REFRESHED" | "COMMIT_OUTCOME_REWOUND"
    )
}

const COMMIT_EVENTS: [&str; 4] = ["CREATE", "ADVANCE", "REFRESH", "REWIND"];

/// Checks everything; `history` and `finals` are per consumer id.
pub(crate) fn check(
    records: &[Record],
    faults: &[Fault],
    history: &History,
    finals: &Finals,
    settings: &Settings,
) -> Report {
    let clock_slack_us = settings.clock_slack_us.max(SLACK_US);
    let mut report = Report::default();
    for r in records {
        let answer = if r.ok() {
            "OK".to_owned()
        } else {
            format!("{}/{}", r.code, r.reason)
        };
        *report.operations.entry(format!("{} {answer}", r.op)).or_default() += 1;
        report.operations_total += 1;
        if r.op == "commit" && r.reason == "LEASE_NOT_HELD" {
            report.fenced_commits_refused += 1;
        }
    }
    retryable_failures(&mut report, records);
    for f in faults {
        *report.faults.entry(f.kind.clone()).or_default() += 1;
    }
    server_history(&mut report, history, finals);
    acknowledged(&mut report, records, history, finals);
    client_view(&mut report, records);
    one_holder_at_a_time(&mut report, records, history, clock_slack_us);
    fenced_learning(&mut report, records, faults);
    linearizable(&mut report, records, clock_slack_us, settings.search_budget);
    report
}

/// No fault may turn into a wrong answer: a call the server could not
/// complete (its database away, failing over, read-only) answers with a
/// status the client retries, never INTERNAL.
fn retryable_failures(report: &mut Report, records: &[Record]) {
    report.examined("failed calls answered retryably: answers", records.len());
    // A server's answer; the client's own (an h2 error on a connection that
    // ended under the call) is a transport failure, retried like one.
    for r in records.iter().filter(|r| r.code == "Internal" && !r.client_side()) {
        report.violation(format!(
            "w{} {} on {} answered INTERNAL at {} µs ({}): a failure must be retryable",
            r.worker, r.op, r.key, r.t1, r.reason
        ));
    }
}

/// Every key's calls, as the clients saw them, have an order the SPEC's
/// model accepts (see `linearize.rs`).
fn linearizable(report: &mut Report, records: &[Record], clock_slack_us: i64, budget: u64) {
    let mut by_key: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_key.entry(r.key.as_str()).or_default().push(r);
    }
    let calls: usize = by_key.values().map(Vec::len).sum();
    report.examined("linearizability: calls", calls);
    let result = &mut report.linearizability;
    result.budget_per_key = budget;
    let mut failures = Vec::new();
    for (key, records) in by_key {
        result.keys_checked += 1;
        match crate::linearize::check_key(&records, budget, clock_slack_us) {
            Verdict::Linearizable { steps } => {
                result.passed += 1;
                result.steps += steps;
            }
            Verdict::Violation { at, steps } => {
                result.failed += 1;
                result.steps += steps;
                failures.push(format!(
                    "{key}: not linearizable: no order of its {} calls fits the SPEC's model (the search got no \
                     further than calls answered by {at} µs)",
                    records.len()
                ));
            }
            Verdict::Inconclusive { steps } => {
                result.inconclusive += 1;
                result.steps += steps;
            }
        }
    }
    for failure in failures {
        report.violation(failure);
    }
}

/// The server's own history, per key in insertion order: epochs strictly
/// increase; every accepted commit carried the current epoch of a lease
/// not released or revoked since; within a lease positions never move back
/// and a rewind is only a lease's first write; the final state is the last
/// position written.
fn server_history(report: &mut Report, history: &History, finals: &Finals) {
    for (key, rows) in history {
        let mut rows = rows.clone();
        rows.sort_by_key(|r| r.id);
        report.history_rows += rows.len() as u64;
        let mut current: Option<i64> = None;
        let mut live = false;
        let mut last_in_lease: Option<i64> = None;
        let mut position: Option<i64> = None;
        for row in &rows {
            let epoch = row.epoch.unwrap_or(-1);
            match row.event.as_str() {
                "LEASE_ACQUIRE" | "LEASE_TAKEOVER" => {
                    report.examined("server history: grants, epochs increasing", 1);
                    if current.is_some_and(|c| epoch <= c) {
                        report.violation(format!(
                            "{key}: history row {} grants epoch {epoch} after epoch {current:?}",
                            row.id
                        ));
                    }
                    current = Some(epoch);
                    live = true;
                    last_in_lease = None;
                }
                "LEASE_RELEASE" | "LEASE_REVOKE" if Some(epoch) == current => live = false,
                event if COMMIT_EVENTS.contains(&event) => {
                    report.examined("server history: commits under the current live lease, never back", 1);
                    if Some(epoch) != current || !live {
                        report.violation(format!(
                            "{key}: history row {} accepted a commit with epoch {epoch} while the current lease was \
                             {current:?} (live: {live})",
                            row.id
                        ));
                    }
                    let new = row.new_next_snapshot.unwrap_or(i64::MIN);
                    if event == "REWIND" && last_in_lease.is_some() {
                        report.violation(format!("{key}: history row {} rewinds mid-lease", row.id));
                    }
                    if let Some(last) = last_in_lease
                        && new < last
                    {
                        report.violation(format!(
                            "{key}: history row {} moves the position back within a lease ({last} -> {new})",
                            row.id
                        ));
                    }
                    last_in_lease = Some(new);
                    position = Some(new);
                }
                _ => {}
            }
        }
        if let Some(Some(stored)) = finals.get(key)
            && position.is_some_and(|p| p != *stored)
        {
            report.violation(format!(
                "{key}: the stored position {stored} is not the last one written ({position:?})"
            ));
        }
    }
}

/// Every acknowledged commit that wrote a position is in the server's
/// history (same lease and batch), and the final position is at least
/// every acknowledged one (positions only move forward in this workload).
fn acknowledged(report: &mut Report, records: &[Record], history: &History, finals: &Finals) {
    let written: HashSet<(String, i64)> = history
        .values()
        .flatten()
        .filter(|r| COMMIT_EVENTS.contains(&r.event.as_str()))
        .map(|r| (r.lease_id.clone(), r.batch_id.unwrap_or(-1)))
        .collect();
    for r in records.iter().filter(|r| r.op == "commit" && r.ok()) {
        let applied = writes_position(&r.outcome) || r.outcome == "COMMIT_OUTCOME_DUPLICATE";
        if !applied {
            continue;
        }
        if writes_position(&r.outcome) {
            report.acknowledged_commits += 1;
        }
        report.examined("acknowledged commits: in the server's history and state", 1);
        let mut lost = false;
        if !written.contains(&(r.lease.clone(), r.batch)) {
            report.violation(format!(
                "{}: acknowledged commit (lease {}, batch {}, {}) is not in the server's history",
                r.key, r.lease, r.batch, r.outcome
            ));
            lost = true;
        }
        if let (Some(next), Some(Some(stored))) = (r.next, finals.get(&r.key))
            && *stored < next
        {
            report.violation(format!(
                "{}: acknowledged position {next} (lease {}, batch {}) but the stored position is {stored}",
                r.key, r.lease, r.batch
            ));
            lost = true;
        }
        if lost {
            report.acknowledged_commits_lost += 1;
        }
    }
}

/// What the clients saw: epochs per key increase in real time; no commit
/// is accepted after a newer lease was granted; no two holders' leases
/// overlap; positions respect incomplete snapshots and never move back
/// within a lease; a resumed query starts at or after every position
/// acknowledged before it asked.
fn client_view(report: &mut Report, records: &[Record]) {
    let mut by_key: HashMap<&str, Vec<&Record>> = HashMap::new();
    for r in records {
        by_key.entry(r.key.as_str()).or_default().push(r);
    }
    for (key, recs) in by_key {
        let acquires: Vec<&&Record> = recs.iter().filter(|r| r.op == "acquire" && r.ok()).collect();
        report.examined("client view: grants, epochs unique and increasing", acquires.len());
        // Epochs: unique, and increasing in real time.
        let mut seen = HashMap::new();
        for a in &acquires {
            if let Some(other) = seen.insert(a.epoch, a.lease.clone())
                && other != a.lease
            {
                report.violation(format!("{key}: epoch {} granted twice", a.epoch));
            }
        }
        for a in &acquires {
            for b in &acquires {
                if a.t1 + SLACK_US < b.t0 && a.epoch >= b.epoch {
                    report.violation(format!(
                        "{key}: lease granted later has epoch {} <= {} of one granted before",
                        b.epoch, a.epoch
                    ));
                }
            }
        }
        // Fencing: a commit sent after a newer grant was acknowledged must
        // not be accepted.
        for c in recs.iter().filter(|r| r.op == "commit" && r.ok()) {
            report.examined("client view: accepted commits, none after a newer grant", 1);
            if let Some(newer) = acquires.iter().find(|a| a.epoch > c.epoch && a.t1 + SLACK_US < c.t0) {
                report.violation(format!(
                    "{key}: commit with epoch {} accepted after epoch {} was granted",
                    c.epoch, newer.epoch
                ));
            }
        }
        // Positions per lease.
        let mut per_lease: HashMap<&str, Vec<&&Record>> = HashMap::new();
        for c in recs.iter().filter(|r| r.op == "commit" && r.ok()) {
            per_lease.entry(c.lease.as_str()).or_default().push(c);
            let (snapshot, index, total) = c.end;
            let bound = if index == total - 1 { snapshot + 1 } else { snapshot };
            if c.next.is_some_and(|n| n > bound) {
                report.violation(format!(
                    "{key}: position {:?} passes the incomplete snapshot of end {:?}",
                    c.next, c.end
                ));
            }
        }
        for (lease, mut commits) in per_lease {
            commits.sort_by_key(|c| c.t1);
            for pair in commits.windows(2) {
                if pair[1].next < pair[0].next {
                    report.violation(format!(
                        "{key}: lease {lease} moved back from {:?} to {:?}",
                        pair[0].next, pair[1].next
                    ));
                }
            }
        }
        // Recovery sees every acknowledged position.
        for r in recs
            .iter()
            .filter(|r| r.op == "recover" && r.ok() && r.outcome == "RECOVERY_SOURCE_CONSUMER")
        {
            report.examined("client view: recoveries, at or after every acknowledged position", 1);
            let acknowledged = recs
                .iter()
                .filter(|c| c.op == "commit" && c.ok() && c.t1 + SLACK_US < r.t0)
                .filter_map(|c| c.next)
                .max();
            if let (Some(acked), Some(start)) = (acknowledged, r.next)
                && start < acked
            {
                report.violation(format!(
                    "{key}: w{} resumed at {start}, before the acknowledged position {acked}",
                    r.worker
                ));
            }
        }
    }
}

fn micros(t: Option<&prost_types::Timestamp>) -> i64 {
    t.map_or(0, |t| t.seconds * 1_000_000 + i64::from(t.nanos) / 1_000)
}

/// One holder at a time, as the server saw it: walking each key's grants
/// in the server's history, a grant to another holder never happens while
/// the previous lease is known to be live (an OK answer on it reported time
/// left, counted from when that call was sent) unless it was released
/// first. A takeover by the same holder is allowed (L3).
fn one_holder_at_a_time(
    report: &mut Report,
    records: &[Record],
    history: &BTreeMap<String, Vec<pb::HistoryEntry>>,
    clock_slack_us: i64,
) {
    let mut live_until: HashMap<&str, i64> = HashMap::new();
    for r in records.iter().filter(|r| r.ok() && r.ttl_us > 0 && !r.lease.is_empty()) {
        let until = live_until.entry(r.lease.as_str()).or_insert(i64::MIN);
        *until = (*until).max(r.t0 + r.ttl_us);
    }
    for (key, rows) in history {
        let mut rows = rows.clone();
        rows.sort_by_key(|r| r.id);
        let mut previous: Option<&pb::HistoryEntry> = None;
        let mut released = false;
        for row in &rows {
            match row.event.as_str() {
                "LEASE_ACQUIRE" | "LEASE_TAKEOVER" => {
                    report.examined("one holder at a time: grants", 1);
                    if let Some(prev) = previous
                        && !released
                        && prev.holder != row.holder
                        && let Some(until) = live_until.get(prev.lease_id.as_str())
                    {
                        let granted = micros(row.at.as_ref());
                        if granted + clock_slack_us < *until {
                            report.violation(format!(
                                "{key}: {} was granted epoch {:?} while {}'s epoch {:?} was live for another {} ms",
                                row.holder,
                                row.epoch,
                                prev.holder,
                                prev.epoch,
                                (until - granted) / 1000
                            ));
                        }
                    }
                    previous = Some(row);
                    released = false;
                }
                "LEASE_RELEASE" | "LEASE_REVOKE" if previous.is_some_and(|p| p.epoch == row.epoch) => {
                    released = true;
                }
                _ => {}
            }
        }
    }
}

/// How long a paused worker took to learn it lost its lease: from its
/// resumption to the first answer on the lease it held when paused saying
/// the lease is gone (pauses outlast the ttl, so it always is).
fn fenced_learning(report: &mut Report, records: &[Record], faults: &[Fault]) {
    for pause in faults.iter().filter(|f| f.kind == "pause-worker") {
        report.examined("paused workers: refused after resuming", 1);
        let worker: u32 = pause.target.trim_start_matches('w').parse().unwrap_or(u32::MAX);
        let Some(held) = records
            .iter()
            .filter(|r| r.worker == worker && r.t1 <= pause.t0 && r.ok() && !r.lease.is_empty())
            .max_by_key(|r| r.t1)
            .filter(|r| r.op != "release")
        else {
            continue;
        };
        let after = records
            .iter()
            .filter(|r| r.worker == worker && r.lease == held.lease && r.t0 >= pause.t1)
            .min_by_key(|r| r.t0);
        match after {
            // Refused, or (release being idempotent) told it was not held.
            Some(r) if r.reason == "LEASE_NOT_HELD" || (r.op == "release" && r.outcome == "NOT_HELD") => {
                report.fenced_learned_ms.push((r.t1 - pause.t1) as f64 / 1000.0);
            }
            Some(r) if r.ok() => report.violation(format!(
                "w{worker}: lease {} (epoch {}) still accepted a {} after a pause longer than its ttl",
                held.lease, held.epoch, r.op
            )),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
