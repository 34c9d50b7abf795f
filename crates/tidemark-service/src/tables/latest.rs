//! The latest snapshot a lag counts to *now* (issue 55), the same figure
//! for the API, the CLI, the console and the metrics: the higher of a
//! registered table's directory (as last read, at most [`FRESHNESS`] old)
//! and the highest snapshot any worker of the branch reported with a
//! commit. A consumer's own report is not enough: it is as old as that
//! consumer's last commit, so a stopped consumer's lag would stop growing.

use std::sync::Arc;
use std::time::Instant;

use tidemark_core::{BranchName, TableName};

use super::{FRESHNESS, LAG_READ_LIMIT, Tables};

impl Tables {
    /// The highest latest snapshot the branch's workers reported, read from
    /// the store at most once per [`FRESHNESS`] (a listing of a thousand
    /// consumers reads it once), within [`LAG_READ_LIMIT`]. A read that
    /// fails or is late answers with the last value read, if any: a lag
    /// informs, and must not fail a listing or a fence.
    pub(crate) async fn reported_latest(self: &Arc<Self>, table: &TableName, branch: &str) -> Option<i64> {
        let slot = (table.as_str().to_owned(), branch.to_owned());
        let cached = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&slot)
            .copied();
        if let Some((at, value)) = cached
            && at.elapsed() < FRESHNESS
        {
            return value;
        }
        let Ok(branch_name) = BranchName::parse(branch, "branch") else {
            return None;
        };
        let read = tokio::time::timeout(LAG_READ_LIMIT, self.store.reported_latest(table, &branch_name)).await;
        match read {
            Ok(Ok(value)) => {
                self.reported
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(slot, (Instant::now(), value));
                value
            }
            Ok(Err(e)) => {
                tracing::debug!(table = table.as_str(), branch, error = %e, "cannot read the reported latest snapshot");
                cached.and_then(|(_, value)| value)
            }
            Err(_) => cached.and_then(|(_, value)| value),
        }
    }

    /// The latest snapshot of a branch known now (see the module comment).
    pub(crate) async fn latest_now(self: &Arc<Self>, table: &TableName, branch: &str) -> Option<i64> {
        let mut directory = self.last_known_latest(table, branch);
        if directory.is_none() {
            directory = self.read_latest_once(table, branch).await;
        }
        directory.max(self.reported_latest(table, branch).await)
    }
}
