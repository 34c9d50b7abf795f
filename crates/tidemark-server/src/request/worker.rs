//! The worker protocol's and the retention API's requests.

use std::time::Duration;

use tidemark_core::validate::Violations;
use tidemark_core::{BranchName, CommitBatch, ConsumerKey, RecoveryRequest, TableName};
use tidemark_proto::v1 as pb;
use tidemark_service::store::{MAX_PAGE, StoreError};
use uuid::Uuid;

use super::{Parse, Scoped, Touches, checked, fields};
use crate::convert;

pub(crate) struct AcquireLease {
    pub key: ConsumerKey,
    pub holder: String,
    pub ttl: Option<Duration>,
}

impl Parse for pb::AcquireLeaseRequest {
    type Parsed = AcquireLease;
    fn parse(self) -> Result<AcquireLease, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        let holder = v.check(tidemark_core::ids::parse_holder(&self.holder, "holder").map_err(|e| vec![e]));
        let ttl = fields::duration(&mut v, self.ttl.as_ref(), "ttl");
        let parsed = key.zip(holder).map(|(key, holder)| AcquireLease { key, holder, ttl });
        checked(v, parsed)
    }
}

impl Scoped for AcquireLease {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

pub(crate) struct RenewLease {
    pub lease_id: Uuid,
    pub epoch: i64,
    pub ttl: Option<Duration>,
}

impl Parse for pb::RenewLeaseRequest {
    type Parsed = RenewLease;
    fn parse(self) -> Result<RenewLease, StoreError> {
        let mut v = Violations::new();
        let lease_id = fields::lease_id(&mut v, &self.lease_id, "lease_id");
        let epoch = fields::epoch(&mut v, self.epoch, "epoch");
        let ttl = fields::duration(&mut v, self.ttl.as_ref(), "ttl");
        let parsed = lease_id
            .zip(epoch)
            .map(|(lease_id, epoch)| RenewLease { lease_id, epoch, ttl });
        checked(v, parsed)
    }
}

impl Scoped for RenewLease {
    fn touches(&self) -> Touches<'_> {
        Touches::Lease
    }
}

pub(crate) struct ReleaseLease {
    pub lease_id: Uuid,
    pub epoch: i64,
}

impl Parse for pb::ReleaseLeaseRequest {
    type Parsed = ReleaseLease;
    fn parse(self) -> Result<ReleaseLease, StoreError> {
        let mut v = Violations::new();
        let lease_id = fields::lease_id(&mut v, &self.lease_id, "lease_id");
        let epoch = fields::epoch(&mut v, self.epoch, "epoch");
        let parsed = lease_id
            .zip(epoch)
            .map(|(lease_id, epoch)| ReleaseLease { lease_id, epoch });
        checked(v, parsed)
    }
}

impl Scoped for ReleaseLease {
    fn touches(&self) -> Touches<'_> {
        Touches::Lease
    }
}

impl Parse for pb::CommitBatchRequest {
    type Parsed = CommitBatch;
    fn parse(self) -> Result<CommitBatch, StoreError> {
        let mut v = Violations::new();
        let lease_id = fields::lease_id(&mut v, &self.lease_id, "lease_id");
        let epoch = fields::epoch(&mut v, self.epoch, "epoch");
        if self.batch_id < 0 {
            v.add("batch_id", format!("must be >= 0 (got {})", self.batch_id));
        }
        if let Some(latest) = self.latest_snapshot
            && latest < 0
        {
            v.add("latest_snapshot", format!("must be >= 0 when present (got {latest})"));
        }
        // The end offset is validated by the rule, after the lease check
        // (C1 before C2).
        let parsed = lease_id.zip(epoch).map(|(lease_id, epoch)| CommitBatch {
            lease_id,
            epoch,
            batch_id: self.batch_id,
            end: self.end.as_ref().map(convert::offset),
            latest_snapshot: self.latest_snapshot,
        });
        checked(v, parsed)
    }
}

impl Scoped for CommitBatch {
    fn touches(&self) -> Touches<'_> {
        Touches::Lease
    }
}

pub(crate) struct GetRecoveryPosition {
    pub key: ConsumerKey,
    /// The recovery as the worker asks for it, built once here (the range
    /// is the worker's view; the application plans a registered table with
    /// its directory's).
    pub recovery: RecoveryRequest,
    pub lease_id: Option<Uuid>,
}

impl Parse for pb::GetRecoveryPositionRequest {
    type Parsed = GetRecoveryPosition;
    fn parse(self) -> Result<GetRecoveryPosition, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        let startup = fields::startup(&mut v, self.startup.as_ref());
        let range = fields::snapshot_range(&mut v, self.table.as_ref());
        let checkpoint = fields::logged_batch(&mut v, self.checkpoint.as_ref());
        let on_expired = fields::on_expired(&mut v, self.on_expired);
        let lease_id = self
            .lease_id
            .as_deref()
            .filter(|id| !id.is_empty())
            .map(|id| fields::lease_id(&mut v, id, "lease_id"));
        if let Some(range) = &range {
            v.check(range.validate("table"));
        }
        if let Some(Some(checkpoint)) = &checkpoint {
            v.check(checkpoint.validate("checkpoint"));
        }
        let parsed = match (key, startup, range, checkpoint, on_expired) {
            (Some(key), Some(startup), Some(range), Some(checkpoint), Some(on_expired)) => Some(GetRecoveryPosition {
                key,
                recovery: RecoveryRequest {
                    startup,
                    ignore_progress: self.ignore_progress,
                    range,
                    checkpoint,
                    on_expired,
                },
                lease_id: lease_id.flatten(),
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for GetRecoveryPosition {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

pub(crate) struct Fence {
    pub table: TableName,
    pub branch: BranchName,
    pub changelog_decoupled: bool,
    /// Most holders listed.
    pub limit: i64,
}

impl Parse for pb::GetRetentionFenceRequest {
    type Parsed = Fence;
    fn parse(self) -> Result<Fence, StoreError> {
        fence(&self.table, &self.branch, self.changelog_decoupled, None)
    }
}

impl Parse for pb::ExplainRetentionRequest {
    type Parsed = Fence;
    fn parse(self) -> Result<Fence, StoreError> {
        fence(&self.table, &self.branch, self.changelog_decoupled, Some(self.limit))
    }
}

/// Most holders GetRetentionFence lists at each fence.
const FENCE_HOLDERS: i64 = 100;

fn fence(table: &str, branch: &str, changelog_decoupled: bool, limit: Option<i32>) -> Result<Fence, StoreError> {
    let mut v = Violations::new();
    let table = fields::table_name(&mut v, table, "table");
    let branch = fields::branch_name(&mut v, branch, "branch");
    let limit = match limit {
        Some(limit) => fields::page_size(&mut v, limit, 100, MAX_PAGE, "limit"),
        None => Some(FENCE_HOLDERS),
    };
    let parsed = match (table, branch, limit) {
        (Some(table), Some(branch), Some(limit)) => Some(Fence {
            table,
            branch,
            changelog_decoupled,
            limit,
        }),
        _ => None,
    };
    checked(v, parsed)
}

impl Scoped for Fence {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}
