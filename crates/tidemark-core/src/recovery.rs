//! GetRecoveryPosition (SPEC §4, rules R1–R4): where a starting query resumes.

use std::cmp::Ordering;
use std::time::Duration;

use uuid::Uuid;

use crate::error::CoreError;
use crate::expiry::consumer_expired;
use crate::lease::check_lease;
use crate::offset::{MAX_SNAPSHOT_ID, Offset};
use crate::state::{ConsumerRecord, KeyState, Transition};
use crate::time::Timestamp;
use crate::validate::{FieldViolation, Violations, path};

/// Startup mode used when neither a checkpoint nor a consumer applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupMode {
    /// Full scan of the latest snapshot, then deltas (the default).
    LatestFull,
    /// Deltas after the latest snapshot.
    Latest,
    /// Deltas from a snapshot.
    FromSnapshot(i64),
    /// Full scan of a snapshot (or the earliest, if it expired), then deltas.
    FromSnapshotFull(i64),
}

/// The startup mode names, before their snapshot id is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupKind {
    /// See [`StartupMode::LatestFull`].
    LatestFull,
    /// See [`StartupMode::Latest`].
    Latest,
    /// See [`StartupMode::FromSnapshot`].
    FromSnapshot,
    /// See [`StartupMode::FromSnapshotFull`].
    FromSnapshotFull,
}

impl StartupMode {
    /// Combines a mode and its snapshot id: the FROM_SNAPSHOT modes need an id
    /// >= 1, the LATEST modes take none (0).
    pub fn from_parts(kind: StartupKind, snapshot_id: i64, field: &str) -> Result<Self, FieldViolation> {
        match kind {
            StartupKind::FromSnapshot | StartupKind::FromSnapshotFull if snapshot_id < 1 => Err(FieldViolation::new(
                field,
                format!("must be >= 1 with the FROM_SNAPSHOT modes (got {snapshot_id})"),
            )),
            StartupKind::FromSnapshot | StartupKind::FromSnapshotFull if snapshot_id > MAX_SNAPSHOT_ID => Err(
                FieldViolation::new(field, format!("must be <= {MAX_SNAPSHOT_ID} (got {snapshot_id})")),
            ),
            StartupKind::FromSnapshot => Ok(StartupMode::FromSnapshot(snapshot_id)),
            StartupKind::FromSnapshotFull => Ok(StartupMode::FromSnapshotFull(snapshot_id)),
            StartupKind::LatestFull | StartupKind::Latest if snapshot_id != 0 => Err(FieldViolation::new(
                field,
                format!("must be unset with the LATEST modes, which take no snapshot (got {snapshot_id})"),
            )),
            StartupKind::LatestFull => Ok(StartupMode::LatestFull),
            StartupKind::Latest => Ok(StartupMode::Latest),
        }
    }
}

/// What the worker sees of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRange {
    /// Earliest snapshot present (0 with `latest > 0` means unknown: 1).
    pub earliest_snapshot: i64,
    /// Latest snapshot (0 = the table has none).
    pub latest_snapshot: i64,
    /// Earliest long-lived changelog, if any.
    pub earliest_changelog: Option<i64>,
    /// Whether changelogs outlive snapshots.
    pub changelog_decoupled: bool,
}

