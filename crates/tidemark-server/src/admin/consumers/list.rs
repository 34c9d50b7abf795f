//! ListConsumers (SPEC §11 A1): a page of consumers, each with its
//! registered table's lag.

use tidemark_core::ConsumerKey;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::{KeyFilter, MAX_PAGE, StoreError};
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct ListConsumers {
    pub filter: KeyFilter,
    pub after: Option<ConsumerKey>,
    pub page_size: i64,
}

impl Parse for pb::ListConsumersRequest {
    type Parsed = ListConsumers;
    fn parse(self) -> Result<ListConsumers, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
        if let Err(violation) =
            tidemark_core::ids::check_consumer_id_prefix(&self.consumer_id_prefix, "consumer_id_prefix")
        {
            v.extend(vec![violation]);
        }
        let page_size = fields::page_size(&mut v, self.page_size, 100, MAX_PAGE, "page_size");
        let after = fields::parse_consumer_page_token(&mut v, &self.page_token);
        let parsed = match (table, branch, page_size, after) {
            (Some(table), Some(branch), Some(page_size), Some(after)) => Some(ListConsumers {
                filter: KeyFilter {
                    table,
                    branch,
                    consumer_id_prefix: Some(self.consumer_id_prefix).filter(|p| !p.is_empty()),
                },
                after,
                page_size,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ListConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.filter.table.as_ref(), "list consumers")
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ListConsumersRequest>,
) -> Result<Response<pb::ListConsumersResponse>, Status> {
    admin
        .rpcs
        .handle("ListConsumers", request, |ctx, req| async move {
            let page = admin
                .app
                .list_consumers(&req.filter, req.after.as_ref(), req.page_size)
                .await?;
            // A table filter that lists nothing: say whether the table is
            // one tidemark knows.
            let seen = match (&req.filter.table, page.consumers.is_empty() && req.after.is_none()) {
                (Some(table), true) => Some(admin.app.table_seen(&ctx, table).await),
                _ => None,
            };
            Ok(pb::ListConsumersResponse {
                table_known: seen.as_ref().map(|s| s.known),
                did_you_mean: seen.map(|s| s.did_you_mean).unwrap_or_default(),
                consumers: page
                    .consumers
                    .iter()
                    .map(|c| convert::consumer_info(&c.view, c.lag.as_ref()))
                    .collect(),
                next_page_token: page.next.as_ref().map(convert::consumer_page_token).unwrap_or_default(),
            })
        })
        .await
}
