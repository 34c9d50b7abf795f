"""A6 (SPEC §11) on a real Paimon table written by pypaimon 2.1.0: `tidemark
consumers reset --to-datetime` (the real CLI) moves the selected consumers to
the first snapshot committed at or after the time, by the commit times
pypaimon recorded, with the same rule the Spark source's from-timestamp
start uses; `--to-earliest` on an unregistered table is refused with exit
code 4 (FAILED_PRECONDITION, TABLE_NOT_REGISTERED) and changes nothing."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timezone

from harness import PaimonTable, tidemark_binary

from tidemark import Client
from tidemark.paimon_plan import first_snapshot_at_or_after
from tidemark.v1 import admin_pb2, types_pb2


def cli(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tidemark_binary(), "consumers", *args, "--server", server.endpoint, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )


def test_to_datetime_on_a_pypaimon_table_and_refusal_when_unregistered(own_server, tmp_path, unique):
    database = unique("bulk")
    table = PaimonTable(tmp_path / "warehouse", database)
    commit_times = {}
    for _ in range(4):
        snapshot = table.commit()
        commit_times[snapshot] = table.table.snapshot_manager().get_snapshot_by_id(snapshot).time_millis
        time.sleep(0.05)
    client = Client(own_server.endpoint, timeout=10.0)
    client.admin.RegisterTable(
        admin_pb2.RegisterTableRequest(table=table.id, location=table.path, execute=True), timeout=10
    )
    for consumer_id in ["etl-1", "etl-2", "other"]:
        client.admin.ResetConsumer(
            admin_pb2.ResetConsumerRequest(
                consumer=types_pb2.ConsumerKey(table=table.id, consumer_id=consumer_id),
                next_snapshot=1,
                execute=True,
            ),
            timeout=10,
        )
    # Half way between the second and the third commit.
    at_millis = (commit_times[2] + commit_times[3]) // 2
    expected = first_snapshot_at_or_after(sorted(commit_times.items()), at_millis)
    assert expected == 3
    at = datetime.fromtimestamp(at_millis / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    plan = cli(own_server, "reset", table.id, "--including", "etl-.*", "--to-datetime", at)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["executed"] is False
    assert sorted((c["consumer"]["consumerId"], c["newNextSnapshot"]) for c in planned["reset"]) == [
        ("etl-1", str(expected)),
        ("etl-2", str(expected)),
    ]
    done = cli(own_server, "reset", table.id, "--including", "etl-.*", "--to-datetime", at, "--execute")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["executed"] is True
    listed = client.admin.ListConsumers(admin_pb2.ListConsumersRequest(table=table.id), timeout=10)
    positions = {c.key.consumer_id: c.consumer.next_snapshot for c in listed.consumers}
    assert positions == {"etl-1": expected, "etl-2": expected, "other": 1}

    # Not registered: refused, exit code 4, nothing changed.
    client.admin.ResetConsumer(
        admin_pb2.ResetConsumerRequest(
            consumer=types_pb2.ConsumerKey(table=f"{database}.unregistered", consumer_id="x"),
            next_snapshot=2,
            execute=True,
        ),
        timeout=10,
    )
    refused = cli(own_server, "reset", f"{database}.unregistered", "--to-earliest", "--execute")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "TABLE_NOT_REGISTERED" in refused.stderr
    listed = client.admin.ListConsumers(admin_pb2.ListConsumersRequest(table=f"{database}.unregistered"), timeout=10)
    assert [c.consumer.next_snapshot for c in listed.consumers] == [2]
    client.close()
