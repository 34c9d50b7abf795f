//! The retention fence as a transport asks for it (SPEC §5): the fence of a
//! table's branch with its holders, and the full explanation.

use tidemark_core::{BranchName, TableName};
use tidemark_store::{Explanation, FenceReport, StoreError};

use crate::app::App;

impl App {
    /// GetRetentionFence: the branch's fences and up to `holders` holders
    /// of each.
    pub async fn fence(
        &self,
        table: &TableName,
        branch: &BranchName,
        changelog_decoupled: bool,
        holders: i64,
    ) -> Result<FenceReport, StoreError> {
        self.store.fence(table, branch, changelog_decoupled, holders).await
    }

    /// The latest snapshot of a branch known now, which every lag counts to:
    /// the higher of a registered table's directory (as last read) and the
    /// highest snapshot the branch's workers reported.
    pub async fn latest_now(&self, table: &TableName, branch: &BranchName) -> Option<i64> {
        self.tables.latest_now(table, branch.as_str()).await
    }

    /// ExplainRetention: the fences and every holder (up to `limit`).
    pub async fn explain_retention(
        &self,
        table: &TableName,
        branch: &BranchName,
        changelog_decoupled: bool,
        limit: i64,
    ) -> Result<Explanation, StoreError> {
        self.store.explain(table, branch, changelog_decoupled, limit).await
    }
}
