//! The `tidemark.v1.Coordinator` service: the worker protocol.

use std::time::Duration;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_server::Coordinator;
use tidemark_service::App;
use tonic::{Request, Response, Status};

use crate::call::Rpcs;
use crate::convert;
use crate::metrics;

/// The worker protocol over the application.
#[derive(Debug, Clone)]
pub struct CoordinatorService {
    app: App,
    rpcs: Rpcs,
}

impl CoordinatorService {
    /// The service over `app`; calls taking longer than `request_timeout`
    /// fail with DEADLINE_EXCEEDED.
    pub fn new(app: App, request_timeout: Duration) -> Self {
        Self {
            rpcs: Rpcs::new("Coordinator", request_timeout, app.unavailable_signal()),
            app,
        }
    }
}

#[tonic::async_trait]
impl Coordinator for CoordinatorService {
    async fn acquire_lease(
        &self,
        request: Request<pb::AcquireLeaseRequest>,
    ) -> Result<Response<pb::AcquireLeaseResponse>, Status> {
        self.rpcs
            .handle("AcquireLease", request, |ctx, req| async move {
                let (key, holder) = (&req.key, &req.holder);
                let acquired = self.app.acquire_lease(&ctx, key, holder, req.ttl).await?;
                let lease = &acquired.lease;
                metrics::lease_acquired(acquired.takeover);
                if acquired.takeover {
                    tracing::info!(
                        request_id = %ctx.request_id, consumer = %key, holder, epoch = lease.epoch,
                        previous_epoch = acquired.previous_epoch, previous_holder = acquired.previous_holder,
                        "lease taken over"
                    );
                } else {
                    tracing::debug!(consumer = %key, holder, epoch = lease.epoch, "lease acquired");
                }
                Ok(pb::AcquireLeaseResponse {
                    lease: Some(pb::Lease {
                        lease_id: lease.lease_id.to_string(),
                        epoch: lease.epoch,
                        ttl: Some(convert::duration_to_pb(lease.ttl)),
                        holder: lease.holder.clone(),
                        consumer: Some(convert::key_to_pb(key)),
                    }),
                    consumer: acquired
                        .consumer
                        .as_ref()
                        .map(|c| convert::consumer_to_pb(key, c, None)),
                    takeover: acquired.takeover,
                    previous_epoch: acquired.previous_epoch,
                })
            })
            .await
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        self.rpcs
            .handle("RenewLease", request, |ctx, req| async move {
                let (lease_id, epoch) = (req.lease_id, req.epoch);
                let ttl = self.app.renew_lease(&ctx, lease_id, epoch, req.ttl).await?;
                tracing::debug!(%lease_id, epoch, "lease renewed");
                Ok(pb::RenewLeaseResponse {
                    ttl: Some(convert::duration_to_pb(ttl)),
                })
            })
            .await
    }

    async fn release_lease(
        &self,
        request: Request<pb::ReleaseLeaseRequest>,
    ) -> Result<Response<pb::ReleaseLeaseResponse>, Status> {
        self.rpcs
            .handle("ReleaseLease", request, |ctx, req| async move {
                let (lease_id, epoch) = (req.lease_id, req.epoch);
                let released = self.app.release_lease(&ctx, lease_id, epoch).await?;
                tracing::debug!(%lease_id, epoch, released, "lease release");
                Ok(pb::ReleaseLeaseResponse { released })
            })
            .await
    }

    async fn commit_batch(
        &self,
        request: Request<pb::CommitBatchRequest>,
    ) -> Result<Response<pb::CommitBatchResponse>, Status> {
        self.rpcs
            .handle("CommitBatch", request, |ctx, commit| async move {
                let (lease_id, epoch) = (commit.lease_id, commit.epoch);
                let done = self.app.commit(&ctx, &commit).await?;
                tracing::debug!(
                    %lease_id, epoch, batch_id = commit.batch_id, outcome = done.outcome.as_str(),
                    next_snapshot = done.next_snapshot, "batch committed"
                );
                metrics::commit(done.outcome);
                Ok(pb::CommitBatchResponse {
                    outcome: convert::outcome_to_pb(done.outcome).into(),
                    next_snapshot: done.next_snapshot,
                    lease_ttl: Some(convert::duration_to_pb(done.lease_ttl)),
                    warnings: done.warnings,
                    previous_next_snapshot: done.previous_next_snapshot,
                    lag: done.lag,
                })
            })
            .await
    }

    async fn get_recovery_position(
        &self,
        request: Request<pb::GetRecoveryPositionRequest>,
    ) -> Result<Response<pb::GetRecoveryPositionResponse>, Status> {
        self.rpcs
            .handle("GetRecoveryPosition", request, |ctx, req| async move {
                let key = &req.key;
                let done = self.app.recover(&ctx, key, req.recovery, req.lease_id).await?;
                let (recovered, plan) = (&done.recovered, &done.recovered.plan);
                tracing::debug!(
                    consumer = %key, source = ?plan.source, start = %plan.start, pinned = recovered.pinned,
                    "recovery position"
                );
                Ok(pb::GetRecoveryPositionResponse {
                    source: convert::source_to_pb(plan.source).into(),
                    start: Some(convert::offset_to_pb(&plan.start)),
                    consumer: recovered
                        .consumer
                        .as_ref()
                        .map(|c| convert::consumer_to_pb(key, c, Some(done.latest_snapshot))),
                    warnings: done.warnings,
                    skipped: plan.skipped.map(|(first, last)| pb::SnapshotInterval { first, last }),
                    pinned: recovered.pinned,
                })
            })
            .await
    }
}
