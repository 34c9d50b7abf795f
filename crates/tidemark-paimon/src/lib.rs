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
//! `consumer-*` only), fsynced, renamed over the old one, and the directory
//! fsynced, so an operating-system crash leaves the old file or the new one,
//! never an empty one. A write never creates the table's or a branch's
//! directory: a dropped branch stays dropped.
//!
//! Also read here: the table's identity (its first schema file, which
//! Paimon keeps for the table's whole life) and the options of its latest
//! schema (`consumer.expiration-time`).

use std::sync::Arc;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};

/// Paimon's main branch.
pub const MAIN_BRANCH: &str = "main";
const CONSUMER_PREFIX: &str = "consumer-";
/// The consumer-id prefix of full-scan pin files (SPEC §9): `~` is refused
/// in tidemark consumer ids and accepted by Paimon's readers, so these never
/// collide with a consumer's file.
pub const PIN_PREFIX: &str = "tidemark~pin~";
/// The Paimon table option by which consumer files expire.
pub const CONSUMER_EXPIRATION_OPTION: &str = "consumer.expiration-time";
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
    /// The table's or the branch's directory does not exist (dropped, or a
    /// mistyped location); nothing was written.
    #[error("{path} does not exist (was the table or branch dropped?)")]
    Missing {
        /// The directory.
        path: String,
    },
    /// A local file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
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

/// A consumer file as listed: its id and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedConsumer {
    /// The id from the file name (a pin file's id starts with [`PIN_PREFIX`]).
    pub consumer_id: String,
    /// When it was last written.
    pub modified: SystemTime,
    /// Its size in bytes.
    pub size: u64,
}

