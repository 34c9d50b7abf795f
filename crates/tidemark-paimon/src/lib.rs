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

mod budget;
mod consumer;
mod schema;
mod snapshots;

pub use budget::{BACKGROUND_CALL_LIMIT, within_deadline};
pub use consumer::{ObjectVersion, Written};
pub use schema::parse_paimon_duration;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path;

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
                // Conditional puts compare ETags (If-Match / If-None-Match),
                // which S3 and S3-compatible stores support.
                // Inside every call's budget (see `budget`): two retries
                // within 5 s, 5 s a request, 2 s to connect (object_store's
                // defaults are 10 retries over up to 3 minutes and 30 s a
                // request, longer than any call's deadline).
                use object_store::ClientConfigKey;
                use object_store::aws::AmazonS3ConfigKey;
                let store = object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url.as_str().replacen("s3a://", "s3://", 1))
                    .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
                    .with_retry(object_store::RetryConfig {
                        max_retries: 2,
                        retry_timeout: std::time::Duration::from_secs(5),
                        ..object_store::RetryConfig::default()
                    })
                    .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), "5s")
                    .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), "2s")
                    .build()
                    .map_err(|e| bad(e.to_string()))?;
                let root = Path::parse(url.path().trim_start_matches('/')).map_err(|e| bad(e.to_string()))?;
                Ok(Self {
                    store: Arc::new(budget::Bounded::new(Arc::new(store))),
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
            store: Arc::new(budget::Bounded::new(Arc::new(LocalFileSystem::new()))),
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

    async fn exists(&self, path: &Path) -> Result<bool, PaimonError> {
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
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

#[cfg(test)]
mod tests;

/// A location in one canonical spelling, for comparing locations: a local
/// path (absolute, or `file://`) as `file:///a/b`, an object store URL as
/// `s3://bucket/a/b` (`s3a://` is `s3://`); no trailing slash, no empty
/// segments. `.` and `..` segments are refused: a location must say where
/// it is.
pub fn canonical_location(location: &str) -> Result<String, String> {
    let (scheme, rest) = if let Some(rest) = location.strip_prefix("file://") {
        ("file", rest.to_owned())
    } else if location.starts_with('/') {
        ("file", location.to_owned())
    } else {
        let url = url::Url::parse(location).map_err(|e| format!("{location:?} is not a location: {e}"))?;
        let scheme = match url.scheme() {
            "s3" | "s3a" => "s3",
            other => {
                return Err(format!(
                    "unsupported scheme {other:?}: use an absolute path, file:// or s3://"
                ));
            }
        };
        let bucket = url.host_str().unwrap_or_default();
        if bucket.is_empty() {
            return Err(format!("{location:?} names no bucket"));
        }
        (scheme, format!("{bucket}/{}", url.path()))
    };
    if scheme == "file" && !rest.starts_with('/') {
        return Err(format!("{location:?}: a local path must be absolute"));
    }
    let mut segments = Vec::new();
    for segment in rest.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." {
            return Err(format!("{location:?}: no . or .. segments"));
        }
        segments.push(segment);
    }
    Ok(match scheme {
        "file" => format!("file:///{}", segments.join("/")),
        _ => format!("{scheme}://{}", segments.join("/")),
    })
}

/// `path` with symbolic links followed as far as it exists (the rest, not
/// yet created, appended as written).
fn resolve_existing(path: &std::path::Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(mut real) = std::fs::canonicalize(existing) {
            real.extend(rest.iter().rev());
            return real;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Where registrations may point: location prefixes, compared canonically
/// and segment by segment (`/data/lake` allows `/data/lake/db.db/t`, not
/// `/data/lake2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationAllowList {
    prefixes: Vec<String>,
}

impl LocationAllowList {
    /// The list from location prefixes; an invalid one is an error.
    pub fn new<S: AsRef<str>>(prefixes: &[S]) -> Result<Self, String> {
        let prefixes = prefixes
            .iter()
            .map(|p| canonical_location(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if prefixes.is_empty() {
            return Err("an allow-list needs at least one location".to_owned());
        }
        Ok(Self { prefixes })
    }

    /// Whether `location` lies under one of the prefixes: as written,
    /// and — for local paths — once symbolic links are followed, so a link
    /// under an allowed prefix cannot lead out of it.
    pub fn allows(&self, location: &str) -> bool {
        let Ok(location) = canonical_location(location) else {
            return false;
        };
        let lexically = self.prefixes.iter().any(|prefix| {
            location == *prefix
                || location
                    .strip_prefix(prefix.as_str())
                    .is_some_and(|rest| rest.starts_with('/') || prefix.ends_with('/'))
        });
        let Some(path) = location.strip_prefix("file://") else {
            return lexically;
        };
        let real = resolve_existing(std::path::Path::new(path));
        lexically
            && self.prefixes.iter().any(|prefix| {
                prefix
                    .strip_prefix("file://")
                    .is_some_and(|p| real.starts_with(resolve_existing(std::path::Path::new(p))))
            })
    }

    /// The prefixes, for messages.
    pub fn describe(&self) -> String {
        self.prefixes.join(", ")
    }
}
