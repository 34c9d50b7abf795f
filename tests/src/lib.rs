//! End-to-end harness: a real tidemark gRPC server on an ephemeral port over
//! a fresh database (SQLite file or Postgres schema), the generated Rust
//! client, and direct access to the store to check what was (not) written.

use std::net::SocketAddr;
use std::time::Duration;

use tidemark_client::{ApiError, CoordinatorClient};
use tidemark_core::{ConsumerKey, KeyState, LeasePolicy};
use tidemark_proto::v1 as pb;
use tidemark_server::ServerConfig;
use tidemark_store::{HistoryRecord, Store};
pub use tidemark_testkit::Kind;
use tidemark_testkit::TestDb;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// Expands to one `#[tokio::test]` per backend for each listed async test
/// function `fn(Kind)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Kind::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if $crate::postgres_skipped() {
                        return;
                    }
                    super::$name($crate::Kind::Postgres).await;
                }
            )*
        }
    };
}

/// Whether Postgres tests are skipped on purpose (`TIDEMARK_SKIP_POSTGRES=1`
/// and no `DATABASE_URL`).
pub fn postgres_skipped() -> bool {
    tidemark_testkit::postgres_url().is_none()
}

/// Lease bounds for tests: short ttls so expiry takes a fraction of a second.
pub fn test_policy() -> LeasePolicy {
    LeasePolicy {
        min_ttl: Duration::from_millis(100),
        max_ttl: Duration::from_secs(60),
        default_ttl: Duration::from_secs(30),
    }
}

