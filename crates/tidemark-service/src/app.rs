//! The application: the store, the registered tables, and the policy a
//! replica is configured with.

use std::sync::Arc;
use std::time::Duration;

use tidemark_core::TableName;
use tidemark_paimon::LocationAllowList;
use tidemark_store::{RegisteredTable, Store, StoreError, UnavailableSignal};
use tokio_util::sync::CancellationToken;

use crate::gauges::{self, GaugeSettings};
use crate::mirror::{self, MirrorSettings};
use crate::sweeper::{self, SweeperSettings};
use crate::tables::Tables;

/// What every handler of a replica shares: cheap to clone.
#[derive(Debug, Clone)]
pub struct App {
    pub(crate) store: Store,
    pub(crate) tables: Arc<Tables>,
    /// Where registrations may point; `None`: anywhere the server can reach.
    pub(crate) allowed_locations: Option<Arc<LocationAllowList>>,
    /// The mirror's refresh interval, which a registration checks against a
    /// table's own `consumer.expiration-time`.
    pub(crate) mirror_refresh: Duration,
}

/// The background jobs' settings.
#[derive(Debug, Clone)]
pub struct Background {
    /// The consumer mirror and its keeper.
    pub mirror: MirrorSettings,
    /// The sweeper.
    pub sweeper: SweeperSettings,
    /// The gauge collector.
    pub gauges: GaugeSettings,
}

impl App {
    /// The application over `store`: any location may be registered, and
    /// the mirror refreshes files every minute.
    pub fn new(store: Store) -> Self {
        Self {
            tables: Arc::new(Tables::new(store.clone())),
            store,
            allowed_locations: None,
            mirror_refresh: Duration::from_secs(60),
        }
    }

    /// Only registrations (RegisterTable, ImportState) under these locations
    /// are accepted: the server writes consumer files wherever a
    /// registration points. `None`: any.
    pub fn with_allowed_locations(mut self, allowed: Option<LocationAllowList>) -> Self {
        self.allowed_locations = allowed.map(Arc::new);
        self
    }

    /// The mirror's refresh interval (see [`MirrorSettings::refresh`]).
    pub fn with_mirror_refresh(mut self, mirror_refresh: Duration) -> Self {
        self.mirror_refresh = mirror_refresh;
        self
    }

    /// Raised while the database cannot be reached (the request layer
    /// answers `UNAVAILABLE` at once instead of queueing).
    pub fn unavailable_signal(&self) -> UnavailableSignal {
        self.store.unavailable_signal()
    }

    /// Whether the database answers (the readiness probe).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    /// The registration of `table`, if any, as the database holds it now.
    pub async fn registration(&self, table: &TableName) -> Result<Option<RegisteredTable>, StoreError> {
        crate::tables::registration(&self.store, table).await
    }

    /// Keeps a console session, by the hashes of its id and token (see
    /// `tidemark_store::SessionStore`).
    pub async fn open_console_session(&self, session: &tidemark_store::NewSession<'_>) -> Result<(), StoreError> {
        self.store.open_console_session(session).await
    }

    /// The token hash of the live console session whose id hashes to
    /// `id_sha256`.
    pub async fn console_session(&self, id_sha256: &[u8; 32]) -> Result<Option<[u8; 32]>, StoreError> {
        self.store.console_session(id_sha256).await
    }

    /// Ends a console session, on every replica at once.
    pub async fn close_console_session(&self, id_sha256: &[u8; 32]) -> Result<bool, StoreError> {
        self.store.close_console_session(id_sha256).await
    }

    /// The registered tables.
    pub fn tables(&self) -> &Arc<Tables> {
        &self.tables
    }

    /// `LOCATION_NOT_ALLOWED` unless the allow-list (if any) takes
    /// `location`: the one check before anything reads or records a
    /// location (SPEC §9).
    pub(crate) fn check_location(&self, principal: &str, location: &str) -> Result<(), StoreError> {
        match &self.allowed_locations {
            Some(allowed) if !allowed.allows(location) => Err(tidemark_core::access::Denied::LocationNotAllowed {
                principal: principal.to_owned(),
                location: location.to_owned(),
                allowed: allowed.describe(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// Runs the mirror (and its keeper), the sweeper and the gauge
    /// collector until `stop`.
    pub async fn run_background(&self, settings: Background, stop: CancellationToken) {
        // Each ends at `stop` even mid-pass (a statement on a half-open
        // connection, a table store that does not answer): every step they
        // take is a transaction or a compared write, so one cut short is
        // rolled back or redone by the next pass, here or on another
        // replica.
        tokio::join!(
            until_stopped(&stop, mirror::run(self.store.clone(), settings.mirror, stop.clone())),
            until_stopped(&stop, sweeper::run(self.store.clone(), settings.sweeper, stop.clone())),
            until_stopped(
                &stop,
                gauges::run(
                    self.store.clone(),
                    Arc::clone(&self.tables),
                    settings.gauges,
                    stop.clone()
                )
            ),
        );
    }
}

/// Runs `job` until it ends or `stop` (whichever first; see
/// [`App::run_background`]).
async fn until_stopped(stop: &CancellationToken, job: impl Future<Output = ()>) {
    tokio::select! {
        biased;
        () = stop.cancelled() => {}
        () = job => {}
    }
}
