//! The consumer mirror (SPEC §9): for registered Paimon tables, writes each
//! consumer's position into the table's own consumer file, deletes the
//! files of deleted consumers, and rewrites files whose consumer was
//! refreshed, so the file's modification time tracks `updated_at` (Paimon
//! expires consumer files by modification time).
//!
//! The database stays the source of truth. The mirror only ever writes what
//! it read from committed rows, so a file never shows a position before it
//! is durable in the database, and a mirror failure never fails a worker's
//! commit: it is retried every round and reported per consumer
//! (DescribeConsumer) and in the metrics. Every replica runs the mirror;
//! each re-reads a consumer right before writing its file, so a stale write
//! needs a change to land within those few milliseconds, and whatever a
//! stale round leaves behind is corrected by the next one.
//!
//! The mirror is also a keeper (SPEC §9): every few rounds it compares the
//! files with the database. A file deleted, overwritten or torn from
//! outside is written back (counted, logged and recorded in history); on
//! tables whose schema sets Paimon's `consumer.expiration-time`, the file of
//! every consumer tidemark keeps is rewritten before it is half a refresh
//! interval old, whatever the commit rate, so Paimon never expires it; live
//! full-scan pins get files of their own (`consumer-tidemark~pin~<lease>`),
//! and pin files without a live pin are deleted. It never writes into a
//! branch whose directory is gone.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use tidemark_core::{EventKind, HistoryEvent, KeyState};
use tidemark_paimon::{FileState, ListedConsumer, PaimonTable};
use tidemark_store::{CallContext, MirrorEntry, MirrorTask, Store};
use tokio_util::sync::CancellationToken;

use crate::metrics;

/// The mirror's own settings (from `ServerConfig`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MirrorSettings {
    /// How often stale files are brought up to date; zero turns it off.
    pub(crate) interval: Duration,
    /// The keeper's interval (see [`Keeper`]).
    pub(crate) refresh: Duration,
}

/// Most files one round writes.
const ROUND_LIMIT: i64 = 500;

/// Mirrors every `settings.interval` until `stop`.
pub(crate) async fn run(store: Store, settings: MirrorSettings, stop: CancellationToken) {
    if settings.interval.is_zero() {
        tracing::info!("consumer mirror disabled");
        return;
    }
    let mut tables: HashMap<String, PaimonTable> = HashMap::new();
    let mut keeper = Keeper::new(settings.interval, settings.refresh);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
        // A full round goes again at once: a backlog drains quickly.
        while let Ok(done) = round(&store, settings.refresh, &mut tables).await {
            if done < ROUND_LIMIT as usize || stop.is_cancelled() {
                break;
            }
        }
        if keeper.due() {
            keeper.pass(&store, &mut tables).await;
        }
    }
}

