//! ClearConsumers (SPEC §11 A4): removes the selected consumers of a
//! table's branch.

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::validate::Violations;
use tidemark_core::{BranchName, TableName};
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::split_bulk;
use crate::admin::AdminService;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct ClearConsumers {
    pub table: TableName,
    pub branch: BranchName,
    pub selector: ConsumerSelector,
    pub force: bool,
    pub execute: bool,
}

impl Parse for pb::ClearConsumersRequest {
    type Parsed = ClearConsumers;
    fn parse(self) -> Result<ClearConsumers, StoreError> {
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let branch = fields::branch_name(&mut v, &self.branch, "branch");
        let selector = v.check(ConsumerSelector::parse(&self.including, &self.excluding));
        let parsed = match (table, branch, selector) {
            (Some(table), Some(branch), Some(selector)) => Some(ClearConsumers {
                table,
                branch,
                selector,
                force: self.force,
                execute: self.execute,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ClearConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ClearConsumersRequest>,
) -> Result<Response<pb::ClearConsumersResponse>, Status> {
    let until = admin.rpcs.bulk_deadline(&request);
    admin
        .rpcs
        .handle("ClearConsumers", request, |ctx, req| async move {
            let cleared = admin
                .app
                .clear_consumers(
                    &ctx,
                    &req.table,
                    &req.branch,
                    &req.selector,
                    req.force,
                    req.execute,
                    Some(until),
                )
                .await?;
            let (cleared, skipped) = split_bulk(&cleared);
            let response = pb::ClearConsumersResponse {
                cleared,
                skipped,
                executed: Some(req.execute),
            };
            if req.execute {
                tracing::info!(table = %req.table.as_str(), branch = %req.branch.as_str(),
                cleared = response.cleared.len(), skipped = response.skipped.len(), "consumers cleared");
            }
            Ok(response)
        })
        .await
}
