//! The Paimon side of the operator API (SPEC §9): what a registered table's
//! directory says about a consumer, the checks a registration makes, and
//! importing the consumer files a table already has.

use std::time::Duration;

use tidemark_core::admin::Imported;
use tidemark_core::{ConsumerKey, CoreError, TableName, Timestamp};
use tidemark_paimon::{FileState, FoundConsumer, PaimonTable, SnapshotRange};
use tidemark_store::{CallContext, RegisteredTable, Store, StoreError};

/// A consumer's Paimon file as read from storage now, and what the mirror
/// last wrote there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorFile {
    /// The file's path.
    pub path: String,
    /// The position the mirror last wrote.
    pub mirrored_next_snapshot: Option<i64>,
    /// When the mirror last wrote it.
    pub mirrored_at: Option<Timestamp>,
    /// Whether the file shows tidemark's position (or is absent for a
    /// consumer tidemark does not have).
    pub in_sync: bool,
    /// Failed writes in a row.
    pub failures: i32,
    /// The last failed write's error.
    pub last_error: String,
    /// PRESENT, MISSING, UNREADABLE, BRANCH_MISSING or STORAGE_ERROR, and
    /// why for the last two.
    pub file_state: &'static str,
    /// Why the file cannot be read.
    pub file_error: String,
    /// The position the file shows.
    pub file_next_snapshot: Option<i64>,
    /// When the file was last written.
    pub file_modified_at: Option<std::time::SystemTime>,
}

/// A consumer's Paimon file, and the branch's latest snapshot in the
/// directory.
pub(crate) struct MirrorView {
    pub file: MirrorFile,
    pub directory_latest: Option<i64>,
}

/// What a registered table's directory shows for `key` (whose position in
/// tidemark is `next`).
pub(crate) async fn mirror_view(
    store: &Store,
    registered: &RegisteredTable,
    key: &ConsumerKey,
    next: Option<i64>,
) -> Result<MirrorView, StoreError> {
    let table = PaimonTable::open(&registered.location).ok();
    let file = mirror_file(store, key, table.as_ref(), next).await?;
    let directory_latest = match &table {
        Some(table) => table
            .snapshot_range(key.branch.as_str())
            .await
            .ok()
            .flatten()
            .map(|range| range.latest),
        None => None,
    };
    Ok(MirrorView { file, directory_latest })
}

async fn mirror_file(
    store: &Store,
    key: &ConsumerKey,
    table: Option<&PaimonTable>,
    next: Option<i64>,
) -> Result<MirrorFile, StoreError> {
    let (branch, id) = (key.branch.as_str(), key.consumer_id.as_str());
    let path = table.map(|t| t.consumer_location(branch, id)).unwrap_or_default();
    let state = store.paimon().mirror_state(key).await?.unwrap_or_default();
    let mut info = MirrorFile {
        path,
        mirrored_next_snapshot: state.mirrored_next,
        mirrored_at: state.mirrored_at,
        in_sync: false,
        failures: state.failures,
        last_error: state.last_error.unwrap_or_default(),
        ..Default::default()
    };
    let Some(table) = table else {
        info.file_state = "STORAGE_ERROR";
        info.file_error = "the registered location cannot be opened".into();
        return Ok(info);
    };
    match table.branch_exists(branch).await {
        Ok(false) => {
            info.file_state = "BRANCH_MISSING";
            return Ok(info);
        }
        Err(e) => {
            info.file_state = "STORAGE_ERROR";
            info.file_error = e.to_string();
            return Ok(info);
        }
        Ok(true) => {}
    }
    match table.consumer_file(branch, id).await {
        Ok(FileState::Position(n)) => {
            info.file_state = "PRESENT";
            info.file_next_snapshot = Some(n);
            info.in_sync = Some(n) == next;
            info.file_modified_at = table.stat_consumer(branch, id).await.ok().flatten().map(|f| f.modified);
        }
        Ok(FileState::Missing) => {
            info.file_state = "MISSING";
            info.in_sync = next.is_none();
        }
        Ok(FileState::Unreadable(why)) => {
            info.file_state = "UNREADABLE";
            info.file_error = why;
        }
        Err(e) => {
            info.file_state = "STORAGE_ERROR";
            info.file_error = e.to_string();
        }
    }
    Ok(info)
}

/// The code of the registration warning for a location with no Paimon
/// table; recovery on such a table is refused with the same reason
/// (SPEC §9), and the CLI refuses to register it without `--allow-missing`.
pub(crate) const LOCATION_HAS_NO_TABLE: &str = "TABLE_LOCATION_EMPTY";

/// What registering a table's directory found there.
pub(crate) struct Probe {
    /// Its main branch's snapshots, if it has any.
    pub range: Option<SnapshotRange>,
    /// Why the range could not be read ("" when it was).
    pub error: String,
    /// The table's identity (SPEC §9), when it has a schema to tell.
    pub identity: Option<String>,
    /// What an operator should know (say, Paimon would expire kept files,
    /// or there is no table at the location).
    pub warnings: Vec<String>,
}

