//! [`LeaseKeeper`]: renews a lease in the background (about every ttl/3),
//! reports its loss at once, and stops renewing after a loss.

use std::time::Duration;

use tidemark_proto::v1 as pb;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::ApiError;
use crate::client::{Client, duration_from_pb};

// The keeper builds on the client, never the other way round: the client's
// way to start one lives here.
impl Client {
    /// Keeps `lease` alive in the background until it is lost or released;
    /// its clock starts now (see [`Client::keep_lease_sent_at`]).
    pub fn keep_lease(&self, lease: pb::Lease) -> LeaseKeeper {
        LeaseKeeper::start_at(self.clone(), lease, Instant::now())
    }

    /// The same, for a lease whose acquire request left at `sent_at`: the
    /// server may have granted it any time after, so its clock starts there.
    pub fn keep_lease_sent_at(&self, lease: pb::Lease, sent_at: Instant) -> LeaseKeeper {
        LeaseKeeper::start_at(self.clone(), lease, sent_at)
    }
}

/// What the keeper knows about its lease.
#[derive(Debug, Clone)]
pub enum LeaseState {
    /// Renewed; the server said it has this much time left.
    Held {
        /// Time left at the last renewal.
        ttl: Duration,
    },
    /// The lease ended (revoked, superseded, expired while unreachable, ...):
    /// the query must stop. The error says why.
    Lost(ApiError),
    /// Released by [`LeaseKeeper::release`].
    Released,
}

/// Renews a lease in the background; see [`Client::keep_lease`].
#[derive(Debug)]
pub struct LeaseKeeper {
    lease: pb::Lease,
    client: Client,
    state: watch::Receiver<LeaseState>,
    task: JoinHandle<()>,
}

impl LeaseKeeper {
    /// Starts renewing `lease` (ttl from the lease) with `client`; its clock
    /// starts now.
    pub fn start(client: Client, lease: pb::Lease) -> Self {
        Self::start_at(client, lease, Instant::now())
    }

    /// Starts renewing `lease`, granted no earlier than `sent_at`.
    pub fn start_at(client: Client, lease: pb::Lease, sent_at: Instant) -> Self {
        let ttl = lease.ttl.map(duration_from_pb).unwrap_or(Duration::from_secs(30));
        let (tx, state) = watch::channel(LeaseState::Held { ttl });
        let task = tokio::spawn(renew_until_lost(client.clone(), lease.clone(), sent_at, ttl, tx));
        Self {
            lease,
            client,
            state,
            task,
        }
    }

    /// The lease being kept.
    pub fn lease(&self) -> &pb::Lease {
        &self.lease
    }

    /// A receiver that sees every change of state (e.g. to stop a query as
    /// soon as the lease is lost).
    pub fn watch(&self) -> watch::Receiver<LeaseState> {
        self.state.clone()
    }

    /// Whether the lease is still held, as far as the keeper knows.
    pub fn is_held(&self) -> bool {
        matches!(*self.state.borrow(), LeaseState::Held { .. })
    }

    /// Resolves when the lease is lost, with the reason.
    pub async fn lost(&self) -> ApiError {
        let mut state = self.state.clone();
        loop {
            if let LeaseState::Lost(err) = &*state.borrow_and_update() {
                return err.clone();
            }
            if state.changed().await.is_err() {
                return ApiError::local("the lease keeper stopped");
            }
        }
    }

    /// Stops renewing and releases the lease; `true` when it was still live.
    pub async fn release(self) -> Result<bool, ApiError> {
        self.task.abort();
        self.client.release_lease(&self.lease).await
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn renew_until_lost(
    client: Client,
    lease: pb::Lease,
    sent_at: Instant,
    ttl: Duration,
    state: watch::Sender<LeaseState>,
) {
    // Clocks run from when each request left: the lease ends `ttl` after
    // that at the latest, whenever the answer came.
    let mut deadline = sent_at + ttl;
    let mut renew_at = sent_at + ttl / 3;
    loop {
        tokio::time::sleep_until(renew_at).await;
        let sent = Instant::now();
        // Retried inside, never past the deadline: a lease that cannot be
        // renewed by then is lost by definition.
        match client.renew_lease_until(&lease, None, Some(deadline)).await {
            Ok(granted) => {
                deadline = sent + granted;
                renew_at = sent + granted / 3;
                let _ = state.send(LeaseState::Held { ttl: granted });
            }
            Err(err) => {
                tracing::warn!(
                    lease_id = lease.lease_id,
                    reason = err.reason,
                    "lease lost: {}",
                    err.message
                );
                let _ = state.send(LeaseState::Lost(err));
                return;
            }
        }
    }
}
