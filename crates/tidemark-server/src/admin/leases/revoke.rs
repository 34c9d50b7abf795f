//! RevokeLease (SPEC §11 A5): ends one consumer's lease.

use tidemark_core::ConsumerKey;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::convert;
use crate::request::fields::check_reason;
use crate::request::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct RevokeLease {
    pub key: ConsumerKey,
    /// Why, for history (a default when none was given).
    pub reason: String,
    /// The lease the plan saw (`Some(None)`: none live).
    pub expected_lease: Option<Option<uuid::Uuid>>,
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
        let expected_lease = fields::expected_lease(&mut v, "expected_lease_id", self.expected_lease_id.as_deref());
        let parsed = key.map(|key| RevokeLease {
            key,
            reason,
            expected_lease,
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
            let planned = admin
                .app
                .revoke_lease(&ctx, &req.key, &req.reason, req.expected_lease, req.execute)
                .await?;
            if planned.applied && planned.change.lease.is_some() {
                tracing::info!(consumer = %req.key, epoch = planned.change.epoch, reason = req.reason, "lease revoked");
            }
            let (key_known, did_you_mean) = match planned.change.lease {
                Some(_) => (None, String::new()),
                None => {
                    let (known, suggestion) = admin.app.revoked_nothing(&ctx, &req.key, planned.change.epoch).await;
                    let name = suggestion.and_then(|s| s.name().map(str::to_owned));
                    (Some(known), name.unwrap_or_default())
                }
            };
            Ok(pb::RevokeLeaseResponse {
                key_known,
                did_you_mean,
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
