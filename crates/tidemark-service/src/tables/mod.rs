//! Registered Paimon tables (SPEC §9): the one place registrations are
//! read ([`registrations`], [`registration`], and a short-lived cache of
//! them), so a recovery on a registered table reads the snapshot
//! range from the table's own directory without an extra database round
//! trip on every call; the latest snapshot and commit times behind the lag
//! of their consumers; and the range a recovery or a bulk reset plans with.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidemark_core::{ConsumerKey, CoreError, TableName};
use tidemark_paimon::PaimonTable;
use tidemark_store::{RegisteredTable, Store, StoreError};

/// Every registration, as the database holds it now (uncached: for
/// operator calls and the mirror's keeper, which must see a change at once).
pub(crate) async fn registrations(store: &Store) -> Result<Vec<RegisteredTable>, StoreError> {
    store.paimon().registered_tables().await
}

/// The registration of `table`, if any, as the database holds it now.
pub(crate) async fn registration(store: &Store, table: &TableName) -> Result<Option<RegisteredTable>, StoreError> {
    Ok(registrations(store).await?.into_iter().find(|t| &t.table == table))
}

/// How long a read of the registrations is reused.
const FRESHNESS: Duration = Duration::from_secs(5);

/// A registered table: its registration and its opened directory.
#[derive(Debug, Clone)]
pub struct Registered {
    /// What the database holds.
    pub registration: RegisteredTable,
    /// The table's directory.
    pub directory: PaimonTable,
}

/// Each registered table, opened, or its location and why it cannot be.
type Opened = Arc<HashMap<String, Result<Registered, (String, String)>>>;
/// The latest snapshot per (table, branch), and when it was read.
type LatestSnapshots = HashMap<(String, String), (Instant, Option<i64>)>;
/// Per (table, branch): when a lag last read the latest snapshot itself,
/// behind a lock so concurrent lags wait for one read rather than each
/// making their own.
type LatestReads = HashMap<(String, String), Arc<tokio::sync::Mutex<Option<Instant>>>>;

/// How long a lag waits for a table's directory: a lag informs, and a
/// listing of many consumers must answer even while the store does not.
const LAG_READ_LIMIT: Duration = Duration::from_secs(2);

/// The registered tables, refreshed at most every few seconds, and the
/// latest snapshot of their branches as last read from storage. One per
/// process, shared by every handler and the gauge collector.
#[derive(Debug)]
pub struct Tables {
    store: Store,
    cached: Mutex<Option<(Instant, Opened)>>,
    latest: Mutex<LatestSnapshots>,
    latest_reads: Mutex<LatestReads>,
    /// The highest latest snapshot workers reported per (table, branch),
    /// and when it was read (see `latest.rs`).
    reported: Mutex<LatestSnapshots>,
    /// Commit times that could not be read, and when (not read again
    /// within [`FRESHNESS`]).
    unreadable_times: Mutex<HashMap<(String, String, i64), Instant>>,
    /// Commit times of snapshots (they never change), per (table, branch,
    /// id); cleared when it grows past [`MAX_SNAPSHOT_TIMES`].
    snapshot_times: Mutex<HashMap<(String, String, i64), i64>>,
}

/// A consumer's lag (SPEC §11 A8), counted to the latest snapshot known
/// now (see `latest.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lag {
    /// The branch's latest snapshot known now: the higher of a registered
    /// table's directory (as last read) and what workers reported.
    pub latest: i64,
    /// Snapshots not read yet.
    pub snapshots: Option<i64>,
    /// How long the consumer's next snapshot has waited (zero when it is
    /// not committed yet); `None` when its commit time cannot be read.
    pub waited: Option<Duration>,
}

/// Most snapshot commit times kept.
const MAX_SNAPSHOT_TIMES: usize = 100_000;

impl Tables {
    pub(crate) fn new(store: Store) -> Self {
        Self {
            store,
            cached: Mutex::new(None),
            latest: Mutex::new(HashMap::new()),
            latest_reads: Mutex::new(HashMap::new()),
            reported: Mutex::new(HashMap::new()),
            unreadable_times: Mutex::new(HashMap::new()),
            snapshot_times: Mutex::new(HashMap::new()),
        }
    }

