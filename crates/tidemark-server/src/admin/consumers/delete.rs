//! DeleteConsumer (SPEC §11 A3): removes one consumer.

use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::{ChangeConsumer, expected_snapshot};
use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, checked, fields};

impl Parse for pb::DeleteConsumerRequest {
    type Parsed = ChangeConsumer;
    fn parse(self) -> Result<ChangeConsumer, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        expected_snapshot(&mut v, self.expected_next_snapshot);
        let expected_lease = fields::expected_lease(&mut v, "expected_lease_id", self.expected_lease_id.as_deref());
        fields::check_reason(&mut v, &self.reason);
        let parsed = key.map(|key| ChangeConsumer {
            key,
            next_snapshot: 0,
            expected_next_snapshot: self.expected_next_snapshot,
            expected_lease,
            force: self.force,
            execute: self.execute,
            reason: self.reason,
        });
        checked(v, parsed)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::DeleteConsumerRequest>,
) -> Result<Response<pb::DeleteConsumerResponse>, Status> {
    admin
        .rpcs
        .handle("DeleteConsumer", request, |ctx, req| async move {
            let mut ctx = ctx;
            ctx.reason = Some(req.reason.clone());
            let key = &req.key;
            let planned = admin
                .app
                .delete_consumer(&ctx, key, req.expected_next_snapshot, req.force(), req.execute)
                .await?;
            if planned.applied && planned.change.changes_anything() {
                tracing::info!(consumer = %key, old = planned.change.old_next,
                forced = planned.change.revoked.is_some(), "consumer deleted");
            }
            Ok(pb::DeleteConsumerResponse {
                change: Some(convert::consumer_change(key, &planned.change)),
                executed: Some(planned.applied),
            })
        })
        .await
}