/// The keeper's memory between passes.
pub(crate) struct Keeper {
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
    pub(crate) fn new(interval: Duration, refresh: Duration) -> Self {
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
        }
    }

    fn due(&self) -> bool {
        self.last.is_none_or(|at| at.elapsed() >= self.period)
    }

    /// One pass over every registered table. Failures are logged and
    /// retried next pass.
    pub(crate) async fn pass(&mut self, store: &Store, tables: &mut HashMap<String, PaimonTable>) {
        let started = Instant::now();
        self.last = Some(started);
        self.tally = Tally::default();
        let (inventory, registered) =
            match tokio::try_join!(store.paimon().mirror_inventory(), store.paimon().registered_tables()) {
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
            match self.keep_table(store, &table, &entries).await {
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
        table: &PaimonTable,
        entries: &[&MirrorEntry],
    ) -> Result<usize, tidemark_paimon::PaimonError> {
        let expiration = table.consumer_expiration().await.unwrap_or(None);
        if let Some(expiration) = expiration
            && expiration < 3 * self.refresh
            && self.warned.insert(table.location().to_owned())
        {
            tracing::warn!(
                location = %table.location(), expiration = %humantime::format_duration(expiration),
                refresh = %humantime::format_duration(self.refresh),
                "the table's consumer.expiration-time is shorter than three times --mirror-refresh: Paimon could \
                 expire the file of a consumer tidemark keeps"
            );
        }
        let keep_alive = expiration.is_some();
        let mut branches: BTreeSet<String> = table.branches().await?.into_iter().collect();
        branches.extend(entries.iter().map(|e| e.key.branch.as_str().to_owned()));
        let mut missing = 0;
        for branch in branches {
            let here: Vec<&MirrorEntry> = entries
                .iter()
                .copied()
                .filter(|e| e.key.branch.as_str() == branch)
                .collect();
            if !table.branch_exists(&branch).await? {
                if !here.is_empty() {
                    missing += 1;
                }
                // Said once per branch (the gauge says it every pass).
                if !here.is_empty() && self.warned.insert(format!("{}#{branch}", table.location())) {
                    tracing::warn!(
                        location = %table.location(), %branch,
                        "mirror keeper: a registered branch's directory is gone; its consumers are left for an \
                         operator to delete"
                    );
                }
                continue;
            }
            let files: HashMap<String, ListedConsumer> = table
                .list_consumer_files(&branch)
                .await?
                .into_iter()
                .map(|f| (f.consumer_id.clone(), f))
                .collect();
            self.tally.files += files.len();
            self.keep_branch(store, table, &branch, &here, &files, keep_alive)
                .await?;
        }
        Ok(missing)
    }

    async fn keep_branch(
        &mut self,
        store: &Store,
        table: &PaimonTable,
        branch: &str,
        entries: &[&MirrorEntry],
        files: &HashMap<String, ListedConsumer>,
        keep_alive: bool,
    ) -> Result<(), tidemark_paimon::PaimonError> {
        let rewrite_age = self.rewrite_age;
        let old = |f: &ListedConsumer| f.modified.elapsed().unwrap_or_default() >= rewrite_age;
        let slot = |id: &str| (table.location().to_owned(), branch.to_owned(), id.to_owned());
        // Sort the consumers: files gone, files to read (changed since this
        // keeper last read them), files to keep alive.
        let mut repairs: Vec<(&MirrorEntry, &'static str, Option<i64>)> = Vec::new();
        let mut to_read: Vec<&MirrorEntry> = Vec::new();
        let mut to_keep: Vec<&MirrorEntry> = Vec::new();
        let keep_due = |entry: &MirrorEntry, file: &ListedConsumer| {
            // Only a file in sync (a round writes the others).
            keep_alive && entry.kept && entry.mirrored_next == entry.next_snapshot && old(file)
        };
        for entry in entries.iter().copied() {
            if entry.next_snapshot.is_none() || entry.mirrored_next.is_none() {
                continue; // not mirrored yet (or only a pin): the rounds write it
            }
            let id = entry.key.consumer_id.as_str();
            match files.get(id) {
                None => repairs.push((entry, "missing", None)),
                Some(file) if self.checked.get(&slot(id)) != Some(&(file.modified, file.size)) => to_read.push(entry),
                Some(file) if keep_due(entry, file) => to_keep.push(entry),
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
                    async move { table.consumer_file(&branch, &id).await }
                }
            },
        )
        .await;
        for (entry, state) in to_read.into_iter().zip(read) {
            let (next, mirrored) = (entry.next_snapshot, entry.mirrored_next);
            match state? {
                FileState::Position(n) if Some(n) == mirrored || Some(n) == next => {
                    let file = &files[entry.key.consumer_id.as_str()];
                    self.checked
                        .insert(slot(entry.key.consumer_id.as_str()), (file.modified, file.size));
                    if keep_due(entry, file) {
                        to_keep.push(entry);
                    }
                }
                FileState::Position(n) => repairs.push((entry, "changed", Some(n))),
                FileState::Unreadable(_) => repairs.push((entry, "unreadable", None)),
                FileState::Missing => repairs.push((entry, "missing", None)),
            }
        }
        for (entry, cause, found) in repairs {
            self.repair(store, table, entry, cause, found).await;
        }
        // Keep-alive, many files at once: only the modification time moves
        // (Paimon expires by it), never the content, so a round that wrote a
        // newer position meanwhile is never undone; and only of the file
        // listed, so an outside change since is never kept alive unseen.
        let kept = concurrently(
            to_keep
                .iter()
                .filter_map(|e| {
                    let id = e.key.consumer_id.as_str();
                    Some((id.to_owned(), e.next_snapshot?, files.get(id)?.clone()))
                })
                .collect(),
            {
                let (table, branch) = (table.clone(), branch.to_owned());
                move |(id, next, seen): (String, i64, ListedConsumer)| {
                    let (table, branch) = (table.clone(), branch.clone());
                    async move {
                        // Only the file listed (and checked): one replaced
                        // since is read next pass instead.
                        let touched = table.touch_consumer(&branch, &id, next, &seen).await?;
                        Ok::<_, tidemark_paimon::PaimonError>((id, touched))
                    }
                }
            },
        )
        .await;
        for outcome in kept {
            metrics::mirror_write(outcome.is_ok());
            let (id, written) = outcome?;
            if let Some(file) = written {
                self.tally.kept_alive += 1;
                self.checked.insert(slot(&id), (file.modified, file.size));
            }
        }
        // Full-scan pins: a file per live pin, kept fresh; none without one.
        let live: HashMap<String, i64> = entries
            .iter()
            .filter_map(|e| {
                e.pin
                    .map(|(lease, snapshot)| (tidemark_paimon::pin_consumer_id(&lease), snapshot))
            })
            .collect();
        for (id, snapshot) in &live {
            let shows = match files.get(id) {
                None => false,
                Some(_) => table.consumer_file(branch, id).await? == FileState::Position(*snapshot),
            };
            if !shows {
                let written = table.write_consumer(branch, id, *snapshot).await;
                metrics::mirror_write(written.is_ok());
                written?;
                self.tally.pins_written += 1;
            } else if let Some(seen) = files.get(id).filter(|f| keep_alive && old(f))
                && table.touch_consumer(branch, id, *snapshot, seen).await?.is_some()
            {
                self.tally.kept_alive += 1;
            }
        }
        // A pin file outlives its pin (completed, released, lease lapsed,
        // a server killed mid-scan). Deleted once its lease's consumer file
        // (if the key has a consumer) is up to date, so a completed scan's
        // consumer protects its snapshots in Paimon's eyes before the pin
        // stops doing so.
        for id in files.keys() {
            let Some(lease) = tidemark_paimon::pinned_lease(id) else {
                continue;
            };
            if live.contains_key(id) {
                continue;
            }
            let in_sync = entries
                .iter()
                .find(|e| e.lease == Some(lease))
                .is_none_or(|e| e.next_snapshot.is_none() || e.mirrored_next == e.next_snapshot);
            if !in_sync {
                continue;
            }
            // The pass read its pins before it listed the files: a pin taken
            // in between (its file written before its answer) is not in
            // `live`. Only a pin the database says is gone now is stale.
            match store.live_pin(lease).await {
                Ok(None) => {}
                Ok(Some(_)) => continue,
                Err(e) => {
                    tracing::warn!(file = %id, error = %e, "mirror keeper: cannot check a pin; keeping its file");
                    continue;
                }
            }
            table.delete_consumer(branch, id).await?;
            metrics::mirror_repair("stale_pin");
            tracing::info!(
                location = %table.location(), %branch, file = %id,
                "mirror keeper: deleted a pin file without a live pin"
            );
        }
        Ok(())
    }

    /// Writes tidemark's position back over a file changed from outside,
    /// and records it.
    async fn repair(
        &self,
        store: &Store,
        table: &PaimonTable,
        entry: &MirrorEntry,
        cause: &'static str,
        found: Option<i64>,
    ) {
        let (branch, id) = (entry.key.branch.as_str(), entry.key.consumer_id.as_str());
        let Ok(Some(state)) = store.key_state(&entry.key).await else {
            return;
        };
        let Some(consumer) = state.consumer else {
            return; // deleted meanwhile: the rounds delete its file
        };
        let task = MirrorTask {
            key: entry.key.clone(),
            location: entry.location.clone(),
            next_snapshot: Some(consumer.next_snapshot),
            updated_at: Some(consumer.updated_at),
        };
        let path = table.consumer_location(branch, id);
        if let Err(e) = table.write_consumer(branch, id, consumer.next_snapshot).await {
            metrics::mirror_write(false);
            tracing::warn!(%path, error = %e, "mirror keeper: cannot write back a consumer file");
            let _ = store.paimon().mirror_done(&task, Some(&e.to_string())).await;
            return;
        }
        metrics::mirror_write(true);
        metrics::mirror_repair(cause);
        tracing::warn!(
            %path, cause, found, wrote = consumer.next_snapshot,
            "mirror keeper: a consumer file was changed from outside; wrote tidemark's position back"
        );
        let _ = store.paimon().mirror_done(&task, None).await;
        let mut event = HistoryEvent::new(EventKind::MirrorRepair, found, Some(consumer.next_snapshot));
        event.detail = Some(format!("{cause}: {path}"));
        let ctx = CallContext::internal(format!("mirror-keeper-{}", uuid::Uuid::now_v7()));
        if let Err(e) = store.append_history(&entry.key, &[event], &ctx).await {
            tracing::warn!(error = %e, "mirror keeper: cannot record a repair in history");
        }
    }
}

/// Files one keeper pass reads or writes at once.
const KEEPER_CONCURRENCY: usize = 32;

/// Runs `work` on every item, [`KEEPER_CONCURRENCY`] at a time; the
/// results in the items' order.
async fn concurrently<T, F, Fut>(items: Vec<T>, work: F) -> Vec<Fut::Output>
where
    F: Fn(T) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let mut results: Vec<Option<Fut::Output>> = Vec::with_capacity(items.len());
    results.resize_with(items.len(), || None);
    let mut items = items.into_iter().enumerate();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < KEEPER_CONCURRENCY {
            let Some((i, item)) = items.next() else { break };
            let future = work(item);
            running.spawn(async move { (i, future.await) });
        }
        let Some(done) = running.join_next().await else { break };
        if let Ok((i, output)) = done {
            results[i] = Some(output);
        }
    }
    results.into_iter().flatten().collect()
}