/// A running server.
#[derive(Debug)]
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where its plaintext health port listens, if it has one.
    pub health_addr: Option<SocketAddr>,
    /// Where its console listens, if it has one.
    pub console_addr: Option<SocketAddr>,
    tls: bool,
    /// Its store, for checking what was written.
    pub store: Store,
    db: TestDb,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    /// A server over a fresh database of `kind`, with test lease bounds.
    pub async fn start(kind: Kind) -> Self {
        Self::start_with(kind, test_policy(), ServerConfig::default()).await
    }

    /// A server with explicit lease bounds and settings.
    pub async fn start_with(kind: Kind, policy: LeasePolicy, config: ServerConfig) -> Self {
        Self::start_full(kind, policy, config, false).await
    }

    /// A server that may also serve plaintext health on a second port.
    pub async fn start_full(kind: Kind, policy: LeasePolicy, config: ServerConfig, health_port: bool) -> Self {
        Self::start_ports(kind, policy, config, health_port, false).await
    }

    /// A server with its console on a port of its own (and perhaps health).
    pub async fn start_with_console(kind: Kind, policy: LeasePolicy, config: ServerConfig) -> Self {
        Self::start_ports(kind, policy, config, false, true).await
    }

    async fn start_ports(
        kind: Kind,
        policy: LeasePolicy,
        config: ServerConfig,
        health_port: bool,
        console: bool,
    ) -> Self {
        let db = TestDb::new(kind).await.expect("test database (is DATABASE_URL set?)");
        let store = Store::new(db.backend().await, policy);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let health = if health_port {
            Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind"))
        } else {
            None
        };
        let health_addr = health.as_ref().map(|l| l.local_addr().expect("local addr"));
        let console = if console {
            Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind"))
        } else {
            None
        };
        let console_addr = console.as_ref().map(|l| l.local_addr().expect("local addr"));
        let tls = config.tls.is_some();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = store.clone();
        let task = tokio::spawn(async move {
            let front_door = console.map(|listener| -> tidemark_server::FrontDoor {
                Box::new(move |shared| {
                    let settings = tidemark_console::ConsoleSettings::default();
                    tidemark_console::start(
                        listener,
                        &settings,
                        shared.app,
                        shared.auth,
                        shared.tls,
                        shared.errors,
                        shared.stop,
                    )
                })
            });
            let listeners = tidemark_server::Listeners {
                grpc: listener,
                health,
                front_door,
            };
            tidemark_server::serve_listeners(config, serving, listeners, async {
                let _ = stopped.await;
            })
            .await
            .expect("server failed");
        });
        Self {
            addr,
            health_addr,
            console_addr,
            tls,
            store,
            db,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Waits until the server reports itself ready (the `readiness` health
    /// service turns SERVING once its first database ping answered), as a
    /// deployment's readiness probe would, before a test that expects a
    /// ready server (plaintext servers only).
    pub async fn wait_until_ready(&self) {
        use tonic_health::pb::health_check_response::ServingStatus;
        use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(channel) = tonic::transport::Endpoint::from_shared(self.url())
                .expect("a URL")
                .connect()
                .await
            {
                let mut client = HealthClient::new(channel);
                let request = HealthCheckRequest {
                    service: tidemark_server::READINESS_SERVICE.to_owned(),
                };
                if let Ok(answer) = client.check(request).await
                    && answer.into_inner().status() == ServingStatus::Serving
                {
                    return;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not become ready in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The server's URL (`https://localhost:port` with TLS, so the name
    /// matches test certificates).
    pub fn url(&self) -> String {
        if self.tls {
            format!("https://localhost:{}", self.addr.port())
        } else {
            format!("http://{}", self.addr)
        }
    }

    /// The database kind.
    pub fn kind(&self) -> Kind {
        self.db.kind()
    }

    /// A connected Coordinator client.
    pub async fn client(&self) -> CoordinatorClient<Channel> {
        tidemark_client::connect_coordinator(self.url()).await.expect("connect")
    }

    /// A connected channel (for health and other services).
    pub async fn channel(&self) -> Channel {
        tonic::transport::Endpoint::from_shared(self.url())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect")
    }

    /// Registers a Paimon table at `location` (executed).
    pub async fn register_table(&self, table: &str, location: &std::path::Path) -> pb::RegisterTableResponse {
        pb::admin_client::AdminClient::new(self.channel().await)
            .register_table(pb::RegisterTableRequest {
                table: table.into(),
                location: location.display().to_string(),
                execute: true,
            })
            .await
            .expect("register the table")
            .into_inner()
    }

    /// Everything stored for a key: its state and its whole history.
    pub async fn stored(&self, key: &pb::ConsumerKey) -> (Option<KeyState>, Vec<HistoryRecord>) {
        let key = ConsumerKey::parse(&key.table, &key.branch, &key.consumer_id, "").expect("valid key");
        (
            self.store.key_state(&key).await.expect("key state"),
            self.store.history(&key, 10_000).await.expect("history"),
        )
    }

    /// A summary of the whole database; equal before and after means
    /// nothing was written.
    pub async fn fingerprint(&self) -> tidemark_testkit::Fingerprint {
        self.db.fingerprint().await
    }

    /// A raw pool on the server's Postgres schema; `None` on SQLite.
    pub async fn postgres_pool(&self) -> Option<sqlx::PgPool> {
        self.db.postgres_pool().await
    }

    /// Stops the server gracefully.
    pub async fn stop(mut self) {
        self.shutdown().await;
    }

    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Puts a consumer at `next` through the operator API (ResetConsumer,
/// executed).
pub async fn set_consumer(
    admin: &mut tidemark_proto::v1::admin_client::AdminClient<Channel>,
    table: &str,
    id: &str,
    next: i64,
) {
    admin
        .reset_consumer(pb::ResetConsumerRequest {
            consumer: Some(key(table, "main", id)),
            next_snapshot: next,
            expected_next_snapshot: None,
            force: false,
            execute: true,
            expected_lease_id: None,
            reason: String::new(),
        })
        .await
        .expect("reset");
}

/// A consumer key message.
pub fn key(table: &str, branch: &str, consumer_id: &str) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: table.into(),
        branch: branch.into(),
        consumer_id: consumer_id.into(),
    }
}

/// An offset message.
pub fn offset(snapshot_id: i64, index: i64, full: bool, total_splits: Option<i64>) -> pb::Offset {
    pb::Offset {
        snapshot_id,
        index,
        scan_snapshot: full,
        total_splits,
    }
}

/// A snapshot range message.
pub fn range(earliest: i64, latest: i64) -> pb::SnapshotRange {
    pb::SnapshotRange {
        earliest_snapshot: earliest,
        latest_snapshot: latest,
        earliest_changelog: None,
        changelog_decoupled: false,
    }
}

/// A ttl as a proto duration.
pub fn ttl(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).expect("small"),
        nanos: i32::try_from(d.subsec_nanos()).expect("small"),
    }
}

/// The decoded error of a failed call; panics if the call succeeded.
pub fn api_error<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> ApiError {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(status) => ApiError::from(status),
    }
}

/// A worker acquiring leases and committing through the generated client.
#[derive(Debug)]
pub struct Worker {
    /// The client.
    pub client: CoordinatorClient<Channel>,
    /// The lease it holds.
    pub lease: pb::Lease,
}

impl Worker {
    /// Acquires `key` for `holder` with the given ttl (or the default).
    pub async fn acquire(
        client: &CoordinatorClient<Channel>,
        key: &pb::ConsumerKey,
        holder: &str,
        lease_ttl: Option<Duration>,
    ) -> Result<Self, tonic::Status> {
        let mut client = client.clone();
        let response = client
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(key.clone()),
                holder: holder.into(),
                ttl: lease_ttl.map(ttl),
            })
            .await?
            .into_inner();
        Ok(Self {
            client,
            lease: response.lease.expect("lease"),
        })
    }

    /// Commits batch `batch_id` ending at `end`.
    pub async fn commit(&mut self, batch_id: i64, end: pb::Offset) -> Result<pb::CommitBatchResponse, tonic::Status> {
        self.client
            .commit_batch(pb::CommitBatchRequest {
                lease_id: self.lease.lease_id.clone(),
                epoch: self.lease.epoch,
                batch_id,
                end: Some(end),
                latest_snapshot: None,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Renews the lease.
    pub async fn renew(&mut self) -> Result<pb::RenewLeaseResponse, tonic::Status> {
        self.client
            .renew_lease(pb::RenewLeaseRequest {
                lease_id: self.lease.lease_id.clone(),
                epoch: self.lease.epoch,
                ttl: None,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Releases the lease.
    pub async fn release(&mut self) -> Result<bool, tonic::Status> {
        self.client
            .release_lease(pb::ReleaseLeaseRequest {
                lease_id: self.lease.lease_id.clone(),
                epoch: self.lease.epoch,
            })
            .await
            .map(|r| r.into_inner().released)
    }
}

/// A recovery request for `key` with default startup options.
pub fn recovery_request(key: &pb::ConsumerKey, table: pb::SnapshotRange) -> pb::GetRecoveryPositionRequest {
    pb::GetRecoveryPositionRequest {
        consumer: Some(key.clone()),
        startup: None,
        ignore_progress: false,
        table: Some(table),
        checkpoint: None,
        on_expired: pb::OnExpired::Fail.into(),
        lease_id: None,
    }
}

/// Credentials for tests: `(name, token, TOML entry)` per role.
pub mod credentials {
    use tidemark_server::auth::{hash_token, hex};

    /// A token entry of the credentials file.
    pub fn entry(name: &str, token: &str, roles: &[&str], tables: &[&str]) -> String {
        let quote = |items: &[&str]| items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(", ");
        format!(
            "[[token]]\nname = {name:?}\nsha256 = \"{}\"\nroles = [{}]\ntables = [{}]\n",
            hex(&hash_token(token)),
            quote(roles),
            quote(tables)
        )
    }
}

/// A channel carrying `token` (or none).
pub async fn channel_with_token(url: &str, token: Option<&str>) -> tidemark_client::AuthChannel {
    tidemark_client::connect(&tidemark_client::ClientOptions {
        endpoint: url.to_owned(),
        token: token.map(str::to_owned),
        ..Default::default()
    })
    .await
    .expect("connect")
}

pub use tidemark_testkit::paimon_table_dir;

/// Waits (up to 10 s) until `check` holds; fails naming `what` otherwise.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
