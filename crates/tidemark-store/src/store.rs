//! [`Store`]: the domain rules applied over a [`Backend`], one short
//! optimistic transaction per operation.

use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

use tidemark_core::commit::RefreshHistory;
use tidemark_core::lease::LeasePolicy;
use tidemark_core::{ConsumerKey, CoreError, KeyState, Timestamp, Transition};
use uuid::Uuid;

use crate::backend::{Backend, CallContext, Change, FindKey, HistoryFilter, HistoryRecord, Loaded};
use crate::cache::LeaseCache;
use crate::error::StoreError;

/// How many times an operation re-reads and re-decides after losing a
/// compare-and-set race before giving up with [`StoreError::Contention`].
const MAX_ATTEMPTS: u32 = 32;

/// Randomized exponential backoff after `attempt` lost races: up to
/// 2^attempt ms, capped at 50 ms, so racing writers spread out.
fn backoff(attempt: u32) -> Duration {
    use std::hash::{BuildHasher, RandomState};
    let cap_ms = (1u64 << attempt.min(6)).min(50);
    let jitter = RandomState::new().hash_one(attempt) % (cap_ms * 1000);
    Duration::from_micros(jitter + 100)
}

/// A span for one of `backend`'s statements (`operation`), a child of the
/// work it serves: a call's, a sweep's, a mirrored file's. A trace then
/// shows where any of them spent its time in the database. A statement
/// serving no span (a background loop polling for work) gets none, so an
/// idle replica exports nothing.
pub(crate) fn statement_span(backend: &dyn Backend, operation: &'static str) -> tracing::Span {
    // Export off: one atomic load, as every trace hook (docs/performance.md).
    if !tidemark_trace::enabled() || tracing::Span::current().is_none() {
        return tracing::Span::none();
    }
    tidemark_trace::statement(backend.name(), operation, 1, None)
}

/// tidemark's state: leases, consumers and history, kept by a backend.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
    pub(crate) policy: LeasePolicy,
    leases: Arc<LeaseCache>,
    pub(crate) refreshes: RefreshHistory,
    unavailable: UnavailableSignal,
    /// Calls made to the backend (each a statement, or a few in one
    /// transaction), by every clone of this store.
    pub(crate) calls: Arc<std::sync::atomic::AtomicU64>,
}

/// How calls that found the database unavailable tell whoever watches its
/// health (the readiness tracker) to look again now, rather than at its
/// next interval. Reports made while nobody waits coalesce into one.
#[derive(Debug, Clone, Default)]
pub struct UnavailableSignal(Arc<tokio::sync::Notify>);

impl UnavailableSignal {
    /// A call just found the database unavailable (or timed out on it).
    pub fn report(&self) {
        self.0.notify_one();
    }

    /// Resolves once a call has reported since this last resolved.
    pub async fn reported(&self) {
        self.0.notified().await;
    }
}

impl Store {
    /// A store over `backend` granting leases per `policy`.
    pub fn new(backend: Arc<dyn Backend>, policy: LeasePolicy) -> Self {
        Self {
            backend,
            policy,
            leases: Arc::new(LeaseCache::default()),
            refreshes: RefreshHistory::Full,
            unavailable: UnavailableSignal::default(),
            calls: Arc::default(),
        }
    }

