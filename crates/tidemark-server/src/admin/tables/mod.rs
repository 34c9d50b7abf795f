//! The operator calls on tables, one file per call.

pub(super) mod get_options;
pub(super) mod import_consumers;
pub(super) mod list;
pub(super) mod register;
pub(super) mod set_options;
pub(super) mod unregister;

use tidemark_core::TableName;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::{RegisteredTable, StoreError};

use crate::convert;
use crate::request::{Scoped, Touches, checked, fields};

/// A request naming one table and whether to execute.
pub(crate) struct OneTable {
    pub table: TableName,
    pub execute: bool,
}

pub(super) fn one_table(table: &str, execute: bool) -> Result<OneTable, StoreError> {
    let mut v = Violations::new();
    let table = fields::table_name(&mut v, table, "table");
    checked(v, table.map(|table| OneTable { table, execute }))
}

impl Scoped for OneTable {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(super) fn registered_to_pb(t: &RegisteredTable) -> pb::RegisteredTable {
    pb::RegisteredTable {
        table: t.table.as_str().to_owned(),
        location: t.location.clone(),
        registered_at: Some(convert::timestamp(t.registered_at)),
        registered_by: t.registered_by.clone(),
        identity: t.identity.clone().unwrap_or_default(),
    }
}
