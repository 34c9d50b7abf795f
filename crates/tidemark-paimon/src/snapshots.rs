//! A branch's snapshot range, from `snapshot/EARLIEST` and
//! `snapshot/LATEST` checked against the `snapshot-N` files, as Paimon does.

use object_store::ObjectStore;
use object_store::path::Path;

use crate::{HINT_STEPS, PaimonError, PaimonTable, SnapshotRange};

impl PaimonTable {
    /// Whether the branch exists: its directory holds a schema (Paimon
    /// writes one when it creates a table or a branch) or snapshots.
    pub async fn branch_exists(&self, branch: &str) -> Result<bool, PaimonError> {
        if !self.schema_ids(branch).await?.is_empty() {
            return Ok(true);
        }
        let dir = self.branch_root(branch).child("snapshot");
        match self.store.list_with_delimiter(Some(&dir)).await {
            Ok(listed) => Ok(!listed.objects.is_empty()),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) async fn hint(&self, dir: &Path, name: &str) -> Result<Option<i64>, PaimonError> {
        let path = dir.child(name);
        match self.store.get(&path).await {
            Ok(found) => {
                let text = found.bytes().await?;
                Ok(std::str::from_utf8(&text).ok().and_then(|t| t.trim().parse().ok()))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The branch's snapshot range; `None` when it has no snapshot. Reads
    /// the EARLIEST and LATEST hints and checks them against the snapshot
    /// files (hints may be stale or missing), listing the directory when
    /// they cannot be trusted.
    pub async fn snapshot_range(&self, branch: &str) -> Result<Option<SnapshotRange>, PaimonError> {
        let dir = self.branch_root(branch).child("snapshot");
        let file = |id: i64| dir.child(format!("snapshot-{id}"));
        let mut latest = None;
        if let Some(mut hint) = self.hint(&dir, "LATEST").await?
            && hint >= 1
            && self.exists(&file(hint)).await?
        {
            // Writers may have committed after the hint was written.
            let mut steps = 0;
            while steps < HINT_STEPS && self.exists(&file(hint + 1)).await? {
                hint += 1;
                steps += 1;
            }
            if steps < HINT_STEPS {
                latest = Some(hint);
            }
        }
        let mut earliest = None;
        if let (Some(mut hint), Some(latest)) = (self.hint(&dir, "EARLIEST").await?, latest)
            && hint >= 1
        {
            // Expiration may have removed snapshots after writing the hint.
            let mut steps = 0;
            while hint <= latest && steps < HINT_STEPS && !self.exists(&file(hint)).await? {
                hint += 1;
                steps += 1;
            }
            if hint <= latest && steps < HINT_STEPS {
                earliest = Some(hint);
            }
        }
        if let (Some(earliest), Some(latest)) = (earliest, latest) {
            return Ok(Some(SnapshotRange { earliest, latest }));
        }
        self.list_snapshots(&dir).await
    }

    /// When snapshot `id` of the branch was committed (its `timeMillis`, Unix
    /// ms).
    pub async fn snapshot_millis(&self, branch: &str, id: i64) -> Result<i64, PaimonError> {
        let path = self
            .branch_root(branch)
            .child("snapshot")
            .child(format!("snapshot-{id}"));
        let bytes = match self.store.get(&path).await {
            Ok(found) => found.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(PaimonError::Missing {
                    path: format!("{}{path}", self.url_prefix),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let snapshot: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| PaimonError::Malformed {
            path: format!("{}{path}", self.url_prefix),
            why: e.to_string(),
        })?;
        snapshot["timeMillis"].as_i64().ok_or_else(|| PaimonError::Malformed {
            path: format!("{}{path}", self.url_prefix),
            why: "no timeMillis".to_owned(),
        })
    }

    pub(crate) async fn list_snapshots(&self, dir: &Path) -> Result<Option<SnapshotRange>, PaimonError> {
        let listed = match self.store.list_with_delimiter(Some(dir)).await {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let ids: Vec<i64> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename()?.strip_prefix("snapshot-")?.parse().ok())
            .collect();
        Ok(ids
            .iter()
            .min()
            .zip(ids.iter().max())
            .map(|(&earliest, &latest)| SnapshotRange { earliest, latest }))
    }
}
