"""The exactly-once checker (SPEC §12 X4; scripts/exactly-once.sh runs it).

Real Spark and real pypaimon: a writer appends to an append table and
upserts/deletes on a two-bucket primary-key table, continuously; a Spark
driver (scripts/exactly_once_query.py) runs a query per table into the sink
under test (PostgresSink or PaimonSink) with `tidemark.sink-columns=true`;
a fault loop SIGKILLs the driver inside foreachBatch before and after the
sink's commit and at random moments, deletes its checkpoints, restarts
tidemark, and makes zombies: it stalls a batch inside foreachBatch, revokes
the lease, runs a second query on the consumer until it has written, then
lets the stalled batch go on. At the end, with the writer stopped and a
last driver drained: the append sink must hold every source row exactly
once (multiset equality with a batch read), the primary-key sink must equal
the table's state, and no row may have landed after a newer epoch's write.

Prints `faults: ...` by kind, batches, rows, `duplicates: N`, `lost: N`,
`zombies refused: N`; exits 1 on any duplicate, loss or late zombie row.
`--mutant skip_position_check|skip_epoch_check` runs the sinks with that
check off: the run must then fail."""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))

from harness import PaimonTable, PrimaryKeyTable, TidemarkServer  # noqa: E402

KINDS = ["kill_before_commit", "kill_after_commit", "kill_random", "restart_tidemark", "zombie"]
SINKS = ("postgres", "paimon")
LANES = ("append", "pk")
DRIVER_WAIT = 120.0


