//! Retention fences, expiration and operator changes (SPEC §5, §6) over the
//! [`Store`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tidemark_core::admin::{self, AdminChange, ConsumerSelector, Liveness};
use tidemark_core::lease;
use tidemark_core::retention::{self, FenceInputs, Fences};
use tidemark_core::{
    BranchName, ConsumerKey, CoreError, EventKind, KeyState, Revoked, TableName, TableOptions, Timestamp, Transition,
};

use crate::backend::{
    CallContext, FindKey, HistoryFilter, HistoryRecord, KeyFilter, Loaded, PruneRun, Pruned, StoredOptions,
};
use crate::error::StoreError;
use crate::store::Store;

/// Most rows one listing or explanation returns.
pub const MAX_PAGE: i64 = 1000;
/// Most consumers one clear or expire call may affect.
pub const MAX_BATCH: i64 = 100_000;

/// A change computed for an operator, and whether it was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned<T> {
    /// What the change does (or would do).
    pub change: T,
    /// Whether it was written (`execute`); `false` for a plan.
    pub applied: bool,
}

/// A key as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerView {
    /// Its state.
    pub state: KeyState,
    /// Its table's options.
    pub options: TableOptions,
    /// Idle time and expiry, when it has a consumer.
    pub liveness: Option<Liveness>,
    /// The database clock at the read.
    pub now: Timestamp,
}

impl ConsumerView {
    fn new(state: KeyState, options: TableOptions, now: Timestamp) -> Self {
        let liveness = admin::liveness(&state, options.expiration, now);
        Self {
            state,
            options,
            liveness,
            now,
        }
    }
}

/// One page of a consumer listing.
#[derive(Debug, Clone)]
pub struct ConsumerPage {
    /// The keys on this page.
    pub consumers: Vec<ConsumerView>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<ConsumerKey>,
}

/// One consumer a bulk change (clear, reset) looked at.
#[derive(Debug, Clone)]
pub struct BulkChange {
    /// The key.
    pub key: ConsumerKey,
    /// The change, or why it was not made (a live lease without `force`, a
    /// precondition, a race).
    pub result: Result<AdminChange, CoreError>,
}

/// Something holding a branch's retention back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// What holds it.
    pub kind: HolderKind,
    /// The snapshot it protects (its position, or the pinned snapshot).
    pub snapshot: i64,
    /// The key, with its lease and consumer.
    pub view: ConsumerView,
}

/// Kinds of retention holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    /// An unexpired consumer.
    Consumer,
    /// A live lease's in-progress initial full scan (E5).
    FullScanPin,
}

/// E4: a branch's fences and what sets them.
#[derive(Debug, Clone)]
pub struct FenceReport {
    /// The fences.
    pub fences: Fences,
    /// The lowest consumer position and pin.
    pub inputs: FenceInputs,
    /// The holders at the snapshot fence.
    pub snapshot_holders: Vec<Holder>,
    /// The holders at the changelog fence.
    pub changelog_holders: Vec<Holder>,
    /// The table's options.
    pub options: TableOptions,
    /// The database clock at the read.
    pub now: Timestamp,
}

/// E6: everything holding a branch's retention back, lowest first.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The fences (as for `changelog_decoupled`).
    pub fences: FenceReport,
    /// Holders ordered by the snapshot they protect.
    pub holders: Vec<Holder>,
    /// Whether more holders exist beyond `limit`.
    pub truncated: bool,
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

/// A table-options change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsChange {
    /// The options before.
    pub before: StoredOptions,
    /// The options after.
    pub after: TableOptions,
}

impl Store {
    /// Decides a change; writes it only when `execute` (else it is a plan,
    /// with the same checks and refusals).
    async fn plan_or_apply<T>(
        &self,
        execute: bool,
        find: FindKey<'_>,
        ctx: &CallContext,
        decide: impl FnMut(&Loaded) -> Result<Transition<T>, CoreError>,
    ) -> Result<Planned<T>, StoreError> {
        let mut decide = decide;
        if execute {
            // What the written decision recorded, for the audit log: the
            // last decision is the one written (a lost race decides again).
            let mut written: Option<(ConsumerKey, Vec<tidemark_core::HistoryEvent>)> = None;
            let change = self
                .apply(find, ctx, |loaded| {
                    let transition = decide(loaded)?;
                    written = transition
                        .write
                        .as_ref()
                        .map(|state| (state.key.clone(), transition.events.clone()));
                    Ok(transition)
                })
                .await?;
            if let Some((key, events)) = written {
                for event in &events {
                    crate::audit::consumer_change(ctx, &key, event);
                }
            }
            return Ok(Planned { change, applied: true });
        }
        let loaded = self.backend().load(find).await?;
        if let Some(state) = &loaded.state {
            ctx.authorize(find, state)?;
        }
        let change = decide(&loaded)?.output;
        Ok(Planned { change, applied: false })
    }

