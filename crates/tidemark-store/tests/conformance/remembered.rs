//! The one-round-trip path (a lease's calls decided on the state this
//! replica wrote last): it is taken, and it never gives an answer the
//! database would not. Each case has two `Store`s on one database, as two
//! replicas.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tidemark_core::commit::{CommitBatch, CommitOutcome};
use tidemark_core::lease::LeasePolicy;
use tidemark_core::{BranchName, ConsumerKey, CoreError, LeaseLoss, Offset, TableName, TableOptions, Timestamp};
use tidemark_store::{
    Backend, BranchView, CallContext, Change, FindKey, HistoryFilter, HistoryRecord, HistoryStore, KeyFilter, KeyStore,
    Listed, Loaded, MirrorState, MirrorTask, OptionsStore, PaimonStore, Pruned, RegisteredTable, Store, StoreError,
    StoredOptions,
};
use tidemark_testkit::{Kind, TestDb};
use uuid::Uuid;

/// Expands to one `#[tokio::test]` per case for a database kind.
#[macro_export]
macro_rules! remembered_conformance_suite {
    ($kind:expr) => {
        $crate::remembered_conformance_suite!($kind;
            a_lease_writes_in_one_round_trip_after_its_first,
            a_key_changed_by_another_replica_is_decided_on_fresh_state,
            a_lease_revoked_or_taken_over_elsewhere_is_refused,
            a_jump_of_the_database_clock_is_never_extrapolated,
            a_one_round_trip_write_is_stamped_by_the_database_clock,
        );
    };
    ($kind:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                if $kind == tidemark_testkit::Kind::Postgres && tidemark_testkit::postgres_url().is_none() {
                    return;
                }
                conformance::remembered::$case($kind).await;
            }
        )*
    };
}

/// A backend that counts reads and writes of key rows.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn Backend>,
    loads: AtomicUsize,
    saves: AtomicUsize,
}

impl Counting {
    fn new(inner: Arc<dyn Backend>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            loads: AtomicUsize::new(0),
            saves: AtomicUsize::new(0),
        })
    }

    /// (loads, saves) so far.
    fn counts(&self) -> (usize, usize) {
        (self.loads.load(Ordering::SeqCst), self.saves.load(Ordering::SeqCst))
    }
}

#[async_trait]
impl Backend for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn migrate(&self) -> Result<(), StoreError> {
        self.inner.migrate().await
    }
    async fn schema_level(&self) -> Result<Option<tidemark_store::SchemaLevel>, StoreError> {
        self.inner.schema_level().await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    async fn close(&self) {
        self.inner.close().await;
    }
}

#[async_trait]
impl tidemark_store::SessionStore for Counting {
    async fn open_session(&self, session: &tidemark_store::NewSession<'_>) -> Result<(), StoreError> {
        self.inner.open_session(session).await
    }
    async fn session_token(&self, id_sha256: &[u8; 32]) -> Result<Option<[u8; 32]>, StoreError> {
        self.inner.session_token(id_sha256).await
    }
    async fn close_session(&self, id_sha256: &[u8; 32]) -> Result<bool, StoreError> {
        self.inner.close_session(id_sha256).await
    }
}

#[async_trait]
impl tidemark_store::StatsStore for Counting {
    async fn claim_collector(&self) -> Result<bool, StoreError> {
        self.inner.claim_collector().await
    }
    async fn branch_overview(
        &self,
        limit: i64,
        scope: &tidemark_core::TableScope,
    ) -> Result<Vec<tidemark_store::BranchOverview>, StoreError> {
        self.inner.branch_overview(limit, scope).await
    }
    async fn fleet_stats(
        &self,
        branch_limit: i64,
        worst: i64,
        history_retention: Option<Duration>,
        window: Duration,
    ) -> Result<tidemark_store::FleetStats, StoreError> {
        self.inner
            .fleet_stats(branch_limit, worst, history_retention, window)
            .await
    }
    fn pool_stats(&self) -> tidemark_store::PoolStats {
        self.inner.pool_stats()
    }
}