/// One round: every stale file, up to the limit. Returns how many tasks it
/// handled.
pub(crate) async fn round(
    store: &Store,
    refresh: Duration,
    tables: &mut HashMap<String, PaimonTable>,
) -> Result<usize, ()> {
    let tasks = match store.paimon().mirror_tasks(refresh, ROUND_LIMIT).await {
        Ok(tasks) => tasks,
        Err(e) => {
            tracing::warn!(error = %e, "mirror: cannot read what to mirror; retrying next interval");
            return Err(());
        }
    };
    metrics::mirror_backlog(tasks.len());
    for task in &tasks {
        // Re-read the consumer just before touching its file: a task read at
        // the start of a slow round may be stale by now (another replica, a
        // commit, an operator's rewind), and a stale write could show a
        // position the database no longer holds. Stale tasks come back next
        // round with the current position.
        match store.key_state(&task.key).await {
            Ok(state) if state.as_ref().and_then(KeyState::next_snapshot) == task.next_snapshot => {}
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "mirror: cannot re-read a consumer; retrying next interval");
                return Err(());
            }
        }
        let outcome = apply(task, tables).await;
        if let Err(e) = &outcome {
            tracing::warn!(consumer = %task.key, location = %task.location, error = %e, "mirror: write failed; retrying");
        }
        metrics::mirror_write(outcome.is_ok());
        if let Err(e) = store.paimon().mirror_done(task, outcome.err().as_deref()).await {
            tracing::warn!(error = %e, "mirror: cannot record progress; retrying next interval");
            return Err(());
        }
    }
    Ok(tasks.len())
}

async fn apply(task: &MirrorTask, tables: &mut HashMap<String, PaimonTable>) -> Result<(), String> {
    if !tables.contains_key(&task.location) {
        let table = PaimonTable::open(&task.location).map_err(|e| e.to_string())?;
        tables.insert(task.location.clone(), table);
    }
    let table = &tables[&task.location];
    let (branch, id) = (task.key.branch.as_str(), task.key.consumer_id.as_str());
    match task.next_snapshot {
        Some(next) => table.write_consumer(branch, id, next).await,
        None => table.delete_consumer(branch, id).await,
    }
    .map_err(|e| e.to_string())
}