    /// A1: a key's state, options and idle/expiry times, with its recent
    /// history. NOT_FOUND when the key has neither a consumer nor a lease.
    pub async fn describe(
        &self,
        key: &ConsumerKey,
        history: i64,
    ) -> Result<(ConsumerView, Vec<HistoryRecord>), StoreError> {
        // One snapshot for the row and its history (SPEC §8).
        let (loaded, recent) = self.backend().load_with_history(key, history).await?;
        let Some(state) = loaded.state.filter(|s| s.consumer.is_some() || s.lease.is_some()) else {
            return Err(CoreError::ConsumerNotFound { key: key.clone() }.into());
        };
        Ok((ConsumerView::new(state, loaded.options, loaded.now), recent))
    }

    /// A1: keys with a consumer or a live lease, in key order.
    pub async fn list_consumers(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        page_size: i64,
    ) -> Result<ConsumerPage, StoreError> {
        let page_size = page_size.clamp(1, MAX_PAGE);
        // One extra row says whether there is a next page.
        let listed = self.backend().list_keys(filter, after, page_size + 1).await?;
        let now = listed.now;
        let mut consumers: Vec<ConsumerView> = listed
            .rows
            .into_iter()
            .map(|(state, options)| ConsumerView::new(state, options, now))
            .collect();
        let next = if consumers.len() > usize::try_from(page_size).unwrap_or(usize::MAX) {
            consumers.pop();
            consumers.last().map(|c| c.state.key.clone())
        } else {
            None
        };
        Ok(ConsumerPage { consumers, next })
    }