#[async_trait]
impl KeyStore for Counting {
    async fn load(&self, find: FindKey<'_>) -> Result<Loaded, StoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(find).await
    }
    async fn save(&self, loaded: &Loaded, change: &Change<'_>) -> Result<Option<Timestamp>, StoreError> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        self.inner.save(loaded, change).await
    }
    async fn load_with_history(
        &self,
        key: &ConsumerKey,
        limit: i64,
    ) -> Result<(Loaded, Vec<HistoryRecord>), StoreError> {
        self.inner.load_with_history(key, limit).await
    }
    async fn reported_latest(&self, table: &TableName, branch: &BranchName) -> Result<Option<i64>, StoreError> {
        self.inner.reported_latest(table, branch).await
    }
    async fn table_known(&self, table: &TableName) -> Result<bool, StoreError> {
        self.inner.table_known(table).await
    }
    async fn known_tables(&self, limit: i64) -> Result<Vec<String>, StoreError> {
        self.inner.known_tables(limit).await
    }
    async fn list_keys(
        &self,
        filter: &KeyFilter,
        after: Option<&ConsumerKey>,
        limit: i64,
    ) -> Result<Listed, StoreError> {
        self.inner.list_keys(filter, after, limit).await
    }
    async fn branch_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        self.inner.branch_view(table, branch, limit).await
    }
    async fn fence_view(&self, table: &TableName, branch: &BranchName, limit: i64) -> Result<BranchView, StoreError> {
        self.inner.fence_view(table, branch, limit).await
    }
    async fn expired_keys(
        &self,
        table: Option<&TableName>,
        branch: Option<&BranchName>,
        limit: i64,
    ) -> Result<Vec<ConsumerKey>, StoreError> {
        self.inner.expired_keys(table, branch, limit).await
    }
}