impl SnapshotRange {
    /// Validates the range, naming fields under `prefix`.
    pub fn validate(&self, prefix: &str) -> Result<(), Vec<FieldViolation>> {
        let mut v = Violations::new();
        if self.latest_snapshot < 0 {
            v.add(
                path(prefix, "latest_snapshot"),
                format!(
                    "must be >= 0, where 0 means the table has no snapshot (got {})",
                    self.latest_snapshot
                ),
            );
        } else if self.latest_snapshot > MAX_SNAPSHOT_ID {
            v.add(
                path(prefix, "latest_snapshot"),
                format!("must be <= {MAX_SNAPSHOT_ID} (got {})", self.latest_snapshot),
            );
        }
        if self.earliest_snapshot < 0 {
            v.add(
                path(prefix, "earliest_snapshot"),
                format!("must be >= 0 (got {})", self.earliest_snapshot),
            );
        } else if self.earliest_snapshot > self.latest_snapshot && self.latest_snapshot >= 0 {
            v.add(
                path(prefix, "earliest_snapshot"),
                format!(
                    "must not be after latest_snapshot ({}) (got {})",
                    self.latest_snapshot, self.earliest_snapshot
                ),
            );
        }
        if let Some(c) = self.earliest_changelog
            && !(1..=MAX_SNAPSHOT_ID).contains(&c)
        {
            v.add(
                path(prefix, "earliest_changelog"),
                format!("must be between 1 and {MAX_SNAPSHOT_ID} when present (got {c})"),
            );
        }
        v.finish()
    }

    fn is_empty(&self) -> bool {
        self.latest_snapshot == 0
    }

    /// The earliest snapshot present (1 when unknown; 0 for an empty table).
    pub fn earliest(&self) -> i64 {
        if self.is_empty() {
            0
        } else {
            self.earliest_snapshot.max(1)
        }
    }

    /// R2: the earliest snapshot a scan of this kind can start at. An
    /// incremental read of a table whose changelog lifecycle is decoupled can
    /// start at the earliest long-lived changelog; a full read needs a
    /// snapshot.
    pub fn earliest_readable(&self, full: bool) -> i64 {
        let earliest = self.earliest();
        match self.earliest_changelog {
            Some(changelog) if !full && self.changelog_decoupled && !self.is_empty() => changelog.min(earliest),
            _ => earliest,
        }
    }
}

/// The engine checkpoint's last logged batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedBatch {
    /// Its start offset.
    pub start: Offset,
    /// Its end offset.
    pub end: Offset,
}

/// What to do when the position is no longer readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnExpired {
    /// Fail with DATA_LOSS / POSITION_EXPIRED.
    #[default]
    Fail,
    /// Start at the earliest readable snapshot and report what was skipped.
    ClampToEarliest,
}

/// A GetRecoveryPosition request (the key and lease are handled by the
/// caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryRequest {
    /// Startup options.
    pub startup: StartupMode,
    /// Whether to ignore the consumer's progress.
    pub ignore_progress: bool,
    /// The worker's view of the table.
    pub range: SnapshotRange,
    /// The engine checkpoint's last logged batch.
    pub checkpoint: Option<LoggedBatch>,
    /// What to do when the position expired.
    pub on_expired: OnExpired,
}

impl RecoveryRequest {
    /// Validates the request's offsets and range (field names as in the proto).
    pub fn validate(&self) -> Result<(), Vec<FieldViolation>> {
        let mut v = Violations::new();
        v.check(self.range.validate("table"));
        if let Some(cp) = self.checkpoint {
            v.check(cp.validate("checkpoint"));
        }
        v.finish()
    }
}

impl LoggedBatch {
    /// C2 on both offsets, named under `prefix` (e.g. `checkpoint.start.index`).
    pub fn validate(&self, prefix: &str) -> Result<(), Vec<FieldViolation>> {
        let mut v = Violations::new();
        v.check(self.start.validate(&path(prefix, "start")));
        v.check(self.end.validate(&path(prefix, "end")));
        v.finish()
    }
}

/// Where a plan's start came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoverySource {
    /// The checkpoint's logged batch, replayed exactly.
    Checkpoint,
    /// The consumer's position, read incrementally.
    Consumer,
    /// The startup options.
    StartupOptions,
}

/// A recovery plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryPlan {
    /// Where the start came from.
    pub source: RecoverySource,
    /// Where to start.
    pub start: Offset,
    /// Warnings for the caller.
    pub warnings: Vec<String>,
    /// Snapshots skipped by a clamp (inclusive range).
    pub skipped: Option<(i64, i64)>,
}

