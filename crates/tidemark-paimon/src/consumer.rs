//! Consumer files: `consumer/consumer-<id>` holding `{"nextSnapshot": n}`,
//! written durably, read as Paimon reads them.

use std::time::SystemTime;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::{
    CONSUMER_PREFIX, FileState, FoundConsumer, ListedConsumer, MAIN_BRANCH, PaimonError, PaimonTable, blocking,
    file_name,
};

/// An object's version as read, which a conditional put compares (object
/// stores only: a local disk has no versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectVersion {
    /// No object was there.
    Missing,
    /// The object's ETag (and version id, where the store keeps them).
    Seen {
        /// Its ETag.
        e_tag: Option<String>,
        /// Its version id.
        version: Option<String>,
    },
}

impl ObjectVersion {
    fn of(meta: &object_store::ObjectMeta) -> Self {
        Self::Seen {
            e_tag: meta.e_tag.clone(),
            version: meta.version.clone(),
        }
    }
}

/// What a conditional write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The object holds what was written (also when the put was heard as a
    /// failed condition but the object holds exactly what it put: its own
    /// write, answered late).
    Written,
    /// The object changed since its version was read (another replica, an
    /// outside writer): nothing was written; read it again.
    Conflict,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ConsumerFile {
    #[serde(rename = "nextSnapshot")]
    next_snapshot: i64,
}

impl PaimonTable {
    /// Writes `{"nextSnapshot": n}` atomically and durably (and so refreshes
    /// the file's modification time, by which Paimon expires consumers).
    /// Fails with [`PaimonError::Missing`] when the branch's directory is
    /// gone, rather than creating it.
    /// On object stores the branch's existence is checked first (its schema
    /// or snapshot objects), so a write never re-creates a dropped branch
    /// or table in Paimon's eyes.
    pub async fn write_consumer(&self, branch: &str, consumer_id: &str, next_snapshot: i64) -> Result<(), PaimonError> {
        match self.write_consumer_if(branch, consumer_id, next_snapshot, None).await? {
            Written::Written => Ok(()),
            Written::Conflict => unreachable!("an unconditional put has no condition to fail"),
        }
    }

    /// [`Self::write_consumer`], on object stores only if the object is
    /// still as `seen` (read before the position being written was read
    /// from the database): `Missing` creates it only if it is still absent,
    /// `Seen` replaces only that version. A changed object is
    /// [`Written::Conflict`], never overwritten. `None` (and any write on a
    /// local disk, which has no versions) writes unconditionally.
    pub async fn write_consumer_if(
        &self,
        branch: &str,
        consumer_id: &str,
        next_snapshot: i64,
        seen: Option<&ObjectVersion>,
    ) -> Result<Written, PaimonError> {
        use tracing::Instrument;
        // Debug level: exported as a trace span, never logged at info.
        let span = tracing::debug_span!(
            "paimon.write_consumer_file",
            branch,
            consumer_id,
            next_snapshot,
            conditional = seen.is_some(),
        );
        async {
            let body = serde_json::to_vec(&ConsumerFile { next_snapshot }).expect("serializes");
            if let Some(dir) = self.local_dir(branch) {
                let name = format!("{CONSUMER_PREFIX}{consumer_id}");
                blocking(consumer_id, move || write_durably(&dir, &name, &body)).await?;
                return Ok(Written::Written);
            }
            self.put_if(branch, consumer_id, body, seen).await
        }
        .instrument(span)
        .await
    }

