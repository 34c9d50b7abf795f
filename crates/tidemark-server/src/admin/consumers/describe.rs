//! DescribeConsumer: one consumer, its recent history, and for a
//! registered table its lag and Paimon file.

use tidemark_core::ConsumerKey;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::{MAX_PAGE, StoreError};
use tonic::{Request, Response, Status};

use super::super::options_map;
use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct DescribeConsumer {
    pub key: ConsumerKey,
    pub history_limit: i64,
}

impl Parse for pb::DescribeConsumerRequest {
    type Parsed = DescribeConsumer;
    fn parse(self) -> Result<DescribeConsumer, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        let limit = fields::page_size(&mut v, self.history_limit, 20, MAX_PAGE, "history_limit");
        let parsed = key
            .zip(limit)
            .map(|(key, history_limit)| DescribeConsumer { key, history_limit });
        checked(v, parsed)
    }
}

impl Scoped for DescribeConsumer {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::DescribeConsumerRequest>,
) -> Result<Response<pb::DescribeConsumerResponse>, Status> {
    admin
        .rpcs
        .handle("DescribeConsumer", request, |ctx, req| async move {
            let described = admin.app.describe(&ctx, &req.key, req.history_limit).await?;
            let consumer = &described.consumer;
            Ok(pb::DescribeConsumerResponse {
                info: Some(convert::consumer_info(&consumer.view, consumer.lag.as_ref())),
                table_options: options_map(&consumer.view.options),
                recent_history: described.history.iter().map(convert::history_entry).collect(),
                mirror: described.mirror.as_ref().map(convert::mirror_info),
            })
        })
        .await
}
