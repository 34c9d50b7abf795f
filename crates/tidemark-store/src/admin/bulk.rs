//! Operator calls on many consumers at once — clear, reset, revoke, expire —
//! each key its own compare-and-set, with a time budget.

use std::time::{Duration, Instant};

use tidemark_core::admin::{self, AdminChange, ConsumerSelector};
use tidemark_core::lease;
use tidemark_core::{BranchName, ConsumerKey, CoreError, KeyState, Revoked, TableName, Timestamp};
use tracing::Instrument;

use super::MAX_BATCH;
use crate::backend::{CallContext, FindKey, KeyFilter, MAX_PAGE};
use crate::error::StoreError;
use crate::store::Store;

/// One consumer a bulk change (clear, reset) looked at.
#[derive(Debug, Clone)]
pub struct BulkChange {
    /// The key.
    pub key: ConsumerKey,
    /// The change, or why it was not made (a live lease without `force`, a
    /// precondition, a race).
    pub result: Result<AdminChange, CoreError>,
    /// For a reset that left the consumer alone: its position as the
    /// selection listed it and where the target would have put it, so a
    /// plan shows every selected consumer's move; `None` elsewhere.
    pub target: Option<(i64, Option<i64>)>,
}

/// A bulk reset executed as planned: per consumer id, the position and
/// the lease (`None`: none live) its plan saw. A non-empty map leaves the
/// consumers it does not name alone (`NOT_IN_PLAN`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkExpected {
    /// The planned positions.
    pub next_snapshots: std::collections::HashMap<String, i64>,
    /// The planned leases.
    pub leases: std::collections::HashMap<String, Option<uuid::Uuid>>,
}

/// A consumer the sweeper (or ExpireConsumers) found expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The key.
    pub key: ConsumerKey,
    /// Its last position.
    pub next_snapshot: i64,
    /// How long it had been idle.
    pub idle: Duration,
}

/// What one expiry run found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryRun {
    /// The consumers it expired.
    pub expired: Vec<Expired>,
    /// The expired consumers it found (some may have been expired by
    /// another replica before it got to them).
    pub found: usize,
}

