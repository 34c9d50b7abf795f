"""Object stores inside the call's budget (issue: object-store calls outlast
the RPC deadline). A registered table whose store stops answering (a
network partition, a black-holed endpoint: connections accepted, nothing
sent back) must make a recovery answer UNAVAILABLE TABLE_LOCATION_UNREADABLE
with RetryInfo before the call's deadline, never DEADLINE_EXCEEDED (which
also sends readiness to re-probe a healthy database); and operators'
listings must answer within theirs, with the lag unknown, however many
consumers the table has."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from harness import TidemarkServer, free_port, moto_s3_process, slow_puts_proxy

from tidemark import Client, TidemarkError, offset
from tidemark.v1 import admin_pb2, coordinator_pb2, types_pb2

from conftest import database_url

REQUEST_TIMEOUT = 4.0
CONSUMERS = 40


def retry_info(error: grpc.RpcError):
    status = rpc_status.from_call(error)
    for detail in status.details if status else []:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return info
    return None


def test_a_store_that_stops_answering_is_unreadable_within_the_calls_deadline(tmp_path, unique, monkeypatch):
    hang = tmp_path / "hang"
    with moto_s3_process(monkeypatch) as (endpoint, s3):
        proxy, proxied = slow_puts_proxy(endpoint, 0, "--hang-while", str(hang))
        monkeypatch.setenv("AWS_ENDPOINT", proxied)
        prefix = f"warehouse/{unique('hang')}.db/events"
        for snapshot in range(1, 6):
            s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/snapshot-{snapshot}", Body=b"{}")
        s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/EARLIEST", Body=b"1")
        s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/LATEST", Body=b"5")
        console = f"127.0.0.1:{free_port()}"
        server = TidemarkServer(
            database_url(tmp_path),
            tmp_path / "server.log",
            extra_args=[
                "--request-timeout", f"{REQUEST_TIMEOUT}s",
                "--mirror-interval", "100ms",
                "--console-listen", console,
            ],
        ).start()
        try:
            with Client(server.endpoint) as client:
                table_id = f"{unique('lake')}.events"
                client.admin.RegisterTable(
                    admin_pb2.RegisterTableRequest(table=table_id, location=f"s3://lake/{prefix}", execute=True),
                    metadata=client.metadata,
                    timeout=10,
                )
                for i in range(CONSUMERS):
                    lease = client.acquire_lease(table_id, f"c{i:02}", holder="q").lease
                    client.commit_batch(lease, 0, offset(3, 0, scan_snapshot=False, total_splits=1))
                    client.release_lease(lease)

                # The store stops answering.
                hang.touch()
                request = coordinator_pb2.GetRecoveryPositionRequest(
                    consumer=types_pb2.ConsumerKey(table=table_id, branch="main", consumer_id="fresh"),
                    startup=coordinator_pb2.StartupOptions(mode=coordinator_pb2.STARTUP_MODE_LATEST_FULL),
                    table=coordinator_pb2.SnapshotRange(earliest_snapshot=1, latest_snapshot=5),
                )
                started = time.monotonic()
                try:
                    client.coordinator.GetRecoveryPosition(request, timeout=30, metadata=client.metadata)
                    raise AssertionError("a recovery on a table whose store does not answer succeeded")
                except grpc.RpcError as rpc_error:
                    took = time.monotonic() - started
                    error = TidemarkError.from_rpc_error(rpc_error)
                    print(f"recovery on a hanging store: {error.code.name} {error.reason} after {took:.1f} s")
                    assert (error.code, error.reason) == (
                        grpc.StatusCode.UNAVAILABLE,
                        "TABLE_LOCATION_UNREADABLE",
                    ), error
                    assert retry_info(rpc_error) is not None, "RetryInfo is set"
                    assert took < REQUEST_TIMEOUT, f"answered after {took:.1f} s"

                # Operators' listings answer within their deadline; the lag
                # is unknown rather than read per consumer.
                started = time.monotonic()
                listed = client.admin.ListConsumers(
                    admin_pb2.ListConsumersRequest(table=table_id, page_size=1000),
                    metadata=client.metadata,
                    timeout=30,
                )
                took = time.monotonic() - started
                print(f"ListConsumers of {len(listed.consumers)} consumers on a hanging store: {took:.1f} s")
                assert len(listed.consumers) == CONSUMERS
                assert took < REQUEST_TIMEOUT, f"ListConsumers took {took:.1f} s"

                # The console's pages have a deadline like an RPC's.
                for page in ["/", "/table?" + urllib.parse.urlencode({"name": table_id, "branch": "main"})]:
                    started = time.monotonic()
                    try:
                        with urllib.request.urlopen(f"http://{console}{page}", timeout=30) as answer:
                            status = answer.status
                    except urllib.error.HTTPError as refused:
                        status = refused.code
                    took = time.monotonic() - started
                    print(f"console {page} on a hanging store: {status} after {took:.1f} s")
                    assert status in (200, 503), status
                    assert took < REQUEST_TIMEOUT + 1, f"{page} took {took:.1f} s"
                hang.unlink()
                # The database is shared with later tests: leave no table
                # whose consumer files were never written (their servers
                # would go on mirroring it into their own stores).
                client.admin.UnregisterTable(
                    admin_pb2.UnregisterTableRequest(table=table_id, execute=True),
                    metadata=client.metadata,
                    timeout=10,
                )
        finally:
            if hang.exists():
                hang.unlink()
            server.stop()
            proxy.terminate()
            proxy.wait(timeout=30)
