//! The worker protocol (SPEC §2–§4), one [`App`] call per RPC: leases are
//! the store's alone; a recovery on a registered table plans with the
//! table's own directory and writes the full-scan pin file; a commit's lag
//! counts to the directory's latest snapshot.

use std::time::Duration;

use tidemark_core::{Acquired, CommitBatch, Committed, ConsumerKey, CoreError, Recovered, RecoveryRequest};
use tidemark_store::{CallContext, StoreError};
use uuid::Uuid;

use crate::app::App;
use crate::tables::{Registered, recovery_range};

/// A recovery's answer.
#[derive(Debug, Clone)]
pub struct RecoveryDone {
    /// The plan, the consumer, and whether a full-scan pin was placed.
    pub recovered: Recovered,
    /// The latest snapshot planned with (a registered table's directory's).
    pub latest_snapshot: i64,
    /// A table name spelled as a catalog would not; where the range planned
    /// with differs from the worker's, why; then the plan's own warnings.
    pub warnings: Vec<String>,
}

impl App {
    /// AcquireLease (SPEC §2): takes `key`'s lease for `holder`, or takes
    /// it over from a holder whose lease lapsed.
    pub async fn acquire_lease(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        holder: &str,
        ttl: Option<Duration>,
    ) -> Result<Acquired, StoreError> {
        self.store.acquire_lease(ctx, key, holder, ttl).await
    }

    /// RenewLease (SPEC §2): the lease's new time to live.
    pub async fn renew_lease(
        &self,
        ctx: &CallContext,
        lease_id: Uuid,
        epoch: i64,
        ttl: Option<Duration>,
    ) -> Result<Duration, StoreError> {
        self.store.renew_lease(ctx, lease_id, epoch, ttl).await
    }

    /// ReleaseLease (SPEC §2): whether a live lease was released.
    pub async fn release_lease(&self, ctx: &CallContext, lease_id: Uuid, epoch: i64) -> Result<bool, StoreError> {
        self.store.release_lease(ctx, lease_id, epoch).await
    }

    /// GetRecoveryPosition (SPEC §4, §9): a registered table's range comes
    /// from its own directory (after checking the table there is the one
    /// registered); the plan from the store; and a full-scan pin is
    /// promised only once its file is in the table's directory, since
    /// Paimon's own expiration honours only what it can see.
    pub async fn recover(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        mut request: RecoveryRequest,
        lease_id: Option<Uuid>,
    ) -> Result<RecoveryDone, StoreError> {
        let mut warnings: Vec<String> = key.table.spelling_warning().into_iter().collect();
        let registered = self.tables.table(&key.table).await?;
        let directory = registered.as_ref().map(|r| r.directory.clone());
        request.range = recovery_range(
            &self.store,
            registered,
            key.branch.as_str(),
            request.range,
            &mut warnings,
        )
        .await?;
        let recovered = self.store.recovery_position(ctx, key, &request, lease_id).await?;
        if let (true, Some(directory), Some(lease_id)) = (recovered.pinned, &directory, lease_id) {
            let id = tidemark_paimon::pin_consumer_id(&lease_id);
            directory
                .write_consumer(key.branch.as_str(), &id, recovered.plan.start.snapshot_id)
                .await
                .map_err(|e| CoreError::TableLocationUnreadable {
                    table: key.table.as_str().to_owned(),
                    location: directory.location().to_owned(),
                    why: format!(
                        "cannot write the full-scan pin file {}: {e}",
                        directory.consumer_location(key.branch.as_str(), &id)
                    ),
                })?;
        }
        warnings.extend(recovered.plan.warnings.iter().cloned());
        Ok(RecoveryDone {
            latest_snapshot: request.range.latest_snapshot,
            recovered,
            warnings,
        })
    }

    /// CommitBatch (SPEC §3): the store's commit; for a registered table the
    /// lag counts up to the latest snapshot in its directory (read in the
    /// background, never waited for), not only to what the worker reported
    /// (core's `commit_knowing` decides it).
    pub async fn commit(&self, ctx: &CallContext, commit: &CommitBatch) -> Result<Committed, StoreError> {
        if tidemark_core::mutant!("mirror_before_durable") {
            self.mirror_before_durable(commit).await;
        }
        let tables = &self.tables;
        let done = self
            .store
            .commit_batch_knowing(ctx, commit, |key| {
                tables.last_known_latest(&key.table, key.branch.as_str())
            })
            .await?;
        if done.first_legacy_offset {
            tracing::warn!(
                request_id = %ctx.request_id, lease_id = %commit.lease_id, epoch = commit.epoch,
                batch_id = commit.batch_id, snapshot_id = commit.end.map(|e| e.snapshot_id),
                "cannot advance the consumer: the end offset has no total_splits (an offset from an older \
                 checkpoint); the consumer stays unchanged and the snapshot may be replayed"
            );
        }
        Ok(done)
    }

    /// Mutant: writes the position a commit asks for into the table's
    /// consumer file before the database has it (or has refused it), as an
    /// eager mirror would. SPEC §9: a file never shows a position before it
    /// is durable.
    async fn mirror_before_durable(&self, commit: &CommitBatch) {
        let (Ok(Some(state)), Some(end)) = (self.store.lease_key_state(commit.lease_id).await, commit.end) else {
            return;
        };
        let Some(Registered { directory, .. }) = self.tables.table_if_readable(&state.key.table).await else {
            return;
        };
        let target = if end.is_complete() {
            end.snapshot_id + 1
        } else {
            end.snapshot_id
        };
        let _ = directory
            .write_consumer(state.key.branch.as_str(), state.key.consumer_id.as_str(), target)
            .await;
    }
}
