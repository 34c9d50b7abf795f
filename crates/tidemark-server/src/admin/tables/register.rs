//! RegisterTable (SPEC §9): the location checked against the allow-list,
//! probed, and recorded when `execute`.

use tidemark_core::TableName;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::paimon::PaimonTable;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::registered_to_pb;
use crate::admin::AdminService;
use crate::request::{Parse, Scoped, Touches, checked, fields};

/// Longest table location accepted.
const MAX_LOCATION: usize = 2048;

pub(crate) struct RegisterTable {
    pub table: TableName,
    /// The table's directory, opened (not yet read).
    pub location: PaimonTable,
    pub execute: bool,
}

impl Parse for pb::RegisterTableRequest {
    type Parsed = RegisterTable;
    fn parse(self) -> Result<RegisterTable, StoreError> {
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let location = if self.location.len() > MAX_LOCATION {
            v.add("location", format!("must be at most {MAX_LOCATION} bytes"));
            None
        } else {
            match PaimonTable::open(&self.location) {
                Ok(opened) => Some(opened),
                Err(e) => {
                    v.add("location", e.to_string());
                    None
                }
            }
        };
        let parsed = table.zip(location).map(|(table, location)| RegisterTable {
            table,
            location,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Scoped for RegisterTable {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::RegisterTableRequest>,
) -> Result<Response<pb::RegisterTableResponse>, Status> {
    admin
        .rpcs
        .handle("RegisterTable", request, |ctx, req| async move {
            let registration = admin.app.register(&ctx, &req.table, &req.location, req.execute).await?;
            Ok(pb::RegisterTableResponse {
                table: Some(registered_to_pb(&registration.table)),
                previous_location: registration.previous_location.unwrap_or_default(),
                earliest_snapshot: registration.range.map(|r| r.earliest),
                latest_snapshot: registration.range.map(|r| r.latest),
                executed: Some(req.execute),
                probe_error: registration.probe_error,
                warnings: registration.warnings,
            })
        })
        .await
}
