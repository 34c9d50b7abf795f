//! The work each system does, as closed-loop workers (each sends its next
//! request when the previous one is answered), and the measurement window.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_proto::v1::retention_client::RetentionClient;
use tonic::transport::Channel;

use crate::etcd::{self, KvClient};

/// Operations are timed from `measure_from` until `until`; before that is
/// warm-up (connections, prepared statements, caches).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub measure_from: Instant,
    pub until: Instant,
}

impl Window {
    pub(crate) fn starting_in(warmup: Duration, measure: Duration) -> Self {
        let measure_from = Instant::now() + warmup;
        Self {
            measure_from,
            until: measure_from + measure,
        }
    }
}

/// What one worker saw in the window.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub latencies_us: Vec<u32>,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Recorder {
    pub(crate) fn record(&mut self, window: &Window, started: Instant, result: anyhow::Result<()>) {
        if started < window.measure_from || started >= window.until {
            return;
        }
        match result {
            Ok(()) => {
                let micros = started.elapsed().as_micros().min(u128::from(u32::MAX));
                self.latencies_us.push(micros as u32);
            }
            Err(error) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| format!("{error:#}"));
            }
        }
    }
}

/// Runs an operation back to back until the window closes; evaluates to the
/// worker's [`Recorder`]. A macro, because the operation borrows the
/// worker's own state (its client, lease and batch counter).
macro_rules! closed_loop {
    ($window:expr, $op:expr) => {{
        let window: $crate::work::Window = $window;
        let mut recorder = $crate::work::Recorder::default();
        while std::time::Instant::now() < window.until {
            let started = std::time::Instant::now();
            let result = $op;
            recorder.record(&window, started, result);
        }
        recorder
    }};
}
pub(crate) use closed_loop;

/// Adds a bearer token (when there is one) to every call, as a production
/// client does.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bearer(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl Bearer {
    pub(crate) fn token(token: &str) -> anyhow::Result<Self> {
        Ok(Self(Some(format!("Bearer {token}").parse()?)))
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A Coordinator client, with or without credentials.
pub(crate) type Coordinator = CoordinatorClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;

pub(crate) fn coordinator(channel: Channel, bearer: Bearer) -> Coordinator {
    CoordinatorClient::with_interceptor(channel, bearer)
}

/// A gRPC channel of its own (one connection per worker, as separate
/// queries would have).
pub(crate) async fn channel(url: &str) -> anyhow::Result<Channel> {
    Ok(tonic::transport::Endpoint::from_shared(url.to_owned())?
        .tcp_nodelay(true)
        .connect()
        .await?)
}

pub(crate) fn key(table: &str, id: &str) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: table.into(),
        branch: "main".into(),
        consumer_id: id.into(),
    }
}

/// A worker's micro-batch sequence: three splits per snapshot, so two of
/// three commits end partway through a snapshot (the consumer stays) and one
/// completes it (the consumer advances).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batches {
    pub snapshot: i64,
    pub index: i64,
    pub batch: i64,
}

impl Batches {
    pub(crate) const SPLITS: i64 = 3;

    pub(crate) fn new() -> Self {
        Self {
            snapshot: 1,
            index: 0,
            batch: 0,
        }
    }

    /// The next batch end and the consumer position it implies.
    pub(crate) fn next(&mut self) -> (pb::Offset, i64, i64) {
        let end = pb::Offset {
            snapshot_id: self.snapshot,
            index: self.index,
            scan_snapshot: false,
            total_splits: Some(Self::SPLITS),
        };
        let position = if self.index + 1 == Self::SPLITS {
            self.snapshot + 1
        } else {
            self.snapshot
        };
        let batch = self.batch;
        self.batch += 1;
        self.index += 1;
        if self.index == Self::SPLITS {
            self.index = 0;
            self.snapshot += 1;
        }
        (end, position, batch)
    }
}

// ---------------------------------------------------------------- tidemark

