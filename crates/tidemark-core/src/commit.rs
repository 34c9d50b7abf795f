//! CommitBatch (SPEC §3, rules C1–C7): what a committed micro-batch end
//! offset does to the consumer. Exactly Paimon's Spark source (PR #9273), plus
//! fencing, idempotent retries and no silent regressions.

use std::time::Duration;

use uuid::Uuid;

use crate::error::CoreError;
use crate::lease::check_lease;
use crate::offset::Offset;
use crate::state::{CommittedBatch, ConsumerRecord, EventKind, HistoryEvent, KeyState, Transition, lag};
use crate::time::Timestamp;

/// A CommitBatch request, with its lease already parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitBatch {
    /// The lease presented.
    pub lease_id: Uuid,
    /// Its epoch.
    pub epoch: i64,
    /// The engine's micro-batch id (>= 0).
    pub batch_id: i64,
    /// The batch's end offset, not yet validated (C2 runs after the lease
    /// check, C1). `None` when the request has none.
    pub end: Option<Offset>,
    /// The table's latest snapshot as the worker sees it.
    pub latest_snapshot: Option<i64>,
}

/// What a commit did (C3 outcomes plus idempotent replays).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitOutcome {
    /// The consumer was created.
    Created,
    /// The position moved forward.
    Advanced,
    /// The position kept its value; `updated_at` was refreshed (C4).
    Refreshed,
    /// The lease's first write moved the position back (C6).
    Rewound,
    /// Partway through an initial full scan: nothing written.
    UnchangedIncompleteFullScan,
    /// No `total_splits` (older checkpoint): nothing written, a warning.
    UnchangedLegacyOffset,
    /// A retry or a late callback (C5): nothing written.
    Duplicate,
}

impl CommitOutcome {
    /// Every outcome, for exhaustive tests.
    pub const ALL: [CommitOutcome; 7] = [
        CommitOutcome::Created,
        CommitOutcome::Advanced,
        CommitOutcome::Refreshed,
        CommitOutcome::Rewound,
        CommitOutcome::UnchangedIncompleteFullScan,
        CommitOutcome::UnchangedLegacyOffset,
        CommitOutcome::Duplicate,
    ];

    /// Stable name (the proto enum value without its prefix).
    pub fn as_str(self) -> &'static str {
        match self {
            CommitOutcome::Created => "CREATED",
            CommitOutcome::Advanced => "ADVANCED",
            CommitOutcome::Refreshed => "REFRESHED",
            CommitOutcome::Rewound => "REWOUND",
            CommitOutcome::UnchangedIncompleteFullScan => "UNCHANGED_INCOMPLETE_FULL_SCAN",
            CommitOutcome::UnchangedLegacyOffset => "UNCHANGED_LEGACY_OFFSET",
            CommitOutcome::Duplicate => "DUPLICATE",
        }
    }

    /// Whether the consumer record was written.
    pub fn writes_consumer(self) -> bool {
        matches!(
            self,
            CommitOutcome::Created | CommitOutcome::Advanced | CommitOutcome::Refreshed | CommitOutcome::Rewound
        )
    }
}

/// The answer to a commit (C7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The key the lease is for.
    pub key: crate::ids::ConsumerKey,
    /// What happened.
    pub outcome: CommitOutcome,
    /// The consumer's position after the commit.
    pub next_snapshot: Option<i64>,
    /// The position before it.
    pub previous_next_snapshot: Option<i64>,
    /// Time left on the lease after the commit renewed it.
    pub lease_ttl: Duration,
    /// Warnings for the caller.
    pub warnings: Vec<String>,
    /// Whether this is the lease's first commit of a legacy end offset (no
    /// `total_splits`) on its snapshot: SPEC C3 records the legacy offset
    /// once per (lease, snapshot), in the operator's log.
    pub first_legacy_offset: bool,
    /// Snapshots not yet consumed, when the latest snapshot is known.
    pub lag: Option<i64>,
}

/// C3: the position a committed end offset proves, or why it proves none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Write `next_snapshot := n`.
    Next(i64),
    /// Partway through an initial full scan: no position is proven.
    IncompleteFullScan,
    /// No completion metadata: no position is proven.
    LegacyOffset,
}

/// C3's decision table for a valid end offset.
pub fn target(end: &Offset) -> Target {
    match end.total_splits {
        None => Target::LegacyOffset,
        Some(_) if end.is_complete() => Target::Next(end.snapshot_id + 1),
        Some(_) if !end.scan_snapshot => Target::Next(end.snapshot_id),
        Some(_) => Target::IncompleteFullScan,
    }
}