#[async_trait]
impl HistoryStore for Counting {
    async fn history_page(
        &self,
        filter: &HistoryFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<HistoryRecord>, StoreError> {
        self.inner.history_page(filter, before_id, limit).await
    }
    async fn append_history(
        &self,
        key: &ConsumerKey,
        events: &[tidemark_core::HistoryEvent],
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        self.inner.append_history(key, events, ctx).await
    }
    async fn prune(&self, older_than: Duration, limit: i64) -> Result<Pruned, StoreError> {
        self.inner.prune(older_than, limit).await
    }
}

#[async_trait]
impl OptionsStore for Counting {
    async fn table_options(&self, table: &TableName) -> Result<StoredOptions, StoreError> {
        self.inner.table_options(table).await
    }
    async fn save_table_options(
        &self,
        table: &TableName,
        previous: &StoredOptions,
        options: &TableOptions,
        ctx: &CallContext,
    ) -> Result<bool, StoreError> {
        self.inner.save_table_options(table, previous, options, ctx).await
    }
}

#[async_trait]
impl PaimonStore for Counting {
    async fn register_table(
        &self,
        table: &TableName,
        location: &str,
        identity: Option<&str>,
        ctx: &CallContext,
    ) -> Result<(), StoreError> {
        self.inner.register_table(table, location, identity, ctx).await
    }
    async fn set_table_identity(&self, table: &TableName, location: &str, identity: &str) -> Result<(), StoreError> {
        self.inner.set_table_identity(table, location, identity).await
    }
    async fn unregister_table(&self, table: &TableName) -> Result<bool, StoreError> {
        self.inner.unregister_table(table).await
    }
    async fn registered_tables(&self) -> Result<Vec<RegisteredTable>, StoreError> {
        self.inner.registered_tables().await
    }
    async fn mirror_inventory(&self) -> Result<Vec<tidemark_store::MirrorEntry>, StoreError> {
        self.inner.mirror_inventory().await
    }
    async fn mirror_tasks(&self, refresh: Duration, limit: i64) -> Result<Vec<MirrorTask>, StoreError> {
        self.inner.mirror_tasks(refresh, limit).await
    }
    async fn mirror_done(
        &self,
        task: &MirrorTask,
        failure: Option<tidemark_store::MirrorFailure<'_>>,
    ) -> Result<(), StoreError> {
        self.inner.mirror_done(task, failure).await
    }
    async fn mirror_state(&self, key: &ConsumerKey) -> Result<Option<MirrorState>, StoreError> {
        self.inner.mirror_state(key).await
    }
    async fn mirror_states(
        &self,
        table: &TableName,
        branch: &BranchName,
    ) -> Result<std::collections::HashMap<String, MirrorState>, StoreError> {
        self.inner.mirror_states(table, branch).await
    }
}

fn policy() -> LeasePolicy {
    LeasePolicy {
        min_ttl: Duration::from_millis(50),
        max_ttl: Duration::from_secs(600),
        default_ttl: Duration::from_secs(30),
    }
}

fn ctx(request_id: &str) -> CallContext {
    CallContext::new("worker", request_id)
}

fn key(id: &str) -> ConsumerKey {
    ConsumerKey::parse("db.orders", "main", id, "").unwrap()
}

/// A commit of batch `batch` ending snapshot `batch + 1` (one split).
fn batch(lease_id: Uuid, epoch: i64, batch: i64) -> CommitBatch {
    CommitBatch {
        lease_id,
        epoch,
        batch_id: batch,
        end: Some(Offset {
            snapshot_id: batch + 1,
            index: 0,
            scan_snapshot: false,
            total_splits: Some(1),
        }),
        latest_snapshot: None,
    }
}

/// Two replicas (stores) on one database, the first one counted.
async fn replicas(db: &TestDb) -> (Arc<Counting>, Store, Store) {
    let counting = Counting::new(db.backend().await);
    let first = Store::new(Arc::clone(&counting) as Arc<dyn Backend>, policy());
    let second = Store::new(db.backend().await, policy());
    (counting, first, second)
}

pub(crate) async fn a_lease_writes_in_one_round_trip_after_its_first(kind: Kind) {
    let db = TestDb::new(kind).await.unwrap();
    let (counting, store, _) = replicas(&db).await;
    let lease = store
        .acquire_lease(&ctx("a"), &key("fast"), "q", None)
        .await
        .unwrap()
        .lease;
    assert_eq!(counting.counts(), (1, 1), "acquire reads and writes");
    for b in 0..10 {
        let done = store
            .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, b))
            .await
            .unwrap();
        assert_eq!(done.next_snapshot, Some(b + 2));
    }
    store
        .renew_lease(&ctx("r"), lease.lease_id, lease.epoch, None)
        .await
        .unwrap();
    assert_eq!(
        counting.counts(),
        (1, 12),
        "ten commits and a renewal: one write each, no read"
    );

    // A repeated batch is a DUPLICATE that still renews the lease (L7): a
    // write, so it too is checked against the row version in one trip.
    let again = store
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, 9))
        .await
        .unwrap();
    assert_eq!(again.outcome, CommitOutcome::Duplicate);
    assert_eq!(counting.counts(), (1, 13));
    // A refusal is always decided on a fresh read.
    let wrong_epoch = store
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch + 1, 10))
        .await
        .unwrap_err();
    assert!(matches!(wrong_epoch, StoreError::Rule(_)), "{wrong_epoch:?}");
    assert_eq!(counting.counts().0, 2);
    // Every commit left its history row and the position is the database's.
    let state = store.key_state(&key("fast")).await.unwrap().unwrap();
    assert_eq!(state.consumer.unwrap().next_snapshot, 11);
    let history = store.history(&key("fast"), 100).await.unwrap();
    assert_eq!(history.len(), 11, "acquire + 10 commits");
}