    async fn put_if(
        &self,
        branch: &str,
        consumer_id: &str,
        body: Vec<u8>,
        seen: Option<&ObjectVersion>,
    ) -> Result<Written, PaimonError> {
        if !self.branch_exists(branch).await? {
            return Err(PaimonError::Missing {
                path: format!("{}{}", self.url_prefix, self.branch_root(branch)),
            });
        }
        let mode = match seen {
            None => PutMode::Overwrite,
            Some(ObjectVersion::Missing) => PutMode::Create,
            Some(ObjectVersion::Seen { e_tag, version }) => PutMode::Update(UpdateVersion {
                e_tag: e_tag.clone(),
                version: version.clone(),
            }),
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let path = self.consumer_path(branch, consumer_id);
        match self
            .store
            .put_opts(&path, PutPayload::from(body.clone()), options)
            .await
        {
            Ok(_) => Ok(Written::Written),
            Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => {
                self.conflict_or_own_write(&path, &body).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A failed condition may be this very put heard late: it landed, its
    /// answer was lost (a 500 after the store committed, a dropped
    /// connection) and object_store's retry met the object it had just
    /// written. An object holding exactly what was put is written, and is
    /// answered so: heard as a conflict, no one would record it, and a
    /// consumer dropped before the next write would leave it behind with
    /// nothing to say it exists.
    async fn conflict_or_own_write(&self, path: &Path, body: &[u8]) -> Result<Written, PaimonError> {
        let found = match self.store.get(path).await {
            Ok(found) => found.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(Written::Conflict),
            Err(e) => return Err(e.into()),
        };
        Ok(if found.as_ref() == body {
            Written::Written
        } else {
            Written::Conflict
        })
    }

    /// What a consumer's object holds and its version, read together (on a
    /// local disk the version is `None`).
    pub async fn consumer_file_versioned(
        &self,
        branch: &str,
        consumer_id: &str,
    ) -> Result<(FileState, Option<ObjectVersion>), PaimonError> {
        if self.local.is_some() {
            return Ok((self.consumer_file(branch, consumer_id).await?, None));
        }
        let path = self.consumer_path(branch, consumer_id);
        let found = match self.store.get(&path).await {
            Ok(found) => found,
            Err(object_store::Error::NotFound { .. }) => return Ok((FileState::Missing, Some(ObjectVersion::Missing))),
            Err(e) => return Err(e.into()),
        };
        let version = ObjectVersion::of(&found.meta);
        let bytes = found.bytes().await?;
        let state = match serde_json::from_slice::<ConsumerFile>(&bytes) {
            Ok(file) => FileState::Position(file.next_snapshot),
            Err(e) => FileState::Unreadable(format!("not a Paimon consumer file: {e}")),
        };
        Ok((state, Some(version)))
    }

    /// A consumer object's version (`None` on a local disk).
    pub async fn consumer_version(
        &self,
        branch: &str,
        consumer_id: &str,
    ) -> Result<Option<ObjectVersion>, PaimonError> {
        if self.local.is_some() {
            return Ok(None);
        }
        match self.store.head(&self.consumer_path(branch, consumer_id)).await {
            Ok(meta) => Ok(Some(ObjectVersion::of(&meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(Some(ObjectVersion::Missing)),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the table lives on an object store, where a write puts
    /// content (no time can be set alone) and versions can be compared.
    pub fn is_object_store(&self) -> bool {
        self.local.is_none()
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
    /// stores cannot set a time, so the same content is put again, and only
    /// over the version `read` (the caller read the object, then found
    /// `next_snapshot` in it and in the database, in that order). Returns
    /// the file's new time and size; `None` when it no longer exists or is
    /// no longer the file the caller saw (on a local disk `seen`, replaced
    /// or rewritten since; on an object store any other version): such a
    /// file is not touched, so an outside change or another replica's write
    /// is never kept alive nor undone.
    pub async fn touch_consumer(
        &self,
        branch: &str,
        consumer_id: &str,
        next_snapshot: i64,
        seen: &ListedConsumer,
        read: Option<&ObjectVersion>,
    ) -> Result<Option<ListedConsumer>, PaimonError> {
        if let Some(dir) = self.local_dir(branch) {
            let path = dir.join("consumer").join(format!("{CONSUMER_PREFIX}{consumer_id}"));
            let seen = (seen.modified, seen.size);
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
                // Checked on the open file, so the time is set on the very
                // file that was compared (a rename after this point only
                // makes it an unlinked file).
                let before = file.metadata().map_err(io)?;
                if (before.modified().map_err(io)?, before.len()) != seen {
                    return Ok(None);
                }
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
        let Some(read @ ObjectVersion::Seen { .. }) = read else {
            return Ok(None); // nothing read to compare: never a blind put
        };
        let body = serde_json::to_vec(&ConsumerFile { next_snapshot }).expect("serializes");
        match self.put_if(branch, consumer_id, body, Some(read)).await? {
            Written::Written => self.stat_consumer(branch, consumer_id).await,
            Written::Conflict => Ok(None),
        }
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

    /// A consumer's position, if its file exists.
    pub async fn read_consumer(&self, branch: &str, consumer_id: &str) -> Result<Option<i64>, PaimonError> {
        self.read_consumer_at(&self.consumer_path(branch, consumer_id)).await
    }

    pub(crate) async fn read_consumer_at(&self, path: &Path) -> Result<Option<i64>, PaimonError> {
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
        use tracing::Instrument;
        let span = tracing::debug_span!("paimon.delete_consumer_file", branch, consumer_id);
        let path = self.consumer_path(branch, consumer_id);
        match self.store.delete(&path).instrument(span).await {
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
