//! The keeper (SPEC §9): every few rounds, compares the files with the
//! database and repairs what was changed from outside, keeps files alive
//! on tables with Paimon's `consumer.expiration-time`, and keeps pin files.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use tidemark_core::TableName;
use tidemark_paimon::{FileState, ListedConsumer, ObjectVersion, PaimonTable};
use tidemark_store::{MirrorBackoff, MirrorEntry, Store};

use super::files::{FileTurns, concurrently};
use crate::metrics;

mod pins;
mod repairs;

use pins::Failures;

/// The keeper's memory between passes.
pub(super) struct Keeper {
    /// How often a pass runs.
    period: Duration,
    /// Files older than this are rewritten on keep-alive tables.
    rewrite_age: Duration,
    refresh: Duration,
    last: Option<Instant>,
    /// Files whose content was checked, by (location, branch, id): their
    /// modification time and size then. A file that still has them is not
    /// read again.
    checked: HashMap<(String, String, String), (SystemTime, u64)>,
    /// What was already warned about: tables with a too-short expiration
    /// time, and gone branches (`location#branch`).
    warned: HashSet<String>,
    /// What the current pass did.
    tally: Tally,
    /// What the current branch could not read or write.
    failures: Failures,
    /// Shared with the rounds.
    turns: FileTurns,
    /// How long a file the keeper could not write back waits (as the
    /// rounds' failures do).
    backoff: MirrorBackoff,
}

/// What one keeper pass did, for its log line.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    files: usize,
    read: usize,
    kept_alive: usize,
    pins_written: usize,
}

impl Keeper {
    pub(super) fn new(interval: Duration, refresh: Duration, turns: FileTurns, backoff: MirrorBackoff) -> Self {
        // A pass every eighth of the refresh interval (at most every round),
        // and rewrites due by the pass that would otherwise leave a file
        // older than half the refresh interval.
        let period = interval.max(refresh / 8);
        Self {
            period,
            rewrite_age: (refresh / 2).saturating_sub(period),
            refresh,
            last: None,
            checked: HashMap::new(),
            warned: HashSet::new(),
            tally: Tally::default(),
            failures: Failures::default(),
            turns,
            backoff,
        }
    }

    pub(super) fn due(&self) -> bool {
        self.last.is_none_or(|at| at.elapsed() >= self.period)
    }

