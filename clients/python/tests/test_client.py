"""The Python SDK against a real tidemark server: typed errors with reasons,
retries only where safe, and the lease keeper."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from harness import TidemarkServer

from tidemark import Client, RetryPolicy, TidemarkError, is_retryable, offset
from tidemark.v1 import admin_pb2, coordinator_pb2, types_pb2

TABLE = "sdk.orders"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Short leases are allowed here so keeper tests run in seconds."""
    from conftest import database_url

    directory = tmp_path_factory.mktemp("sdk")
    server = TidemarkServer(
        database_url(directory), directory / "server.log", extra_args=["--min-lease-ttl", "300ms"]
    ).start()
    yield server
    server.stop()


@pytest.fixture
def client(server):
    with Client(server.endpoint) as client:
        yield client


def test_lease_commit_and_recovery_round_trip(client, unique):
    consumer = unique("rt")
    lease = client.acquire_lease(TABLE, consumer, holder="q1", ttl=30).lease
    assert lease.epoch >= 1 and lease.holder == "q1"
    assert abs(lease.ttl.ToNanoseconds() / 1e9 - 30) < 0.001

    done = client.commit_batch(lease, 0, offset(7, 2, False, 3), latest_snapshot=9)
    assert done.outcome == coordinator_pb2.COMMIT_OUTCOME_CREATED
    assert done.next_snapshot == 8
    again = client.commit_batch(lease, 0, offset(7, 2, False, 3))
    assert again.outcome == coordinator_pb2.COMMIT_OUTCOME_DUPLICATE

    plan = client.get_recovery_position(TABLE, consumer, earliest_snapshot=1, latest_snapshot=9)
    assert plan.source == coordinator_pb2.RECOVERY_SOURCE_CONSUMER
    assert (plan.start.snapshot_id, plan.start.scan_snapshot) == (8, False)

    described = client.describe_consumer(TABLE, consumer)
    assert described.info.consumer.next_snapshot == 8
    assert described.info.consumer.lag == 2
    assert client.renew_lease(lease, ttl=10) == pytest.approx(10, abs=0.001)
    assert client.release_lease(lease) is True
    assert client.release_lease(lease) is False
    events = [entry.event for entry in client.list_history(TABLE, consumer)]
    assert events == ["LEASE_RELEASE", "CREATE", "LEASE_ACQUIRE"]


def test_refusals_carry_reason_and_details_and_are_not_retried(client, unique):
    consumer = unique("held")
    client.acquire_lease(TABLE, consumer, holder="first", ttl=30)
    started = time.monotonic()
    with pytest.raises(TidemarkError) as raised:
        client.acquire_lease(TABLE, consumer, holder="second")
    assert time.monotonic() - started < 0.5, "a refusal is not retried"
    error = raised.value
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert error.reason == "LEASE_HELD"
    assert error.metadata["holder"] == "first"
    assert int(error.metadata["remaining_ms"]) > 0
    assert "LEASE_HELD" in str(error)
    assert not is_retryable(error)


def test_a_fenced_lease_cannot_commit(client, unique):
    consumer = unique("fenced")
    old = client.acquire_lease(TABLE, consumer, holder="q", ttl=30).lease
    new = client.acquire_lease(TABLE, consumer, holder="q", ttl=30)
    assert new.takeover and new.lease.epoch > old.epoch
    with pytest.raises(TidemarkError) as raised:
        client.commit_batch(old, 1, offset(3, 0, False, 1))
    assert raised.value.reason == "LEASE_NOT_HELD"
    assert int(raised.value.metadata["current_epoch"]) == new.lease.epoch


def test_bad_input_names_the_field(client):
    with pytest.raises(TidemarkError) as raised:
        client.acquire_lease("no-dot-in-table", "c", holder="q")
    error = raised.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in error.field_violations] == ["consumer.table"]


def test_worker_calls_wait_for_a_server_that_comes_up_late(tmp_path, unique):
    from conftest import database_url

    late = TidemarkServer(database_url(tmp_path), tmp_path / "late.log")
    patient = RetryPolicy(max_attempts=60, initial_backoff=0.05, max_backoff=0.25)
    starter = threading.Timer(0.5, late.start)
    starter.start()
    try:
        with Client(late.endpoint, retry=patient, timeout=2.0) as client:
            lease = client.acquire_lease(TABLE, unique("late"), holder="q").lease
            assert lease.epoch == 1
    finally:
        starter.join()
        late.stop()