impl Store {
    /// A3: deletes every consumer of a branch the selector matches. Each key
    /// is its own transaction; a key with a live lease is reported as
    /// refused unless `force` revokes the lease. Keys left when `until`
    /// passes are reported `NOT_REACHED`, unchanged.
    #[allow(clippy::too_many_arguments)]
    pub async fn clear_consumers(
        &self,
        ctx: &CallContext,
        table: &TableName,
        branch: &BranchName,
        selector: &ConsumerSelector,
        force: bool,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<Vec<BulkChange>, StoreError> {
        let selected = self.select_consumers(table, branch, selector).await?;
        let mut cleared = Vec::with_capacity(selected.len());
        for (key, _, _) in selected {
            if out_of_time(until) {
                cleared.push(not_reached(key));
                continue;
            }
            let result = match self.delete_consumer(ctx, &key, None, force, execute).await {
                Ok(planned) => Ok(planned.change),
                Err(StoreError::Rule(rule)) => Err(rule),
                Err(other) => return Err(other),
            };
            cleared.push(BulkChange {
                key,
                result,
                target: None,
            });
        }
        Ok(cleared)
    }

    /// A6: moves every consumer of a branch whose id the selector matches
    /// to where `target` says given its position as the change compares it
    /// (read with the key for the write, not the listing's), plan-only
    /// unless `execute`. With `expected` (consumer id → position, as a plan
    /// showed), each change is a compare-and-set on that position, and a
    /// consumer the plan did not show is left alone. Live leases refuse
    /// unless `force`, which fences only the lease the listing showed (one
    /// granted since refuses as if not forced). Keys left when `until`
    /// passes are reported `NOT_REACHED`, unchanged.
    #[allow(clippy::too_many_arguments)]
    pub async fn reset_consumers(
        &self,
        ctx: &CallContext,
        table: &TableName,
        branch: &BranchName,
        selector: &ConsumerSelector,
        target: impl Fn(Option<i64>) -> Result<i64, CoreError>,
        expected: &BulkExpected,
        force: bool,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<Vec<BulkChange>, StoreError> {
        let selected = self.select_consumers(table, branch, selector).await?;
        let mut reset = Vec::with_capacity(selected.len());
        for (key, listed_at, seen_lease) in selected {
            // Where a consumer left alone would have gone (resolved only
            // for those: the target is resolved for the write otherwise).
            let listed = || Some((listed_at, target(Some(listed_at)).ok()));
            if out_of_time(until) {
                reset.push(BulkChange {
                    target: listed(),
                    ..not_reached(key)
                });
                continue;
            }
            let id = key.consumer_id.as_str();
            let in_plan = (expected.next_snapshots.is_empty() || expected.next_snapshots.contains_key(id))
                && (expected.leases.is_empty() || expected.leases.contains_key(id));
            if !in_plan {
                let consumer_id = id.to_owned();
                reset.push(BulkChange {
                    result: Err(CoreError::NotInPlan { consumer_id }),
                    target: listed(),
                    key,
                });
                continue;
            }
            let precondition = expected.next_snapshots.get(id).copied();
            let force = match (expected.leases.get(id), force, seen_lease) {
                // The lease the plan saw, whatever the listing shows now.
                (Some(planned), force, _) => admin::Force::as_planned(force, Some(*planned)),
                (None, false, _) => admin::Force::No,
                (None, true, Some(lease)) => admin::Force::Lease(lease),
                // No live lease listed: one granted since is not forced.
                (None, true, None) => admin::Force::No,
            };
            let planned = self
                .plan_or_apply(execute, FindKey::Key(&key), ctx, |loaded| {
                    admin::reset_to(loaded.state.as_ref(), &key, &target, precondition, force, loaded.now)
                })
                .await;
            let (result, target) = match planned {
                Ok(planned) => (Ok(planned.change), None),
                Err(StoreError::Rule(rule)) => (Err(rule), listed()),
                Err(other) => return Err(other),
            };
            reset.push(BulkChange { key, result, target });
        }
        Ok(reset)
    }

    /// The consumers of a branch whose id the selector matches, with their
    /// positions and live leases, in key order (at most [`MAX_BATCH`]).
    async fn select_consumers(
        &self,
        table: &TableName,
        branch: &BranchName,
        selector: &ConsumerSelector,
    ) -> Result<Vec<(ConsumerKey, i64, Option<uuid::Uuid>)>, StoreError> {
        let filter = KeyFilter {
            table: Some(table.clone()),
            branch: Some(branch.clone()),
            consumer_id_prefix: None,
        };
        self.collect_keys(&filter, "consumers; narrow the patterns", |s, now| {
            let next = s.consumer?.next_snapshot;
            let lease = s.live_lease(now).map(|l| l.lease_id);
            selector
                .matches(s.key.consumer_id.as_str())
                .then_some((s.key, next, lease))
        })
        .await
    }

    /// What `keep` takes of every key `filter` lists (given the database
    /// clock of its page), in key order, a page at a time; more than
    /// [`MAX_BATCH`] taken refuses the call ("selects more than … `what`").
    async fn collect_keys<T>(
        &self,
        filter: &KeyFilter,
        what: &str,
        mut keep: impl FnMut(KeyState, Timestamp) -> Option<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut kept = Vec::new();
        let mut after: Option<ConsumerKey> = None;
        loop {
            let page = self
                .backend()
                .list_keys(filter, after.as_ref(), MAX_PAGE)
                .instrument(self.statement("list keys"))
                .await?;
            let Some((last, _)) = page.rows.last() else { break };
            after = Some(last.key.clone());
            let full = i64::try_from(page.rows.len()).unwrap_or(0) == MAX_PAGE;
            kept.extend(page.rows.into_iter().filter_map(|(state, _)| keep(state, page.now)));
            if kept.len() > usize::try_from(MAX_BATCH).unwrap_or(usize::MAX) {
                return Err(CoreError::invalid("including", format!("selects more than {MAX_BATCH} {what}")).into());
            }
            if !full {
                break;
            }
        }
        Ok(kept)
    }

    /// A4 in bulk: revokes every live lease among the keys `filter` lists
    /// whose consumer id the selector matches (plan-only unless `execute`).
    /// Only the lease listed is revoked: keys whose lease ended or was
    /// replaced meanwhile are left out. Keys left when `until` passes are
    /// returned apart (their leases untouched).
    pub async fn revoke_leases(
        &self,
        ctx: &CallContext,
        filter: &KeyFilter,
        selector: &ConsumerSelector,
        reason: &str,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<(Vec<(ConsumerKey, Revoked)>, Vec<ConsumerKey>), StoreError> {
        let leased = self
            .collect_keys(filter, "live leases; narrow the selection", |state, now| {
                let lease = state.live_lease(now)?.lease_id;
                selector
                    .matches(state.key.consumer_id.as_str())
                    .then_some((state.key, lease))
            })
            .await?;
        let mut revoked = Vec::with_capacity(leased.len());
        let mut left = Vec::new();
        for (key, seen) in leased {
            if out_of_time(until) {
                left.push(key);
                continue;
            }
            let planned = self
                .plan_or_apply(execute, FindKey::Key(&key), ctx, |loaded| {
                    lease::revoke_seen(loaded.state.as_ref(), loaded.now, reason, seen)
                })
                .await?;
            if planned.change.lease.is_some() {
                revoked.push((key, planned.change));
            }
        }
        Ok((revoked, left))
    }

    /// E3/A4: deletes expired consumers (plan-only unless `execute`), each
    /// leaving a history row with its last position. Safe with several
    /// replicas at once: each deletion is a compare-and-set, so every
    /// consumer is expired exactly once.
    pub async fn expire_consumers(
        &self,
        ctx: &CallContext,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
        execute: bool,
    ) -> Result<Vec<Expired>, StoreError> {
        Ok(self
            .expire_consumers_counted(ctx, table, branch, limit, execute)
            .await?
            .expired)
    }

    /// [`Self::expire_consumers`], also saying how many expired consumers
    /// it found: when another replica expires some of them first, fewer are
    /// expired here than were found, and a sweeper that found its limit
    /// knows more may be waiting either way.
    pub async fn expire_consumers_counted(
        &self,
        ctx: &CallContext,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
        execute: bool,
    ) -> Result<ExpiryRun, StoreError> {
        let candidates = self
            .backend()
            .expired_keys(table, branch, limit.clamp(1, MAX_BATCH))
            .instrument(self.statement("expired keys"))
            .await?;
        let found = candidates.len();
        let mut expired = Vec::new();
        for key in candidates {
            let planned = self
                .plan_or_apply(execute, FindKey::Key(&key), ctx, |loaded| {
                    let idle = loaded
                        .state
                        .as_ref()
                        .and_then(|s| s.consumer)
                        .map(|c| c.updated_at.until(loaded.now))
                        .unwrap_or_default();
                    Ok(
                        tidemark_core::expiry::expire(loaded.state.as_ref(), loaded.options.expiration, loaded.now)
                            .map(|expired| expired.map(|next| (next, idle))),
                    )
                })
                .await?;
            if let Some((next_snapshot, idle)) = planned.change {
                expired.push(Expired {
                    key,
                    next_snapshot,
                    idle,
                });
            }
        }
        Ok(ExpiryRun { expired, found })
    }
}

/// Whether a bulk operation's time (`until`) has run out.
fn out_of_time(until: Option<Instant>) -> bool {
    until.is_some_and(|until| Instant::now() >= until)
}

/// A key a bulk operation did not reach in time.
fn not_reached(key: ConsumerKey) -> BulkChange {
    let consumer_id = key.consumer_id.as_str().to_owned();
    BulkChange {
        key,
        result: Err(CoreError::NotReached { consumer_id }),
        target: None,
    }
}
