//! The parts of a Paimon table's directory tidemark reads and writes,
//! through one `object_store` interface for local disks and S3-compatible
//! stores (credentials from the environment: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT`,
//! `AWS_ALLOW_HTTP`, ...):
//!
//! - consumer files, `<table>[/branch/branch-<b>]/consumer/consumer-<id>`
//!   holding `{"nextSnapshot": n}`, which Paimon's own snapshot expiration
//!   honours;
//! - the snapshot range, from `snapshot/EARLIEST` and `snapshot/LATEST`
//!   checked against the `snapshot-N` files, as Paimon does.
//!
//! Writes are never torn: on object stores a put is atomic; on local disks
//! the file is written under a hidden temporary name (Paimon lists
//! `consumer-*` only) and renamed over the old one.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};

/// Paimon's main branch.
pub const MAIN_BRANCH: &str = "main";
const CONSUMER_PREFIX: &str = "consumer-";
/// How far a stale snapshot hint is followed before listing instead.
const HINT_STEPS: i64 = 1000;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum PaimonError {
    /// The location is not a usable path or URL.
    #[error("invalid table location {location:?}: {why}")]
    Location {
        /// The location given.
        location: String,
        /// Why.
        why: String,
    },
    /// The store failed (unreachable, permission, ...).
    #[error("table storage: {0}")]
    Storage(#[from] object_store::Error),
    /// A file that is not what Paimon writes.
    #[error("{path}: {why}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A consumer file found in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundConsumer {
    /// Its branch.
    pub branch: String,
    /// The id from the file name.
    pub consumer_id: String,
    /// Its position, or why the file could not be read.
    pub next_snapshot: Result<i64, String>,
}

/// The snapshots a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRange {
    /// The earliest snapshot present.
    pub earliest: i64,
    /// The latest snapshot.
    pub latest: i64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ConsumerFile {
    #[serde(rename = "nextSnapshot")]
    next_snapshot: i64,
}

/// A Paimon table's directory.
#[derive(Debug, Clone)]
pub struct PaimonTable {
    store: Arc<dyn ObjectStore>,
    root: Path,
    local: bool,
    location: String,
    /// What goes before a path inside the store to name it in full: "/" on
    /// local disks, "s3://bucket/" on object stores.
    url_prefix: String,
}

impl PaimonTable {
    /// Opens a table at a local path (absolute, or `file://`) or an object
    /// store URL (`s3://bucket/path`). Nothing is read yet.
    pub fn open(location: &str) -> Result<Self, PaimonError> {
        let bad = |why: String| PaimonError::Location {
            location: location.to_owned(),
            why,
        };
        let trimmed = location.trim_end_matches('/');
        if trimmed.is_empty() {
            return Err(bad("empty".into()));
        }
        if let Some(rest) = trimmed.strip_prefix("file://") {
            return Self::local(rest, location).map_err(bad);
        }
        if trimmed.starts_with('/') {
            return Self::local(trimmed, location).map_err(bad);
        }
        let url = url::Url::parse(trimmed).map_err(|e| bad(e.to_string()))?;
        match url.scheme() {
            "s3" | "s3a" => {
                let store = object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url.as_str().replacen("s3a://", "s3://", 1))
                    .build()
                    .map_err(|e| bad(e.to_string()))?;
                let root = Path::parse(url.path().trim_start_matches('/')).map_err(|e| bad(e.to_string()))?;
                Ok(Self {
                    store: Arc::new(store),
                    root,
                    local: false,
                    location: location.to_owned(),
                    url_prefix: format!("{}://{}/", url.scheme(), url.host_str().unwrap_or_default()),
                })
            }
            other => Err(bad(format!(
                "unsupported scheme {other:?}: use an absolute path, file:// or s3://"
            ))),
        }
    }

    fn local(path: &str, location: &str) -> Result<Self, String> {
        if !path.starts_with('/') {
            return Err("a local path must be absolute".into());
        }
        let root = Path::from_absolute_path(path).map_err(|e| e.to_string())?;
        Ok(Self {
            store: Arc::new(LocalFileSystem::new()),
            root,
            local: true,
            location: location.to_owned(),
            url_prefix: "/".to_owned(),
        })
    }

    /// The location as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn branch_root(&self, branch: &str) -> Path {
        if branch.is_empty() || branch == MAIN_BRANCH {
            self.root.clone()
        } else {
            self.root.child("branch").child(format!("branch-{branch}"))
        }
    }

    /// Where a consumer's file lives.
    pub fn consumer_path(&self, branch: &str, consumer_id: &str) -> Path {
        self.branch_root(branch)
            .child("consumer")
            .child(format!("{CONSUMER_PREFIX}{consumer_id}"))
    }

    /// The consumer's file named in full (an absolute path, or an object
    /// store URL), for people to read.
    pub fn consumer_location(&self, branch: &str, consumer_id: &str) -> String {
        format!("{}{}", self.url_prefix, self.consumer_path(branch, consumer_id))
    }

    /// Writes `{"nextSnapshot": n}` atomically (and so refreshes the file's
    /// modification time, by which Paimon expires consumers).
    pub async fn write_consumer(&self, branch: &str, consumer_id: &str, next_snapshot: i64) -> Result<(), PaimonError> {
        let body = serde_json::to_vec(&ConsumerFile { next_snapshot }).expect("serializes");
        let path = self.consumer_path(branch, consumer_id);
        if self.local {
            // Hidden from Paimon's `consumer-*` listing until renamed.
            let temp = self.branch_root(branch).child("consumer").child(format!(
                ".{CONSUMER_PREFIX}{consumer_id}.{}.tmp",
                uuid::Uuid::new_v4().simple()
            ));
            self.store.put(&temp, PutPayload::from(body)).await?;
            if let Err(e) = self.store.rename(&temp, &path).await {
                let _ = self.store.delete(&temp).await;
                return Err(e.into());
            }
        } else {
            self.store.put(&path, PutPayload::from(body)).await?;
        }
        Ok(())
    }

    /// A consumer's position, if its file exists.
    pub async fn read_consumer(&self, branch: &str, consumer_id: &str) -> Result<Option<i64>, PaimonError> {
        self.read_consumer_at(&self.consumer_path(branch, consumer_id)).await
    }

    async fn read_consumer_at(&self, path: &Path) -> Result<Option<i64>, PaimonError> {
        let bytes = match self.store.get(path).await {
            Ok(found) => found.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let file: ConsumerFile = serde_json::from_slice(&bytes).map_err(|e| PaimonError::Malformed {
            path: path.to_string(),
            why: format!("not a Paimon consumer file: {e}"),
        })?;
        Ok(Some(file.next_snapshot))
    }

    /// Deletes a consumer's file (absent is fine).
    pub async fn delete_consumer(&self, branch: &str, consumer_id: &str) -> Result<(), PaimonError> {
        match self.store.delete(&self.consumer_path(branch, consumer_id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The table's branches: main plus every `branch/branch-<b>`.
    pub async fn branches(&self) -> Result<Vec<String>, PaimonError> {
        let mut branches = vec![MAIN_BRANCH.to_owned()];
        let listed = self.store.list_with_delimiter(Some(&self.root.child("branch"))).await;
        let listed = match listed {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return Ok(branches),
            Err(e) => return Err(e.into()),
        };
        for prefix in listed.common_prefixes {
            if let Some(name) = prefix.filename().and_then(|n| n.strip_prefix("branch-"))
                && !name.is_empty()
            {
                branches.push(name.to_owned());
            }
        }
        branches.sort();
        Ok(branches)
    }

    /// Every consumer file of every branch.
    pub async fn list_consumers(&self) -> Result<Vec<FoundConsumer>, PaimonError> {
        let mut found = Vec::new();
        for branch in self.branches().await? {
            let dir = self.branch_root(&branch).child("consumer");
            let listed = match self.store.list_with_delimiter(Some(&dir)).await {
                Ok(listed) => listed,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            for object in listed.objects {
                let Some(id) = object.location.filename().and_then(|n| n.strip_prefix(CONSUMER_PREFIX)) else {
                    continue;
                };
                let next_snapshot = match self.read_consumer_at(&object.location).await {
                    Ok(Some(n)) => Ok(n),
                    Ok(None) => continue, // deleted meanwhile
                    Err(e) => Err(e.to_string()),
                };
                found.push(FoundConsumer {
                    branch: branch.clone(),
                    consumer_id: id.to_owned(),
                    next_snapshot,
                });
            }
        }
        found.sort_by(|a, b| (&a.branch, &a.consumer_id).cmp(&(&b.branch, &b.consumer_id)));
        Ok(found)
    }

    async fn exists(&self, path: &Path) -> Result<bool, PaimonError> {
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn hint(&self, dir: &Path, name: &str) -> Result<Option<i64>, PaimonError> {
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

    async fn list_snapshots(&self, dir: &Path) -> Result<Option<SnapshotRange>, PaimonError> {
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

    /// Lists every object under the table (tests and diagnostics).
    pub async fn list_all(&self) -> Result<Vec<String>, PaimonError> {
        let objects: Vec<_> = self.store.list(Some(&self.root)).try_collect().await?;
        Ok(objects.into_iter().map(|o| o.location.to_string()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (tempfile::TempDir, PaimonTable) {
        let dir = tempfile::tempdir().unwrap();
        let table = PaimonTable::open(dir.path().to_str().unwrap()).unwrap();
        (dir, table)
    }

    #[tokio::test]
    async fn consumer_files_are_where_paimon_looks_and_in_its_format() {
        let (dir, table) = table();
        table.write_consumer("main", "q1", 42).await.unwrap();
        table.write_consumer("b1", "q2", 7).await.unwrap();
        let main = std::fs::read_to_string(dir.path().join("consumer/consumer-q1")).unwrap();
        assert_eq!(main, r#"{"nextSnapshot":42}"#);
        let branch = std::fs::read_to_string(dir.path().join("branch/branch-b1/consumer/consumer-q2")).unwrap();
        assert_eq!(branch, r#"{"nextSnapshot":7}"#);
        assert_eq!(table.read_consumer("main", "q1").await.unwrap(), Some(42));
        table.write_consumer("main", "q1", 43).await.unwrap();
        assert_eq!(table.read_consumer("main", "q1").await.unwrap(), Some(43));
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("consumer"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["consumer-q1"]);
        table.delete_consumer("main", "q1").await.unwrap();
        table.delete_consumer("main", "q1").await.unwrap();
        assert_eq!(table.read_consumer("main", "q1").await.unwrap(), None);
    }

    #[tokio::test]
    async fn listing_finds_every_branch_and_reports_bad_files() {
        let (dir, table) = table();
        table.write_consumer("main", "a", 3).await.unwrap();
        table.write_consumer("dev", "b", 5).await.unwrap();
        std::fs::write(dir.path().join("consumer/consumer-broken"), "{nope").unwrap();
        std::fs::write(dir.path().join("consumer/.consumer-hidden.tmp"), "{}").unwrap();
        let found = table.list_consumers().await.unwrap();
        let summary: Vec<_> = found
            .iter()
            .map(|f| (f.branch.as_str(), f.consumer_id.as_str(), f.next_snapshot.is_ok()))
            .collect();
        assert_eq!(
            summary,
            [("dev", "b", true), ("main", "a", true), ("main", "broken", false)]
        );
    }

    fn snapshot_dir(dir: &std::path::Path, ids: std::ops::RangeInclusive<i64>, hints: Option<(i64, i64)>) {
        let snapshots = dir.join("snapshot");
        std::fs::create_dir_all(&snapshots).unwrap();
        for id in ids {
            std::fs::write(snapshots.join(format!("snapshot-{id}")), "{}").unwrap();
        }
        if let Some((earliest, latest)) = hints {
            std::fs::write(snapshots.join("EARLIEST"), earliest.to_string()).unwrap();
            std::fs::write(snapshots.join("LATEST"), latest.to_string()).unwrap();
        }
    }

    #[tokio::test]
    async fn snapshot_range_follows_hints_and_corrects_stale_ones() {
        let (dir, table) = table();
        assert_eq!(table.snapshot_range("main").await.unwrap(), None);
        snapshot_dir(dir.path(), 3..=9, Some((3, 9)));
        let range = |e, l| Some(SnapshotRange { earliest: e, latest: l });
        assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 9));
        // Stale hints: newer snapshots committed, older ones expired.
        snapshot_dir(dir.path(), 10..=12, Some((1, 8)));
        assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 12));
        // No hints: listed.
        std::fs::remove_file(dir.path().join("snapshot/LATEST")).unwrap();
        std::fs::remove_file(dir.path().join("snapshot/EARLIEST")).unwrap();
        assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 12));
        // A hint pointing at nothing: listed.
        std::fs::write(dir.path().join("snapshot/LATEST"), "99").unwrap();
        assert_eq!(table.snapshot_range("main").await.unwrap(), range(3, 12));
        // Branches have their own directory.
        snapshot_dir(&dir.path().join("branch/branch-dev"), 1..=2, None);
        assert_eq!(table.snapshot_range("dev").await.unwrap(), range(1, 2));
    }

    #[tokio::test]
    async fn concurrent_readers_never_see_a_torn_file() {
        let (dir, table) = table();
        table.write_consumer("main", "q", 1).await.unwrap();
        let path = dir.path().join("consumer/consumer-q");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let text = std::fs::read_to_string(&path).expect("the file is always there");
                    let parsed: serde_json::Value = serde_json::from_str(&text).expect("never torn");
                    assert!(parsed["nextSnapshot"].as_i64().unwrap() >= 1);
                    reads += 1;
                }
                reads
            })
        };
        for n in 2..2000 {
            table.write_consumer("main", "q", n).await.unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    }

    #[test]
    fn locations_are_checked() {
        assert!(PaimonTable::open("relative/path").is_err());
        assert!(PaimonTable::open("").is_err());
        assert!(PaimonTable::open("hdfs://nn/warehouse/t").is_err());
        assert!(PaimonTable::open("/warehouse/db.db/t").is_ok());
        assert!(PaimonTable::open("file:///warehouse/db.db/t").is_ok());
    }

    #[test]
    fn consumer_files_are_named_in_full() {
        let local = PaimonTable::open("file:///warehouse/db.db/t/").unwrap();
        assert_eq!(
            local.consumer_location("main", "q"),
            "/warehouse/db.db/t/consumer/consumer-q"
        );
        let s3 = PaimonTable::open("s3://bucket/warehouse/db.db/t").unwrap();
        assert_eq!(
            s3.consumer_location("dev", "q"),
            "s3://bucket/warehouse/db.db/t/branch/branch-dev/consumer/consumer-q"
        );
    }
}
