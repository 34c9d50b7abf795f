//! ListTables: the registered tables the caller's scope allows.

use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::registered_to_pb;
use crate::admin::AdminService;
use crate::request::{Parse, Scoped, Touches};

impl Parse for pb::ListTablesRequest {
    type Parsed = ListTables;
    fn parse(self) -> Result<ListTables, StoreError> {
        Ok(ListTables)
    }
}

pub(crate) struct ListTables;

impl Scoped for ListTables {
    fn touches(&self) -> Touches<'_> {
        Touches::Filtered
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ListTablesRequest>,
) -> Result<Response<pb::ListTablesResponse>, Status> {
    admin
        .rpcs
        .handle("ListTables", request, |ctx, _| async move {
            let tables = admin.app.list_tables().await?;
            Ok(pb::ListTablesResponse {
                tables: tables
                    .iter()
                    .filter(|t| ctx.access().table(&t.table).is_ok())
                    .map(registered_to_pb)
                    .collect(),
            })
        })
        .await
}
