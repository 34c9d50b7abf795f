//! ResetConsumer (SPEC §11 A2): moves one consumer, never past a
//! registered table's latest snapshot + 1.

use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::{ChangeConsumer, expected_snapshot};
use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, checked, fields};

impl Parse for pb::ResetConsumerRequest {
    type Parsed = ChangeConsumer;
    fn parse(self) -> Result<ChangeConsumer, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        fields::position(&mut v, self.next_snapshot, "next_snapshot");
        expected_snapshot(&mut v, self.expected_next_snapshot);
        let expected_lease = fields::expected_lease(&mut v, "expected_lease_id", self.expected_lease_id.as_deref());
        fields::check_reason(&mut v, &self.reason);
        let parsed = key.map(|key| ChangeConsumer {
            key,
            next_snapshot: self.next_snapshot,
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
    request: Request<pb::ResetConsumerRequest>,
) -> Result<Response<pb::ResetConsumerResponse>, Status> {
    admin
        .rpcs
        .handle("ResetConsumer", request, |ctx, req| async move {
            let mut ctx = ctx;
            ctx.reason = Some(req.reason.clone());
            let key = &req.key;
            let planned = admin
                .app
                .reset_consumer(
                    &ctx,
                    key,
                    req.next_snapshot,
                    req.expected_next_snapshot,
                    req.force(),
                    req.execute,
                )
                .await?;
            if planned.applied {
                tracing::info!(consumer = %key, old = planned.change.old_next, new = planned.change.new_next,
                forced = planned.change.revoked.is_some(), "consumer reset");
            }
            // A reset of a key with no consumer creates one: the plan says
            // so, with the name the operator most likely meant.
            let creates = planned.change.old_next.is_none();
            let did_you_mean = match creates {
                true => admin
                    .app
                    .suggest_consumer(&ctx, key)
                    .await
                    .and_then(|s| s.name().map(str::to_owned))
                    .unwrap_or_default(),
                false => String::new(),
            };
            Ok(pb::ResetConsumerResponse {
                change: Some(convert::consumer_change(key, &planned.change)),
                executed: Some(planned.applied),
                creates,
                did_you_mean,
                warnings: admin
                    .app
                    .reset_warnings(&key.table, &key.branch, req.next_snapshot)
                    .await,
            })
        })
        .await
}
