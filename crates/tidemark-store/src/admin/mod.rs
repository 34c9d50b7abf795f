//! The operator's side of the [`Store`] (SPEC §5, §6): consumers one at a
//! time, bulk changes and expiry, retention fences, history and table
//! options. Every mutating call is plan-only unless `execute`.

mod bulk;
mod consumers;
mod fences;
mod tables;

use tidemark_core::admin::{self, Liveness};
use tidemark_core::{ConsumerKey, CoreError, KeyState, TableOptions, Timestamp, Transition};

use crate::backend::{CallContext, FindKey, Loaded};
use crate::error::StoreError;
use crate::store::Store;

pub use bulk::{BulkChange, BulkExpected, Expired, ExpiryRun};
pub use consumers::ConsumerPage;
pub use fences::{Explanation, FenceReport, Holder, HolderKind};
pub use tables::OptionsChange;

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
    pub(super) fn new(state: KeyState, options: TableOptions, now: Timestamp) -> Self {
        let liveness = admin::liveness(&state, options.expiration, now);
        Self {
            state,
            options,
            liveness,
            now,
        }
    }
}

impl Store {
    /// Decides a change; writes it only when `execute` (else it is a plan,
    /// with the same checks and refusals).
    pub(super) async fn plan_or_apply<T>(
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
                    let mut transition = decide(loaded)?;
                    // The operator's reason goes to the rows that carry no
                    // detail of their own (a reset, a delete).
                    if let Some(reason) = ctx.reason.as_ref().filter(|r| !r.is_empty()) {
                        for event in transition.events.iter_mut().filter(|e| e.detail.is_none()) {
                            event.detail = Some(reason.clone());
                        }
                    }
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
        let loaded = self.load(find).await?;
        if let Some(state) = &loaded.state {
            ctx.authorize(find, state)?;
        }
        let change = decide(&loaded)?.output;
        Ok(Planned { change, applied: false })
    }
}
