//! The state of one consumer key and the history events its changes produce.

use std::fmt;
use std::time::Duration;

use uuid::Uuid;

use crate::ids::ConsumerKey;
use crate::offset::Offset;
use crate::time::Timestamp;

/// Everything tidemark knows about one key: its epoch high-water mark, its
/// consumer record and its current (or last) lease. Storage keeps one row per
/// key and never deletes it, so epochs are never reused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// The key.
    pub key: ConsumerKey,
    /// Highest epoch ever issued or burned for the key (0 = never leased).
    pub epoch: i64,
    /// The consumer record, when one exists.
    pub consumer: Option<ConsumerRecord>,
    /// The current or most recent lease.
    pub lease: Option<LeaseRecord>,
    /// The latest snapshot last reported by a worker (for lag).
    pub latest_snapshot: Option<i64>,
}

impl KeyState {
    /// A key that has never been seen.
    pub fn new(key: ConsumerKey) -> Self {
        Self {
            key,
            epoch: 0,
            consumer: None,
            lease: None,
            latest_snapshot: None,
        }
    }

    /// The lease, if it is live at `now`.
    pub fn live_lease(&self, now: Timestamp) -> Option<&LeaseRecord> {
        self.lease.as_ref().filter(|l| l.is_live(now))
    }

    /// The consumer's next snapshot, if there is a consumer.
    pub fn next_snapshot(&self) -> Option<i64> {
        self.consumer.as_ref().map(|c| c.next_snapshot)
    }

    /// Snapshots not yet consumed, when both the position and the latest
    /// snapshot are known.
    pub fn lag(&self) -> Option<i64> {
        lag(self.next_snapshot()?, self.latest_snapshot?)
    }
}

/// Snapshots not yet consumed: `latest - next + 1`, never negative.
pub fn lag(next_snapshot: i64, latest_snapshot: i64) -> Option<i64> {
    Some(latest_snapshot.saturating_sub(next_snapshot).saturating_add(1).max(0))
}

/// A consumer: every snapshot below `next_snapshot` is fully consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The next snapshot to read (>= 1).
    pub next_snapshot: i64,
    /// When the record was created.
    pub created_at: Timestamp,
    /// Last write or refresh; drives expiration.
    pub updated_at: Timestamp,
}

/// How a lease ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Granted and not ended; live until its deadline.
    Active,
    /// Released by its holder.
    Released,
    /// Revoked by an operator.
    Revoked,
}

impl LeaseStatus {
    /// Stable storage code.
    pub fn code(self) -> i16 {
        match self {
            LeaseStatus::Active => 1,
            LeaseStatus::Released => 2,
            LeaseStatus::Revoked => 3,
        }
    }

    /// Parses a storage code.
    pub fn from_code(code: i16) -> Option<Self> {
        match code {
            1 => Some(LeaseStatus::Active),
            2 => Some(LeaseStatus::Released),
            3 => Some(LeaseStatus::Revoked),
            _ => None,
        }
    }
}

/// The last batch a lease committed (C5), whatever its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommittedBatch {
    /// The engine's batch id.
    pub batch_id: i64,
    /// Its end offset.
    pub end: Offset,
}

/// The longest client name kept (a user-agent can be long; the name and
/// version lead it).
pub const MAX_CLIENT_LEN: usize = 128;

/// Where a lease was asked from, as the server saw the call. Behind a proxy
/// or a load balancer the peer is the proxy's address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The peer address (`ip:port`); `None` when the transport gives none
    /// (an internal call, a Unix socket).
    pub peer: Option<String>,
    /// The client's name and version (the user-agent); `None` when absent.
    pub client: Option<String>,
}

impl Caller {
    /// No caller recorded.
    pub const UNKNOWN: Caller = Caller {
        peer: None,
        client: None,
    };

    /// A caller from what the transport gives: the client name is cut to
    /// [`MAX_CLIENT_LEN`] characters and kept only when printable.
    pub fn new(peer: Option<String>, client: Option<&str>) -> Self {
        let client = client
            .map(|c| c.trim().chars().take(MAX_CLIENT_LEN).collect::<String>())
            .filter(|c| !c.is_empty() && c.chars().all(|ch| !ch.is_control()));
        Self { peer, client }
    }
}

/// One lease grant on a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The grant's id.
    pub lease_id: Uuid,
    /// The query that holds it.
    pub holder: String,
    /// The authenticated principal that acquired it ("anonymous" without
    /// authentication). Only it may renew, commit or release the lease.
    pub principal: String,
    /// The grant's epoch (fencing token).
    pub epoch: i64,
    /// Its time to live (after clamping).
    pub ttl: Duration,
    /// When it was granted.
    pub acquired_at: Timestamp,
    /// When it ends unless renewed (or when it was released/revoked).
    pub deadline: Timestamp,
    /// Whether it was ended explicitly.
    pub status: LeaseStatus,
    /// The last batch it committed.
    pub last_batch: Option<CommittedBatch>,
    /// Whether it has written the consumer (then the position never moves
    /// back under it, C6).
    pub wrote_consumer: bool,
    /// The last snapshot for which a legacy-offset warning was logged, so the
    /// log says it once per (lease, snapshot).
    pub legacy_warned_snapshot: Option<i64>,
    /// E5: the snapshot of an initial full scan in progress, pinned in the
    /// retention fences until the scan completes or the lease ends.
    pub full_scan_pin: Option<i64>,
    /// Where the grant was asked from (issue 55).
    pub caller: Caller,
    /// When it last committed a new batch (a retry of the last one does
    /// not count); `None` before its first.
    pub committed_at: Option<Timestamp>,
}

