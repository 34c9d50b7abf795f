//! The domain's errors. Each maps to one gRPC code and one `ErrorInfo`
//! reason (SPEC §7); the mapping lives in the server, exhaustively.
//!
//! One room: the enum, its messages and its reasons are read side by side
//! against SPEC §7's table, and a variant split from its message or reason
//! is the one that drifts.

use std::fmt;
use std::time::Duration;

use uuid::Uuid;

use crate::ids::ConsumerKey;
use crate::offset::Offset;
use crate::time::duration_millis;
use crate::validate::FieldViolation;

/// Why a lease presented by a caller does not hold its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseLoss {
    /// The lease's deadline passed without a renewal.
    Expired,
    /// The holder released it.
    Released,
    /// An operator revoked it (or forced a reset/delete).
    Revoked,
    /// A newer lease (a takeover) replaced it.
    Superseded,
    /// The lease id is known but the epoch given with it is not the lease's.
    EpochMismatch,
    /// No such lease (never granted, or its record was pruned).
    Unknown,
}

impl LeaseLoss {
    /// Every state, for documents and tests that list them.
    pub const ALL: [LeaseLoss; 6] = [
        LeaseLoss::Expired,
        LeaseLoss::Released,
        LeaseLoss::Revoked,
        LeaseLoss::Superseded,
        LeaseLoss::EpochMismatch,
        LeaseLoss::Unknown,
    ];

    /// Stable lower-case name, for error metadata and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseLoss::Expired => "expired",
            LeaseLoss::Released => "released",
            LeaseLoss::Revoked => "revoked",
            LeaseLoss::Superseded => "superseded",
            LeaseLoss::EpochMismatch => "epoch_mismatch",
            LeaseLoss::Unknown => "unknown",
        }
    }
}

