//! SetTableOptions (SPEC §11 A9): sets and unsets a table's consumer
//! options, checked before anything is read.

use std::collections::BTreeMap;

use tidemark_core::validate::Violations;
use tidemark_core::{TableName, TableOptions};
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::super::options_map;
use crate::admin::AdminService;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct SetTableOptions {
    pub table: TableName,
    pub set: BTreeMap<String, String>,
    pub unset: Vec<String>,
    pub execute: bool,
}

impl Parse for pb::SetTableOptionsRequest {
    type Parsed = SetTableOptions;
    fn parse(self) -> Result<SetTableOptions, StoreError> {
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let set: BTreeMap<String, String> = self.options.into_iter().collect();
        // Validate the change before reading anything: bad keys or values
        // never reach the database.
        v.check(TableOptions::default().apply(&set, &self.unset));
        let parsed = table.map(|table| SetTableOptions {
            table,
            set,
            unset: self.unset,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Scoped for SetTableOptions {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::SetTableOptionsRequest>,
) -> Result<Response<pb::SetTableOptionsResponse>, Status> {
    admin
        .rpcs
        .handle("SetTableOptions", request, |ctx, req| async move {
            let planned = admin
                .app
                .set_table_options(&ctx, &req.table, &req.set, &req.unset, req.execute)
                .await?;
            Ok(pb::SetTableOptionsResponse {
                before: options_map(&planned.change.before.options),
                after: options_map(&planned.change.after),
                executed: Some(planned.applied),
            })
        })
        .await
}