    /// Calls made to the database so far (the store's own count, on every
    /// backend: what a page or a call costs, where Postgres'
    /// pg_stat_statements is not at hand).
    pub fn calls_made(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keeps refreshes in the history as `refreshes` says (default: every
    /// one).
    pub fn with_refresh_history(mut self, refreshes: RefreshHistory) -> Self {
        self.refreshes = refreshes;
        self
    }

    /// A span for one of the backend's statements (see [`statement_span`]).
    pub(crate) fn statement(&self, operation: &'static str) -> tracing::Span {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        statement_span(self.backend.as_ref(), operation)
    }

    /// The backend (this crate's own door to it).
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Whether this process computes the fleet's gauges now (see
    /// [`crate::StatsStore::claim_collector`]).
    pub async fn claim_collector(&self) -> Result<bool, StoreError> {
        self.backend
            .claim_collector()
            .instrument(self.statement("claim collector"))
            .await
    }

    /// Keeps a console session (see [`crate::SessionStore`]).
    pub async fn open_console_session(&self, session: &crate::NewSession<'_>) -> Result<(), StoreError> {
        self.backend
            .open_session(session)
            .instrument(self.statement("open console session"))
            .await
    }

    /// The token hash of a live console session.
    pub async fn console_session(&self, id_sha256: &[u8; 32]) -> Result<Option<[u8; 32]>, StoreError> {
        self.backend
            .session_token(id_sha256)
            .instrument(self.statement("console session"))
            .await
    }

    /// Ends a console session; whether one was there.
    pub async fn close_console_session(&self, id_sha256: &[u8; 32]) -> Result<bool, StoreError> {
        self.backend
            .close_session(id_sha256)
            .instrument(self.statement("close console session"))
            .await
    }

    /// Per branch, the console's tables page's figures in one statement
    /// (see [`crate::StatsStore::branch_overview`]).
    pub async fn branch_overview(
        &self,
        limit: i64,
        scope: &tidemark_core::TableScope,
    ) -> Result<Vec<crate::BranchOverview>, StoreError> {
        self.backend
            .branch_overview(limit, scope)
            .instrument(self.statement("branch overview"))
            .await
    }

    /// The fleet's figures for the metrics (see
    /// [`crate::StatsStore::fleet_stats`]).
    pub async fn fleet_stats(
        &self,
        branch_limit: i64,
        worst: i64,
        history_retention: Option<Duration>,
        window: Duration,
    ) -> Result<crate::FleetStats, StoreError> {
        self.backend
            .fleet_stats(branch_limit, worst, history_retention, window)
            .instrument(self.statement("fleet stats"))
            .await
    }

    /// The database connection pool now.
    pub fn pool_stats(&self) -> crate::PoolStats {
        self.backend.pool_stats()
    }

    /// Loads, decides and writes with compare-and-set, deciding again on
    /// fresh state whenever another writer changed the key in between. A
    /// call on a lease whose state this replica wrote moments ago first
    /// tries the one-round-trip path (see [`crate::cache`]).
    pub(crate) async fn apply<T>(
        &self,
        find: FindKey<'_>,
        ctx: &CallContext,
        decide: impl FnMut(&Loaded) -> Result<Transition<T>, CoreError>,
    ) -> Result<T, StoreError> {
        self.apply_restamped(find, ctx, decide, |_, _, _| {}).await
    }

    /// [`Store::apply`], for a decision whose output carries times it
    /// stamped: `restamp(output, decided, written)` moves them to the
    /// clock reading of the write, as the backend moved the stored ones
    /// (see `stamp.rs`).
    pub(crate) async fn apply_restamped<T>(
        &self,
        find: FindKey<'_>,
        ctx: &CallContext,
        mut decide: impl FnMut(&Loaded) -> Result<Transition<T>, CoreError>,
        restamp: impl Fn(&mut T, Timestamp, Timestamp),
    ) -> Result<T, StoreError> {
        if let FindKey::Lease(lease_id) = find
            && let Some(remembered) = self.leases.get(lease_id)
        {
            if let Some((mut output, written)) = self.try_remembered(find, ctx, &remembered, &mut decide).await? {
                restamp(&mut output, remembered.now, written);
                return Ok(output);
            }
            self.leases.forget(lease_id);
        }
        for attempt in 0..MAX_ATTEMPTS {
            if attempt >= 1 {
                tracing::debug!(attempt, "lost a race; deciding again on fresh state");
                tokio::time::sleep(backoff(attempt)).await;
            }
            let loaded = match self.load(find).await {
                Ok(loaded) => loaded,
                Err(StoreError::Contention) => continue,
                Err(e) => return Err(e),
            };
            if let Some(state) = &loaded.state {
                ctx.authorize(find, state)?;
            }
            let transition = decide(&loaded)?;
            if transition.write.is_none() {
                return Ok(transition.output);
            }
            // Mutant: write against whatever version the row has now, as if
            // there were no compare-and-set.
            let loaded = if tidemark_core::mutant!("store_skips_version_check") {
                Loaded {
                    version: self.backend.load(find).await?.version,
                    ..loaded
                }
            } else {
                loaded
            };
            match self.write(&loaded, &transition, ctx, None).await {
                Ok(Some(written)) => {
                    let mut output = transition.output;
                    restamp(&mut output, loaded.now, written);
                    return Ok(output);
                }
                // Another writer changed the key since the read (or the
                // database asked for a retry): nothing was written.
                Ok(None) | Err(StoreError::Contention) => {}
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Contention)
    }

    /// Decides on a remembered state and writes if the row is still that
    /// version; the output and when it was written. `Ok(None)` when that
    /// path does not apply (the decision writes nothing or refuses, or the
    /// row moved on): decide afresh.
    async fn try_remembered<T>(
        &self,
        find: FindKey<'_>,
        ctx: &CallContext,
        remembered: &Loaded,
        decide: &mut impl FnMut(&Loaded) -> Result<Transition<T>, CoreError>,
    ) -> Result<Option<(T, Timestamp)>, StoreError> {
        let Some(state) = &remembered.state else {
            return Ok(None);
        };
        if ctx.authorize(find, state).is_err() {
            return Ok(None);
        }
        let Ok(transition) = decide(remembered) else {
            return Ok(None);
        };
        if transition.write.is_none() {
            return Ok(None);
        }
        // Mutant: the remembered state writes against whatever version the
        // row has now, as if nothing could have changed it meanwhile.
        let current;
        let remembered = if tidemark_core::mutant!("cache_skips_version_check") {
            current = Loaded {
                version: self.backend.load(find).await?.version,
                ..remembered.clone()
            };
            &current
        } else {
            remembered
        };
        match self.write(remembered, &transition, ctx, Some(remembered.now)).await {
            Ok(Some(written)) => Ok(Some((transition.output, written))),
            Ok(None) | Err(StoreError::Contention) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes a transition decided on `loaded`; remembers the result for
    /// the lease's next call. When it was written (the database's clock);
    /// `Ok(None)`: the row moved on.
    async fn write<T>(
        &self,
        loaded: &Loaded,
        transition: &Transition<T>,
        ctx: &CallContext,
        estimated_now: Option<Timestamp>,
    ) -> Result<Option<Timestamp>, StoreError> {
        let Some(state) = &transition.write else {
            return Ok(None);
        };
        let previous_lease = loaded.state.as_ref().and_then(|s| s.lease.as_ref()).map(|l| l.lease_id);
        let new_grant = state.lease.as_ref().filter(|l| Some(l.lease_id) != previous_lease);
        let change = Change {
            state,
            // Mutant: the database's own check of the deadline goes too,
            // so an expired lease is held end to end.
            requires_live_lease: transition.requires_live_lease
                && !tidemark_core::mutant!("lease_ignores_expiry")
                && !tidemark_core::mutant!("expiry_by_replica_clock"),
            new_grant,
            events: &transition.events,
            ctx,
            estimated_now,
        };
        let Some(written_at) = self
            .backend
            .save(loaded, &change)
            .instrument(self.statement("save"))
            .await?
        else {
            return Ok(None);
        };
        if let Some(previous) = previous_lease
            && Some(previous) != state.lease.as_ref().map(|l| l.lease_id)
        {
            self.leases.forget(previous);
        }
        let version = loaded.version.map_or(1, |v| v + 1);
        // Remembered as stored: stamped by the write's clock reading.
        let stamped = crate::stamp::restamp(state, loaded.state.as_ref(), loaded.now, written_at);
        self.leases.remember(stamped, version, &loaded.options, written_at);
        Ok(Some(written_at))
    }

    /// The key `find` names, as stored now (see [`crate::KeyStore::load`]).
    pub(crate) async fn load(&self, find: FindKey<'_>) -> Result<Loaded, StoreError> {
        self.backend.load(find).instrument(self.statement("load")).await
    }

    /// The key's full state, if the key was ever used.
    pub async fn key_state(&self, key: &ConsumerKey) -> Result<Option<KeyState>, StoreError> {
        Ok(self.load(FindKey::Key(key)).await?.state)
    }

    /// The state of the key a lease was granted on (whichever lease holds
    /// it now), if the lease is known.
    pub async fn lease_key_state(&self, lease_id: Uuid) -> Result<Option<KeyState>, StoreError> {
        Ok(self.load(FindKey::Lease(lease_id)).await?.state)
    }

    /// The snapshot `lease_id` pins for its initial full scan right now
    /// (E5): `None` unless it is its key's live lease and holds a pin.
    pub async fn live_pin(&self, lease_id: Uuid) -> Result<Option<i64>, StoreError> {
        let loaded = self.load(FindKey::Lease(lease_id)).await?;
        Ok(loaded
            .state
            .as_ref()
            .and_then(|state| state.live_lease(loaded.now))
            .filter(|lease| lease.lease_id == lease_id)
            .and_then(|lease| lease.full_scan_pin))
    }

    /// The key's newest history rows, newest first.
    pub async fn history(&self, key: &ConsumerKey, limit: i64) -> Result<Vec<HistoryRecord>, StoreError> {
        self.backend
            .history_page(&HistoryFilter::key(key), None, limit)
            .instrument(self.statement("history page"))
            .await
    }

    /// Appends history rows about a key without changing it (say, a
    /// consumer file changed from outside and put back).
    pub async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[tidemark_core::HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        self.backend
            .append_history(key, events, ctx)
            .instrument(self.statement("append history"))
            .await
    }

    /// Checks that the database can make a commit now.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.backend.ping().instrument(self.statement("ping")).await
    }

    /// Where calls on this store report the database unavailable.
    pub fn unavailable_signal(&self) -> UnavailableSignal {
        self.unavailable.clone()
    }
}