    /// A2: sets a consumer's position (plan-only unless `execute`).
    pub async fn reset_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        next_snapshot: i64,
        expected: Option<i64>,
        force: bool,
        execute: bool,
    ) -> Result<Planned<AdminChange>, StoreError> {
        self.plan_or_apply(execute, FindKey::Key(key), ctx, |loaded| {
            admin::reset(loaded.state.as_ref(), key, next_snapshot, expected, force, loaded.now)
        })
        .await
    }

    /// SPEC §9: creates a consumer from a Paimon consumer file, only if the
    /// key still has none (compare-and-set: a consumer created meanwhile
    /// wins, and the answer says so).
    pub async fn import_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        next_snapshot: i64,
    ) -> Result<admin::Imported, StoreError> {
        self.apply(FindKey::Key(key), ctx, |loaded| {
            admin::import(loaded.state.as_ref(), key, next_snapshot, loaded.now)
        })
        .await
    }

    /// A2: deletes a consumer (plan-only unless `execute`).
    pub async fn delete_consumer(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        expected: Option<i64>,
        force: bool,
        execute: bool,
    ) -> Result<Planned<AdminChange>, StoreError> {
        self.plan_or_apply(execute, FindKey::Key(key), ctx, |loaded| {
            admin::delete(loaded.state.as_ref(), expected, force, loaded.now, EventKind::Delete)
        })
        .await
    }

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
            cleared.push(BulkChange { key, result });
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
        expected: &std::collections::HashMap<String, i64>,
        force: bool,
        execute: bool,
        until: Option<Instant>,
    ) -> Result<Vec<BulkChange>, StoreError> {
        let selected = self.select_consumers(table, branch, selector).await?;
        let mut reset = Vec::with_capacity(selected.len());
        for (key, _, seen_lease) in selected {
            if out_of_time(until) {
                reset.push(not_reached(key));
                continue;
            }
            let precondition = if expected.is_empty() {
                None
            } else {
                match expected.get(key.consumer_id.as_str()) {
                    Some(position) => Some(*position),
                    None => {
                        let consumer_id = key.consumer_id.as_str().to_owned();
                        reset.push(BulkChange {
                            key,
                            result: Err(CoreError::NotInPlan { consumer_id }),
                        });
                        continue;
                    }
                }
            };
            let force = match (force, seen_lease) {
                (false, _) => admin::Force::No,
                (true, Some(lease)) => admin::Force::Lease(lease),
                // No live lease listed: one granted since is not forced.
                (true, None) => admin::Force::No,
            };
            let planned = self
                .plan_or_apply(execute, FindKey::Key(&key), ctx, |loaded| {
                    admin::reset_to(loaded.state.as_ref(), &key, &target, precondition, force, loaded.now)
                })
                .await;
            let result = match planned {
                Ok(planned) => Ok(planned.change),
                Err(StoreError::Rule(rule)) => Err(rule),
                Err(other) => return Err(other),
            };
            reset.push(BulkChange { key, result });
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
        let mut selected = Vec::new();
        let mut after: Option<ConsumerKey> = None;
        loop {
            let page = self.backend().list_keys(&filter, after.as_ref(), MAX_PAGE).await?;
            let Some((last, _)) = page.rows.last() else { break };
            after = Some(last.key.clone());
            let full = i64::try_from(page.rows.len()).unwrap_or(0) == MAX_PAGE;
            selected.extend(page.rows.into_iter().filter_map(|(s, _)| {
                let next = s.consumer?.next_snapshot;
                let lease = s.live_lease(page.now).map(|l| l.lease_id);
                selector
                    .matches(s.key.consumer_id.as_str())
                    .then_some((s.key, next, lease))
            }));
            if selected.len() > usize::try_from(MAX_BATCH).unwrap_or(usize::MAX) {
                return Err(CoreError::invalid(
                    "including",
                    format!("selects more than {MAX_BATCH} consumers; narrow the patterns"),
                )
                .into());
            }
            if !full {
                break;
            }
        }
        Ok(selected)
    }

    /// L8/A4: revokes a key's live lease and burns an epoch (plan-only
    /// unless `execute`).
    pub async fn revoke(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        reason: &str,
        execute: bool,
    ) -> Result<Planned<Revoked>, StoreError> {
        self.plan_or_apply(execute, FindKey::Key(key), ctx, |loaded| {
            lease::revoke(loaded.state.as_ref(), loaded.now, reason)
        })
        .await
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
        let mut leased = Vec::new();
        let mut after: Option<ConsumerKey> = None;
        loop {
            let page = self.backend().list_keys(filter, after.as_ref(), MAX_PAGE).await?;
            let Some((last, _)) = page.rows.last() else { break };
            after = Some(last.key.clone());
            let full = i64::try_from(page.rows.len()).unwrap_or(0) == MAX_PAGE;
            leased.extend(page.rows.into_iter().filter_map(|(state, _)| {
                let lease = state.live_lease(page.now)?.lease_id;
                selector
                    .matches(state.key.consumer_id.as_str())
                    .then_some((state.key, lease))
            }));
            if leased.len() > usize::try_from(MAX_BATCH).unwrap_or(usize::MAX) {
                return Err(CoreError::invalid(
                    "including",
                    format!("selects more than {MAX_BATCH} live leases; narrow the selection"),
                )
                .into());
            }
            if !full {
                break;
            }
        }
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

    /// A5: deletes history rows and stale lease grants older than `max_age`.
    pub async fn prune(&self, max_age: Duration, limit: i64) -> Result<Pruned, StoreError> {
        self.backend().prune(max_age, limit).await
    }

    /// A5, keeping up with any commit rate: prunes `batch` rows at a time
    /// (each its own short transaction) until a batch finds fewer than
    /// `batch` rows to delete, or `budget` has passed. `caught_up` says
    /// which.
    pub async fn prune_until_caught_up(
        &self,
        max_age: Duration,
        batch: i64,
        budget: Duration,
    ) -> Result<PruneRun, StoreError> {
        let started = Instant::now();
        let mut run = PruneRun::default();
        loop {
            let pruned = self.prune(max_age, batch).await?;
            run.history += pruned.history;
            run.grants += pruned.grants;
            run.batches += 1;
            let full = |n: u64| i64::try_from(n).unwrap_or(i64::MAX) >= batch;
            if !full(pruned.history) && !full(pruned.grants) {
                run.caught_up = true;
                return Ok(run);
            }
            if started.elapsed() >= budget {
                return Ok(run);
            }
        }
    }

    /// A5: a page of history, newest first.
    pub async fn list_history(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        page_size: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        self.backend()
            .history_page(filter, before_id, page_size.clamp(1, MAX_PAGE))
            .await
    }

    /// E1/A4: a table's options.
    pub async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        self.backend().table_options(table).await
    }

    /// E1/A4: changes a table's options (plan-only unless `execute`).
    pub async fn set_table_options(
        &self,
        ctx: &CallContext,
        table: &TableName,
        set: &BTreeMap<String, String>,
        unset: &[String],
        execute: bool,
    ) -> Result<Planned<OptionsChange>, StoreError> {
        for _ in 0..8 {
            let before = self.backend().table_options(table).await?;
            let after = before.options.apply(set, unset).map_err(CoreError::InvalidArgument)?;
            let change = OptionsChange { before, after };
            if !execute {
                return Ok(Planned { change, applied: false });
            }
            if self
                .backend()
                .save_table_options(table, &change.before, &after, ctx)
                .await?
            {
                return Ok(Planned { change, applied: true });
            }
        }
        Err(StoreError::Contention)
    }

    /// E4/E5: the branch's fences and the consumers and pins that set them.
    pub async fn fence(
        &self,
        table: &TableName,
        branch: &BranchName,
        changelog_decoupled: bool,
        holders: i64,
    ) -> Result<FenceReport, StoreError> {
        let view = self
            .backend()
            .branch_view(table, branch, holders.clamp(1, MAX_PAGE))
            .await?;
        Ok(fence_report(view, changelog_decoupled))
    }

    /// E6: everything holding the branch's retention back, lowest first.
    pub async fn explain(
        &self,
        table: &TableName,
        branch: &BranchName,
        changelog_decoupled: bool,
        limit: i64,
    ) -> Result<Explanation, StoreError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let view = self.backend().branch_view(table, branch, limit).await?;
        let report = fence_report(view.clone(), changelog_decoupled);
        let truncated = [&view.consumers, &view.pins]
            .iter()
            .any(|rows| i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit);
        let mut holders = holders_of(&view);
        holders.sort_by(|a, b| {
            (a.snapshot, a.view.state.key.consumer_id.as_str())
                .cmp(&(b.snapshot, b.view.state.key.consumer_id.as_str()))
        });
        holders.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok(Explanation {
            fences: report,
            holders,
            truncated,
        })
    }
}