/// R1–R4: plans where to resume. `consumer` is the key's consumer if it exists
/// and has not expired.
pub fn plan(req: &RecoveryRequest, consumer: Option<&ConsumerRecord>) -> Result<RecoveryPlan, CoreError> {
    match req.checkpoint {
        Some(logged) => replay_checkpoint(req, consumer, logged),
        None => plan_without_checkpoint(req, consumer),
    }
}

/// R1–R3: the consumer's position unless progress is ignored, else the
/// startup options.
fn plan_without_checkpoint(
    req: &RecoveryRequest,
    consumer: Option<&ConsumerRecord>,
) -> Result<RecoveryPlan, CoreError> {
    match consumer {
        Some(consumer) if !req.ignore_progress => {
            resume_incrementally(req, consumer.next_snapshot, RecoverySource::Consumer)
        }
        _ => plan_startup(req),
    }
}

/// R2 for a delta read starting at `next`: fails (or clamps) when `next` is
/// no longer readable, fails when it is beyond `latest + 1`.
fn resume_incrementally(req: &RecoveryRequest, next: i64, source: RecoverySource) -> Result<RecoveryPlan, CoreError> {
    let range = &req.range;
    if next > range.latest_snapshot + 1 {
        return Err(CoreError::PositionAheadOfTable {
            next,
            latest: range.latest_snapshot,
        });
    }
    let earliest = range.earliest_readable(false);
    if next < earliest && !crate::mutant!("recovery_ignores_expired") {
        return match req.on_expired {
            OnExpired::Fail => Err(CoreError::PositionExpired { next, earliest }),
            OnExpired::ClampToEarliest => Ok(RecoveryPlan {
                source,
                start: Offset::start_of(earliest, false),
                warnings: vec![format!(
                    "POSITION_CLAMPED: snapshot {next} is no longer readable; starting at the earliest readable \
                     snapshot {earliest} and skipping snapshots {next}–{}",
                    earliest - 1
                )],
                skipped: Some((next, earliest - 1)),
            }),
        };
    }
    Ok(RecoveryPlan {
        source,
        start: Offset::start_of(next, false),
        warnings: Vec::new(),
        skipped: None,
    })
}

/// R3: the startup options.
fn plan_startup(req: &RecoveryRequest) -> Result<RecoveryPlan, CoreError> {
    let range = &req.range;
    let plan = |start: Offset| RecoveryPlan {
        source: RecoverySource::StartupOptions,
        start,
        warnings: Vec::new(),
        skipped: None,
    };
    match req.startup {
        StartupMode::LatestFull if range.is_empty() => Ok(plan(Offset::start_of(1, false))),
        StartupMode::LatestFull => Ok(plan(Offset::start_of(range.latest_snapshot, true))),
        StartupMode::Latest => Ok(plan(Offset::start_of(range.latest_snapshot + 1, false))),
        StartupMode::FromSnapshot(id) => resume_incrementally(req, id, RecoverySource::StartupOptions),
        StartupMode::FromSnapshotFull(id) => {
            if id > range.latest_snapshot {
                if range.is_empty() && id == 1 {
                    // Nothing to scan yet: the first snapshot, read as a delta,
                    // is the same data.
                    return Ok(plan(Offset::start_of(1, false)));
                }
                return Err(CoreError::PositionAheadOfTable {
                    next: id,
                    latest: range.latest_snapshot,
                });
            }
            Ok(plan(Offset::start_of(id.max(range.earliest_readable(true)), true)))
        }
    }
}