def test_an_unreachable_server_is_unavailable_without_a_reason(unique):
    from harness import free_port

    with Client(f"127.0.0.1:{free_port()}", retry=RetryPolicy(max_attempts=2), timeout=1.0) as client:
        with pytest.raises(TidemarkError) as raised:
            client.acquire_lease(TABLE, unique("down"), holder="q")
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert raised.value.reason == ""
    assert is_retryable(raised.value)


def test_the_keeper_keeps_a_short_lease_alive_and_releases_it(client, unique):
    consumer = unique("kept")
    lease = client.acquire_lease(TABLE, consumer, holder="q", ttl=0.6).lease
    keeper = client.keep_lease(lease)
    time.sleep(2.0)  # more than three ttls
    assert keeper.held
    client.commit_batch(lease, 0, offset(2, 0, False, 1))  # still the live lease
    assert keeper.release() is True
    keeper.join(timeout=2)
    assert not keeper.is_alive()
    assert not keeper.lost.is_set()


def test_the_keeper_reports_loss_at_once_and_stops(client, unique):
    consumer = unique("lost")
    lease = client.acquire_lease(TABLE, consumer, holder="q", ttl=0.9).lease
    keeper = client.keep_lease(lease)
    client.admin.RevokeLease(
        admin_pb2.RevokeLeaseRequest(
            consumer=types_pb2.ConsumerKey(table=TABLE, branch="main", consumer_id=consumer),
            reason="test",
            execute=True,
        ),
        timeout=5,
    )
    assert keeper.lost.wait(timeout=2.0), "loss is reported within a renewal interval"
    assert keeper.error.reason == "LEASE_NOT_HELD"
    keeper.join(timeout=2)
    assert not keeper.is_alive(), "no renewing after loss"