    /// When snapshot `id` of a registered table's branch was committed
    /// (Unix ms); `None` for unregistered tables or an unreadable snapshot.
    pub(crate) async fn snapshot_millis(self: &Arc<Self>, table: &TableName, branch: &str, id: i64) -> Option<i64> {
        let slot = (table.as_str().to_owned(), branch.to_owned(), id);
        if let Some(millis) = self
            .snapshot_times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&slot)
        {
            return Some(*millis);
        }
        let failed_recently = |times: &HashMap<_, Instant>| times.get(&slot).is_some_and(|at| at.elapsed() < FRESHNESS);
        if failed_recently(
            &self
                .unreadable_times
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ) {
            return None;
        }
        let registered = self.table_if_readable(table).await?;
        let read = tokio::time::timeout(LAG_READ_LIMIT, registered.directory.snapshot_millis(branch, id)).await;
        let Ok(Ok(millis)) = read else {
            let mut failed = self
                .unreadable_times
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if failed.len() >= MAX_SNAPSHOT_TIMES {
                failed.clear();
            }
            failed.insert(slot, Instant::now());
            return None;
        };
        let mut times = self
            .snapshot_times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if times.len() >= MAX_SNAPSHOT_TIMES {
            times.clear();
        }
        times.insert(slot, millis);
        Some(millis)
    }

    /// A8: a consumer's lag: the latest snapshot known now, the lag in
    /// snapshots, and for a registered table the lag in time (how long its
    /// next snapshot has waited). `None` when no latest snapshot is known.
    pub(crate) async fn lag(
        self: &Arc<Self>,
        key: &ConsumerKey,
        next_snapshot: i64,
        directory_latest: Option<i64>,
        now: tidemark_core::Timestamp,
    ) -> Option<Lag> {
        self.branch_lag(&key.table, key.branch.as_str(), next_snapshot, directory_latest, now)
            .await
    }

    /// [`Self::lag`] of a position on a branch (the lowest of a branch's
    /// consumers gives its worst lag).
    pub(crate) async fn branch_lag(
        self: &Arc<Self>,
        table: &TableName,
        branch: &str,
        next_snapshot: i64,
        directory_latest: Option<i64>,
        now: tidemark_core::Timestamp,
    ) -> Option<Lag> {
        let mut directory = directory_latest.or_else(|| self.last_known_latest(table, branch));
        if directory.is_none() {
            // Nothing read yet for this branch (the background read has just
            // started): read it now, once for every lag that asks, so the
            // first listing shows the lag too.
            directory = self.read_latest_once(table, branch).await;
        }
        let latest = directory.max(self.reported_latest(table, branch).await)?;
        let waited = match directory {
            // Unregistered: no commit times to read.
            None => None,
            Some(_) if next_snapshot > latest => Some(Duration::ZERO),
            Some(_) => self
                .snapshot_millis(table, branch, next_snapshot)
                .await
                .map(|millis| waited_since(millis, now)),
        };
        Some(Lag {
            latest,
            snapshots: tidemark_core::state::lag(next_snapshot, latest),
            waited,
        })
    }

    /// The branch's latest snapshot as last read from the table's
    /// directory, without waiting: when that read is older than a few
    /// seconds (or missing) a fresh one starts in the background, and this
    /// call answers with what it has. `None` for unregistered tables.
    pub(crate) fn last_known_latest(self: &Arc<Self>, table: &TableName, branch: &str) -> Option<i64> {
        // The common case on the commit path: no registration for this
        // table, known from a fresh read. Nothing to look up or refresh.
        if self
            .fresh_tables()
            .is_some_and(|tables| !tables.contains_key(table.as_str()))
        {
            return None;
        }
        let slot = (table.as_str().to_owned(), branch.to_owned());
        let (value, stale) = {
            let mut latest = self.latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match latest.get_mut(&slot) {
                Some((at, value)) if at.elapsed() < FRESHNESS => (*value, false),
                Some((at, value)) => {
                    // One refresh at a time: mark it as just read.
                    *at = Instant::now();
                    (*value, true)
                }
                None => {
                    latest.insert(slot.clone(), (Instant::now(), None));
                    (None, true)
                }
            }
        };
        if stale {
            let this = Arc::clone(self);
            let table = table.clone();
            tokio::spawn(async move {
                let Some(registered) = this.table_if_readable(&table).await else {
                    return;
                };
                if let Ok(range) = registered.directory.snapshot_range(&slot.1).await {
                    let mut latest = this.latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    latest.insert(slot, (Instant::now(), range.map(|r| r.latest)));
                }
            });
        }
        value
    }

    /// The branch's latest snapshot, read from its directory at most once
    /// per [`FRESHNESS`] however many lags ask (they wait for that one
    /// read), within [`LAG_READ_LIMIT`]. A read that failed is not tried
    /// again until then: a store that does not answer costs a listing one
    /// bounded wait, not one per consumer.
    async fn read_latest_once(self: &Arc<Self>, table: &TableName, branch: &str) -> Option<i64> {
        let slot = (table.as_str().to_owned(), branch.to_owned());
        let gate = Arc::clone(
            self.latest_reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(slot.clone())
                .or_default(),
        );
        let mut last_read = gate.lock().await;
        let known = |this: &Self| {
            this.latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&slot)
                .and_then(|(_, value)| *value)
        };
        if let Some(latest) = known(self) {
            return Some(latest); // read meanwhile, by another lag or the background
        }
        if last_read.is_some_and(|at| at.elapsed() < FRESHNESS) {
            return None;
        }
        *last_read = Some(Instant::now());
        let registered = self.table_if_readable(table).await?;
        let read = tokio::time::timeout(LAG_READ_LIMIT, registered.directory.snapshot_range(branch)).await;
        let latest = read.ok()?.ok().flatten().map(|range| range.latest);
        if latest.is_some() {
            self.latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(slot, (Instant::now(), latest));
        }
        latest
    }

    /// Drops the registrations read so far: this replica's next look reads
    /// them again, so a table it registers or unregisters counts at once
    /// (other replicas see it within [`FRESHNESS`]).
    pub(crate) fn forget_registrations(&self) {
        *self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// The registrations, if read within [`FRESHNESS`].
    fn fresh_tables(&self) -> Option<Opened> {
        let cached = self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cached
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FRESHNESS)
            .map(|(_, tables)| Arc::clone(tables))
    }

    /// The table's registration and directory, if it is registered. A
    /// registration that cannot be read now is `UNAVAILABLE`
    /// (`STORE_UNAVAILABLE`), and one whose location cannot be opened is
    /// `TABLE_LOCATION_UNREADABLE`: never "not registered", which would
    /// skip the identity check and trust the worker's range (SPEC §9).
    pub(crate) async fn table(&self, table: &TableName) -> Result<Option<Registered>, StoreError> {
        let tables = match self.fresh_tables() {
            Some(tables) => tables,
            None => {
                let registered = registrations(&self.store).await.map_err(|e| {
                    tracing::warn!(error = %e, "cannot read the table registrations");
                    StoreError::Unavailable(format!("cannot read the table registrations: {e}"))
                })?;
                let tables: Opened = Arc::new(
                    registered
                        .into_iter()
                        .map(|r| {
                            let name = r.table.as_str().to_owned();
                            let entry = match PaimonTable::open(&r.location) {
                                Ok(directory) => Ok(Registered {
                                    registration: r,
                                    directory,
                                }),
                                Err(e) => Err((r.location, e.to_string())),
                            };
                            (name, entry)
                        })
                        .collect(),
                );
                *self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((Instant::now(), Arc::clone(&tables)));
                tables
            }
        };
        match tables.get(table.as_str()) {
            None => Ok(None),
            Some(Ok(registered)) => Ok(Some(registered.clone())),
            Some(Err((location, why))) => Err(CoreError::TableLocationUnreadable {
                table: table.as_str().to_owned(),
                location: location.clone(),
                why: format!("cannot open the location: {why}"),
            }
            .into()),
        }
    }

    /// [`Self::table`] for what only informs (lag, gauges): a registration
    /// that cannot be read now is taken as none.
    pub(crate) async fn table_if_readable(&self, table: &TableName) -> Option<Registered> {
        self.table(table).await.ok().flatten()
    }
}

mod latest;
mod ranges;

pub(crate) use ranges::{recovery_range, reset_snapshots, waited_since};