impl fmt::Display for LeaseLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a live lease refused (`LEASE_HELD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimant {
    /// A query acquiring the consumer: one query owns a consumer.
    Query,
    /// An operator's change (reset, delete, clear, import) without force.
    Operator,
}

impl Claimant {
    /// What the refused caller can do.
    pub fn way_out(self) -> &'static str {
        match self {
            Claimant::Query => "concurrent queries sharing one consumer are not allowed",
            Claimant::Operator => {
                "the change would race the running query: force it (the CLI's --force, the request's force: true), \
                 which revokes the lease and fences the query, or revoke the lease first"
            }
        }
    }
}

/// A broken rule. Nothing was changed when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// Malformed input; each violation names its field.
    #[error("invalid argument: {}", join_violations(.0))]
    InvalidArgument(Vec<FieldViolation>),

    /// L2: another holder's lease on the key is live.
    #[error(
        "consumer {key} is leased by holder {holder:?} (epoch {epoch}) for another {}; {}",
        crate::options::Human(*remaining),
        claimant.way_out()
    )]
    LeaseHeld {
        /// The key (boxed: it keeps every `Result` of the crate small).
        key: Box<ConsumerKey>,
        /// Who holds it.
        holder: String,
        /// The live lease's epoch.
        epoch: i64,
        /// Time left on the live lease.
        remaining: Duration,
        /// Who was refused: the message tells each its way out.
        claimant: Claimant,
    },

    /// L5/C1: the presented lease is not the key's live lease.
    #[error(
        "lease {lease_id} is not held ({loss}){}; the query must stop and acquire a new lease",
        current_epoch.map(|e| format!(", current epoch {e}")).unwrap_or_default()
    )]
    LeaseNotHeld {
        /// The lease presented.
        lease_id: Uuid,
        /// Why it does not hold the key.
        loss: LeaseLoss,
        /// The key's current epoch, when the key is known.
        current_epoch: Option<i64>,
    },

    /// C5: the lease already committed this batch id with another end offset.
    #[error("batch {batch_id} was already committed with end {committed}, not {requested}")]
    BatchConflict {
        /// The batch id.
        batch_id: i64,
        /// End offset committed first.
        committed: Offset,
        /// End offset of this request.
        requested: Offset,
    },

    /// C6: a lease that already wrote the consumer tried to move it back.
    #[error("commit would move consumer back from next_snapshot {current} to {computed} under the same lease")]
    PositionRegression {
        /// The consumer's next snapshot.
        current: i64,
        /// The position the commit computed.
        computed: i64,
    },

    /// R2/R3: the position is no longer readable; resuming would lose data.
    #[error(
        "snapshot {next} is no longer readable (earliest readable is {earliest}); resuming there would silently skip data. Set on_expired = ON_EXPIRED_CLAMP_TO_EARLIEST to accept the loss, or reset the consumer"
    )]
    PositionExpired {
        /// The snapshot to resume at.
        next: i64,
        /// The earliest readable snapshot.
        earliest: i64,
    },

    /// R2: the position is beyond the table's latest snapshot + 1.
    #[error("next snapshot {next} is ahead of the table (latest snapshot {latest}); the table may have been recreated")]
    PositionAheadOfTable {
        /// The snapshot to resume at.
        next: i64,
        /// The table's latest snapshot.
        latest: i64,
    },

    /// A reset past a registered table's latest snapshot + 1 (reason
    /// `POSITION_AHEAD_OF_TABLE`, as recovery would refuse the position
    /// later): said with the range a reset may use, since here it is most
    /// often a typo.
    #[error(
        "cannot reset to next snapshot {next}: past the table's latest snapshot {latest} + 1 = {}, the furthest \
         a consumer's next snapshot goes (everything written so far read; --to-latest moves consumers there)",
        latest.saturating_add(1)
    )]
    ResetAheadOfTable {
        /// The position asked for.
        next: i64,
        /// The table's latest snapshot.
        latest: i64,
    },

    /// R4: replaying the logged batch would mix a full and an incremental plan.
    #[error(
        "the logged batch cannot be replayed: its start {start} and end {end} in snapshot {snapshot_id} use different scan modes, and the checkpointed range is no longer readable without changing its data. Start a new query with a new checkpoint"
    )]
    ReplayScanMismatch {
        /// The shared snapshot.
        snapshot_id: i64,
        /// The (possibly fallen-back) start.
        start: Offset,
        /// The logged end.
        end: Offset,
    },

    /// A2: the operator's compare-and-set precondition failed.
    #[error(
        "expected next_snapshot {expected} but the consumer {}; nothing was changed",
        actual.map(|a| format!("is at {a}")).unwrap_or_else(|| "does not exist".into())
    )]
    NextSnapshotMismatch {
        /// What the operator expected.
        expected: i64,
        /// What the consumer has (`None`: no consumer).
        actual: Option<i64>,
    },

    /// A change executed as planned found another live lease than the plan
    /// saw (a query took the consumer over since): refused, not applied.
    #[error(
        "consumer {key}'s live lease is {} now, not {} as planned: it changed since the plan; plan again",
        lease_text(actual),
        lease_text(expected)
    )]
    LeaseMismatch {
        /// The key (boxed: it keeps every `Result` of the crate small).
        key: Box<ConsumerKey>,
        /// The lease the plan saw (`None`: none live).
        expected: Option<Uuid>,
        /// The lease live now (`None`: none).
        actual: Option<Uuid>,
    },

    /// The key has no consumer (and no lease) to describe.
    #[error(
        "consumer {key} not found{}",
        suggestion.as_ref().map(|s| format!("; {s}")).unwrap_or_default()
    )]
    ConsumerNotFound {
        /// The key.
        key: ConsumerKey,
        /// What the name most likely meant (filled in where names are
        /// known; `None` from the rules themselves).
        suggestion: Option<crate::suggest::Suggestion>,
    },

    /// SPEC §9: a registered table's directory holds no snapshot (missing,
    /// empty, a mistyped location, a missing branch).
    #[error(
        "table {table} is registered at {location}, but its directory holds no snapshot for branch {branch} (a mistyped location, a dropped table or branch?); fix the registration or unregister the table to use the worker's range"
    )]
    TableLocationEmpty {
        /// The table.
        table: String,
        /// The branch.
        branch: String,
        /// The registered location.
        location: String,
    },

    /// SPEC §9: a registered table's directory cannot be read right now.
    #[error("cannot read table {table}'s directory at {location} right now: {why}; retry")]
    TableLocationUnreadable {
        /// The table.
        table: String,
        /// The registered location.
        location: String,
        /// What failed.
        why: String,
    },

    /// SPEC §9: the table at the registered location is not the one that was
    /// registered (dropped and recreated under the same name).
    #[error(
        "table {table} at {location} is not the table that was registered (identity {registered}, now {found}): it was dropped and recreated, so consumer positions would name other data; delete or reset its consumers, then register it again"
    )]
    TableIdentityChanged {
        /// The table.
        table: String,
        /// The registered location.
        location: String,
        /// The identity stored at registration.
        registered: String,
        /// The identity found now.
        found: String,
    },

    /// A6: a reset target that needs the table's snapshots (earliest,
    /// latest, a time, a shift) on a table tidemark does not know the
    /// location of.
    #[error(
        "table {table} is not registered, so its snapshots are unknown: reset to a snapshot id (--to-snapshot), or register the table first (tidemark tables register)"
    )]
    TableNotRegistered {
        /// The table.
        table: String,
    },

    /// A6: a bulk change executed against a plan (expected positions per
    /// consumer) met a consumer the plan did not show; it is left alone.
    #[error("consumer {consumer_id} was not in the plan (it appeared since); plan again to include it")]
    NotInPlan {
        /// The consumer.
        consumer_id: String,
    },

    /// A bulk operation ran out of its call's time before this consumer:
    /// nothing was changed for it (the answer lists what was).
    #[error(
        "consumer {consumer_id} was not reached before the call's time ran out; nothing was changed for it: \
         send the request again for the rest"
    )]
    NotReached {
        /// The consumer.
        consumer_id: String,
    },

    /// SPEC §7: the key's epochs are used up; a new epoch would pass the
    /// ceiling, so no lease can be granted or revoked on it. Epochs never
    /// wrap.
    #[error(
        "consumer {key} has used up its epochs (epoch {epoch}, ceiling {ceiling}); delete the consumer and create it again under a new id"
    )]
    EpochExhausted {
        /// The key.
        key: ConsumerKey,
        /// The key's epoch high-water mark.
        epoch: i64,
        /// The highest epoch tidemark grants.
        ceiling: i64,
    },

    /// R4: the recovery start is after the logged batch's end.
    #[error(
        "the logged batch cannot be replayed: recovery start {start} is newer than the logged end offset {end}, so the checkpointed range is no longer readable. Start a new query with a new checkpoint"
    )]
    ReplayRangeExpired {
        /// The (possibly fallen-back) start.
        start: Offset,
        /// The logged end.
        end: Offset,
    },
}

impl CoreError {
    /// The `google.rpc.ErrorInfo` reason (SPEC §2–§4).
    pub fn reason(&self) -> &'static str {
        match self {
            CoreError::InvalidArgument(_) => "INVALID_ARGUMENT",
            CoreError::LeaseHeld { .. } => "LEASE_HELD",
            CoreError::LeaseNotHeld { .. } => "LEASE_NOT_HELD",
            CoreError::BatchConflict { .. } => "BATCH_CONFLICT",
            CoreError::PositionRegression { .. } => "POSITION_REGRESSION",
            CoreError::PositionExpired { .. } => "POSITION_EXPIRED",
            CoreError::PositionAheadOfTable { .. } | CoreError::ResetAheadOfTable { .. } => "POSITION_AHEAD_OF_TABLE",
            CoreError::ReplayScanMismatch { .. } => "REPLAY_SCAN_MISMATCH",
            CoreError::ReplayRangeExpired { .. } => "REPLAY_RANGE_EXPIRED",
            CoreError::NextSnapshotMismatch { .. } => "NEXT_SNAPSHOT_MISMATCH",
            CoreError::ConsumerNotFound { .. } => "CONSUMER_NOT_FOUND",
            CoreError::LeaseMismatch { .. } => "LEASE_MISMATCH",
            CoreError::TableLocationEmpty { .. } => "TABLE_LOCATION_EMPTY",
            CoreError::TableLocationUnreadable { .. } => "TABLE_LOCATION_UNREADABLE",
            CoreError::TableIdentityChanged { .. } => "TABLE_IDENTITY_CHANGED",
            CoreError::TableNotRegistered { .. } => "TABLE_NOT_REGISTERED",
            CoreError::NotInPlan { .. } => "NOT_IN_PLAN",
            CoreError::NotReached { .. } => "NOT_REACHED",
            CoreError::EpochExhausted { .. } => "EPOCH_EXHAUSTED",
        }
    }

    /// The `ErrorInfo` metadata: the error's details as strings.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            CoreError::InvalidArgument(violations) => violations
                .first()
                .map(|v| vec![("field", v.field.clone())])
                .unwrap_or_default(),
            CoreError::LeaseHeld {
                key,
                holder,
                epoch,
                remaining,
                ..
            } => {
                let mut m = key_metadata(key);
                m.extend([
                    ("holder", holder.clone()),
                    ("epoch", epoch.to_string()),
                    ("remaining_ms", duration_millis(*remaining).to_string()),
                ]);
                m
            }
            CoreError::LeaseNotHeld {
                lease_id,
                loss,
                current_epoch,
            } => {
                let mut m = vec![("lease_id", lease_id.to_string()), ("state", loss.as_str().to_owned())];
                if let Some(epoch) = current_epoch {
                    m.push(("current_epoch", epoch.to_string()));
                }
                m
            }
            CoreError::BatchConflict {
                batch_id,
                committed,
                requested,
            } => vec![
                ("batch_id", batch_id.to_string()),
                ("committed_end", committed.to_string()),
                ("requested_end", requested.to_string()),
            ],
            CoreError::PositionRegression { current, computed } => vec![
                ("next_snapshot", current.to_string()),
                ("computed_next_snapshot", computed.to_string()),
            ],
            CoreError::PositionExpired { next, earliest } => vec![
                ("next_snapshot", next.to_string()),
                ("earliest_snapshot", earliest.to_string()),
            ],
            CoreError::PositionAheadOfTable { next, latest } | CoreError::ResetAheadOfTable { next, latest } => vec![
                ("next_snapshot", next.to_string()),
                ("latest_snapshot", latest.to_string()),
            ],
            CoreError::ReplayScanMismatch {
                snapshot_id,
                start,
                end,
            } => vec![
                ("snapshot_id", snapshot_id.to_string()),
                ("start", start.to_string()),
                ("end", end.to_string()),
            ],
            CoreError::ReplayRangeExpired { start, end } => {
                vec![("start", start.to_string()), ("end", end.to_string())]
            }
            CoreError::TableLocationEmpty {
                table,
                branch,
                location,
            } => vec![
                ("table", table.clone()),
                ("branch", branch.clone()),
                ("location", location.clone()),
            ],
            CoreError::TableLocationUnreadable { table, location, why } => vec![
                ("table", table.clone()),
                ("location", location.clone()),
                ("error", why.clone()),
            ],
            CoreError::TableIdentityChanged {
                table,
                location,
                registered,
                found,
            } => vec![
                ("table", table.clone()),
                ("location", location.clone()),
                ("registered_identity", registered.clone()),
                ("found_identity", found.clone()),
            ],
            CoreError::TableNotRegistered { table } => vec![("table", table.clone())],
            CoreError::NotInPlan { consumer_id } | CoreError::NotReached { consumer_id } => {
                vec![("consumer_id", consumer_id.clone())]
            }
            CoreError::NextSnapshotMismatch { expected, actual } => {
                let mut m = vec![("expected_next_snapshot", expected.to_string())];
                if let Some(actual) = actual {
                    m.push(("next_snapshot", actual.to_string()));
                }
                m
            }
            CoreError::LeaseMismatch { key, expected, actual } => {
                let mut m = key_metadata(key);
                m.push(("expected_lease_id", expected.map(|l| l.to_string()).unwrap_or_default()));
                m.push(("actual_lease_id", actual.map(|l| l.to_string()).unwrap_or_default()));
                m
            }
            CoreError::ConsumerNotFound { key, suggestion } => {
                let mut m = key_metadata(key);
                if let Some(name) = suggestion.as_ref().and_then(|s| s.name()) {
                    m.push(("did_you_mean", name.to_owned()));
                }
                m
            }
            CoreError::EpochExhausted { key, epoch, ceiling } => {
                let mut m = key_metadata(key);
                m.extend([("epoch", epoch.to_string()), ("ceiling", ceiling.to_string())]);
                m
            }
        }
    }

    /// A single-field invalid-argument error.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        CoreError::InvalidArgument(vec![FieldViolation::new(field, description)])
    }
}

/// A lease id as a message says it.
fn lease_text(lease: &Option<Uuid>) -> String {
    lease.map_or_else(|| "none".to_owned(), |l| l.to_string())
}

fn key_metadata(key: &ConsumerKey) -> Vec<(&'static str, String)> {
    vec![
        ("table", key.table.as_str().to_owned()),
        ("branch", key.branch.as_str().to_owned()),
        ("consumer_id", key.consumer_id.as_str().to_owned()),
    ]
}

fn join_violations(violations: &[FieldViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<Vec<FieldViolation>> for CoreError {
    fn from(violations: Vec<FieldViolation>) -> Self {
        CoreError::InvalidArgument(violations)
    }
}