pub(crate) async fn tidemark_lease(
    client: &mut Coordinator,
    key: pb::ConsumerKey,
    holder: &str,
) -> anyhow::Result<pb::Lease> {
    let response = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key),
            holder: holder.into(),
            ttl: Some(prost_types::Duration {
                seconds: 3600,
                nanos: 0,
            }),
        })
        .await?;
    response.into_inner().lease.ok_or_else(|| anyhow::anyhow!("no lease"))
}

pub(crate) async fn tidemark_commit(
    client: &mut Coordinator,
    lease: &pb::Lease,
    batches: &mut Batches,
) -> anyhow::Result<()> {
    let (end, position, batch) = batches.next();
    let response = client
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            batch_id: batch,
            end: Some(end),
            latest_snapshot: Some(batches.snapshot + 1),
        })
        .await?
        .into_inner();
    // Checked as the peers' results are: the commit was applied, to the
    // position it implies.
    let applied = matches!(
        response.outcome(),
        pb::CommitOutcome::Created | pb::CommitOutcome::Advanced | pb::CommitOutcome::Refreshed
    );
    anyhow::ensure!(
        applied && response.next_snapshot == Some(position),
        "commit {batch} not applied: {:?} at {:?} (expected {position})",
        response.outcome(),
        response.next_snapshot
    );
    Ok(())
}

pub(crate) async fn tidemark_recover(client: &mut Coordinator, key: &pb::ConsumerKey) -> anyhow::Result<()> {
    let response = client
        .get_recovery_position(pb::GetRecoveryPositionRequest {
            consumer: Some(key.clone()),
            startup: Some(pb::StartupOptions {
                mode: pb::StartupMode::LatestFull as i32,
                snapshot_id: 0,
            }),
            table: Some(pb::SnapshotRange {
                earliest_snapshot: 1,
                latest_snapshot: 1_000_000,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await?
        .into_inner();
    anyhow::ensure!(
        response.source() == pb::RecoverySource::Consumer,
        "no consumer for {key:?}"
    );
    Ok(())
}

/// Renews `lease` for its own ttl.
pub(crate) async fn tidemark_renew(client: &mut Coordinator, lease: &pb::Lease) -> anyhow::Result<()> {
    client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            ttl: None,
        })
        .await?;
    Ok(())
}

/// Acquire, renew, release: one lease's life.
pub(crate) async fn tidemark_churn(
    client: &mut Coordinator,
    key: &pb::ConsumerKey,
    holder: &str,
) -> anyhow::Result<()> {
    let lease = tidemark_lease(client, key.clone(), holder).await?;
    tidemark_renew(client, &lease).await?;
    client
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: lease.lease_id,
            epoch: lease.epoch,
        })
        .await?;
    Ok(())
}

pub(crate) async fn tidemark_fence(client: &mut RetentionClient<Channel>, table: &str) -> anyhow::Result<()> {
    let fence = client
        .get_retention_fence(pb::GetRetentionFenceRequest {
            table: table.into(),
            branch: "main".into(),
            changelog_decoupled: false,
        })
        .await?
        .into_inner();
    anyhow::ensure!(fence.snapshot_fence.is_some(), "no fence");
    Ok(())
}

// ---------------------------------------------------------------- raw SQL

/// The raw-SQL peer: what a team without tidemark would write, as fast as
/// it can be while still correct (the lease epoch and deadline guard every
/// write, a history row is appended in the same transaction, one statement
/// per operation, prepared).
pub(crate) const PEER_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS peer_consumers (
    table_name text NOT NULL, branch text NOT NULL, consumer_id text NOT NULL,
    epoch bigint NOT NULL, holder text, lease_deadline timestamptz,
    next_snapshot bigint, last_batch_id bigint NOT NULL DEFAULT -1, updated_at timestamptz NOT NULL,
    PRIMARY KEY (table_name, branch, consumer_id));
CREATE INDEX IF NOT EXISTS peer_consumers_by_position ON peer_consumers (table_name, branch, next_snapshot);
CREATE TABLE IF NOT EXISTS peer_history (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL,
    table_name text NOT NULL, branch text NOT NULL, consumer_id text NOT NULL, event text NOT NULL,
    new_next bigint, epoch bigint, batch_id bigint)";