/// A batch cannot end past the latest snapshot its own request reports: a
/// snapshot read (even partway, or a full scan of it) exists, so it is at
/// most `latest_snapshot`; only the start of a delta snapshot nothing of
/// which was read (where a `latest` startup begins) may be the next one,
/// `latest_snapshot + 1`. A pair beyond that contradicts itself, and the
/// lag it would report (zero) would hide the worker's bug.
fn check_end_within_latest(end: &Offset, latest_snapshot: Option<i64>) -> Result<(), CoreError> {
    let Some(latest) = latest_snapshot else {
        return Ok(());
    };
    let nothing_read = end.index == crate::offset::BEFORE_FIRST_SPLIT && !end.scan_snapshot;
    let highest = if nothing_read { latest.saturating_add(1) } else { latest };
    if end.snapshot_id > highest {
        return Err(CoreError::invalid(
            "latest_snapshot",
            format!(
                "is {latest}, before the batch's end at snapshot {} (a batch cannot end past the latest snapshot it \
                 reports; send the table's latest snapshot as read after the batch)",
                end.snapshot_id
            ),
        ));
    }
    Ok(())
}

/// C1–C7: applies a committed micro-batch end to the key's state.
///
/// `state` is the state of the key the lease was granted on (`None` when the
/// lease is unknown). Order: lease check (C1), offset validation (C2),
/// idempotency (C5), decision (C3), no regression under a lease (C6). A
/// successful commit renews the lease (L7).
pub fn commit(state: Option<&KeyState>, req: &CommitBatch, now: Timestamp) -> Result<Transition<Committed>, CoreError> {
    commit_with(state, req, now, RefreshHistory::Full)
}

/// How refreshes (commits that leave the position where it was) are kept
/// in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefreshHistory {
    /// Every refresh is a history row.
    #[default]
    Full,
    /// A refresh repeating the lease's previous batch end (an idle stream
    /// committing the same offset again and again) is not recorded: the row
    /// of the batch that set the position stands for it, and the consumer's
    /// `updated_at` still moves. Every change of position, and a refresh
    /// with another end, are recorded.
    Compact,
}

/// [`commit`], keeping refreshes in the history as `refreshes` says.
pub fn commit_with(
    state: Option<&KeyState>,
    req: &CommitBatch,
    now: Timestamp,
    refreshes: RefreshHistory,
) -> Result<Transition<Committed>, CoreError> {
    commit_knowing(state, req, now, refreshes, None)
}

