"""The tidemark client: one channel, typed stubs for every service, and the
worker calls with safe retries."""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

import grpc
from google.protobuf import duration_pb2

from tidemark.errors import TidemarkError, is_retryable
from tidemark.v1 import admin_pb2, admin_pb2_grpc, coordinator_pb2, coordinator_pb2_grpc, retention_pb2, retention_pb2_grpc
from tidemark.v1 import types_pb2

try:  # optional: with OpenTelemetry installed, calls carry the current span's context
    from opentelemetry import propagate as _otel_propagate
except ImportError:  # pragma: no cover - exercised by the package test's bare venv
    _otel_propagate = None

T = TypeVar("T")


@dataclass
class RetryPolicy:
    """The one retry and deadline policy of every call: each attempt has its
    own deadline (the client's `timeout`), and transient failures are
    retried with jittered exponential backoff until `budget` seconds have
    passed since the first attempt (or `max_attempts` attempts, when set).
    The default budget rides out a tidemark restart and a Postgres failover
    (about 20 s with Patroni's smallest ttl, measured in
    docs/reliability.md)."""

    budget: float = 30.0
    initial_backoff: float = 0.05
    max_backoff: float = 1.0
    max_attempts: Optional[int] = None

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry `attempt` (1-based): full jitter."""
        cap = min(self.max_backoff, self.initial_backoff * (2 ** min(attempt - 1, 16)))
        return random.uniform(0, cap)


def _duration(seconds: Optional[float]) -> Optional[duration_pb2.Duration]:
    if seconds is None:
        return None
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def offset(
    snapshot_id: int,
    index: Optional[int] = None,
    scan_snapshot: bool = False,
    total_splits: Optional[int] = None,
    *,
    complete: bool = False,
) -> types_pb2.Offset:
    """The end offset of a batch: split `index` of `total_splits` of snapshot
    `snapshot_id` (read as an initial full scan when `scan_snapshot`), or with
    `complete=True` the whole snapshot (`offset(7, complete=True)`).

    The server moves a consumer only with completion metadata: an offset
    without total_splits is an older checkpoint's, answered
    COMMIT_OUTCOME_UNCHANGED_LEGACY_OFFSET. Build one only on purpose, with
    legacy_offset().
    """
    if complete:
        if index is not None or total_splits is not None:
            raise TypeError("offset(): complete=True is the whole snapshot: give no index or total_splits with it")
        return types_pb2.Offset(snapshot_id=snapshot_id, index=0, scan_snapshot=scan_snapshot, total_splits=1)
    if index is None or total_splits is None:
        raise TypeError(
            "offset() needs index and total_splits (the snapshot's split count), or complete=True for a whole "
            "snapshot; an offset without completion metadata never moves a consumer — build one on purpose "
            "with legacy_offset()"
        )
    return types_pb2.Offset(
        snapshot_id=snapshot_id, index=index, scan_snapshot=scan_snapshot, total_splits=total_splits
    )


def legacy_offset(snapshot_id: int, index: int, scan_snapshot: bool) -> types_pb2.Offset:
    """An offset without completion metadata, as an older checkpoint holds it:
    the server keeps the consumer where it is (UNCHANGED_LEGACY_OFFSET) and the
    snapshot may be replayed."""
    return types_pb2.Offset(snapshot_id=snapshot_id, index=index, scan_snapshot=scan_snapshot)


def _sdk_version() -> str:
    try:
        from importlib.metadata import version

        return version("tidemark")
    except Exception:  # not installed (a source checkout on sys.path)
        return "dev"


class Client:
    """A connection to a tidemark server.

    The worker calls (acquire, renew, release, commit, recovery, fence) are
    retried on transient failures only (unavailable, timeout, overload,
    contention), because each is safe to repeat: renew/release/recovery are
    idempotent, a commit is idempotent per batch (a repeat is DUPLICATE), and
    a repeated acquire by the same holder takes over the grant it may have
    missed. Refusals such as FAILED_PRECONDITION are never retried; they raise
    TidemarkError with the server's reason.

    With OpenTelemetry installed (`opentelemetry-api`), every call made while
    a span is current carries its W3C `traceparent`, so tidemark's span for
    the call joins the application's trace.
    """

    def __init__(
        self,
        endpoint: str,
        token: Optional[str] = None,
        ca: Optional[bytes] = None,
        cert: Optional[bytes] = None,
        key: Optional[bytes] = None,
        timeout: float = 5.0,
        retry: Optional[RetryPolicy] = None,
    ):
        target, secure = _target(endpoint)
        # Reconnect promptly once a restarted server is back (gRPC's default
        # backoff grows to two minutes, far past any retry budget).
        # Balancing by connection: each (re)connection picks one of the
        # addresses the host resolves to at random (with a headless Service,
        # the ready replicas), and a reconnection after the server's max
        # connection age resolves again, so connections spread over replicas
        # that were added since. Every call on a connection goes to one
        # replica, which keeps its lease state cache and group commit useful.
        options = [
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            ("grpc.dns_min_time_between_resolutions_ms", 1000),
            # Each Client its own connection: gRPC would otherwise share one
            # connection per address among a process's Clients, so they would
            # all land on one replica.
            ("grpc.use_local_subchannel_pool", 1),
            # Leads the user-agent (gRPC appends its own): the server records
            # it on the leases this client acquires.
            ("grpc.primary_user_agent", f"tidemark-python/{_sdk_version()}"),
            ("grpc.service_config", json.dumps({"loadBalancingConfig": [{"pick_first": {"shuffleAddressList": True}}]})),
        ]
        if secure or ca is not None or cert is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        channel = self._channel
        if _otel_propagate is not None:
            channel = grpc.intercept_channel(channel, _TraceContext(_otel_propagate))
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self.retry_policy = retry or RetryPolicy()
        self.coordinator = coordinator_pb2_grpc.CoordinatorStub(channel)
        self.retention = retention_pb2_grpc.RetentionStub(channel)
        self.admin = admin_pb2_grpc.AdminStub(channel)

    @property
    def metadata(self):
        """Call metadata carrying the token (pass it to direct stub calls)."""
        return self._metadata

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[float], T], until: Optional[float] = None) -> T:
        """Runs `fn(deadline in seconds)` under the retry policy; `until` (a
        time.monotonic() value) ends the retrying early, e.g. at a lease's
        deadline."""
        policy = self.retry_policy
        started = time.monotonic()
        end = started + policy.budget
        if until is not None:
            end = min(end, until)
        attempt = 1
        while True:
            timeout = min(self.timeout, end - time.monotonic())
            if timeout <= 0:
                raise TidemarkError(
                    grpc.StatusCode.DEADLINE_EXCEEDED, f"{what}: no answer before the deadline", ""
                )
            try:
                return fn(timeout)
            except grpc.RpcError as rpc_error:
                error = TidemarkError.from_rpc_error(rpc_error)
                out_of_attempts = policy.max_attempts is not None and attempt >= policy.max_attempts
                wait = policy.backoff(attempt)
                if out_of_attempts or not is_retryable(error) or time.monotonic() + wait >= end:
                    raise error from None
                time.sleep(wait)
                attempt += 1

    def acquire_lease(
        self,
        table: str,
        consumer_id: str,
        holder: str,
        branch: str = "main",
        ttl: Optional[float] = None,
    ) -> coordinator_pb2.AcquireLeaseResponse:
        """Takes a consumer's lease for `holder` (seconds of ttl, or the server's default)."""
        request = coordinator_pb2.AcquireLeaseRequest(
            consumer=types_pb2.ConsumerKey(table=table, branch=branch, consumer_id=consumer_id),
            holder=holder,
            ttl=_duration(ttl),
        )
        return self._call(
            "AcquireLease",
            lambda t: self.coordinator.AcquireLease(request, timeout=t, metadata=self._metadata),
        )

    def renew_lease(
        self, lease: coordinator_pb2.Lease, ttl: Optional[float] = None, until: Optional[float] = None
    ) -> float:
        """Renews a lease; returns the seconds left. `until` (time.monotonic())
        stops retrying there, e.g. at the lease's own deadline."""
        request = coordinator_pb2.RenewLeaseRequest(lease_id=lease.lease_id, epoch=lease.epoch, ttl=_duration(ttl))
        response = self._call(
            "RenewLease",
            lambda t: self.coordinator.RenewLease(request, timeout=t, metadata=self._metadata),
            until=until,
        )
        return response.ttl.ToNanoseconds() / 1e9

    def release_lease(self, lease: coordinator_pb2.Lease) -> bool:
        """Releases a lease; True when it was live."""
        request = coordinator_pb2.ReleaseLeaseRequest(lease_id=lease.lease_id, epoch=lease.epoch)
        return self._call(
            "ReleaseLease",
            lambda t: self.coordinator.ReleaseLease(request, timeout=t, metadata=self._metadata),
        ).released

    def commit_batch(
        self,
        lease: coordinator_pb2.Lease,
        batch_id: int,
        end: types_pb2.Offset,
        latest_snapshot: Optional[int] = None,
    ) -> coordinator_pb2.CommitBatchResponse:
        """Records a committed micro-batch's end offset."""
        request = coordinator_pb2.CommitBatchRequest(
            lease_id=lease.lease_id, epoch=lease.epoch, batch_id=batch_id, end=end
        )
        if latest_snapshot is not None:
            request.latest_snapshot = latest_snapshot
        return self._call(
            "CommitBatch",
            lambda t: self.coordinator.CommitBatch(request, timeout=t, metadata=self._metadata),
        )

    def get_recovery_position(
        self,
        table: str,
        consumer_id: str,
        earliest_snapshot: int,
        latest_snapshot: int,
        branch: str = "main",
        startup_mode: int = coordinator_pb2.STARTUP_MODE_LATEST_FULL,
        snapshot_id: int = 0,
        ignore_progress: bool = False,
        checkpoint: Optional[tuple] = None,
        lease: Optional[coordinator_pb2.Lease] = None,
        clamp_to_earliest: bool = False,
        earliest_changelog: Optional[int] = None,
        changelog_decoupled: bool = False,
    ) -> coordinator_pb2.GetRecoveryPositionResponse:
        """Where to resume. `checkpoint` is the logged batch (start, end) as
        Offset messages, when the engine has one."""
        table_range = coordinator_pb2.SnapshotRange(
            earliest_snapshot=earliest_snapshot,
            latest_snapshot=latest_snapshot,
            changelog_decoupled=changelog_decoupled,
        )
        if earliest_changelog is not None:
            table_range.earliest_changelog = earliest_changelog
        request = coordinator_pb2.GetRecoveryPositionRequest(
            consumer=types_pb2.ConsumerKey(table=table, branch=branch, consumer_id=consumer_id),
            startup=coordinator_pb2.StartupOptions(mode=startup_mode, snapshot_id=snapshot_id),
            ignore_progress=ignore_progress,
            table=table_range,
            on_expired=(
                coordinator_pb2.ON_EXPIRED_CLAMP_TO_EARLIEST if clamp_to_earliest else coordinator_pb2.ON_EXPIRED_FAIL
            ),
        )
        if checkpoint is not None:
            request.checkpoint.start.CopyFrom(checkpoint[0])
            request.checkpoint.end.CopyFrom(checkpoint[1])
        if lease is not None:
            request.lease_id = lease.lease_id
        return self._call(
            "GetRecoveryPosition",
            lambda t: self.coordinator.GetRecoveryPosition(request, timeout=t, metadata=self._metadata),
        )

    def get_retention_fence(
        self, table: str, branch: str = "main", changelog_decoupled: bool = False
    ) -> retention_pb2.GetRetentionFenceResponse:
        """A branch's retention fences."""
        request = retention_pb2.GetRetentionFenceRequest(
            table=table, branch=branch, changelog_decoupled=changelog_decoupled
        )
        return self._call(
            "GetRetentionFence",
            lambda t: self.retention.GetRetentionFence(request, timeout=t, metadata=self._metadata),
        )

    def describe_consumer(
        self, table: str, consumer_id: str, branch: str = "main", history_limit: int = 20
    ) -> admin_pb2.DescribeConsumerResponse:
        """A key's consumer record, lease, options and recent history (an
        operator call: needs the `operator` role when auth is on)."""
        request = admin_pb2.DescribeConsumerRequest(
            consumer=types_pb2.ConsumerKey(table=table, branch=branch, consumer_id=consumer_id),
            history_limit=history_limit,
        )
        return self._call(
            "DescribeConsumer",
            lambda t: self.admin.DescribeConsumer(request, timeout=t, metadata=self._metadata),
        )

    def list_history(
        self, table: str, consumer_id: Optional[str] = None, branch: str = "main", page_size: int = 100
    ) -> list:
        """A key's (or, without consumer_id, a whole table's) history, newest
        first, every page."""
        entries, token = [], ""
        while True:
            request = admin_pb2.ListHistoryRequest(page_size=page_size, page_token=token)
            if consumer_id is None:
                request.table, request.branch = table, branch
            else:
                request.consumer.CopyFrom(types_pb2.ConsumerKey(table=table, branch=branch, consumer_id=consumer_id))
            response = self._call(
                "ListHistory",
                lambda t: self.admin.ListHistory(request, timeout=t, metadata=self._metadata),
            )
            entries.extend(response.entries)
            token = response.next_page_token
            if not token:
                return entries

    def keep_lease(self, lease: coordinator_pb2.Lease, sent_at: Optional[float] = None) -> "LeaseKeeper":
        """Renews `lease` in a background thread; see LeaseKeeper. `sent_at`
        (time.monotonic()) is when the acquire request left: the lease's
        clock starts there (default: now)."""
        keeper = LeaseKeeper(self, lease, sent_at=sent_at)
        keeper.start()
        return keeper


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class _TraceContext(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds the W3C `traceparent` (and `tracestate`, `baggage`) of the span
    current when a call is made, through OpenTelemetry's global propagator,
    so the server's span for the call joins the application's trace. Without
    a current span (or with only the OpenTelemetry API and no SDK) nothing
    is added. Each retry attempt carries the same context: it is read on the
    calling thread, where the application's span is current."""

    def __init__(self, propagate):
        self._propagate = propagate

    def _with_context(self, details):
        carrier: dict = {}
        self._propagate.inject(carrier)
        if not carrier:
            return details
        metadata = list(details.metadata or ())
        present = {key for key, _ in metadata}
        metadata.extend((key, value) for key, value in carrier.items() if key not in present)
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._with_context(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._with_context(client_call_details), request)


def _target(endpoint: str) -> tuple[str, bool]:
    for scheme, secure in (("https://", True), ("http://", False)):
        if endpoint.startswith(scheme):
            return endpoint[len(scheme):].rstrip("/"), secure
    return endpoint, False


class LeaseKeeper(threading.Thread):
    """Renews a lease about every ttl/3 until it is lost or stopped.

    `lost` is set the moment the lease is lost (revoked, superseded, expired
    while the server was unreachable); `error` then says why, and renewals
    stop. `stop()` ends renewing; `release()` also releases the lease.
    """

    def __init__(self, client: Client, lease: coordinator_pb2.Lease, sent_at: Optional[float] = None):
        super().__init__(name=f"tidemark-lease-{lease.lease_id[:8]}", daemon=True)
        self.client = client
        self.lease = lease
        self.ttl = lease.ttl.ToNanoseconds() / 1e9 if lease.HasField("ttl") else 30.0
        # The lease's clock starts when its request left, not when the
        # answer came: the server may have granted it any time in between.
        self.deadline = (sent_at if sent_at is not None else time.monotonic()) + self.ttl
        self.lost = threading.Event()
        self.error: Optional[TidemarkError] = None
        self._stopped = threading.Event()

    def run(self) -> None:
        renew_at = self.deadline - self.ttl * 2 / 3
        while not self._stopped.wait(max(0.0, renew_at - time.monotonic())):
            sent = time.monotonic()
            try:
                # Retried inside, never past the lease's deadline: a lease
                # that cannot be renewed in time is lost by then.
                self.ttl = self.client.renew_lease(self.lease, until=self.deadline)
            except TidemarkError as error:
                if self._stopped.is_set():
                    return
                self.error = error
                self.lost.set()
                return
            self.deadline = sent + self.ttl
            renew_at = sent + self.ttl / 3

    @property
    def held(self) -> bool:
        return not self.lost.is_set() and not self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()

    def release(self) -> bool:
        """Stops renewing and releases the lease; True when it was still live."""
        self.stop()
        return self.client.release_lease(self.lease)