const PEER_COMMIT: &str = "WITH u AS (UPDATE peer_consumers SET next_snapshot = $5, last_batch_id = $6, \
    updated_at = now(), lease_deadline = now() + interval '1 hour' \
    WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 AND epoch = $4 AND lease_deadline > now() \
    AND last_batch_id < $6 RETURNING table_name, branch, consumer_id) \
    INSERT INTO peer_history (at, table_name, branch, consumer_id, event, new_next, epoch, batch_id) \
    SELECT now(), table_name, branch, consumer_id, 'COMMIT', $5, $4, $6 FROM u";

const PEER_READ: &str =
    "SELECT next_snapshot FROM peer_consumers WHERE table_name = $1 AND branch = $2 AND consumer_id = $3";

const PEER_ACQUIRE: &str = "WITH u AS (UPDATE peer_consumers SET epoch = epoch + 1, holder = $4, \
    lease_deadline = now() + interval '30 seconds', updated_at = now() \
    WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 \
    AND (lease_deadline IS NULL OR lease_deadline <= now() OR holder = $4) \
    RETURNING table_name, branch, consumer_id, epoch), \
    h AS (INSERT INTO peer_history (at, table_name, branch, consumer_id, event, epoch) \
    SELECT now(), table_name, branch, consumer_id, 'ACQUIRE', epoch FROM u) SELECT epoch FROM u";

const PEER_RENEW: &str = "UPDATE peer_consumers SET lease_deadline = now() + interval '30 seconds' \
    WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 AND epoch = $4 AND lease_deadline > now()";

const PEER_RELEASE: &str = "WITH u AS (UPDATE peer_consumers SET lease_deadline = now(), holder = NULL \
    WHERE table_name = $1 AND branch = $2 AND consumer_id = $3 AND epoch = $4 AND lease_deadline > now() \
    RETURNING table_name, branch, consumer_id, epoch) \
    INSERT INTO peer_history (at, table_name, branch, consumer_id, event, epoch) \
    SELECT now(), table_name, branch, consumer_id, 'RELEASE', epoch FROM u";

const PEER_FENCE: &str = "SELECT min(next_snapshot) FROM peer_consumers WHERE table_name = $1 AND branch = $2";

/// Creates (or resets) a peer consumer row holding a live lease at epoch 1.
pub(crate) async fn peer_consumer(pool: &PgPool, table: &str, id: &str) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO peer_consumers (table_name, branch, consumer_id, epoch, holder, lease_deadline, next_snapshot, \
         updated_at) VALUES ($1, 'main', $2, 1, 'bench', now() + interval '1 hour', 1, now()) \
         ON CONFLICT (table_name, branch, consumer_id) DO UPDATE SET epoch = 1, holder = 'bench', \
         lease_deadline = now() + interval '1 hour', next_snapshot = 1, last_batch_id = -1",
    )
    .bind(table)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

pub(crate) async fn peer_commit(pool: &PgPool, table: &str, id: &str, batches: &mut Batches) -> anyhow::Result<()> {
    let (_, position, batch) = batches.next();
    let written = sqlx::query(PEER_COMMIT)
        .bind(table)
        .bind("main")
        .bind(id)
        .bind(1_i64)
        .bind(position)
        .bind(batch)
        .execute(pool)
        .await?
        .rows_affected();
    anyhow::ensure!(written == 1, "peer commit not applied");
    Ok(())
}

pub(crate) async fn peer_recover(pool: &PgPool, table: &str, id: &str) -> anyhow::Result<()> {
    let row: (Option<i64>,) = sqlx::query_as(PEER_READ)
        .bind(table)
        .bind("main")
        .bind(id)
        .fetch_one(pool)
        .await?;
    anyhow::ensure!(row.0.is_some(), "no position");
    Ok(())
}

