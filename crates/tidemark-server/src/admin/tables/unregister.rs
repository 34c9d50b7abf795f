//! UnregisterTable: forgets a table's registration.

use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::{OneTable, one_table};
use crate::admin::AdminService;
use crate::request::Parse;

impl Parse for pb::UnregisterTableRequest {
    type Parsed = OneTable;
    fn parse(self) -> Result<OneTable, StoreError> {
        one_table(&self.table, self.execute)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::UnregisterTableRequest>,
) -> Result<Response<pb::UnregisterTableResponse>, Status> {
    admin
        .rpcs
        .handle("UnregisterTable", request, |ctx, req| async move {
            let was_registered = admin.app.unregister(&ctx, &req.table, req.execute).await?;
            Ok(pb::UnregisterTableResponse {
                was_registered,
                executed: Some(req.execute),
            })
        })
        .await
}
