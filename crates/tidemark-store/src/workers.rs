//! The worker protocol over the [`Store`] (SPEC §2–§4): leases, commits
//! and recoveries, each one decision of `tidemark-core` applied in one
//! optimistic transaction.

use std::time::Duration;

use tidemark_core::commit::{self, CommitBatch, Committed};
use tidemark_core::lease::{self, Acquired, LeaseRequest};
use tidemark_core::recovery::{self, Recovered, RecoveryRequest};
use tidemark_core::{ConsumerKey, KeyState};
use uuid::Uuid;

use crate::backend::{CallContext, FindKey};
use crate::error::StoreError;
use crate::store::Store;

impl Store {
    /// L1–L4: takes the key's lease for `holder`.
    pub async fn acquire_lease(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        holder: &str,
        ttl: Option<Duration>,
    ) -> Result<Acquired, StoreError> {
        self.apply_restamped(
            FindKey::Key(key),
            ctx,
            |loaded| {
                let request = LeaseRequest {
                    holder,
                    principal: &ctx.principal,
                    ttl,
                    lease_id: Uuid::now_v7(),
                    caller: &ctx.caller,
                };
                lease::acquire(
                    loaded.state.as_ref(),
                    key,
                    request,
                    &self.policy,
                    loaded.options.expiration,
                    loaded.now,
                )
            },
            |acquired, decided, written| {
                // The grant as stored: stamped when it landed.
                let stamped = KeyState {
                    lease: Some(acquired.lease.clone()),
                    ..KeyState::new(key.clone())
                };
                if let Some(lease) = crate::stamp::restamp(&stamped, None, decided, written).lease {
                    acquired.lease = lease;
                }
            },
        )
        .await
    }

    /// L5: renews a live lease; returns the time left.
    pub async fn renew_lease(
        &self,
        ctx: &CallContext,
        lease_id: Uuid,
        epoch: i64,
        ttl: Option<Duration>,
    ) -> Result<Duration, StoreError> {
        self.apply(FindKey::Lease(lease_id), ctx, |loaded| {
            lease::renew(loaded.state.as_ref(), lease_id, epoch, ttl, &self.policy, loaded.now)
        })
        .await
    }

    /// L6: releases a lease; `true` when it was live.
    pub async fn release_lease(&self, ctx: &CallContext, lease_id: Uuid, epoch: i64) -> Result<bool, StoreError> {
        self.apply(FindKey::Lease(lease_id), ctx, |loaded| {
            Ok(lease::release(loaded.state.as_ref(), lease_id, epoch, loaded.now))
        })
        .await
    }

    /// C1–C7: records a committed micro-batch.
    pub async fn commit_batch(&self, ctx: &CallContext, req: &CommitBatch) -> Result<Committed, StoreError> {
        self.commit_batch_knowing(ctx, req, |_| None).await
    }

    /// [`Store::commit_batch`], the lag counted up to the latest snapshot
    /// `directory_latest` gives for the lease's key (a registered table's
    /// directory, as the application last read it; `None`: not known).
    pub async fn commit_batch_knowing(
        &self,
        ctx: &CallContext,
        req: &CommitBatch,
        directory_latest: impl Fn(&ConsumerKey) -> Option<i64>,
    ) -> Result<Committed, StoreError> {
        self.apply(FindKey::Lease(req.lease_id), ctx, |loaded| {
            let latest = loaded.state.as_ref().and_then(|state| directory_latest(&state.key));
            commit::commit_knowing(loaded.state.as_ref(), req, loaded.now, self.refreshes, latest)
        })
        .await
    }

    /// R1–R4 (+ E5 pin when `lease_id` is given): where the key's query
    /// resumes.
    pub async fn recovery_position(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        req: &RecoveryRequest,
        lease_id: Option<Uuid>,
    ) -> Result<Recovered, StoreError> {
        self.apply(FindKey::Key(key), ctx, |loaded| {
            recovery::recover(
                loaded.state.as_ref(),
                req,
                lease_id,
                loaded.options.expiration,
                loaded.now,
            )
        })
        .await
    }
}
