//! RevokeLease (SPEC §11 A5): ends one consumer's lease.

use tidemark_core::ConsumerKey;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use super::check_reason;
use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct RevokeLease {
    pub key: ConsumerKey,
    /// Why, for history (a default when none was given).
    pub reason: String,
    pub execute: bool,
}

impl Parse for pb::RevokeLeaseRequest {
    type Parsed = RevokeLease;
    fn parse(self) -> Result<RevokeLease, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        check_reason(&mut v, &self.reason);
        let reason = if self.reason.is_empty() {
            "revoked by an operator".to_owned()
        } else {
            self.reason
        };
        let parsed = key.map(|key| RevokeLease {
            key,
            reason,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Scoped for RevokeLease {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::RevokeLeaseRequest>,
) -> Result<Response<pb::RevokeLeaseResponse>, Status> {
    admin
        .rpcs
        .handle("RevokeLease", request, |ctx, req| async move {
            let planned = admin.app.revoke_lease(&ctx, &req.key, &req.reason, req.execute).await?;
            if planned.applied && planned.change.lease.is_some() {
                tracing::info!(consumer = %req.key, epoch = planned.change.epoch, reason = req.reason, "lease revoked");
            }
            Ok(pb::RevokeLeaseResponse {
                // The lease as the revocation leaves it (state "revoked"),
                // or would leave it ("would_revoke").
                lease: planned
                    .change
                    .lease
                    .as_ref()
                    .map(|l| convert::revoked_lease_info(l, planned.applied)),
                epoch: planned.change.epoch,
                executed: Some(planned.applied),
            })
        })
        .await
}