impl LeaseRecord {
    /// Live: not ended and before its deadline.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.status == LeaseStatus::Active && now < self.deadline
    }

    /// Time left before the deadline.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        now.until(self.deadline)
    }
}

/// Kinds of history events (SPEC A5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A consumer was created.
    Create,
    /// A consumer's position moved forward.
    Advance,
    /// A consumer was rewritten at the same position (updated_at refreshed).
    Refresh,
    /// A lease's first write moved a consumer back.
    Rewind,
    /// An operator set a consumer's position.
    Reset,
    /// An operator deleted a consumer.
    Delete,
    /// The sweeper (or ExpireConsumers) deleted an expired consumer.
    Expire,
    /// A lease was granted on a key with no unreleased lease.
    LeaseAcquire,
    /// A lease was granted over an unreleased one (same holder, or expired).
    LeaseTakeover,
    /// A holder released its lease.
    LeaseRelease,
    /// An operator revoked a lease.
    LeaseRevoke,
    /// The consumer's Paimon file was changed or deleted from outside and
    /// written back with tidemark's position (SPEC §9).
    MirrorRepair,
}

impl EventKind {
    /// Every kind, for exhaustive tests and parsing.
    pub const ALL: [EventKind; 12] = [
        EventKind::Create,
        EventKind::Advance,
        EventKind::Refresh,
        EventKind::Rewind,
        EventKind::Reset,
        EventKind::Delete,
        EventKind::Expire,
        EventKind::LeaseAcquire,
        EventKind::LeaseTakeover,
        EventKind::LeaseRelease,
        EventKind::LeaseRevoke,
        EventKind::MirrorRepair,
    ];

    /// Stable name, stored in history and shown to operators.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Create => "CREATE",
            EventKind::Advance => "ADVANCE",
            EventKind::Refresh => "REFRESH",
            EventKind::Rewind => "REWIND",
            EventKind::Reset => "RESET",
            EventKind::Delete => "DELETE",
            EventKind::Expire => "EXPIRE",
            EventKind::LeaseAcquire => "LEASE_ACQUIRE",
            EventKind::LeaseTakeover => "LEASE_TAKEOVER",
            EventKind::LeaseRelease => "LEASE_RELEASE",
            EventKind::LeaseRevoke => "LEASE_REVOKE",
            EventKind::MirrorRepair => "MIRROR_REPAIR",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One history event produced by a transition. Storage adds the key, the time,
/// the principal and the request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEvent {
    /// What happened.
    pub kind: EventKind,
    /// The position before (absent: no consumer).
    pub old_next: Option<i64>,
    /// The position after (absent: no consumer).
    pub new_next: Option<i64>,
    /// The epoch of the lease involved.
    pub epoch: Option<i64>,
    /// The lease involved.
    pub lease_id: Option<Uuid>,
    /// The batch id, for commits.
    pub batch_id: Option<i64>,
    /// The lease holder involved.
    pub holder: Option<String>,
    /// Free-form detail (e.g. the end offset).
    pub detail: Option<String>,
    /// For a commit, the latest snapshot of the branch known when it was
    /// written (the worker's report, or the registered table's directory
    /// when that is further): a consumer's lag over time is read from these.
    pub latest_snapshot: Option<i64>,
}

impl HistoryEvent {
    /// An event with only its kind and positions set.
    pub fn new(kind: EventKind, old_next: Option<i64>, new_next: Option<i64>) -> Self {
        Self {
            kind,
            old_next,
            new_next,
            epoch: None,
            lease_id: None,
            batch_id: None,
            holder: None,
            detail: None,
            latest_snapshot: None,
        }
    }

    /// Attaches the lease involved.
    pub fn with_lease(mut self, lease: &LeaseRecord) -> Self {
        self.epoch = Some(lease.epoch);
        self.lease_id = Some(lease.lease_id);
        self.holder = Some(lease.holder.clone());
        self
    }
}

/// The result of a rule applied to a key: the new state to store (if it
/// changed), the history it adds, and what to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition<T> {
    /// The state after the operation; `None` when nothing must be written.
    pub write: Option<KeyState>,
    /// Whether the write must only land while the lease it was decided
    /// under is still live at write time (a commit or renewal).
    pub requires_live_lease: bool,
    /// History rows to append in the same transaction as the write.
    pub events: Vec<HistoryEvent>,
    /// The answer to the caller.
    pub output: T,
}

impl<T> Transition<T> {
    /// The same change with its answer transformed.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Transition<U> {
        Transition {
            write: self.write,
            requires_live_lease: self.requires_live_lease,
            events: self.events,
            output: f(self.output),
        }
    }

    /// An answer that changes nothing.
    pub fn read_only(output: T) -> Self {
        Self {
            write: None,
            requires_live_lease: false,
            events: Vec::new(),
            output,
        }
    }
}