/// Reads what a registration needs from the table's directory: its range
/// (which shows the location is the table's), its identity (which binds the
/// registration to this table; registering again accepts a recreated one),
/// and whether Paimon's own consumer expiration is too short for the
/// mirror's refresh interval.
pub(crate) async fn probe(table: &TableName, location: &PaimonTable, mirror_refresh: Duration) -> Probe {
    let (range, error) = match location.snapshot_range(tidemark_paimon::MAIN_BRANCH).await {
        Ok(range) => (range, String::new()),
        Err(e) => (None, e.to_string()),
    };
    let identity = location.identity().await;
    let mut warnings = Vec::new();
    // A mistyped location reads as a table with no snapshot yet; one with
    // neither schema (no identity) nor snapshot is no Paimon table at all
    // (yet). Both were just read: no third look at the storage.
    if error.is_empty() && range.is_none() && matches!(identity, Ok(None)) {
        warnings.push(format!(
            "{}: there is no Paimon table at {} (no schema file, no snapshot): a mistyped location? Until a table \
             is created there, recovery on {} answers FAILED_PRECONDITION {}",
            LOCATION_HAS_NO_TABLE,
            location.location(),
            table.as_str(),
            LOCATION_HAS_NO_TABLE
        ));
    }
    match location.consumer_expiration().await {
        Ok(Some(expiration)) if expiration < 3 * mirror_refresh => {
            let warning = format!(
                "MIRROR_REFRESH_TOO_SLOW: the table's consumer.expiration-time ({}) is shorter than three times this \
                 server's --mirror-refresh ({}): Paimon could expire the file of a consumer tidemark keeps; set \
                 --mirror-refresh to at most a third of it",
                humantime::format_duration(expiration),
                humantime::format_duration(mirror_refresh)
            );
            tracing::warn!(table = %table.as_str(), "{warning}");
            warnings.push(warning);
        }
        Ok(_) => {}
        Err(e) => warnings.push(format!("cannot read the table's schema options: {e}")),
    }
    Probe {
        range,
        error,
        identity: identity.ok().flatten(),
        warnings,
    }
}

/// The outcome of importing one consumer file.
#[derive(Debug, Clone)]
pub enum ImportOutcome {
    /// Imported (or, in a plan, would be).
    Imported {
        /// The consumer.
        key: ConsumerKey,
        /// Its position, from the file.
        next_snapshot: i64,
    },
    /// Left alone, and why.
    Skipped(ImportSkipped),
}

/// A consumer file an import left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSkipped {
    /// The file's branch.
    pub branch: String,
    /// The file's consumer id.
    pub consumer_id: String,
    /// PIN_FILE, UNREADABLE, INVALID_ID, EXISTS or a rule's reason.
    pub reason: String,
    /// Why, in words.
    pub message: String,
}

/// Imports the consumer files a registered table already has: each file a
/// consumer tidemark does not have yet becomes one (only while still
/// absent: a consumer created meanwhile wins); tidemark's own pin files,
/// unreadable files and invalid ids are skipped with the reason. A plan
/// (`execute: false`) changes nothing.
pub(crate) async fn import_consumers(
    store: &Store,
    ctx: &CallContext,
    table: &TableName,
    registered: &RegisteredTable,
    execute: bool,
) -> Result<Vec<ImportOutcome>, StoreError> {
    // The table's storage failing is TABLE_LOCATION_UNREADABLE (retryable),
    // never a database condition or a bug.
    let unreadable = |why: String| CoreError::TableLocationUnreadable {
        table: table.as_str().to_owned(),
        location: registered.location.clone(),
        why,
    };
    let paimon = PaimonTable::open(&registered.location).map_err(|e| unreadable(format!("cannot open it: {e}")))?;
    let found = paimon
        .list_consumers()
        .await
        .map_err(|e| unreadable(format!("cannot list the table's consumer files: {e}")))?;
    let mut outcomes = Vec::with_capacity(found.len());
    for file in &found {
        outcomes.push(import_one(store, ctx, table, file, execute).await?);
    }
    Ok(outcomes)
}

async fn import_one(
    store: &Store,
    ctx: &CallContext,
    table: &TableName,
    file: &FoundConsumer,
    execute: bool,
) -> Result<ImportOutcome, StoreError> {
    let skip = |reason: &str, message: String| {
        ImportOutcome::Skipped(ImportSkipped {
            branch: file.branch.clone(),
            consumer_id: file.consumer_id.clone(),
            reason: reason.to_owned(),
            message,
        })
    };
    if file.consumer_id.starts_with(tidemark_paimon::PIN_PREFIX) {
        return Ok(skip("PIN_FILE", "tidemark's own full-scan pin file".to_owned()));
    }
    let next = match &file.next_snapshot {
        Ok(n) if *n >= 1 => *n,
        Ok(n) => return Ok(skip("UNREADABLE", format!("nextSnapshot {n} is not a snapshot id"))),
        Err(e) => return Ok(skip("UNREADABLE", e.clone())),
    };
    let key = match ConsumerKey::parse(table.as_str(), &file.branch, &file.consumer_id, "") {
        Ok(key) => key,
        Err(violations) => {
            let why = violations.iter().map(|v| v.description.clone()).collect::<Vec<_>>();
            return Ok(skip("INVALID_ID", why.join("; ")));
        }
    };
    let exists = |existing: i64| format!("tidemark already has this consumer at {existing}; the file shows {next}");
    if !execute {
        if let Some(existing) = store.key_state(&key).await?.and_then(|s| s.next_snapshot()) {
            return Ok(skip("EXISTS", exists(existing)));
        }
    } else {
        match store.import_consumer(ctx, &key, next).await {
            Ok(Imported::Created) => {}
            Ok(Imported::Exists { next_snapshot }) => return Ok(skip("EXISTS", exists(next_snapshot))),
            Err(StoreError::Rule(rule)) => return Ok(skip(rule.reason(), rule.to_string())),
            Err(other) => return Err(other),
        }
    }
    Ok(ImportOutcome::Imported {
        key,
        next_snapshot: next,
    })
}
