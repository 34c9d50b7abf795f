//! GetTableOptions (SPEC §11 A9): a table's consumer options as stored.

use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::super::options_map;
use super::{OneTable, one_table};
use crate::admin::AdminService;
use crate::convert;
use crate::request::Parse;

impl Parse for pb::GetTableOptionsRequest {
    type Parsed = OneTable;
    fn parse(self) -> Result<OneTable, StoreError> {
        one_table(&self.table, false)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::GetTableOptionsRequest>,
) -> Result<Response<pb::GetTableOptionsResponse>, Status> {
    admin
        .rpcs
        .handle("GetTableOptions", request, |_, req| async move {
            let stored = admin.app.table_options(&req.table).await?;
            let options = stored.options;
            Ok(pb::GetTableOptionsResponse {
                table: req.table.as_str().to_owned(),
                options: options_map(&options),
                expiration_time: options.expiration.map(convert::duration_to_pb),
                changelog_only: options.changelog_only,
                mode: options
                    .mode
                    .unwrap_or(tidemark_core::ConsumerMode::ExactlyOnce)
                    .as_str()
                    .to_owned(),
                updated_at: stored.updated_at.map(convert::timestamp),
                updated_by: stored.updated_by.unwrap_or_default(),
            })
        })
        .await
}