    /// One pass over every registered table. Failures are logged and
    /// retried next pass.
    pub(super) async fn pass(&mut self, store: &Store, tables: &mut HashMap<String, PaimonTable>) {
        let started = Instant::now();
        self.last = Some(started);
        self.tally = Tally::default();
        let (inventory, registered) =
            match tokio::try_join!(store.paimon().mirror_inventory(), crate::tables::registrations(store)) {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(error = %e, "mirror keeper: cannot read the consumers; retrying next pass");
                    return;
                }
            };
        let mut branches_missing = 0;
        let mut by_table: HashMap<&str, Vec<&MirrorEntry>> = HashMap::new();
        for entry in &inventory {
            by_table.entry(entry.key.table.as_str()).or_default().push(entry);
        }
        for registration in registered {
            let location = registration.location.clone();
            if !tables.contains_key(&location) {
                match PaimonTable::open(&location) {
                    Ok(table) => {
                        tables.insert(location.clone(), table);
                    }
                    Err(e) => {
                        tracing::warn!(%location, error = %e, "mirror keeper: cannot open a registered table");
                        continue;
                    }
                }
            }
            let table = tables[&location].clone();
            let entries = by_table.remove(registration.table.as_str()).unwrap_or_default();
            match self.keep_table(store, &registration.table, &table, &entries).await {
                Ok(missing) => branches_missing += missing,
                Err(e) => tracing::warn!(%location, error = %e, "mirror keeper: cannot check the table's files"),
            }
        }
        metrics::mirror_branches_missing(branches_missing);
        // Forget files of consumers that are gone, so the memory stays the
        // size of the current inventory.
        let current: HashSet<(&str, &str, &str)> = inventory
            .iter()
            .map(|e| (e.location.as_str(), e.key.branch.as_str(), e.key.consumer_id.as_str()))
            .collect();
        self.checked
            .retain(|(location, branch, id), _| current.contains(&(location.as_str(), branch.as_str(), id.as_str())));
        metrics::mirror_keeper_pass(started.elapsed());
        let Tally {
            files,
            read,
            kept_alive,
            pins_written,
        } = self.tally;
        tracing::debug!(
            consumers = inventory.len(),
            files,
            read,
            kept_alive,
            pins_written,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "mirror keeper pass"
        );
    }

    async fn keep_table(
        &mut self,
        store: &Store,
        name: &TableName,
        table: &PaimonTable,
        entries: &[&MirrorEntry],
    ) -> Result<usize, tidemark_paimon::PaimonError> {
        let mut branches: BTreeSet<String> = table.branches().await?.into_iter().collect();
        branches.extend(entries.iter().map(|e| e.key.branch.as_str().to_owned()));
        let mut missing = 0;
        // One branch failing (its listing refused, its directory unreadable)
        // stops no other: each is kept on its own.
        for branch in branches {
            let here: Vec<&MirrorEntry> = entries
                .iter()
                .copied()
                .filter(|e| e.key.branch.as_str() == branch)
                .collect();
            match self.keep_one_branch(store, name, table, &branch, &here).await {
                Ok(gone) => missing += usize::from(gone),
                Err(e) => tracing::warn!(
                    location = %table.location(), %branch, error = %e,
                    "mirror keeper: cannot check the branch's files; retrying next pass"
                ),
            }
        }
        Ok(missing)
    }

    /// Keeps one branch's files; `Ok(true)` when the branch's directory is
    /// gone while tidemark has consumers on it.
    async fn keep_one_branch(
        &mut self,
        store: &Store,
        name: &TableName,
        table: &PaimonTable,
        branch: &str,
        here: &[&MirrorEntry],
    ) -> Result<bool, tidemark_paimon::PaimonError> {
        if !table.branch_exists(branch).await? {
            // Said once per branch (the gauge says it every pass).
            if !here.is_empty() && self.warned.insert(format!("{}#{branch}", table.location())) {
                tracing::warn!(
                    location = %table.location(), %branch,
                    "mirror keeper: a registered branch's directory is gone; its consumers are left for an \
                     operator to delete"
                );
            }
            return Ok(!here.is_empty());
        }
        let keep_alive = self.branch_keeps_alive(table, branch).await;
        let files: HashMap<String, ListedConsumer> = table
            .list_consumer_files(branch)
            .await?
            .into_iter()
            .map(|f| (f.consumer_id.clone(), f))
            .collect();
        self.tally.files += files.len();
        self.keep_branch(store, table, branch, here, &files, keep_alive).await;
        self.delete_orphans(store, name, table, branch, here, &files).await;
        std::mem::take(&mut self.failures).log(table.location(), branch);
        Ok(false)
    }

    /// Whether Paimon expires `branch`'s consumer files (its own schema's
    /// `consumer.expiration-time`), so kept files must be rewritten. A
    /// schema that cannot be read counts as expiring: a needless rewrite
    /// costs a write, a missed one a consumer.
    async fn branch_keeps_alive(&mut self, table: &PaimonTable, branch: &str) -> bool {
        match table.branch_consumer_expiration(branch).await {
            Ok(Some(expiration)) => {
                if expiration < 3 * self.refresh && self.warned.insert(format!("{}#{branch}#short", table.location())) {
                    tracing::warn!(
                        location = %table.location(), %branch, expiration = %humantime::format_duration(expiration),
                        refresh = %humantime::format_duration(self.refresh),
                        "the branch's consumer.expiration-time is shorter than three times --mirror-refresh: \
                         Paimon could expire the file of a consumer tidemark keeps"
                    );
                }
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(
                    location = %table.location(), %branch, error = %e,
                    "mirror keeper: cannot read the branch's consumer.expiration-time; keeping its files alive"
                );
                true
            }
        }
    }

    async fn keep_branch(
        &mut self,
        store: &Store,
        table: &PaimonTable,
        branch: &str,
        entries: &[&MirrorEntry],
        files: &HashMap<String, ListedConsumer>,
        keep_alive: bool,
    ) {
        let rewrite_age = self.rewrite_age;
        let old = |f: &ListedConsumer| f.modified.elapsed().unwrap_or_default() >= rewrite_age;
        let slot = |id: &str| (table.location().to_owned(), branch.to_owned(), id.to_owned());
        // Sort the consumers: files gone, files to read (changed since this
        // keeper last read them), files to keep alive.
        // On object stores a keep-alive puts the content again, so every
        // file to keep is read (with its version) like a changed one, and
        // put back only over that version once the database, read after it,
        // still holds what it shows.
        let versioned = table.is_object_store();
        // Files that look changed from outside (judged again in `repair`).
        let mut repairs: Vec<&MirrorEntry> = Vec::new();
        let mut to_read: Vec<&MirrorEntry> = Vec::new();
        // (entry, the position the file shows, its version as read)
        let mut to_keep: Vec<(&MirrorEntry, i64, Option<ObjectVersion>)> = Vec::new();
        let keep_due = |entry: &MirrorEntry, file: &ListedConsumer| {
            // Only a file in sync (a round writes the others).
            keep_alive && entry.kept && entry.mirrored_next == entry.next_snapshot && old(file)
        };
        for entry in entries.iter().copied() {
            let (Some(next), Some(_)) = (entry.next_snapshot, entry.mirrored_next) else {
                continue; // not mirrored yet (or only a pin): the rounds write it
            };
            let id = entry.key.consumer_id.as_str();
            match files.get(id) {
                // Absent when listed (before the repair reads the database).
                None => repairs.push(entry),
                Some(file) if self.checked.get(&slot(id)) != Some(&(file.modified, file.size)) => to_read.push(entry),
                Some(file) if keep_due(entry, file) && versioned => to_read.push(entry),
                Some(file) if keep_due(entry, file) => to_keep.push((entry, next, None)),
                Some(_) => {}
            }
        }
        self.tally.read += to_read.len();
        let read = concurrently(
            to_read.iter().map(|e| e.key.consumer_id.as_str().to_owned()).collect(),
            {
                let (table, branch) = (table.clone(), branch.to_owned());
                move |id: String| {
                    let (table, branch) = (table.clone(), branch.clone());
                    async move { table.consumer_file_versioned(&branch, &id).await }
                }
            },
        )
        .await;
        for (entry, outcome) in to_read.into_iter().zip(read) {
            let (next, mirrored) = (entry.next_snapshot, entry.mirrored_next);
            let (state, version) = match outcome {
                Ok(read) => read,
                Err(e) => {
                    self.failures.add(entry.key.consumer_id.as_str(), e);
                    continue;
                }
            };
            match state {
                FileState::Position(n) if Some(n) == mirrored || Some(n) == next => {
                    let file = &files[entry.key.consumer_id.as_str()];
                    self.checked
                        .insert(slot(entry.key.consumer_id.as_str()), (file.modified, file.size));
                    if keep_due(entry, file) {
                        to_keep.push((entry, n, version));
                    }
                }
                FileState::Position(_) | FileState::Unreadable(_) | FileState::Missing => repairs.push(entry),
            }
        }
        for entry in repairs {
            self.repair(store, table, entry).await;
        }
        if versioned {
            // Read after the objects: only a consumer the database still
            // holds at the position its object shows is kept alive.
            let now = concurrently(to_keep.iter().map(|(e, _, _)| e.key.clone()).collect(), {
                let store = store.clone();
                move |key| {
                    let store = store.clone();
                    async move { store.key_state(&key).await }
                }
            })
            .await;
            let mut confirmed = Vec::with_capacity(to_keep.len());
            for (kept, state) in to_keep.into_iter().zip(now) {
                match state {
                    Ok(Some(state)) if state.next_snapshot() == Some(kept.1) => confirmed.push(kept),
                    Ok(_) => {} // moved or dropped since: the rounds write it
                    Err(e) => {
                        tracing::warn!(error = %e, "mirror keeper: cannot re-read a consumer; keeping its file next pass");
                    }
                }
            }
            to_keep = confirmed;
        }
        // Keep-alive, many files at once. On a local disk only the
        // modification time moves (Paimon expires by it), never the content,
        // and only of the file listed, so an outside change since is never
        // kept alive unseen. On an object store the same content is put
        // over the version read, so a write or delete since (another
        // replica's, or from outside) is never undone.
        let kept = concurrently(
            to_keep
                .into_iter()
                .filter_map(|(e, shown, version)| {
                    let id = e.key.consumer_id.as_str();
                    Some((id.to_owned(), shown, files.get(id)?.clone(), version))
                })
                .collect(),
            {
                let (table, branch) = (table.clone(), branch.to_owned());
                move |(id, shown, seen, version): (String, i64, ListedConsumer, Option<ObjectVersion>)| {
                    let (table, branch) = (table.clone(), branch.clone());
                    async move {
                        let touched = table.touch_consumer(&branch, &id, shown, &seen, version.as_ref()).await;
                        (id, touched)
                    }
                }
            },
        )
        .await;
        for (id, outcome) in kept {
            metrics::mirror_write(outcome.is_ok());
            let written = match outcome {
                Ok(written) => written,
                Err(e) => {
                    self.failures.add(&id, e);
                    continue;
                }
            };
            if let Some(file) = written {
                self.tally.kept_alive += 1;
                self.checked.insert(slot(&id), (file.modified, file.size));
            }
        }
        self.keep_pins(store, table, branch, entries, files, keep_alive).await;
    }
}
