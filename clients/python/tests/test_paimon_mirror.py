"""SPEC §9 with real Paimon tables written by pypaimon 2.1.0: tidemark mirrors
its consumers into the table's own consumer files, which pypaimon's
ConsumerManager and `$consumers` system table read (main and a branch);
Paimon's expiration rule then never removes a snapshot tidemark fences;
consumer files written by pypaimon are imported; and a reader polling a
mirrored file during continuous updates never sees a torn one."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from datetime import datetime, timedelta

import pytest
from harness import PaimonTable, TidemarkServer, wait_for
from pypaimon import CatalogFactory
from pypaimon.consumer.consumer import Consumer
from pypaimon.consumer.consumer_manager import ConsumerManager

from tidemark import Client, offset
from tidemark.v1 import admin_pb2

from conftest import database_url


def serving(tmp_path, *mirror_args: str):
    """A server with these mirror settings, stopped afterwards."""
    server = TidemarkServer(database_url(tmp_path), tmp_path / "server.log", extra_args=list(mirror_args)).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mirroring_server(tmp_path):
    """A server whose mirror runs every 20 ms and rewrites refreshed files
    at once (so files follow every commit)."""
    yield from serving(tmp_path, "--mirror-interval", "20ms", "--mirror-refresh", "0s")


def register(client: Client, table: PaimonTable) -> admin_pb2.RegisterTableResponse:
    return client.admin.RegisterTable(
        admin_pb2.RegisterTableRequest(table=table.id, location=table.path, execute=True),
        metadata=client.metadata,
        timeout=10,
    )


def manager(table: PaimonTable, branch: str = "main") -> ConsumerManager:
    return ConsumerManager(table.table.file_io, table.table.table_path, branch)


def commit_snapshot_end(client: Client, lease, batch: int, snapshot: int) -> None:
    """Commits a batch that ended on the last split of `snapshot`."""
    client.commit_batch(lease, batch, offset(snapshot, 0, False, 1))


def test_pypaimon_reads_the_mirrored_position_on_main_and_on_a_branch(mirroring_server, tmp_path, unique):
    table = PaimonTable(tmp_path / "warehouse", unique("mirror"))
    for _ in range(4):
        table.commit()
    with Client(mirroring_server.endpoint) as client:
        registered = register(client, table)
        assert registered.latest_snapshot == 4 and not registered.probe_error
        lease = client.acquire_lease(table.id, "etl", holder="q1").lease
        commit_snapshot_end(client, lease, 0, 2)
        wait_for(lambda: (manager(table).consumer("etl") or Consumer(0)).next_snapshot == 3, timeout=10, what="the mirrored consumer file")
        # A real branch (Paimon gives it its own directory and schema): the
        # mirror writes into branches that exist, never creates one.
        table.catalog.create_branch(table.id, "dev")
        branch_lease = client.acquire_lease(table.id, "etl", holder="q2", branch="dev").lease
        commit_snapshot_end(client, branch_lease, 0, 1)
        wait_for(lambda: (manager(table, "dev").consumer("etl") or Consumer(0)).next_snapshot == 2, timeout=10, what="the mirrored consumer file")
        # Main only sees main's consumers.
        assert manager(table).min_next_snapshot() == 3

        # The $consumers system table reads the same file.
        catalog = CatalogFactory.create({"warehouse": str(table.warehouse)})
        consumers = catalog.get_table(f"{table.id}$consumers")
        builder = consumers.new_read_builder()
        rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
        assert rows == [{"consumer_id": "etl", "next_snapshot_id": 3}]

        # DescribeConsumer says the file is in sync.
        described = client.describe_consumer(table.id, "etl")
        assert described.mirror.in_sync and described.mirror.mirrored_next_snapshot == 3
        client.release_lease(lease)
        client.release_lease(branch_lease)


def test_paimon_expiration_by_min_next_snapshot_never_removes_a_fenced_snapshot(
    mirroring_server, tmp_path, unique
):
    table = PaimonTable(tmp_path / "warehouse", unique("expire"))
    for _ in range(8):
        table.commit()
    with Client(mirroring_server.endpoint) as client:
        register(client, table)
        slow = client.acquire_lease(table.id, "slow", holder="q-slow").lease
        fast = client.acquire_lease(table.id, "fast", holder="q-fast").lease
        commit_snapshot_end(client, slow, 0, 2)  # needs 3 and later
        commit_snapshot_end(client, fast, 0, 6)  # needs 7 and later
        wait_for(lambda: manager(table).min_next_snapshot() == 3, timeout=10, what="the mirrored consumer file")
        fence = client.get_retention_fence(table.id, "main").snapshot_fence
        assert fence == 3
        # Paimon's rule: snapshots strictly below min(nextSnapshot) may go.
        removed = table.expire_below(manager(table).min_next_snapshot())
        assert removed == [1, 2]
        assert all(s >= fence for s in table.snapshot_ids())
        # The slow consumer advances; the files follow, and so does what
        # Paimon may expire, never past what tidemark fences.
        commit_snapshot_end(client, slow, 1, 4)
        wait_for(lambda: manager(table).min_next_snapshot() == 5, timeout=10, what="the mirrored consumer file")
        assert table.expire_below(manager(table).min_next_snapshot()) == [3, 4]
        assert min(table.snapshot_ids()) == client.get_retention_fence(table.id, "main").snapshot_fence == 5


def test_consumer_files_written_by_pypaimon_are_imported(mirroring_server, tmp_path, unique):
    table = PaimonTable(tmp_path / "warehouse", unique("import"))
    for _ in range(5):
        table.commit()
    manager(table).reset_consumer("legacy-job", Consumer(next_snapshot=4))
    manager(table).reset_consumer("bad id", Consumer(next_snapshot=2))  # Paimon allows it; tidemark ids do not
    manager(table, "dev").reset_consumer("legacy-job", Consumer(next_snapshot=2))
    with Client(mirroring_server.endpoint) as client:
        register(client, table)
        request = admin_pb2.ImportConsumersRequest(table=table.id, execute=False)
        plan = client.admin.ImportConsumers(request, metadata=client.metadata, timeout=10)
        assert sorted((i.consumer.branch, i.consumer.consumer_id, i.next_snapshot) for i in plan.imported) == [
            ("dev", "legacy-job", 2),
            ("main", "legacy-job", 4),
        ]
        assert [(s.consumer_id, s.reason) for s in plan.skipped] == [("bad id", "INVALID_ID")]
        request.execute = True
        client.admin.ImportConsumers(request, metadata=client.metadata, timeout=10)
        assert client.describe_consumer(table.id, "legacy-job").info.consumer.next_snapshot == 4
        # The imported consumer now fences its snapshots in tidemark too.
        assert client.get_retention_fence(table.id, "main").snapshot_fence == 4
        # And a query resumes where the Paimon consumer was.
        lease = client.acquire_lease(table.id, "legacy-job", holder="q").lease
        start = client.get_recovery_position(table.id, "legacy-job", 1, table.latest_snapshot(), lease=lease).start
        assert start.snapshot_id == 4
        client.release_lease(lease)


def test_a_reader_never_sees_a_torn_consumer_file(mirroring_server, tmp_path, unique):
    table = PaimonTable(tmp_path / "warehouse", unique("torn"))
    table.commit()
    with Client(mirroring_server.endpoint) as client:
        register(client, table)
        lease = client.acquire_lease(table.id, "busy", holder="q").lease
        commit_snapshot_end(client, lease, 0, 1)
        wait_for(lambda: manager(table).consumer("busy") is not None, timeout=10, what="the mirrored consumer file")
        stop = threading.Event()
        seen, problems = [], []

        def poll():
            reader = manager(table)
            while not stop.is_set():
                try:
                    consumer = reader.consumer("busy")
                    if consumer is None:
                        problems.append("the file was missing")
                    else:
                        seen.append(consumer.next_snapshot)
                except Exception as e:  # a torn file fails to parse
                    problems.append(repr(e))

        thread = threading.Thread(target=poll)
        thread.start()
        try:
            for batch in range(1, 300):
                commit_snapshot_end(client, lease, batch, batch + 1)
            deadline = time.time() + 10
            while time.time() < deadline and (manager(table).consumer("busy") or Consumer(0)).next_snapshot != 301:
                time.sleep(0.02)
        finally:
            stop.set()
            thread.join()
        assert not problems, problems[:5]
        assert len(seen) > 100 and seen == sorted(seen) and seen[-1] == 301
        # A file the mirror itself moved while the keeper looked is not an
        # outside change: no repair written back, logged or recorded.
        repairs = [e for e in client.list_history(table.id, "busy") if e.event == "MIRROR_REPAIR"]
        assert repairs == [], [(e.old_next_snapshot, e.new_next_snapshot, e.detail) for e in repairs[:5]]
        client.release_lease(lease)


def test_the_mirror_and_import_work_on_an_s3_compatible_store(tmp_path, unique, monkeypatch):
    """The same object_store path tidemark uses for S3, against moto's local
    S3 server: snapshot range read, consumer files written and imported."""
    from harness import moto_s3

    with moto_s3(monkeypatch) as (endpoint, s3):
        prefix = f"warehouse/{unique('s3')}.db/events"
        for snapshot in range(1, 6):
            s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/snapshot-{snapshot}", Body=b"{}")
        s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/EARLIEST", Body=b"1")
        s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/LATEST", Body=b"5")
        s3.put_object(Bucket="lake", Key=f"{prefix}/consumer/consumer-legacy", Body=b'{"nextSnapshot":3}')

        server = TidemarkServer(
            database_url(tmp_path), tmp_path / "server.log", extra_args=["--mirror-interval", "20ms"]
        ).start()
        try:
            with Client(server.endpoint) as client:
                # A name of its own: the database may be shared with earlier runs.
                table_id = f"{unique('lake')}.events"
                registered = client.admin.RegisterTable(
                    admin_pb2.RegisterTableRequest(table=table_id, location=f"s3://lake/{prefix}", execute=True),
                    metadata=client.metadata,
                    timeout=10,
                )
                assert (registered.earliest_snapshot, registered.latest_snapshot) == (1, 5), registered
                request = admin_pb2.ImportConsumersRequest(table=table_id, execute=True)
                imported = client.admin.ImportConsumers(request, metadata=client.metadata, timeout=10)
                assert [(i.consumer.consumer_id, i.next_snapshot) for i in imported.imported] == [("legacy", 3)]
                lease = client.acquire_lease(table_id, "etl", holder="q").lease
                commit_snapshot_end(client, lease, 0, 4)

                def mirrored():
                    try:
                        body = s3.get_object(Bucket="lake", Key=f"{prefix}/consumer/consumer-etl")["Body"].read()
                    except s3.exceptions.NoSuchKey:
                        return None
                    return body

                wait_for(lambda: mirrored() == b'{"nextSnapshot":5}', timeout=10, what="the consumer object on S3")
                described = client.describe_consumer(table_id, "etl")
                assert described.mirror.in_sync and described.mirror.path.startswith("s3://lake/"), described.mirror
                client.release_lease(lease)
        finally:
            server.stop()


def test_a_mistyped_s3_prefix_is_not_registered_unless_told(tmp_path, unique, monkeypatch):
    """A registration of an S3 prefix that holds no Paimon table (a typo of a
    real table's prefix, in an existing bucket) warns TABLE_LOCATION_EMPTY in
    the plan and in the answer, the CLI refuses to execute it (exit 4, nothing
    registered) unless given --allow-missing, and the real prefix next to it
    registers without a warning."""
    from harness import moto_s3, tidemark_binary

    with moto_s3(monkeypatch) as (_, s3):
        prefix = f"warehouse/{unique('s3')}.db/events"
        for snapshot in (1, 2):
            s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/snapshot-{snapshot}", Body=b"{}")
        s3.put_object(Bucket="lake", Key=f"{prefix}/snapshot/LATEST", Body=b"2")
        typo = f"s3://lake/{prefix[:-1]}"  # .../event
        server = TidemarkServer(database_url(tmp_path), tmp_path / "server.log").start()
        try:
            with Client(server.endpoint) as client:
                table_id = f"{unique('lake')}.events"

                def register(location: str, execute: bool) -> admin_pb2.RegisterTableResponse:
                    request = admin_pb2.RegisterTableRequest(table=table_id, location=location, execute=execute)
                    return client.admin.RegisterTable(request, metadata=client.metadata, timeout=10)

                def registered() -> list[str]:
                    answer = client.admin.ListTables(admin_pb2.ListTablesRequest(), metadata=client.metadata, timeout=10)
                    return [t.location for t in answer.tables if t.table == table_id]

                def cli(*args: str) -> subprocess.CompletedProcess:
                    return subprocess.run(
                        [tidemark_binary(), "tables", "register", table_id, typo, *args, "--server", server.endpoint],
                        capture_output=True,
                        text=True,
                        check=False,
                        timeout=60,
                    )

                plan = register(typo, execute=False)
                assert [w for w in plan.warnings if w.startswith("TABLE_LOCATION_EMPTY:")], plan.warnings
                refused = cli("--execute")
                assert refused.returncode == 4, (refused.returncode, refused.stderr)
                assert "TABLE_LOCATION_EMPTY" in refused.stderr and "--allow-missing" in refused.stderr, refused.stderr
                assert registered() == []
                allowed = cli("--execute", "--allow-missing")
                assert allowed.returncode == 0, (allowed.returncode, allowed.stderr)
                assert "TABLE_LOCATION_EMPTY" in allowed.stderr, allowed.stderr
                assert registered() == [typo]
                corrected = register(f"s3://lake/{prefix}", execute=True)
                assert not [w for w in corrected.warnings if w.startswith("TABLE_LOCATION_EMPTY:")], corrected.warnings
                assert (corrected.earliest_snapshot, corrected.latest_snapshot) == (1, 2), corrected
                assert registered() == [f"s3://lake/{prefix}"]
        finally:
            server.stop()


@pytest.fixture
def keeping_server(tmp_path):
    """A server whose keeper runs often, with a 2 s refresh interval: files
    of kept consumers must never get older than 1 s (checked with 2x margin)."""
    yield from serving(tmp_path, "--mirror-interval", "100ms", "--mirror-refresh", "2s")


KEEPER_REFRESH = 2.0


def file_age(path: str) -> float:
    return time.time() - os.stat(path).st_mtime


def test_the_keeper_holds_against_paimons_own_expiration_and_outside_changes(keeping_server, tmp_path, unique):
    """A table whose schema expires consumer files after 6 s (three refresh
    intervals). An idle query that only renews its lease, and a query in the
    middle of its initial full scan, keep their files through Paimon's own
    consumer expiration (ConsumerManager.expire, by modification time) run
    again and again; Paimon's snapshot-expiration rule run against the files
    keeps every snapshot at or above tidemark's fence, pin included; files
    deleted or overwritten from outside come back; a dropped branch is not
    re-created."""
    table = PaimonTable(tmp_path / "warehouse", unique("keeper"), options={"consumer.expiration-time": "6 s"})
    for _ in range(8):
        table.commit()
    with Client(keeping_server.endpoint) as client:
        registered = register(client, table)
        assert list(registered.warnings) == []
        idle = client.acquire_lease(table.id, "idle", holder="q-idle", ttl=5).lease
        commit_snapshot_end(client, idle, 0, 7)  # needs 8 and later
        wait_for(lambda: (manager(table).consumer("idle") or Consumer(0)).next_snapshot == 8, timeout=10, what="the idle consumer's file")
        # A second query starts a full scan of the latest snapshot (8): the
        # pin's file is there when the answer is.
        scanner = client.acquire_lease(table.id, "scanner", holder="q-scan", ttl=5).lease
        plan = client.get_recovery_position(table.id, "scanner", 1, 8, lease=scanner)
        assert plan.pinned and plan.start.snapshot_id == 8
        pin_id = f"tidemark~pin~{scanner.lease_id}"
        assert (manager(table).consumer(pin_id) or Consumer(0)).next_snapshot == 8

        # Both idle for four refresh intervals: only lease renewals.
        idle_file = f"{table.path}/consumer/consumer-idle"
        pin_file = f"{table.path}/consumer/consumer-{pin_id}"
        oldest = 0.0
        started = time.time()
        while time.time() - started < 4 * KEEPER_REFRESH:
            client.renew_lease(idle, ttl=5)
            client.renew_lease(scanner, ttl=5)
            oldest = max(oldest, file_age(idle_file), file_age(pin_file))
            # Paimon's own consumer expiration (consumer.expiration-time = 6 s).
            manager(table).expire(datetime.now() - timedelta(seconds=6))
            assert set(manager(table).consumers()) >= {"idle", pin_id}
            time.sleep(0.2)
        assert oldest < KEEPER_REFRESH, f"a kept file aged to {oldest:.2f}s"

        # Paimon's snapshot expiration: below min(nextSnapshot) of the files.
        fence = client.get_retention_fence(table.id, "main").snapshot_fence
        assert fence == 8 == manager(table).min_next_snapshot()
        table.expire_below(manager(table).min_next_snapshot())
        assert min(table.snapshot_ids()) == fence

        # Deleted from outside: written back. Overwritten (Paimon's own
        # reset_consumer): describe shows the file's real state, then it is
        # written back, and history says so.
        manager(table).delete_consumer("idle")
        wait_for(lambda: manager(table).consumer("idle") is not None, timeout=10, what="the deleted file back")
        seen_out_of_sync = False
        for _ in range(10):
            manager(table).reset_consumer("idle", Consumer(2))
            mirror = client.describe_consumer(table.id, "idle").mirror
            if mirror.file_next_snapshot == 2:
                assert not mirror.in_sync and mirror.file_state == "PRESENT"
                seen_out_of_sync = True
                break
            wait_for(lambda: manager(table).consumer("idle").next_snapshot == 8, timeout=10, what="the file put back")
        assert seen_out_of_sync
        wait_for(lambda: manager(table).consumer("idle").next_snapshot == 8, timeout=10, what="the file put back")
        events = [(e.event, e.old_next_snapshot, e.new_next_snapshot) for e in client.list_history(table.id, "idle")]
        assert ("MIRROR_REPAIR", 2, 8) in events

        # The scan completes: the consumer file replaces the pin's.
        client.commit_batch(scanner, 0, offset(8, 0, True, 1))
        wait_for(
            lambda: (manager(table).consumer("scanner") or Consumer(0)).next_snapshot == 9
            and manager(table).consumer(pin_id) is None,
            timeout=10,
            what="the scan's consumer file and no pin file",
        )

        # A dropped branch stays dropped.
        table.catalog.create_branch(table.id, "dev")
        dev = client.acquire_lease(table.id, "etl", holder="q-dev", branch="dev", ttl=5).lease
        commit_snapshot_end(client, dev, 0, 3)
        wait_for(lambda: (manager(table, "dev").consumer("etl") or Consumer(0)).next_snapshot == 4, timeout=10, what="the branch's consumer file")
        table.catalog.drop_branch(table.id, "dev")
        branch_dir = f"{table.path}/branch/branch-dev"
        assert not os.path.exists(branch_dir)
        commit_snapshot_end(client, dev, 1, 5)
        time.sleep(2 * KEEPER_REFRESH)
        assert not os.path.exists(branch_dir), "the keeper re-created a dropped branch"
        assert client.describe_consumer(table.id, "etl", branch="dev").mirror.file_state == "BRANCH_MISSING"
