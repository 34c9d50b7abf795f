//! Retention fences (SPEC §5 E4–E6): what holds a branch back.

use tidemark_core::retention::{self, FenceInputs, Fences};
use tidemark_core::{BranchName, KeyState, TableName, TableOptions, Timestamp};
use tracing::Instrument;

use super::ConsumerView;
use crate::backend::MAX_PAGE;
use crate::error::StoreError;
use crate::store::Store;

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

impl Store {
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
            .fence_view(table, branch, holders.clamp(1, MAX_PAGE))
            .instrument(self.statement("fence view"))
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
        let view = self
            .backend()
            .branch_view(table, branch, limit)
            .instrument(self.statement("branch view"))
            .await?;
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