fn holders_of(view: &crate::backend::BranchView) -> Vec<Holder> {
    let consumers = view.consumers.iter().filter_map(|s| {
        Some(Holder {
            kind: HolderKind::Consumer,
            snapshot: s.next_snapshot()?,
            view: ConsumerView::new(s.clone(), view.options, view.now),
        })
    });
    let pins = view.pins.iter().filter_map(|s| {
        Some(Holder {
            kind: HolderKind::FullScanPin,
            snapshot: s.lease.as_ref()?.full_scan_pin?,
            view: ConsumerView::new(s.clone(), view.options, view.now),
        })
    });
    consumers.chain(pins).collect()
}

fn fence_report(view: crate::backend::BranchView, changelog_decoupled: bool) -> FenceReport {
    let inputs = FenceInputs {
        consumer_min: view.consumers.first().and_then(KeyState::next_snapshot),
        pin_min: view.pins.first().and_then(|s| s.lease.as_ref()?.full_scan_pin),
    };
    let fences = retention::fences(&view.options, changelog_decoupled, &inputs);
    let all = holders_of(&view);
    let at = |fence: Option<i64>, consumers: bool, pins: bool| -> Vec<Holder> {
        all.iter()
            .filter(|h| Some(h.snapshot) == fence)
            .filter(|h| match h.kind {
                HolderKind::Consumer => consumers,
                HolderKind::FullScanPin => pins,
            })
            .cloned()
            .collect()
    };
    FenceReport {
        snapshot_holders: at(
            fences.snapshot,
            fences.snapshot_set_by_consumers(&inputs),
            fences.snapshot_set_by_pins(&inputs),
        ),
        changelog_holders: at(
            fences.changelog,
            fences.changelog_set_by_consumers(&inputs),
            fences.changelog_set_by_pins(&inputs),
        ),
        fences,
        inputs,
        options: view.options,
        now: view.now,
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
    }
}