/// [`commit_with`], for a key whose table's latest snapshot the caller
/// knows from the table's own directory (`directory_latest`: a registered
/// table, SPEC §9), which the reported lag then counts up to.
pub fn commit_knowing(
    state: Option<&KeyState>,
    req: &CommitBatch,
    now: Timestamp,
    refreshes: RefreshHistory,
    directory_latest: Option<i64>,
) -> Result<Transition<Committed>, CoreError> {
    let lease = check_lease(state, req.lease_id, req.epoch, now)?;
    let Some(end) = req.end else {
        return Err(CoreError::invalid("end", "the batch's end offset is required"));
    };
    end.validate("end")?;
    check_end_within_latest(&end, req.latest_snapshot)?;

    let state = state.expect("check_lease found the state");
    let mut next = state.clone();
    if req.latest_snapshot.is_some() {
        next.latest_snapshot = req.latest_snapshot;
    }
    let current = state.next_snapshot();

    if let Some(last) = lease.last_batch
        && req.batch_id <= last.batch_id
    {
        if req.batch_id == last.batch_id && last.end != end {
            return Err(CoreError::BatchConflict {
                batch_id: req.batch_id,
                committed: last.end,
                requested: end,
            });
        }
        // C5: a retry of the last batch, or a late callback for an older one.
        let lease = next.lease.as_mut().expect("checked lease");
        lease.deadline = now.plus(lease.ttl);
        let output = Committed {
            key: state.key.clone(),
            outcome: CommitOutcome::Duplicate,
            next_snapshot: current,
            previous_next_snapshot: current,
            lease_ttl: lease.ttl,
            warnings: Vec::new(),
            first_legacy_offset: false,
            lag: commit_lag(&next, req.latest_snapshot, directory_latest),
        };
        return Ok(renewal_only(next, output));
    }

    let mut warnings = Vec::new();
    let mut first_legacy_offset = false;
    let (outcome, written) = match target(&end) {
        Target::LegacyOffset => {
            warnings.push(format!(
                "LEGACY_OFFSET: end offset {end} has no total_splits (it was restored from an older checkpoint); \
                 the consumer stays unchanged and snapshot {} may be replayed",
                end.snapshot_id
            ));
            let lease = next.lease.as_mut().expect("checked lease");
            first_legacy_offset = lease.legacy_warned_snapshot != Some(end.snapshot_id);
            lease.legacy_warned_snapshot = Some(end.snapshot_id);
            (CommitOutcome::UnchangedLegacyOffset, None)
        }
        Target::IncompleteFullScan => {
            // E5: the scan's snapshot stays pinned while it is in progress.
            next.lease.as_mut().expect("checked lease").full_scan_pin = Some(end.snapshot_id);
            (CommitOutcome::UnchangedIncompleteFullScan, None)
        }
        Target::Next(target) => {
            let outcome = match current {
                None => CommitOutcome::Created,
                Some(n) if target > n => CommitOutcome::Advanced,
                Some(n) if target == n => CommitOutcome::Refreshed,
                Some(n) if lease.wrote_consumer => {
                    return Err(CoreError::PositionRegression {
                        current: n,
                        computed: target,
                    });
                }
                Some(_) => CommitOutcome::Rewound,
            };
            (outcome, Some(target))
        }
    };

    let latest = latest_known(&next, req.latest_snapshot, directory_latest);
    let lease = next.lease.as_mut().expect("checked lease");
    let repeats_previous_end = lease.last_batch.is_some_and(|previous| previous.end == end);
    lease.last_batch = Some(CommittedBatch {
        batch_id: req.batch_id,
        end,
    });
    lease.deadline = now.plus(lease.ttl);
    lease.committed_at = Some(now);
    if lease
        .full_scan_pin
        .is_some_and(|pin| end.snapshot_id > pin || (end.snapshot_id == pin && end.is_complete()))
    {
        lease.full_scan_pin = None;
    }
    let mut events = Vec::new();
    if let Some(target) = written {
        lease.wrote_consumer = true;
        let created_at = state.consumer.map_or(now, |c| c.created_at);
        next.consumer = Some(ConsumerRecord {
            next_snapshot: target,
            created_at,
            updated_at: now,
        });
        let kind = match outcome {
            CommitOutcome::Created => EventKind::Create,
            CommitOutcome::Advanced => EventKind::Advance,
            CommitOutcome::Refreshed => EventKind::Refresh,
            _ => EventKind::Rewind,
        };
        let quiet = refreshes == RefreshHistory::Compact && outcome == CommitOutcome::Refreshed && repeats_previous_end;
        if !quiet {
            let mut event = HistoryEvent::new(kind, current, Some(target)).with_lease(lease);
            event.batch_id = Some(req.batch_id);
            event.detail = Some(format!("{}: end {end}", outcome.as_str()));
            event.latest_snapshot = latest;
            events.push(event);
        }
    }
    let lease_ttl = lease.ttl;
    let next_snapshot = next.next_snapshot();
    let lag = commit_lag(&next, req.latest_snapshot, directory_latest);
    Ok(Transition {
        write: Some(next),
        requires_live_lease: true,
        events,
        output: Committed {
            key: state.key.clone(),
            outcome,
            next_snapshot,
            previous_next_snapshot: current,
            lease_ttl,
            warnings,
            first_legacy_offset,
            lag,
        },
    })
}

/// The lag a commit reports (SPEC §3, §9), decided here only: for a
/// registered table, up to the latest snapshot in its directory, or the
/// worker's report when that is newer; otherwise up to the latest snapshot
/// the key has seen. `None` without a position.
fn commit_lag(next: &KeyState, reported: Option<i64>, directory_latest: Option<i64>) -> Option<i64> {
    lag(next.next_snapshot()?, latest_known(next, reported, directory_latest)?)
}

/// The latest snapshot a commit knows of: the registered table's directory
/// (or the worker's report, when further), else what the key last heard.
fn latest_known(next: &KeyState, reported: Option<i64>, directory_latest: Option<i64>) -> Option<i64> {
    match directory_latest {
        Some(directory) => Some(directory.max(reported.unwrap_or(0))),
        None => next.latest_snapshot,
    }
}

fn renewal_only(next: KeyState, output: Committed) -> Transition<Committed> {
    Transition {
        write: Some(next),
        requires_live_lease: true,
        events: Vec::new(),
        output,
    }
}
