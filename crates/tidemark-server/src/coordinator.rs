//! The `tidemark.v1.Coordinator` service: the worker protocol.

use std::time::Duration;

use tidemark_core::RecoveryRequest;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_server::Coordinator;
use tidemark_store::{Store, StoreError};
use tonic::{Request, Response, Status};

use crate::call::Rpcs;
use crate::convert;
use crate::metrics;

/// The worker protocol over a [`Store`].
#[derive(Debug, Clone)]
pub struct CoordinatorService {
    store: Store,
    rpcs: Rpcs,
    tables: std::sync::Arc<crate::tables::Registrations>,
}

impl CoordinatorService {
    /// The service over `store`; calls taking longer than `request_timeout`
    /// fail with DEADLINE_EXCEEDED.
    pub fn new(store: Store, request_timeout: Duration) -> Self {
        Self {
            tables: std::sync::Arc::new(crate::tables::Registrations::new(store.clone())),
            rpcs: Rpcs::new("Coordinator", request_timeout, store.unavailable_signal()),
            store,
        }
    }

    /// Mutant: writes the position a commit asks for into the table's
    /// consumer file before the database has it (or has refused it), as an
    /// eager mirror would. SPEC §9: a file never shows a position before it
    /// is durable.
    async fn mirror_before_durable(&self, commit: &tidemark_core::CommitBatch) {
        let (Ok(Some(state)), Some(end)) = (self.store.lease_key_state(commit.lease_id).await, commit.end) else {
            return;
        };
        let Some(registered) = self.tables.table_if_readable(&state.key.table).await else {
            return;
        };
        let target = if end.is_complete() {
            end.snapshot_id + 1
        } else {
            end.snapshot_id
        };
        let _ = registered
            .directory
            .write_consumer(state.key.branch.as_str(), state.key.consumer_id.as_str(), target)
            .await;
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
                let acquired = self.store.acquire_lease(&ctx, key, holder, req.ttl).await?;
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
                let ttl = self.store.renew_lease(&ctx, lease_id, epoch, req.ttl).await?;
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
                let released = self.store.release_lease(&ctx, lease_id, epoch).await?;
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
                if tidemark_core::mutant!("mirror_before_durable") {
                    self.mirror_before_durable(&commit).await;
                }
                let done = self.store.commit_batch(&ctx, &commit).await?;
                if done.log_legacy_warning {
                    tracing::warn!(
                        request_id = %ctx.request_id, %lease_id, epoch, batch_id = commit.batch_id,
                        snapshot_id = commit.end.map(|e| e.snapshot_id),
                        "cannot advance the consumer: the end offset has no total_splits (an offset from an older \
                         checkpoint); the consumer stays unchanged and the snapshot may be replayed"
                    );
                }
                tracing::debug!(
                    %lease_id, epoch, batch_id = commit.batch_id, outcome = done.outcome.as_str(),
                    next_snapshot = done.next_snapshot, "batch committed"
                );
                metrics::commit(done.outcome);
                // For a registered table the lag counts up to the latest snapshot
                // in its directory (read in the background), not only to what
                // the worker reported.
                let directory_latest = self.tables.last_known_latest(&done.key.table, done.key.branch.as_str());
                let lag = match (done.next_snapshot, directory_latest) {
                    (Some(next), Some(latest)) => crate::tables::registered_lag(next, latest, commit.latest_snapshot),
                    _ => done.lag,
                };
                Ok(pb::CommitBatchResponse {
                    outcome: convert::outcome_to_pb(done.outcome).into(),
                    next_snapshot: done.next_snapshot,
                    lease_ttl: Some(convert::duration_to_pb(done.lease_ttl)),
                    warnings: done.warnings,
                    previous_next_snapshot: done.previous_next_snapshot,
                    lag,
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
                // A registered table's range comes from its own directory.
                let mut range_warnings = Vec::new();
                let registered = self.tables.table(&key.table).await?;
                let directory = registered.as_ref().map(|r| r.directory.clone());
                let range = crate::tables::recovery_range(
                    &self.store,
                    registered,
                    key.branch.as_str(),
                    req.range,
                    &mut range_warnings,
                )
                .await?;
                let recovery = RecoveryRequest {
                    startup: req.startup,
                    ignore_progress: req.ignore_progress,
                    range,
                    checkpoint: req.checkpoint,
                    on_expired: req.on_expired,
                };
                let lease_id = req.lease_id;
                let recovered = self.store.recovery_position(&ctx, key, &recovery, lease_id).await?;
                let plan = &recovered.plan;
                // SPEC §9: Paimon's own expiration honours the pin only once its
                // file is there; a pin it cannot see is not promised.
                if let (true, Some(directory), Some(lease_id)) = (recovered.pinned, &directory, lease_id) {
                    let id = tidemark_paimon::pin_consumer_id(&lease_id);
                    directory
                        .write_consumer(key.branch.as_str(), &id, plan.start.snapshot_id)
                        .await
                        .map_err(|e| tidemark_core::CoreError::TableLocationUnreadable {
                            table: key.table.as_str().to_owned(),
                            location: directory.location().to_owned(),
                            why: format!(
                                "cannot write the full-scan pin file {}: {e}",
                                directory.consumer_location(key.branch.as_str(), &id)
                            ),
                        })
                        .map_err(StoreError::from)?;
                }
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
                        .map(|c| convert::consumer_to_pb(key, c, Some(range.latest_snapshot))),
                    warnings: range_warnings
                        .into_iter()
                        .chain(plan.warnings.iter().cloned())
                        .collect(),
                    skipped: plan.skipped.map(|(first, last)| pb::SnapshotInterval { first, last }),
                    pinned: recovered.pinned,
                })
            })
            .await
    }
}
