//! Registered Paimon tables as the worker protocol sees them (SPEC §9): a
//! short-lived cache of registrations, so a recovery on a registered table
//! reads the snapshot range from the table's own directory without an
//! extra database round trip on every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidemark_core::{SnapshotRange, TableName};
use tidemark_paimon::PaimonTable;
use tidemark_store::Store;

/// How long a read of the registrations is reused.
const FRESHNESS: Duration = Duration::from_secs(5);

type Tables = Arc<HashMap<String, PaimonTable>>;
/// The latest snapshot per (table, branch), and when it was read.
type LatestSnapshots = HashMap<(String, String), (Instant, Option<i64>)>;

/// The registered tables, refreshed at most every few seconds, and the
/// latest snapshot of their branches as last read from storage.
#[derive(Debug)]
pub(crate) struct Registrations {
    store: Store,
    cached: Mutex<Option<(Instant, Tables)>>,
    latest: Mutex<LatestSnapshots>,
}

impl Registrations {
    pub(crate) fn new(store: Store) -> Self {
        Self {
            store,
            cached: Mutex::new(None),
            latest: Mutex::new(HashMap::new()),
        }
    }

    /// The branch's latest snapshot as last read from the table's
    /// directory, without waiting: when that read is older than a few
    /// seconds (or missing) a fresh one starts in the background, and this
    /// call answers with what it has. `None` for unregistered tables.
    pub(crate) fn cached_latest(self: &Arc<Self>, table: &TableName, branch: &str) -> Option<i64> {
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
                let Some(directory) = this.table(&table).await else {
                    return;
                };
                if let Ok(range) = directory.snapshot_range(&slot.1).await {
                    let mut latest = this.latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    latest.insert(slot, (Instant::now(), range.map(|r| r.latest)));
                }
            });
        }
        value
    }

    /// The registrations, if read within [`FRESHNESS`].
    fn fresh_tables(&self) -> Option<Tables> {
        let cached = self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cached
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FRESHNESS)
            .map(|(_, tables)| Arc::clone(tables))
    }

    /// The table's directory, if it is registered.
    pub(crate) async fn table(&self, table: &TableName) -> Option<PaimonTable> {
        let tables = match self.fresh_tables() {
            Some(tables) => tables,
            None => {
                let registered = self.store.backend().registered_tables().await.ok()?;
                let tables: Tables = Arc::new(
                    registered
                        .into_iter()
                        .filter_map(|r| Some((r.table.as_str().to_owned(), PaimonTable::open(&r.location).ok()?)))
                        .collect(),
                );
                *self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((Instant::now(), Arc::clone(&tables)));
                tables
            }
        };
        tables.get(table.as_str()).cloned()
    }
}

/// The range to plan a recovery with: for a registered table, the one its
/// directory shows (with a warning when the worker saw another); otherwise,
/// or when the directory cannot be read, the worker's.
pub(crate) async fn recovery_range(
    table: Option<PaimonTable>,
    branch: &str,
    reported: SnapshotRange,
    warnings: &mut Vec<String>,
) -> SnapshotRange {
    let Some(table) = table else {
        return reported;
    };
    match table.snapshot_range(branch).await {
        Ok(found) => {
            let (earliest, latest) = found.map_or((0, 0), |r| (r.earliest, r.latest));
            if (earliest, latest) != (reported.earliest(), reported.latest_snapshot) {
                warnings.push(format!(
                    "TABLE_RANGE_FROM_STORAGE: the table's directory holds snapshots {earliest}..={latest}; the \
                     worker reported {}..={}; planned with the directory's",
                    reported.earliest(),
                    reported.latest_snapshot
                ));
            }
            SnapshotRange {
                earliest_snapshot: earliest,
                latest_snapshot: latest,
                ..reported
            }
        }
        Err(e) => {
            warnings.push(format!(
                "TABLE_RANGE_UNREADABLE: cannot read the table's snapshot range ({e}); planned with the worker's"
            ));
            reported
        }
    }
}
