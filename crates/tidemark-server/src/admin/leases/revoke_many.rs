//! RevokeLeases (SPEC §11 A5): ends the selected live leases.

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::validate::Violations;
use tidemark_core::{BranchName, TableName};
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::admin::consumers::skipped_consumer;
use crate::convert;
use crate::request::fields::check_reason;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct RevokeLeases {
    pub table: Option<TableName>,
    pub branch: Option<BranchName>,
    pub selector: ConsumerSelector,
    pub reason: String,
    pub execute: bool,
}

impl Parse for pb::RevokeLeasesRequest {
    type Parsed = RevokeLeases;
    fn parse(self) -> Result<RevokeLeases, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
        let selector = v.check(ConsumerSelector::parse(&self.including, &self.excluding));
        check_reason(&mut v, &self.reason);
        let parsed = match (table, branch, selector) {
            (Some(table), Some(branch), Some(selector)) if v.is_empty() => Some(RevokeLeases {
                table,
                branch,
                selector,
                reason: if self.reason.is_empty() {
                    "revoked by an operator (bulk)".to_owned()
                } else {
                    self.reason
                },
                execute: self.execute,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for RevokeLeases {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.table.as_ref(), "revoke leases")
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::RevokeLeasesRequest>,
) -> Result<Response<pb::RevokeLeasesResponse>, Status> {
    let until = admin.rpcs.bulk_deadline(&request);
    admin
        .rpcs
        .handle("RevokeLeases", request, |ctx, req| async move {
            let filter = tidemark_service::store::KeyFilter {
                table: req.table.clone(),
                branch: req.branch.clone(),
                consumer_id_prefix: None,
            };
            let (revoked, left) = admin
                .app
                .revoke_leases(&ctx, &filter, &req.selector, &req.reason, req.execute, Some(until))
                .await?;
            Ok(pb::RevokeLeasesResponse {
                revoked: revoked
                    .iter()
                    .map(|(key, r)| pb::RevokedLeaseEntry {
                        consumer: Some(convert::key_to_pb(key)),
                        lease: r.lease.as_ref().map(|l| convert::revoked_lease_info(l, req.execute)),
                        epoch: r.epoch,
                    })
                    .collect(),
                executed: Some(req.execute),
                not_reached: left
                    .iter()
                    .map(|key| {
                        let consumer_id = key.consumer_id.as_str().to_owned();
                        skipped_consumer(key, &tidemark_core::CoreError::NotReached { consumer_id })
                    })
                    .collect(),
            })
        })
        .await
}