/// What a table's consumer file holds, read as Paimon would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// No file.
    Missing,
    /// `{"nextSnapshot": n}`.
    Position(i64),
    /// Something Paimon cannot read (torn, empty, not JSON); why.
    Unreadable(String),
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
    /// The table's directory on a local disk; `None` on object stores.
    local: Option<PathBuf>,
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
                    local: None,
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
            local: Some(PathBuf::from(path)),
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

    /// Where a consumer's file lives. The name is kept as it is: a path
    /// part would percent-encode the `~` of pin files, which Paimon would
    /// then not see as the same name.
    pub fn consumer_path(&self, branch: &str, consumer_id: &str) -> Path {
        let dir = self.branch_root(branch).child("consumer");
        Path::parse(format!("{dir}/{CONSUMER_PREFIX}{consumer_id}"))
            .unwrap_or_else(|_| dir.child(format!("{CONSUMER_PREFIX}{consumer_id}")))
    }

    /// The consumer's file named in full (an absolute path, or an object
    /// store URL), for people to read.
    pub fn consumer_location(&self, branch: &str, consumer_id: &str) -> String {
        format!("{}{}", self.url_prefix, self.consumer_path(branch, consumer_id))
    }

    fn local_dir(&self, branch: &str) -> Option<PathBuf> {
        let root = self.local.as_ref()?;
        Some(if branch.is_empty() || branch == MAIN_BRANCH {
            root.clone()
        } else {
            root.join("branch").join(format!("branch-{branch}"))
        })
    }

    /// Writes `{"nextSnapshot": n}` atomically and durably (and so refreshes
    /// the file's modification time, by which Paimon expires consumers).
    /// Fails with [`PaimonError::Missing`] when the branch's directory is
    /// gone, rather than creating it.
    pub async fn write_consumer(&self, branch: &str, consumer_id: &str, next_snapshot: i64) -> Result<(), PaimonError> {
        let body = serde_json::to_vec(&ConsumerFile { next_snapshot }).expect("serializes");
        if let Some(dir) = self.local_dir(branch) {
            let name = format!("{CONSUMER_PREFIX}{consumer_id}");
            return blocking(consumer_id, move || write_durably(&dir, &name, &body)).await;
        }
        self.store
            .put(&self.consumer_path(branch, consumer_id), PutPayload::from(body))
            .await?;
        Ok(())
    }

    /// What a consumer's file holds: missing, a position, or unreadable
    /// (torn, empty, not Paimon's format). Errors only when the store
    /// cannot be read.
    pub async fn consumer_file(&self, branch: &str, consumer_id: &str) -> Result<FileState, PaimonError> {
        match self.read_consumer(branch, consumer_id).await {
            Ok(Some(n)) => Ok(FileState::Position(n)),
            Ok(None) => Ok(FileState::Missing),
            Err(PaimonError::Malformed { why, .. }) => Ok(FileState::Unreadable(why)),
            Err(e) => Err(e),
        }
    }

    /// Refreshes a consumer file's modification time, by which Paimon
    /// expires consumers, without changing its content: on a local disk the
    /// time alone is set (no new data, so nothing to fsync: after a crash the
    /// file holds the same position, only its time may be older); object
    /// stores cannot set a time, so the same content is put again. Returns
    /// the file's new time and size; `None` when it no longer exists.
    pub async fn touch_consumer(
        &self,
        branch: &str,
        consumer_id: &str,
        next_snapshot: i64,
    ) -> Result<Option<ListedConsumer>, PaimonError> {
        if let Some(dir) = self.local_dir(branch) {
            let path = dir.join("consumer").join(format!("{CONSUMER_PREFIX}{consumer_id}"));
            let touched = blocking(consumer_id, move || {
                let io = |source| PaimonError::Io {
                    path: path.display().to_string(),
                    source,
                };
                let file = match std::fs::OpenOptions::new().write(true).open(&path) {
                    Ok(file) => file,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(io(e)),
                };
                file.set_modified(SystemTime::now()).map_err(io)?;
                let metadata = file.metadata().map_err(io)?;
                Ok(Some((metadata.modified().map_err(io)?, metadata.len())))
            })
            .await?;
            return Ok(touched.map(|(modified, size)| ListedConsumer {
                consumer_id: consumer_id.to_owned(),
                modified,
                size,
            }));
        }
        self.write_consumer(branch, consumer_id, next_snapshot).await?;
        self.stat_consumer(branch, consumer_id).await
    }

    /// A consumer file's modification time and size, if it exists.
    pub async fn stat_consumer(&self, branch: &str, consumer_id: &str) -> Result<Option<ListedConsumer>, PaimonError> {
        match self.store.head(&self.consumer_path(branch, consumer_id)).await {
            Ok(meta) => Ok(Some(ListedConsumer {
                consumer_id: consumer_id.to_owned(),
                modified: meta.last_modified.into(),
                size: meta.size,
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The consumer files of a branch, with their modification times (one
    /// listing). Empty when the branch has no `consumer/` directory.
    pub async fn list_consumer_files(&self, branch: &str) -> Result<Vec<ListedConsumer>, PaimonError> {
        let dir = self.branch_root(branch).child("consumer");
        let listed = match self.store.list_with_delimiter(Some(&dir)).await {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| {
                let id = file_name(&o.location)?.strip_prefix(CONSUMER_PREFIX)?.to_owned();
                Some(ListedConsumer {
                    consumer_id: id,
                    modified: o.last_modified.into(),
                    size: o.size,
                })
            })
            .collect())
    }

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

    async fn schema_ids(&self, branch: &str) -> Result<Vec<i64>, PaimonError> {
        let dir = self.branch_root(branch).child("schema");
        let listed = match self.store.list_with_delimiter(Some(&dir)).await {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut ids: Vec<i64> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename()?.strip_prefix("schema-")?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    async fn schema_file(&self, id: i64) -> Result<Vec<u8>, PaimonError> {
        let path = self.root.child("schema").child(format!("schema-{id}"));
        Ok(self.store.get(&path).await?.bytes().await?.to_vec())
    }

    /// The table's identity: a digest of its first schema file, which Paimon
    /// writes when the table is created (with the creation time in it) and
    /// keeps for the table's whole life. A table dropped and recreated
    /// under the same name has another. `None` when the table has no schema
    /// (no table at this location).
    pub async fn identity(&self) -> Result<Option<String>, PaimonError> {
        use sha2::Digest;
        let Some(&first) = self.schema_ids(MAIN_BRANCH).await?.first() else {
            return Ok(None);
        };
        let content = self.schema_file(first).await?;
        let digest = sha2::Sha256::digest(&content);
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Ok(Some(format!("schema-{first}:{hex}")))
    }

    /// The table's `consumer.expiration-time` from its latest schema's
    /// options; `None` when unset (or the table has no schema).
    pub async fn consumer_expiration(&self) -> Result<Option<Duration>, PaimonError> {
        let Some(&latest) = self.schema_ids(MAIN_BRANCH).await?.last() else {
            return Ok(None);
        };
        let content = self.schema_file(latest).await?;
        let schema: serde_json::Value = serde_json::from_slice(&content).map_err(|e| PaimonError::Malformed {
            path: format!("schema/schema-{latest}"),
            why: format!("not a Paimon schema: {e}"),
        })?;
        let Some(value) = schema["options"][CONSUMER_EXPIRATION_OPTION].as_str() else {
            return Ok(None);
        };
        parse_paimon_duration(value)
            .map(Some)
            .map_err(|why| PaimonError::Malformed {
                path: format!("schema/schema-{latest}"),
                why: format!("{CONSUMER_EXPIRATION_OPTION} {value:?}: {why}"),
            })
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
                let Some(id) = file_name(&object.location)
                    .as_deref()
                    .and_then(|n| n.strip_prefix(CONSUMER_PREFIX))
                    .map(str::to_owned)
                else {
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

/// A listed object's file name as it is on disk (the local store hands
/// back names with characters such as `~` percent-encoded).
fn file_name(location: &Path) -> Option<String> {
    let name = location.filename()?;
    Some(
        percent_encoding::percent_decode_str(name)
            .decode_utf8_lossy()
            .into_owned(),
    )
}

/// The id of the pin file for a lease's full scan (SPEC §9).
pub fn pin_consumer_id(lease_id: &uuid::Uuid) -> String {
    format!("{PIN_PREFIX}{lease_id}")
}

/// The lease a pin file's consumer id names, if it is one.
pub fn pinned_lease(consumer_id: &str) -> Option<uuid::Uuid> {
    consumer_id.strip_prefix(PIN_PREFIX)?.parse().ok()
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> Result<T, PaimonError> + Send + 'static,
) -> Result<T, PaimonError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| PaimonError::Io {
        path: what.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?
}

/// Writes `dir/consumer/<name>` through a hidden temporary file: written,
/// fsynced, renamed, then the directory fsynced, so a crash of the machine
/// leaves the old content or the new, never an empty file. Creates
/// `consumer/` when missing, never `dir` itself.
fn write_durably(dir: &std::path::Path, name: &str, body: &[u8]) -> Result<(), PaimonError> {
    use std::io::Write;
    let io = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| PaimonError::Io { path, source }
    };
    if !dir.is_dir() {
        return Err(PaimonError::Missing {
            path: dir.display().to_string(),
        });
    }
    let consumers = dir.join("consumer");
    match std::fs::create_dir(&consumers) {
        Ok(()) => sync_dir(dir).map_err(io(dir))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(&consumers)(e)),
    }
    let temp = consumers.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(body)?;
        file.sync_all()?;
        std::fs::rename(&temp, consumers.join(name))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io(&temp)(e));
    }
    sync_dir(&consumers).map_err(io(&consumers))
}

fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Parses a duration as Paimon writes its options (`TimeUtils.parseDuration`):
/// a number and an optional unit (`ms`, `s`, `min`, `h`, `d`, and their long
/// forms; none means milliseconds), with optional spaces between.
pub fn parse_paimon_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let digits = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let number: u64 = trimmed[..digits]
        .parse()
        .map_err(|_| "expected a number and a unit, e.g. \"1 d\" or \"30min\"".to_owned())?;
    let unit = trimmed[digits..].trim().to_ascii_lowercase();
    let per_unit = match unit.as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => Duration::from_nanos(1),
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => Duration::from_micros(1),
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => Duration::from_millis(1),
        "s" | "sec" | "secs" | "second" | "seconds" => Duration::from_secs(1),
        "m" | "min" | "mins" | "minute" | "minutes" => Duration::from_secs(60),
        "h" | "hour" | "hours" => Duration::from_secs(3600),
        "d" | "day" | "days" => Duration::from_secs(86_400),
        other => return Err(format!("unknown time unit {other:?}")),
    };
    per_unit
        .checked_mul(u32::try_from(number).map_err(|_| "too large".to_owned())?)
        .ok_or_else(|| "too large".to_owned())
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
        std::fs::create_dir_all(dir.path().join("branch/branch-b1")).unwrap();
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
        std::fs::create_dir_all(dir.path().join("branch/branch-dev")).unwrap();
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

    #[tokio::test]
    async fn writes_never_create_a_dropped_branch_or_table() {
        let (dir, table) = table();
        table.write_consumer("dev", "q", 3).await.unwrap_err();
        assert!(!dir.path().join("branch").exists(), "no branch directory created");
        std::fs::create_dir_all(dir.path().join("branch/branch-dev")).unwrap();
        table.write_consumer("dev", "q", 3).await.unwrap();
        std::fs::remove_dir_all(dir.path().join("branch/branch-dev")).unwrap();
        let err = table.write_consumer("dev", "q", 4).await.unwrap_err();
        assert!(matches!(err, PaimonError::Missing { .. }), "{err}");
        assert!(!dir.path().join("branch/branch-dev").exists());
        let gone = PaimonTable::open(dir.path().join("no-such-table").to_str().unwrap()).unwrap();
        assert!(matches!(
            gone.write_consumer("main", "q", 1).await.unwrap_err(),
            PaimonError::Missing { .. }
        ));
        assert!(!dir.path().join("no-such-table").exists());
    }

    #[tokio::test]
    async fn file_states_and_listing_with_times() {
        let (dir, table) = table();
        assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Missing);
        table.write_consumer("main", "q", 9).await.unwrap();
        assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Position(9));
        std::fs::write(dir.path().join("consumer/consumer-q"), "").unwrap();
        assert!(matches!(
            table.consumer_file("main", "q").await.unwrap(),
            FileState::Unreadable(_)
        ));
        let listed = table.list_consumer_files("main").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].consumer_id.as_str(), listed[0].size), ("q", 0));
        assert!(listed[0].modified.elapsed().unwrap() < Duration::from_secs(60));
        assert!(table.list_consumer_files("dev").await.unwrap().is_empty());
        // A touch moves the time, not the content.
        table.write_consumer("main", "q", 9).await.unwrap();
        let before = table.stat_consumer("main", "q").await.unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let touched = table.touch_consumer("main", "q", 9).await.unwrap().unwrap();
        assert!(touched.modified > before.modified);
        assert_eq!(touched.size, before.size);
        assert_eq!(table.consumer_file("main", "q").await.unwrap(), FileState::Position(9));
        assert_eq!(table.touch_consumer("main", "gone", 1).await.unwrap(), None);
        // Pin files keep their `~` on disk, in listings and in reads.
        let pin = pin_consumer_id(&uuid::Uuid::new_v4());
        table.write_consumer("main", &pin, 4).await.unwrap();
        assert!(dir.path().join(format!("consumer/consumer-{pin}")).exists());
        let ids: Vec<_> = table
            .list_consumer_files("main")
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.consumer_id)
            .collect();
        assert!(ids.contains(&pin), "{ids:?}");
        assert_eq!(table.consumer_file("main", &pin).await.unwrap(), FileState::Position(4));
        table.delete_consumer("main", &pin).await.unwrap();
        assert!(!dir.path().join(format!("consumer/consumer-{pin}")).exists());
    }

    #[tokio::test]
    async fn identity_is_the_first_schema_and_options_come_from_the_latest() {
        let (dir, table) = table();
        assert_eq!(table.identity().await.unwrap(), None);
        assert!(!table.branch_exists("main").await.unwrap());
        let schemas = dir.path().join("schema");
        std::fs::create_dir_all(&schemas).unwrap();
        std::fs::write(schemas.join("schema-0"), r#"{"id":0,"options":{},"timeMillis":1}"#).unwrap();
        let first = table.identity().await.unwrap().unwrap();
        assert!(first.starts_with("schema-0:"), "{first}");
        assert!(table.branch_exists("main").await.unwrap());
        assert_eq!(table.consumer_expiration().await.unwrap(), None);
        std::fs::write(
            schemas.join("schema-1"),
            r#"{"id":1,"options":{"consumer.expiration-time":"1 h"},"timeMillis":2}"#,
        )
        .unwrap();
        assert_eq!(table.identity().await.unwrap().unwrap(), first, "later schemas keep it");
        assert_eq!(
            table.consumer_expiration().await.unwrap(),
            Some(Duration::from_secs(3600))
        );
        // Recreated: same name and place, another first schema.
        std::fs::write(schemas.join("schema-0"), r#"{"id":0,"options":{},"timeMillis":3}"#).unwrap();
        assert_ne!(table.identity().await.unwrap().unwrap(), first);
    }

    #[test]
    fn paimon_durations_and_pin_ids() {
        for (text, secs) in [
            ("1 d", 86_400),
            ("30min", 1800),
            ("10 s", 10),
            ("2h", 7200),
            ("90 seconds", 90),
        ] {
            assert_eq!(
                parse_paimon_duration(text).unwrap(),
                Duration::from_secs(secs),
                "{text}"
            );
        }
        assert_eq!(parse_paimon_duration("500").unwrap(), Duration::from_millis(500));
        assert!(parse_paimon_duration("1 fortnight").is_err());
        assert!(parse_paimon_duration("soon").is_err());
        let lease = uuid::Uuid::new_v4();
        let id = pin_consumer_id(&lease);
        assert!(id.starts_with("tidemark~pin~"));
        assert_eq!(pinned_lease(&id), Some(lease));
        assert_eq!(pinned_lease("orders-etl"), None);
    }
}