pub(crate) async fn peer_churn(pool: &PgPool, table: &str, id: &str, holder: &str) -> anyhow::Result<()> {
    let (epoch,): (i64,) = sqlx::query_as(PEER_ACQUIRE)
        .bind(table)
        .bind("main")
        .bind(id)
        .bind(holder)
        .fetch_one(pool)
        .await?;
    let renewed = sqlx::query(PEER_RENEW)
        .bind(table)
        .bind("main")
        .bind(id)
        .bind(epoch)
        .execute(pool)
        .await?
        .rows_affected();
    anyhow::ensure!(renewed == 1, "renew not applied");
    let released = sqlx::query(PEER_RELEASE)
        .bind(table)
        .bind("main")
        .bind(id)
        .bind(epoch)
        .execute(pool)
        .await?
        .rows_affected();
    anyhow::ensure!(released == 1, "release not applied");
    Ok(())
}

pub(crate) async fn peer_fence(pool: &PgPool, table: &str) -> anyhow::Result<()> {
    let (fence,): (Option<i64>,) = sqlx::query_as(PEER_FENCE)
        .bind(table)
        .bind("main")
        .fetch_one(pool)
        .await?;
    anyhow::ensure!(fence.is_some(), "no fence");
    Ok(())
}

// ---------------------------------------------------------------- etcd

/// etcd doing the work a commit does in tidemark: the lease's epoch lives
/// at `lease/<key>` and its deadline (milliseconds, zero-padded so byte
/// order is time order) at `deadline/<key>`; a commit is one transaction
/// that compares both (the epoch is the holder's, the deadline is ahead of
/// now) and writes the position and a history record.
pub(crate) async fn etcd_consumer(client: &mut KvClient<Channel>, id: &str) -> anyhow::Result<()> {
    let deadline = now_millis() + 3_600_000;
    for (key, value) in [
        (format!("lease/{id}"), b"1".to_vec()),
        (format!("deadline/{id}"), format!("{deadline:020}").into_bytes()),
    ] {
        client
            .put(etcd::PutRequest {
                key: key.into_bytes(),
                value,
                ..Default::default()
            })
            .await?;
    }
    Ok(())
}

fn now_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn put(key: String, value: String) -> etcd::RequestOp {
    etcd::RequestOp {
        request: Some(etcd::request_op::Request::RequestPut(etcd::PutRequest {
            key: key.into_bytes(),
            value: value.into_bytes(),
            ..Default::default()
        })),
    }
}

pub(crate) async fn etcd_commit(client: &mut KvClient<Channel>, id: &str, batches: &mut Batches) -> anyhow::Result<()> {
    let (end, position, batch) = batches.next();
    let now = now_millis();
    let response = client
        .txn(etcd::TxnRequest {
            compare: vec![
                etcd::Compare {
                    result: etcd::compare::CompareResult::Equal as i32,
                    target: etcd::compare::CompareTarget::Value as i32,
                    key: format!("lease/{id}").into_bytes(),
                    target_union: Some(etcd::compare::TargetUnion::Value(b"1".to_vec())),
                    range_end: Vec::new(),
                },
                etcd::Compare {
                    result: etcd::compare::CompareResult::Greater as i32,
                    target: etcd::compare::CompareTarget::Value as i32,
                    key: format!("deadline/{id}").into_bytes(),
                    target_union: Some(etcd::compare::TargetUnion::Value(format!("{now:020}").into_bytes())),
                    range_end: Vec::new(),
                },
            ],
            success: vec![
                put(
                    format!("pos/{id}"),
                    format!("{{\"nextSnapshot\":{position},\"batch\":{batch},\"epoch\":1}}"),
                ),
                put(
                    format!("hist/{id}/{batch:012}"),
                    format!(
                        "{{\"at\":{now},\"event\":\"ADVANCE\",\"new_next\":{position},\"epoch\":1,\"batch\":{batch},\
                         \"end\":[{},{}],\"principal\":\"bench\",\"request_id\":\"{id}-{batch}\"}}",
                        end.snapshot_id, end.index
                    ),
                ),
            ],
            failure: Vec::new(),
        })
        .await?
        .into_inner();
    anyhow::ensure!(response.succeeded, "etcd compare failed");
    Ok(())
}