def test_retry_policy_and_classification():
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=0.4)
    for attempt, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (10, 0.4)]:
        samples = [policy.backoff(attempt) for _ in range(200)]
        assert all(0 <= s <= cap for s in samples)
        assert max(samples) > cap / 2, "jitter spreads over the whole range"

    def error(code, reason=""):
        return TidemarkError(code, "m", reason)

    assert is_retryable(error(grpc.StatusCode.UNAVAILABLE))
    assert is_retryable(error(grpc.StatusCode.DEADLINE_EXCEEDED, "TIMEOUT"))
    assert is_retryable(error(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED"))
    assert is_retryable(error(grpc.StatusCode.ABORTED, "CONTENTION"))
    assert not is_retryable(error(grpc.StatusCode.FAILED_PRECONDITION, "LEASE_NOT_HELD"))
    assert not is_retryable(error(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"))
    assert not is_retryable(error(grpc.StatusCode.PERMISSION_DENIED, "ROLE_NOT_ALLOWED"))


class BlackHole:
    """A TCP server that accepts connections and never answers (a hung
    process, a network that drops replies)."""

    def __init__(self):
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.endpoint = "127.0.0.1:%d" % self._socket.getsockname()[1]
        self._held = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(connection)

    def close(self):
        self._closed.set()
        self._socket.close()
        for connection in self._held:
            connection.close()


def test_a_black_holed_server_costs_the_keeper_its_lease_within_the_ttl(client, unique):
    hole = BlackHole()
    try:
        sent_at = time.monotonic()
        lease = client.acquire_lease(TABLE, unique("hole"), holder="q", ttl=1.0).lease
        with Client(hole.endpoint, timeout=5.0) as hung:
            keeper = hung.keep_lease(lease, sent_at=sent_at)
            assert keeper.lost.wait(timeout=2 * 1.0), "the loss is reported by the lease's deadline"
            reported_after = time.monotonic() - sent_at
            # No answer: a connection that never completes, or a call past
            # its deadline.
            assert keeper.error.code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
            print(f"black hole: keeper reported the loss {reported_after * 1000:.0f} ms after the acquire (ttl 1000 ms)")
            # The bound is the ttl; the margin is the suite's usual 2x.
            assert reported_after <= 2 * 1.0, f"reported {reported_after:.2f} s after the acquire, ttl 1 s"
            # A direct call gives up within its budget too, not 5 s x attempts.
            started = time.monotonic()
            with pytest.raises(TidemarkError):
                Client(hole.endpoint, timeout=0.5, retry=RetryPolicy(budget=1.0)).renew_lease(lease)
            assert time.monotonic() - started < 2 * 1.5
    finally:
        hole.close()


def test_calls_ride_out_a_server_restart_of_several_seconds(tmp_path, unique):
    from conftest import database_url

    server = TidemarkServer(database_url(tmp_path), tmp_path / "restart.log").start()
    try:
        with Client(server.endpoint) as client:  # the default policy
            lease = client.acquire_lease(TABLE, unique("restart"), holder="q").lease
            server.kill()
            restarter = threading.Timer(4.0, server.start)
            restarter.start()
            started = time.monotonic()
            response = client.commit_batch(lease, 0, offset(2, 0, False, 1))
            waited = time.monotonic() - started
            restarter.join()
            print(f"restart: the commit waited {waited:.1f} s for the server to come back (down 4 s)")
            assert response.next_snapshot == 3
            assert 3.5 < waited < 2 * 10, waited
    finally:
        server.stop()


def _psql() -> str:
    import glob
    import shutil

    found = shutil.which("psql") or next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"), reverse=True)), None)
    assert found, "psql is needed (the PostgreSQL client binaries scripts/test.sh uses)"
    return found


def test_the_sdk_rides_out_a_lock_held_past_the_statement_timeout(tmp_path, unique):
    """An operator holds `LOCK TABLE consumer_keys IN ACCESS EXCLUSIVE MODE`
    past the server's 1 s statement timeout: a call without retries sees
    UNAVAILABLE STORE_TIMEOUT (retryable, never INTERNAL); the SDK's default
    policy retries the same commit until the lock is gone."""
    import os
    import subprocess

    url = os.environ.get("TIDEMARK_TEST_DATABASE_URL")
    assert url, "needs Postgres: scripts/test.sh sets TIDEMARK_TEST_DATABASE_URL"
    psql = _psql()
    server = TidemarkServer(url, tmp_path / "server.log", extra_args=["--db-statement-timeout", "1s"]).start()
    holder = None
    try:
        with Client(server.endpoint, timeout=10.0) as client:
            consumer = unique("locked")
            lease = client.acquire_lease(TABLE, consumer, holder="q").lease
            client.commit_batch(lease, 0, offset(2, 0, False, 1))
            holder = subprocess.Popen(
                [psql, "-q", "-X", "-v", "ON_ERROR_STOP=1", url, "-c",
                 "BEGIN; LOCK TABLE consumer_keys IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(5); COMMIT;"],
                stdout=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 10
            while True:
                held = subprocess.run(
                    [psql, "-qtAX", url, "-c",
                     "SELECT count(*) FROM pg_locks WHERE relation = 'consumer_keys'::regclass "
                     "AND mode = 'AccessExclusiveLock' AND granted"],
                    capture_output=True, text=True, check=True,
                ).stdout.strip()
                if held == "1":
                    break
                assert time.monotonic() < deadline, "the lock was never taken"
                time.sleep(0.05)
            locked_at = time.monotonic()
            with Client(server.endpoint, retry=RetryPolicy(max_attempts=1), timeout=10.0) as plain:
                with pytest.raises(TidemarkError) as raised:
                    plain.commit_batch(lease, 1, offset(3, 0, False, 1))
            assert raised.value.code == grpc.StatusCode.UNAVAILABLE, raised.value
            assert raised.value.reason == "STORE_TIMEOUT", raised.value
            assert is_retryable(raised.value)
            # The same commit again, under the default policy: retried
            # until the lock is released.
            committed = client.commit_batch(lease, 1, offset(3, 0, False, 1))
            assert time.monotonic() - locked_at > 3.0, "it waited for the lock"
            assert committed.next_snapshot == 4
        assert holder.wait(timeout=10) == 0
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        server.stop()


def test_an_offset_without_completion_metadata_is_built_only_on_purpose(client, unique):
    """Issue 55: `offset(s, 0, False)` used to build an offset without
    total_splits, which the server answers UNCHANGED_LEGACY_OFFSET forever
    (the consumer never moves). Now offset() requires total_splits or the
    complete=True form, and a legacy offset takes legacy_offset()."""
    from tidemark import legacy_offset

    with pytest.raises(TypeError, match="total_splits"):
        offset(7, 0, False)
    with pytest.raises(TypeError, match="complete"):
        offset(7, 0, False, 3, complete=True)

    consumer = unique("complete")
    lease = client.acquire_lease(TABLE, consumer, holder="q1", ttl=30).lease
    done = client.commit_batch(lease, 0, offset(7, complete=True), latest_snapshot=9)
    assert done.outcome == coordinator_pb2.COMMIT_OUTCOME_CREATED and done.next_snapshot == 8
    assert offset(7, complete=True).total_splits == 1 and offset(7, complete=True).HasField("total_splits")

    legacy = client.commit_batch(lease, 1, legacy_offset(9, 0, False), latest_snapshot=9)
    assert legacy.outcome == coordinator_pb2.COMMIT_OUTCOME_UNCHANGED_LEGACY_OFFSET
    assert not legacy_offset(9, 0, False).HasField("total_splits")
    assert client.describe_consumer(TABLE, consumer).info.consumer.next_snapshot == 8