pub(crate) async fn a_key_changed_by_another_replica_is_decided_on_fresh_state(kind: Kind) {
    let db = TestDb::new(kind).await.unwrap();
    let (counting, first, second) = replicas(&db).await;
    let lease = first
        .acquire_lease(&ctx("a"), &key("moved"), "q", None)
        .await
        .unwrap()
        .lease;
    first
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, 0))
        .await
        .unwrap();
    // The same lease commits batches 1 and 2 through the other replica.
    for b in 1..=2 {
        second
            .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, b))
            .await
            .unwrap();
    }
    // The first replica still remembers batch 0's state: its answer for
    // batch 1 must be the database's (a late, older batch), not a write.
    let (loads_before, _) = counting.counts();
    let late = first
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, 1))
        .await
        .unwrap();
    assert_eq!(late.outcome, CommitOutcome::Duplicate, "{late:?}");
    assert_eq!(late.next_snapshot, Some(4));
    assert!(counting.counts().0 > loads_before, "decided on a fresh read");
    // And batch 3 advances from the database's position.
    let next = first
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, 3))
        .await
        .unwrap();
    assert_eq!(
        (next.outcome, next.previous_next_snapshot, next.next_snapshot),
        (CommitOutcome::Advanced, Some(4), Some(5))
    );
    let history = first.history(&key("moved"), 100).await.unwrap();
    assert_eq!(history.len(), 5, "acquire + batches 0..=3, each once");
}

pub(crate) async fn a_lease_revoked_or_taken_over_elsewhere_is_refused(kind: Kind) {
    let db = TestDb::new(kind).await.unwrap();
    let (_, first, second) = replicas(&db).await;

    let revoked = first
        .acquire_lease(&ctx("a"), &key("revoked"), "q", None)
        .await
        .unwrap()
        .lease;
    first
        .commit_batch(&ctx("c"), &batch(revoked.lease_id, revoked.epoch, 0))
        .await
        .unwrap();
    second
        .revoke(&ctx("op"), &key("revoked"), "test", true)
        .await
        .map(|planned| planned.change)
        .unwrap();
    let refused = first
        .commit_batch(&ctx("c"), &batch(revoked.lease_id, revoked.epoch, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::Rule(CoreError::LeaseNotHeld {
                loss: LeaseLoss::Revoked,
                ..
            })
        ),
        "{refused:?}"
    );
    let renew = first
        .renew_lease(&ctx("r"), revoked.lease_id, revoked.epoch, None)
        .await
        .unwrap_err();
    assert!(
        matches!(renew, StoreError::Rule(CoreError::LeaseNotHeld { .. })),
        "{renew:?}"
    );

    let old = first
        .acquire_lease(&ctx("a"), &key("taken"), "q", None)
        .await
        .unwrap()
        .lease;
    first
        .commit_batch(&ctx("c"), &batch(old.lease_id, old.epoch, 0))
        .await
        .unwrap();
    let new = second.acquire_lease(&ctx("a"), &key("taken"), "q", None).await.unwrap();
    assert!(new.takeover);
    let fenced = first
        .commit_batch(&ctx("c"), &batch(old.lease_id, old.epoch, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            fenced,
            StoreError::Rule(CoreError::LeaseNotHeld {
                loss: LeaseLoss::Superseded,
                ..
            })
        ),
        "{fenced:?}"
    );
    let state = second.key_state(&key("taken")).await.unwrap().unwrap();
    assert_eq!(
        state.consumer.unwrap().next_snapshot,
        2,
        "the fenced commit changed nothing"
    );
}

pub(crate) async fn a_jump_of_the_database_clock_is_never_extrapolated(kind: Kind) {
    let t0 = Timestamp::from_micros(1_800_000_000_000_000);
    let Some(db) = TestDb::with_manual_clock(kind, t0).await else {
        return;
    };
    let store = Store::new(db.backend().await, policy());
    let lease = store
        .acquire_lease(&ctx("a"), &key("clock"), "q", Some(Duration::from_secs(60)))
        .await
        .unwrap()
        .lease;
    store
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, 0))
        .await
        .unwrap();
    // The database clock jumps 40 s ahead: a renewal must count from the
    // database's now, not from the remembered time.
    db.advance(Duration::from_secs(40)).await;
    let left = store
        .renew_lease(&ctx("r"), lease.lease_id, lease.epoch, None)
        .await
        .unwrap();
    assert_eq!(left, Duration::from_secs(60));
    let state = store.key_state(&key("clock")).await.unwrap().unwrap();
    assert_eq!(state.lease.unwrap().deadline, t0.plus(Duration::from_secs(100)));
    // Past the deadline the lease is gone, whatever the replica remembers.
    db.advance(Duration::from_secs(61)).await;
    let expired = store
        .commit_batch(&ctx("c"), &batch(lease.lease_id, lease.epoch, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            expired,
            StoreError::Rule(CoreError::LeaseNotHeld {
                loss: LeaseLoss::Expired,
                ..
            })
        ),
        "{expired:?}"
    );
}