/// etcd's linearizable read of a position (the fair peer of
/// GetRecoveryPosition, RPC to RPC: it reflects every acknowledged write).
pub(crate) async fn etcd_recover(client: &mut KvClient<Channel>, id: &str) -> anyhow::Result<()> {
    let response = client
        .range(etcd::RangeRequest {
            key: format!("pos/{id}").into_bytes(),
            serializable: false,
            ..Default::default()
        })
        .await?
        .into_inner();
    anyhow::ensure!(response.kvs.len() == 1, "no position for {id}");
    Ok(())
}

/// Writes `n` consumers on `table` the hard way for a fence: a week-old
/// fleet whose lowest positions (the `expired` fraction) belong to
/// consumers idle for two days under a one-day `consumer.expiration-time`
/// and not yet swept (the fence must look past each of them), and one
/// consumer in a hundred above them holding a live lease with an initial
/// full scan pinned.
pub(crate) async fn seed_hard_consumers(pool: &PgPool, table: &str, n: usize, expired: f64) -> anyhow::Result<()> {
    // Positions are spread evenly over 1000..51000.
    let expired_below = 1000 + (50_000.0 * expired) as i64;
    sqlx::query(
        "INSERT INTO table_options (table_name, expiration_us, changelog_only, mode, version, updated_at, updated_by) \
         VALUES ($1, 86400000000, false, NULL, 1, now(), 'bench') ON CONFLICT DO NOTHING",
    )
    .bind(table.to_owned())
    .execute(pool)
    .await?;
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
           consumer_created_at, consumer_updated_at, lease_id, lease_holder, lease_principal, lease_epoch, \
           lease_status, lease_ttl_us, lease_acquired_at, lease_deadline, lease_wrote_consumer, full_scan_pin) \
         SELECT $2, 'main', 'consumer-' || i, 1, CASE WHEN leased THEN 1 ELSE 0 END, pos, now() - interval '7 days', \
           CASE WHEN pos < $3 THEN now() - interval '2 days' ELSE now() END, \
           CASE WHEN leased THEN gen_random_uuid() END, CASE WHEN leased THEN 'bench' END, \
           CASE WHEN leased THEN 'anonymous' END, CASE WHEN leased THEN 1 END, CASE WHEN leased THEN 1 END, \
           CASE WHEN leased THEN 3600000000 END, CASE WHEN leased THEN now() END, \
           CASE WHEN leased THEN now() + interval '1 hour' END, CASE WHEN leased THEN false END, \
           CASE WHEN leased THEN $3 + (i * 31) % 20000 END \
         FROM (SELECT i, 1000 + (i * 7919) % 50000 AS pos, i % 100 = 0 AND 1000 + (i * 7919) % 50000 >= $3 AS leased \
               FROM generate_series(1, $1) AS i) AS s",
    )
    .bind(i64::try_from(n)?)
    .bind(table.to_owned())
    .bind(expired_below)
    .execute(pool)
    .await?;
    Ok(())
}

/// Writes `n` consumers (`consumer-1` …) on `table`'s main branch straight
/// into tidemark's table, spread over snapshots 1000..51000.
pub(crate) async fn seed_consumers(pool: &PgPool, table: &str, n: usize) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
         consumer_created_at, consumer_updated_at) SELECT $2, 'main', 'consumer-' || i, 1, 0, \
         1000 + (i * 7919) % 50000, now(), now() FROM generate_series(1, $1) AS i",
    )
    .bind(i64::try_from(n)?)
    .bind(table.to_owned())
    .execute(pool)
    .await?;
    Ok(())
}

/// A new, empty database `name` on the server of `database_url`.
pub(crate) async fn fresh_database(database_url: &str, name: &str) -> anyhow::Result<String> {
    let admin = PgPool::connect(database_url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await?;
    admin.close().await;
    let (base, _) = database_url
        .rsplit_once('/')
        .context("a database URL with a database name")?;
    Ok(format!("{base}/{name}"))
}