/// R4: replays the logged batch exactly when its start is still readable,
/// else falls back to R1–R3; never mixes a full and an incremental plan.
fn replay_checkpoint(
    req: &RecoveryRequest,
    consumer: Option<&ConsumerRecord>,
    logged: LoggedBatch,
) -> Result<RecoveryPlan, CoreError> {
    let (resume, resume_full) = if logged.start.is_complete() {
        (logged.start.snapshot_id + 1, false)
    } else {
        (logged.start.snapshot_id, logged.start.scan_snapshot)
    };
    let earliest = req.range.earliest_readable(resume_full);
    let plan = if resume < earliest {
        let mut fallback = plan_without_checkpoint(req, consumer)?;
        fallback.warnings.insert(
            0,
            format!(
                "CHECKPOINT_EXPIRED: the checkpointed start {} is no longer readable (resume snapshot {resume}, \
                 earliest readable {earliest}); recovering from {} instead",
                logged.start, fallback.start
            ),
        );
        fallback
    } else {
        RecoveryPlan {
            source: RecoverySource::Checkpoint,
            start: logged.start,
            warnings: Vec::new(),
            skipped: None,
        }
    };
    let end = logged.end;
    if plan.start.snapshot_id == end.snapshot_id && plan.start.scan_snapshot != end.scan_snapshot {
        return Err(CoreError::ReplayScanMismatch {
            snapshot_id: end.snapshot_id,
            start: plan.start,
            end,
        });
    }
    if plan.start.position_cmp(&end) == Ordering::Greater {
        return Err(CoreError::ReplayRangeExpired { start: plan.start, end });
    }
    Ok(plan)
}

/// The answer to GetRecoveryPosition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The plan.
    pub plan: RecoveryPlan,
    /// The key's consumer, if it exists and has not expired.
    pub consumer: Option<ConsumerRecord>,
    /// Whether the plan's full-scan snapshot is pinned for the caller's lease.
    pub pinned: bool,
}

/// R1–R4 plus E2 and E5 for one key: ignores an expired consumer, plans the
/// start, and — when the caller names its live lease and the plan is a full
/// scan — pins that snapshot for the lease.
pub fn recover(
    state: Option<&KeyState>,
    req: &RecoveryRequest,
    lease_id: Option<Uuid>,
    expiration: Option<Duration>,
    now: Timestamp,
) -> Result<Transition<Recovered>, CoreError> {
    if let Some(lease_id) = lease_id {
        check_lease_on_key(state, lease_id, now)?;
    }
    let mut warnings = Vec::new();
    let consumer = match state {
        Some(s) if consumer_expired(s, expiration, now) => {
            warnings.push(format!(
                "CONSUMER_EXPIRED: the consumer at next_snapshot {} has expired and is ignored",
                s.next_snapshot().unwrap_or_default()
            ));
            None
        }
        Some(s) => s.consumer,
        None => None,
    };
    let mut plan = plan(req, consumer.as_ref())?;
    plan.warnings.splice(0..0, warnings);

    let pin = plan.start.scan_snapshot.then_some(plan.start.snapshot_id);
    let mut write = None;
    if let (Some(pin), Some(state)) = (pin.filter(|_| lease_id.is_some()), state) {
        let lease = state.lease.as_ref().expect("lease checked");
        if lease.full_scan_pin != Some(pin) {
            let mut next = state.clone();
            next.lease.as_mut().expect("lease checked").full_scan_pin = Some(pin);
            write = Some(next);
        }
    }
    let output = Recovered {
        plan,
        consumer,
        pinned: lease_id.is_some() && pin.is_some(),
    };
    Ok(Transition {
        requires_live_lease: write.is_some(),
        write,
        events: Vec::new(),
        output,
    })
}

/// The lease named in a recovery request must be the key's live lease.
fn check_lease_on_key(state: Option<&KeyState>, lease_id: Uuid, now: Timestamp) -> Result<(), CoreError> {
    // Mutant: a lease id that is not this key's lease passes (it may be
    // another key's, or none at all).
    if crate::mutant!("recovery_accepts_any_lease")
        && state
            .and_then(|s| s.lease.as_ref())
            .is_none_or(|l| l.lease_id != lease_id)
    {
        return Ok(());
    }
    let epoch = state
        .and_then(|s| s.lease.as_ref())
        .filter(|l| l.lease_id == lease_id)
        .map_or(0, |l| l.epoch);
    check_lease(state, lease_id, epoch, now).map(|_| ())
}
