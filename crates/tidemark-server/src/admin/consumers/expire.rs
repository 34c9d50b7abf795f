//! ExpireConsumers (SPEC E2 on request): consumers idle past their
//! expiration.

use tidemark_core::validate::Violations;
use tidemark_core::{BranchName, TableName};
use tidemark_proto::v1 as pb;
use tidemark_service::store::{MAX_BATCH, StoreError};
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct ExpireConsumers {
    pub table: Option<TableName>,
    pub branch: Option<BranchName>,
    pub limit: i64,
    pub execute: bool,
}

impl Parse for pb::ExpireConsumersRequest {
    type Parsed = ExpireConsumers;
    fn parse(self) -> Result<ExpireConsumers, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
        let limit = fields::page_size(&mut v, self.limit, 1000, MAX_BATCH, "limit");
        let parsed = match (table, branch, limit) {
            (Some(table), Some(branch), Some(limit)) => Some(ExpireConsumers {
                table,
                branch,
                limit,
                execute: self.execute,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ExpireConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.table.as_ref(), "expire consumers")
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ExpireConsumersRequest>,
) -> Result<Response<pb::ExpireConsumersResponse>, Status> {
    admin
        .rpcs
        .handle("ExpireConsumers", request, |ctx, req| async move {
            let expired = admin
                .app
                .expire_consumers(&ctx, req.table.as_ref(), req.branch.as_ref(), req.limit, req.execute)
                .await?;
            if req.execute && !expired.is_empty() {
                tracing::info!(expired = expired.len(), "consumers expired on request");
            }
            Ok(pb::ExpireConsumersResponse {
                expired: expired
                    .iter()
                    .map(|e| pb::ExpiredConsumer {
                        consumer: Some(convert::key_to_pb(&e.key)),
                        next_snapshot: e.next_snapshot,
                        idle: Some(convert::duration_to_pb(e.idle)),
                    })
                    .collect(),
                executed: Some(req.execute),
            })
        })
        .await
}