class Checker:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="tidemark-exactly-once-"))
        self.server = TidemarkServer(f"sqlite://{self.dir / 'tidemark.db'}", self.dir / "server.log").start()
        warehouse = self.dir / "warehouse"
        self.append = PaimonTable(warehouse, "src", "events")
        self.pk = PrimaryKeyTable(warehouse, "src", "accounts", options={"bucket": "2"})
        self.sinks = SINKS if args.sink == "both" else (args.sink,)
        self.targets = {kind: self._sink_tables(kind) for kind in self.sinks}
        self.config = {
            "append": {"path": self.append.path, "consumer": "eo-append", "sinks": {}},
            "pk": {"path": self.pk.path, "consumer": "eo-pk", "sinks": {}},
        }
        for kind in self.sinks:
            self.config["append"]["sinks"][kind] = "events" if kind == "postgres" else "sink.events"
            self.config["pk"]["sinks"][kind] = "accounts" if kind == "postgres" else "sink.accounts"
        self.control = self.dir / "control"
        self.control.mkdir()
        self.events = self.dir / "events.jsonl"
        self.events.touch()
        self.faults = collections.Counter()
        self.generation = 0
        self.stop_writer = threading.Event()
        self.alive = {}

    # Set-up.

    def _sink_tables(self, kind: str) -> str:
        if kind == "postgres":
            import psycopg

            base = os.environ["DATABASE_URL"]
            schema = self.schema = f"eo_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
                conn.execute(
                    f"CREATE TABLE {schema}.events (seq bigserial, id bigint, part text, value text, written_epoch bigint)"
                )
                conn.execute(
                    f"CREATE TABLE {schema}.accounts (id bigint PRIMARY KEY, balance bigint, op text, written_epoch bigint)"
                )
            sep = "&" if "?" in base else "?"
            return base + sep + urllib.parse.urlencode({"options": f"-csearch_path={schema}"})
        import pyarrow as pa
        from pypaimon import CatalogFactory, Schema

        warehouse = str(self.dir / "sinks")
        catalog = CatalogFactory.create({"warehouse": warehouse})
        catalog.create_database("sink", True)
        catalog.create_table(
            "sink.events",
            Schema.from_pyarrow_schema(
                pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.string()), ("written_epoch", pa.int64())])
            ),
            False,
        )
        catalog.create_table(
            "sink.accounts",
            Schema.from_pyarrow_schema(
                pa.schema(
                    [
                        pa.field("id", pa.int64(), nullable=False),
                        ("balance", pa.int64()),
                        ("op", pa.string()),
                        ("written_epoch", pa.int64()),
                        ("rowkind", pa.string()),
                    ]
                ),
                primary_keys=["id"],
                options={"bucket": "2", "rowkind.field": "rowkind"},
            ),
            False,
        )
        return warehouse

    # The writer.

    def write_forever(self) -> None:
        while not self.stop_writer.is_set():
            self.append.commit(rows=6)
            keys = self.rng.sample(range(30), 3)
            changes = []
            for key in keys:
                if key in self.alive and self.rng.random() < 0.3:
                    changes.append(("-D", key, self.alive.pop(key)))
                else:
                    kind = "+U" if key in self.alive else "+I"
                    self.alive[key] = self.rng.randrange(10_000)
                    changes.append((kind, key, self.alive[key]))
            self.pk.write(changes)
            time.sleep(0.4)

    # Drivers.

    def driver(self, lanes: str = "append,pk", new_checkpoint: bool = False, drain: bool = False, max_splits: str = ""):
        if new_checkpoint or self.generation == 0:
            self.generation += 1
        env = dict(os.environ)
        if self.args.mutant:
            env["TIDEMARK_SINK_MUTANT"] = self.args.mutant
        command = [
            sys.executable, str(REPO / "scripts" / "exactly_once_query.py"),
            "--lanes", lanes, "--targets", json.dumps(self.targets),
            "--endpoint", self.server.endpoint, "--config", json.dumps(self.config),
            "--checkpoints", str(self.dir / "checkpoints" / f"gen-{self.generation}"),
            "--control", str(self.control), "--events", str(self.events),
        ]
        if drain:
            command.append("--drain")
        if max_splits:
            command += ["--max-splits", max_splits]
        log = open(self.dir / "drivers.log", "a")
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def read_events(self) -> list:
        return [json.loads(line) for line in self.events.read_text().splitlines() if line.strip()]

    def wait_batches(self, process, count: int, lane=None, timeout: float = DRIVER_WAIT) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = [
                e for e in self.read_events()
                if e["pid"] == process.pid and e["event"] == "batch" and (lane is None or e["lane"] == lane)
            ]
            if len(done) >= count:
                return True
            if process.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    @staticmethod
    def kill(process) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def stop(self, process) -> None:
        (self.control / f"stop-{process.pid}").touch()
        try:
            process.wait(DRIVER_WAIT)
        except subprocess.TimeoutExpired:
            self.kill(process)

    # Faults: each returns the next driver.

    def fault(self, kind: str, current, plan_mode: bool):
        self.faults[kind] += 1
        lane = self.rng.choice(LANES)
        if kind == "restart_tidemark":
            self.server.stop()
            time.sleep(self.rng.uniform(0.5, 2.0))
            self.server.start()
            return current
        if kind == "zombie":
            return self.zombie(current)
        if kind == "kill_random":
            time.sleep(self.rng.uniform(0.2, 3.0))
            self.kill(current)
        else:
            (self.control / f"kill-{'before' if kind == 'kill_before_commit' else 'after'}-{lane}").touch()
            try:
                current.wait(DRIVER_WAIT)
            except subprocess.TimeoutExpired:
                self.kill(current)
            for marker in self.control.glob("kill-*"):
                marker.unlink()
        # Some restarts lose the checkpoint (in the fixed plan: after the
        # kill past the sink's commit, the case a checkpoint can not undo).
        lose = kind == "kill_after_commit" if plan_mode else self.rng.random() < 0.4
        if lose:
            self.faults["checkpoint_deleted"] += 1
            shutil.rmtree(self.dir / "checkpoints" / f"gen-{self.generation}", ignore_errors=True)
        return self.driver(new_checkpoint=lose)

    def zombie(self, current):
        """The append query stalls inside foreachBatch; its lease is revoked
        and a second query on the consumer writes; then the first goes on."""
        from tidemark import Client
        from tidemark.v1 import admin_pb2, types_pb2

        (self.control / "stall-append").touch()
        deadline = time.monotonic() + DRIVER_WAIT
        while not (self.control / "stalled-append").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        client = Client(self.server.endpoint, timeout=10.0)
        client.admin.RevokeLease(
            admin_pb2.RevokeLeaseRequest(
                consumer=types_pb2.ConsumerKey(table=self.append.id, branch="main", consumer_id="eo-append"),
                reason="exactly-once checker: a second query takes the consumer",
                execute=True,
            ),
            timeout=10,
        )
        client.close()
        successor = self.driver(lanes="append", new_checkpoint=True, max_splits="1")
        self.wait_batches(successor, len(self.sinks), lane="append")
        (self.control / "release-append").touch()
        deadline = time.monotonic() + DRIVER_WAIT
        while time.monotonic() < deadline:
            if any(e["pid"] == current.pid and e["event"] in ("refused", "batch", "failed") and e.get("lane") == "append"
                   and e["t"] > os.path.getmtime(self.control / "release-append") for e in self.read_events()):
                break
            time.sleep(0.2)
        time.sleep(1.0)
        self.kill(current)
        self.stop(successor)
        for name in ("stall-append", "stalled-append", "release-append"):
            (self.control / name).unlink(missing_ok=True)
        return self.driver(new_checkpoint=True)

    # The run.

    def run(self) -> int:
        started = time.monotonic()
        writer = threading.Thread(target=self.write_forever, daemon=True)
        writer.start()
        current = self.driver()
        plan = list(KINDS)
        self.rng.shuffle(plan)
        while plan or time.monotonic() - started < self.args.duration:
            in_plan = bool(plan)
            kind = plan.pop(0) if plan else self.rng.choice(KINDS)
            if not self.wait_batches(current, 1):
                # A query ended under it (its lease lost while tidemark was
                # down past the ttl): a new driver, and the same fault again.
                print(f"a driver stopped before {kind}; starting another", file=sys.stderr)
                self.faults["driver_restarted"] += 1
                if in_plan:
                    plan.insert(0, kind)
                self.kill(current)
                current = self.driver()
                continue
            current = self.fault(kind, current, in_plan)
        self.stop_writer.set()
        writer.join()
        # The last driver catches up with the stopped writer, then stops.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not self.caught_up():
            if current.poll() is not None:
                current = self.driver()
            time.sleep(1.0)
        self.stop(current)
        return self.report(started)

    def caught_up(self) -> bool:
        source_ids, source_state = self.append.live_ids(), self.pk.content()
        for kind in self.sinks:
            ids, _, state = self.sink_state(kind)
            if len(ids) < len(source_ids) or state != source_state:
                return False
        return True

    def sink_state(self, kind: str):
        if kind == "postgres":
            import psycopg

            with psycopg.connect(self.targets[kind]) as conn:
                rows = conn.execute("SELECT id, written_epoch FROM events ORDER BY seq").fetchall()
                state = dict(conn.execute("SELECT id, balance FROM accounts").fetchall())
            return [r[0] for r in rows], [r[1] for r in rows], state
        from pypaimon import CatalogFactory

        catalog = CatalogFactory.create({"warehouse": self.targets[kind]})
        events = catalog.get_table("sink.events")
        ids = _read(events).column("id").to_pylist()
        manager = events.snapshot_manager()
        epochs = []
        for snapshot_id in range(1, (manager.get_latest_snapshot() or type("s", (), {"id": 0})).id + 1):
            snapshot = manager.get_snapshot_by_id(snapshot_id)
            for key, value in ((snapshot.properties or {}) if snapshot else {}).items():
                if key.startswith("tidemark.sink.progress."):
                    progress = json.loads(value)
                    epochs.append(progress.get("batch_epoch", progress["epoch"]))
        accounts = _read(catalog.get_table("sink.accounts")).to_pylist()
        return ids, epochs, {r["id"]: r["balance"] for r in accounts}

    def report(self, started: float) -> int:
        source_ids = self.append.live_ids()
        source_state = self.pk.content()
        events = self.read_events()
        print(f"{time.monotonic() - started:.0f} s{' (mutant ' + self.args.mutant + ')' if self.args.mutant else ''}, "
              f"work in {self.dir}")
        print("faults: " + ", ".join(f"{k}={self.faults[k]}" for k in [*KINDS, "checkpoint_deleted"])
              + f" (drivers restarted after a query ended: {self.faults['driver_restarted']})")
        failed = False
        for kind in self.sinks:
            ids, epochs, state = self.sink_state(kind)
            counts = collections.Counter(ids)
            known = set(source_ids)
            duplicates = sum(n - 1 for n in counts.values() if n > 1) + sum(n for i, n in counts.items() if i not in known)
            lost = len(known - set(counts))
            wrong_keys = [k for k in set(source_state) | set(state) if source_state.get(k) != state.get(k)]
            late = sum(1 for i in range(1, len(epochs)) if epochs[i] < max(epochs[:i]))
            mine = [e for e in events if kind in e.get("sink", "").lower()]
            zombies = sum(1 for e in mine if e["event"] == "refused" and e.get("reason") == "ZOMBIE_BATCH")
            batches = sum(1 for e in mine if e["event"] == "batch")
            print(f"[{kind}] batches: {batches}")
            print(f"[{kind}] rows: {len(ids)} appended (source {len(source_ids)}), {len(state)} keys (source {len(source_state)})")
            print(f"[{kind}] duplicates: {duplicates}")
            print(f"[{kind}] lost: {lost}")
            print(f"[{kind}] primary-key rows differing from the table: {len(wrong_keys)}")
            print(f"[{kind}] rows after a newer epoch's write: {late}")
            print(f"[{kind}] zombies refused: {zombies}")
            failed = failed or bool(duplicates or lost or wrong_keys or late)
        # A zombie is refused by the first sink it reaches.
        refused = sum(1 for e in events if e["event"] == "refused" and e.get("reason") == "ZOMBIE_BATCH")
        if self.faults["zombie"] and not refused:
            print("no zombie was refused")
            failed = True
        print("FAILED" if failed else "passed")
        if not failed and not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
            if "postgres" in self.targets:
                import psycopg

                with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA {self.schema} CASCADE")
        self.server.stop()
        return 1 if failed else 0


def _read(table):
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=0.0, help="seconds; each fault kind runs at least once")
    parser.add_argument("--sink", choices=["postgres", "paimon", "both"], default="both")
    parser.add_argument("--mutant", choices=["skip_position_check", "skip_epoch_check"])
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    print(f"seed: {args.seed}")
    return Checker(args).run()


if __name__ == "__main__":
    sys.exit(main())