/// SPEC §1: the reading that checks a write also stamps it. A call decided
/// on the remembered state at an estimated time that the database's clock
/// has since passed (here by 400 ms, within the estimate's tolerance: a slow
/// link to the database, a writer lock waited for) stamps its deadline and
/// refresh time with the database's reading, not the estimate: the lease
/// lasts its full ttl from when the write landed, as the answer promised.
pub(crate) async fn a_one_round_trip_write_is_stamped_by_the_database_clock(kind: Kind) {
    let t0 = Timestamp::from_micros(1_800_000_000_000_000);
    let Some(db) = TestDb::with_manual_clock(kind, t0).await else {
        return;
    };
    let counting = Counting::new(db.backend().await);
    let store = Store::new(Arc::clone(&counting) as Arc<dyn Backend>, policy());
    let ttl = Duration::from_secs(60);
    let lease = store
        .acquire_lease(&ctx("a"), &key("stamp"), "q", Some(ttl))
        .await
        .unwrap()
        .lease;
    store
        .commit_batch(&ctx("c0"), &batch(lease.lease_id, lease.epoch, 0))
        .await
        .unwrap();

    db.advance(Duration::from_millis(400)).await;
    let loads = counting.loads.load(Ordering::SeqCst);
    let left = store
        .renew_lease(&ctx("r"), lease.lease_id, lease.epoch, None)
        .await
        .unwrap();
    assert_eq!(
        counting.loads.load(Ordering::SeqCst),
        loads,
        "the renewal took the one-round-trip path"
    );
    assert_eq!(left, ttl);
    let state = store.key_state(&key("stamp")).await.unwrap().unwrap();
    assert_eq!(
        state.lease.unwrap().deadline,
        t0.plus(Duration::from_millis(400)).plus(ttl)
    );

    db.advance(Duration::from_millis(300)).await;
    let loads = counting.loads.load(Ordering::SeqCst);
    store
        .commit_batch(&ctx("c1"), &batch(lease.lease_id, lease.epoch, 1))
        .await
        .unwrap();
    assert_eq!(
        counting.loads.load(Ordering::SeqCst),
        loads,
        "the commit took the one-round-trip path"
    );
    let state = store.key_state(&key("stamp")).await.unwrap().unwrap();
    let landed = t0.plus(Duration::from_millis(700));
    assert_eq!(state.lease.as_ref().unwrap().deadline, landed.plus(ttl));
    let consumer = state.consumer.unwrap();
    assert_eq!(consumer.updated_at, landed);
    assert_eq!(consumer.next_snapshot, 3);
    // What the replica remembers agrees: the next call on the one-round-trip
    // path counts from the stamped deadline.
    db.advance(Duration::from_millis(300)).await;
    store
        .renew_lease(&ctx("r2"), lease.lease_id, lease.epoch, None)
        .await
        .unwrap();
    let state = store.key_state(&key("stamp")).await.unwrap().unwrap();
    assert_eq!(
        state.lease.unwrap().deadline,
        t0.plus(Duration::from_millis(1_000)).plus(ttl)
    );
}

#[async_trait]
impl tidemark_store::StateStore for Counting {
    async fn export_state(
        &self,
        table: Option<&TableName>,
        page: i64,
        out: tokio::sync::mpsc::Sender<tidemark_store::ExportPart>,
    ) -> Result<(), StoreError> {
        self.inner.export_state(table, page, out).await
    }
    async fn insert_new_keys(
        &self,
        rows: &[(tidemark_core::KeyState, tidemark_core::HistoryEvent)],
        ctx: &CallContext,
    ) -> Result<Vec<bool>, StoreError> {
        self.inner.insert_new_keys(rows, ctx).await
    }
}
