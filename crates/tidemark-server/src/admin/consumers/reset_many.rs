//! ResetConsumers (SPEC §11 A6): a bulk reset, its target resolved per
//! consumer against the table's snapshots.

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::validate::Violations;
use tidemark_core::{BranchName, TableName};
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::split_bulk;
use crate::admin::AdminService;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct ResetConsumers {
    pub table: TableName,
    pub branch: BranchName,
    pub selector: ConsumerSelector,
    pub target: tidemark_core::reset::ResetTarget,
    pub force: bool,
    pub execute: bool,
    pub expected: tidemark_service::store::BulkExpected,
}

impl Parse for pb::ResetConsumersRequest {
    type Parsed = ResetConsumers;
    fn parse(self) -> Result<ResetConsumers, StoreError> {
        use pb::reset_target::Target;
        use tidemark_core::reset::ResetTarget;
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let branch = fields::branch_name(&mut v, &self.branch, "branch");
        let selector = v.check(ConsumerSelector::parse(&self.including, &self.excluding));
        let target = match self.target.and_then(|t| t.target) {
            Some(Target::Snapshot(id)) => fields::position(&mut v, id, "target.snapshot").map(ResetTarget::Snapshot),
            Some(Target::Earliest(true)) => Some(ResetTarget::Earliest),
            Some(Target::Latest(true)) => Some(ResetTarget::Latest),
            Some(Target::Earliest(false) | Target::Latest(false)) => {
                v.add("target", "earliest and latest are set with true");
                None
            }
            // Up to the end of year 9999, as RFC 3339 allows.
            Some(Target::Time(t))
                if (0..=253_402_300_799).contains(&t.seconds) && (0..1_000_000_000).contains(&t.nanos) =>
            {
                Some(ResetTarget::Time(t.seconds * 1000 + i64::from(t.nanos) / 1_000_000))
            }
            Some(Target::Time(_)) => {
                v.add("target.time", "must be a valid time between 1970 and 9999");
                None
            }
            Some(Target::ShiftBy(n)) => Some(ResetTarget::ShiftBy(n)),
            None => {
                v.add(
                    "target",
                    "required: one of snapshot, earliest, latest, time or shift_by",
                );
                None
            }
        };
        for (id, position) in &self.expected_next_snapshots {
            if *position < 1 {
                v.add(format!("expected_next_snapshots[{id}]"), "must be >= 1");
            }
        }
        let mut leases = std::collections::HashMap::new();
        for (id, lease) in &self.expected_lease_ids {
            let field = format!("expected_lease_ids[{id}]");
            if let Some(planned) = fields::expected_lease(&mut v, &field, Some(lease)) {
                leases.insert(id.clone(), planned);
            }
        }
        let parsed = match (table, branch, selector, target) {
            (Some(table), Some(branch), Some(selector), Some(target)) => Some(ResetConsumers {
                table,
                branch,
                selector,
                target,
                force: self.force,
                execute: self.execute,
                expected: tidemark_service::store::BulkExpected {
                    next_snapshots: self.expected_next_snapshots.into_iter().collect(),
                    leases,
                },
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ResetConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ResetConsumersRequest>,
) -> Result<Response<pb::ResetConsumersResponse>, Status> {
    let until = admin.rpcs.bulk_deadline(&request);
    admin
        .rpcs
        .handle("ResetConsumers", request, |ctx, req| async move {
            let (reset, table) = admin
                .app
                .reset_consumers(
                    &ctx,
                    &req.table,
                    &req.branch,
                    &req.selector,
                    req.target,
                    &req.expected,
                    req.force,
                    req.execute,
                    Some(until),
                )
                .await?;
            let (reset, skipped) = split_bulk(&reset);
            let warnings = match req.target {
                tidemark_core::reset::ResetTarget::Snapshot(next) => {
                    admin.app.reset_warnings(&req.table, &req.branch, next).await
                }
                _ => Vec::new(),
            };
            Ok(pb::ResetConsumersResponse {
                reset,
                skipped,
                executed: Some(req.execute),
                earliest_snapshot: table.map(|t| t.earliest),
                latest_snapshot: table.map(|t| t.latest),
                warnings,
            })
        })
        .await
}
