//! ListHistory: a page of a consumer's or a table's history, newest
//! first.

use tidemark_core::ConsumerKey;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::{HistoryFilter, MAX_PAGE, StoreError};
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct ListHistory {
    pub filter: HistoryFilter,
    pub before: Option<i64>,
    pub page_size: i64,
}

impl Parse for pb::ListHistoryRequest {
    type Parsed = ListHistory;
    fn parse(self) -> Result<ListHistory, StoreError> {
        let mut v = Violations::new();
        let filter = match &self.consumer {
            Some(key) => {
                if !self.table.is_empty() || !self.branch.is_empty() {
                    v.add("table", "give either consumer or table (and branch), not both");
                }
                fields::consumer_key(&mut v, Some(key), "consumer").map(|k| HistoryFilter::key(&k))
            }
            None => {
                let table = fields::table_name(&mut v, &self.table, "table");
                let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
                table.zip(branch).map(|(table, branch)| HistoryFilter {
                    table,
                    branch,
                    consumer_id: None,
                })
            }
        };
        let page_size = fields::page_size(&mut v, self.page_size, 100, MAX_PAGE, "page_size");
        let before = fields::parse_history_page_token(&mut v, &self.page_token);
        let parsed = match (filter, page_size, before) {
            (Some(filter), Some(page_size), Some(before)) => Some(ListHistory {
                filter,
                before,
                page_size,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ListHistory {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.filter.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ListHistoryRequest>,
) -> Result<Response<pb::ListHistoryResponse>, Status> {
    admin
        .rpcs
        .handle("ListHistory", request, |ctx, req| async move {
            let listed = admin.app.list_history(&req.filter, req.before, req.page_size).await;
            // A key's history of a key tidemark does not know is
            // CONSUMER_NOT_FOUND, told what the name most likely meant.
            let entries = match (&req.filter.branch, &req.filter.consumer_id) {
                (Some(branch), Some(id)) => {
                    let key = ConsumerKey {
                        table: req.filter.table.clone(),
                        branch: branch.clone(),
                        consumer_id: id.clone(),
                    };
                    admin.app.suggesting(&ctx, &key, listed).await?
                }
                _ => listed?,
            };
            let full = i64::try_from(entries.len()).unwrap_or(0) == req.page_size;
            // A table's history that lists nothing: say whether the table
            // is one tidemark knows.
            let seen = match entries.is_empty() {
                true => Some(admin.app.table_seen(&ctx, &req.filter.table).await),
                false => None,
            };
            Ok(pb::ListHistoryResponse {
                table_known: seen.as_ref().map(|s| s.known),
                did_you_mean: seen.map(|s| s.did_you_mean).unwrap_or_default(),
                next_page_token: entries
                    .last()
                    .filter(|_| full)
                    .map(|h| h.id.to_string())
                    .unwrap_or_default(),
                entries: entries.iter().map(convert::history_entry).collect(),
            })
        })
        .await
}
