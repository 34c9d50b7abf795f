//! [`Client`]: one connection to a tidemark server, typed access to every
//! service, and retried worker calls.

use std::time::Duration;

use tidemark_proto::v1 as pb;

use crate::retry::{RetryPolicy, retry};
use crate::{AdminClient, ApiError, AuthChannel, ClientOptions, ConnectError, CoordinatorClient, RetentionClient};

/// A connection to a tidemark server.
///
/// The worker calls below are retried on transient failures (the server
/// unreachable or overloaded, a timeout) because each is safe to repeat:
/// renewing, releasing and recovery planning are idempotent, a commit is
/// idempotent per batch (a repeat is `DUPLICATE`), and a repeated acquire by
/// the same holder is a takeover of the grant it may have missed. Refusals
/// (`FAILED_PRECONDITION`, ...) are never retried. Operator calls are not
/// retried; use the typed clients for them.
#[derive(Debug, Clone)]
pub struct Client {
    channel: AuthChannel,
    retry: RetryPolicy,
}

impl Client {
    /// Connects as configured (token, TLS).
    pub async fn connect(options: &ClientOptions) -> Result<Self, ConnectError> {
        Ok(Self {
            channel: crate::connect(options).await?,
            retry: RetryPolicy::default(),
        })
    }

    /// A client over an existing channel.
    pub fn from_channel(channel: AuthChannel) -> Self {
        Self {
            channel,
            retry: RetryPolicy::default(),
        }
    }

    /// The same client with another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The Coordinator (worker protocol) client.
    pub fn coordinator(&self) -> CoordinatorClient<AuthChannel> {
        CoordinatorClient::new(self.channel.clone())
    }

    /// The Retention client.
    pub fn retention(&self) -> RetentionClient<AuthChannel> {
        RetentionClient::new(self.channel.clone())
    }

    /// The Admin (operator API) client.
    pub fn admin(&self) -> AdminClient<AuthChannel> {
        AdminClient::new(self.channel.clone())
    }

    /// Takes a consumer's lease (retried; see the type's docs).
    pub async fn acquire_lease(&self, request: pb::AcquireLeaseRequest) -> Result<pb::AcquireLeaseResponse, ApiError> {
        retry(&self.retry, "AcquireLease", None, |deadline| {
            let mut c = self.coordinator();
            let request = request.clone();
            async move {
                c.acquire_lease(with_deadline(request, deadline))
                    .await
                    .map(|r| r.into_inner())
                    .map_err(ApiError::from)
            }
        })
        .await
    }

    /// Renews a lease (retried).
    pub async fn renew_lease(&self, lease: &pb::Lease, ttl: Option<Duration>) -> Result<Duration, ApiError> {
        self.renew_lease_until(lease, ttl, None).await
    }

    /// [`Client::renew_lease`], retrying no later than `until` (the lease's
    /// own deadline: a lease that cannot be renewed by then is lost).
    pub async fn renew_lease_until(
        &self,
        lease: &pb::Lease,
        ttl: Option<Duration>,
        until: Option<tokio::time::Instant>,
    ) -> Result<Duration, ApiError> {
        let request = pb::RenewLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
            ttl: ttl.map(duration_to_pb),
        };
        retry(&self.retry, "RenewLease", until, |deadline| {
            let mut c = self.coordinator();
            let request = request.clone();
            async move {
                let response = c
                    .renew_lease(with_deadline(request, deadline))
                    .await
                    .map_err(ApiError::from)?
                    .into_inner();
                Ok(response.ttl.map(duration_from_pb).unwrap_or_default())
            }
        })
        .await
    }

    /// Releases a lease (retried); `true` when it was live.
    pub async fn release_lease(&self, lease: &pb::Lease) -> Result<bool, ApiError> {
        let request = pb::ReleaseLeaseRequest {
            lease_id: lease.lease_id.clone(),
            epoch: lease.epoch,
        };
        retry(&self.retry, "ReleaseLease", None, |deadline| {
            let mut c = self.coordinator();
            let request = request.clone();
            async move {
                Ok(c.release_lease(with_deadline(request, deadline))
                    .await
                    .map_err(ApiError::from)?
                    .into_inner()
                    .released)
            }
        })
        .await
    }

    /// Records a committed micro-batch (retried: a repeat is `DUPLICATE`).
    pub async fn commit_batch(&self, request: pb::CommitBatchRequest) -> Result<pb::CommitBatchResponse, ApiError> {
        retry(&self.retry, "CommitBatch", None, |deadline| {
            let mut c = self.coordinator();
            let request = request.clone();
            async move {
                c.commit_batch(with_deadline(request, deadline))
                    .await
                    .map(|r| r.into_inner())
                    .map_err(ApiError::from)
            }
        })
        .await
    }

    /// Plans where to resume (retried).
    pub async fn get_recovery_position(
        &self,
        request: pb::GetRecoveryPositionRequest,
    ) -> Result<pb::GetRecoveryPositionResponse, ApiError> {
        retry(&self.retry, "GetRecoveryPosition", None, |deadline| {
            let mut c = self.coordinator();
            let request = request.clone();
            async move {
                c.get_recovery_position(with_deadline(request, deadline))
                    .await
                    .map(|r| r.into_inner())
                    .map_err(ApiError::from)
            }
        })
        .await
    }

    /// A branch's retention fences (retried: read-only).
    pub async fn get_retention_fence(
        &self,
        request: pb::GetRetentionFenceRequest,
    ) -> Result<pb::GetRetentionFenceResponse, ApiError> {
        retry(&self.retry, "GetRetentionFence", None, |deadline| {
            let mut c = self.retention();
            let request = request.clone();
            async move {
                c.get_retention_fence(with_deadline(request, deadline))
                    .await
                    .map(|r| r.into_inner())
                    .map_err(ApiError::from)
            }
        })
        .await
    }
}

/// A request the server is told to finish within about `deadline`
/// (`grpc-timeout`). The client holds each attempt to the deadline itself
/// (see `retry`); the header allows a little more, so the client's own
/// timeout (DEADLINE_EXCEEDED, retryable) fires first rather than tonic's
/// (CANCELLED).
fn with_deadline<T>(message: T, deadline: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(deadline + Duration::from_millis(100));
    request
}

/// A proto duration as a std one (negative as zero).
pub fn duration_from_pb(d: prost_types::Duration) -> Duration {
    tidemark_proto::duration::from_pb(&d)
}

/// A std duration as a proto one.
pub fn duration_to_pb(d: Duration) -> prost_types::Duration {
    tidemark_proto::duration::to_pb(d)
}
