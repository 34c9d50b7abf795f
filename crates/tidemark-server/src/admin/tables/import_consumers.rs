//! ImportConsumers (SPEC §9): a registered table's consumer files become
//! consumers.

use tidemark_proto::v1 as pb;
use tidemark_service::ImportOutcome;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::{OneTable, one_table};
use crate::admin::AdminService;
use crate::convert;
use crate::request::Parse;

impl Parse for pb::ImportConsumersRequest {
    type Parsed = OneTable;
    fn parse(self) -> Result<OneTable, StoreError> {
        one_table(&self.table, self.execute)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ImportConsumersRequest>,
) -> Result<Response<pb::ImportConsumersResponse>, Status> {
    admin
        .rpcs
        .handle("ImportConsumers", request, |ctx, req| async move {
            let outcomes = admin.app.import_consumers(&ctx, &req.table, req.execute).await?;
            let mut response = pb::ImportConsumersResponse {
                executed: Some(req.execute),
                ..Default::default()
            };
            for outcome in outcomes {
                match outcome {
                    ImportOutcome::Imported { key, next_snapshot } => response.imported.push(pb::ImportedConsumer {
                        consumer: Some(convert::key_to_pb(&key)),
                        next_snapshot,
                    }),
                    ImportOutcome::Skipped(skipped) => response.skipped.push(pb::ImportSkipped {
                        branch: skipped.branch,
                        consumer_id: skipped.consumer_id,
                        reason: skipped.reason,
                        message: skipped.message,
                    }),
                }
            }
            Ok(response)
        })
        .await
}
