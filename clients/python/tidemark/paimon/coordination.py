"""Everything the source asks tidemark: the consumer's lease for the query's
life (kept alive, released on SIGTERM), where a query without a checkpoint
starts, whether a logged batch may be replayed (SPEC R4), every commit, and
the commit log. The only module of the source that imports the client and
the protos; it runs on Spark's source runner only."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
import uuid
from typing import Callable, Optional, Tuple

from tidemark.client import Client, RetryPolicy, legacy_offset, offset
from tidemark.errors import TidemarkError
from tidemark.paimon.errors import QueryFailed
from tidemark.paimon.offsets import BEFORE_FIRST_SPLIT, Offset
from tidemark.paimon.options import SourceOptions
from tidemark.paimon.table import TableSnapshots
from tidemark.v1 import coordinator_pb2

LOG = logging.getLogger("tidemark.paimon_source")

# What a replay check sends before it knows the startup options are needed
# (check_replay asks again with the real ones when the server falls back to
# them).
UNUSED_STARTUP = ("latest", 0)

# Reasons of a replay check that fail the query with tidemark's guidance.
REPLAY_REFUSALS = ("REPLAY_SCAN_MISMATCH", "REPLAY_RANGE_EXPIRED", "POSITION_EXPIRED")


def _read(path: Optional[str]) -> Optional[bytes]:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()



def _pb_offset(o: Offset):
    """An offset as the API takes it: one restored from an older checkpoint
    has no split count, and goes as a legacy offset on purpose (the server
    keeps the consumer where it is and says so)."""
    if o.total is None:
        return legacy_offset(o.snapshot, o.index, o.full)
    return offset(o.snapshot, o.index, o.full, o.total)

class Coordination:
    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.holder: Optional[str] = opts.holder
        self.lease = None
        self._client: Optional[Client] = None
        self._keeper = None
        self.commit_latencies = []

    def client(self) -> Client:
        if self._client is None:
            self._client = Client(
                self.opts.endpoint,
                token=self.opts.token,
                ca=_read(self.opts.tls_ca),
                cert=_read(self.opts.tls_cert),
                key=_read(self.opts.tls_key),
                timeout=self.opts.call_timeout,
                retry=RetryPolicy(budget=self.opts.retry_budget),
            )
        return self._client

    @property
    def epoch(self) -> int:
        return self.lease.epoch

    def ensure_lease(self, holder: Optional[str]) -> str:
        """Takes the consumer's lease for the query's life (once per runner);
        fails the query once it was lost. Returns the query's holder."""
        if self.lease is not None:
            if self._keeper is not None and self._keeper.lost.is_set():
                raise QueryFailed(
                    f"tidemark lease on consumer {self.opts.consumer_id!r} was lost "
                    f"({self._keeper.error}); another query owns it now, so this one stops"
                )
            return self.holder
        self.holder = holder or self.holder or f"spark-{uuid.uuid4()}"
        client = self.client()
        sent_at = time.monotonic()
        try:
            response = client.acquire_lease(
                self.opts.table_id, self.opts.consumer_id, self.holder, branch=self.opts.branch, ttl=self.opts.lease_ttl
            )
        except TidemarkError as error:
            if error.reason == "LEASE_HELD":
                raise QueryFailed(
                    f"tidemark LEASE_HELD: consumer {self.opts.consumer_id!r} of {self.opts.table_id} is held "
                    "by another query "
                    f"(holder {error.metadata.get('holder')!r}, {error.metadata.get('remaining_ms')} ms left): "
                    "one query per consumer. Stop the other query, or use another consumer-id"
                ) from error
            raise
        self.lease = response.lease
        self._keeper = client.keep_lease(self.lease, sent_at=sent_at)
        self._release_on_sigterm()
        LOG.info("tidemark lease on %s/%s, epoch %s, holder %s", self.opts.table_id,
                 self.opts.consumer_id, self.lease.epoch, self.holder)
        return self.holder

    def _release_on_sigterm(self) -> None:
        # Spark stops the runner with SIGTERM rather than calling stop();
        # release the lease then so the next query starts at once (the
        # lease would expire on its own anyway).
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.stop()
            finally:
                if callable(previous) and previous not in (signal.SIG_IGN, signal.SIG_DFL):
                    previous(signum, frame)
                raise SystemExit(0)

        try:
            signal.signal(signal.SIGTERM, on_term)
        except ValueError:
            pass

    def _recovery_position(self, snapshots: TableSnapshots, startup: Tuple[str, int], **kwargs):
        """GetRecoveryPosition with what this query sees of the table: its
        snapshots and, when changelogs outlive them, its earliest changelog
        (from which a delta read can still start; SPEC R2)."""
        earliest, latest = snapshots.range()
        mode, snapshot = startup
        return self.client().get_recovery_position(
            self.opts.table_id,
            self.opts.consumer_id,
            earliest,
            latest,
            branch=self.opts.branch,
            earliest_changelog=snapshots.earliest_changelog(),
            changelog_decoupled=snapshots.decoupled,
            startup_mode=coordinator_pb2.StartupMode.Value("STARTUP_MODE_" + mode.upper().replace("-", "_")),
            snapshot_id=snapshot,
            ignore_progress=self.opts.ignore_progress,
            lease=self.lease,
            clamp_to_earliest=self.opts.clamp,
            **kwargs,
        )

    def start(self, snapshots: TableSnapshots, startup: Tuple[str, int], exact: bool = False) -> Offset:
        """Where a query without a checkpoint starts (R1-R3). `exact`: a
        start from the startup options must be the snapshot asked for (a
        tag's; R3 moves a full scan of an expired one to the earliest)."""
        response = self._recovery_position(snapshots, startup)
        for warning in response.warnings:
            LOG.warning("tidemark: %s", warning)
        start = response.start
        LOG.info("starting %s/%s at snapshot %s (%s, %s)", self.opts.table_id, self.opts.consumer_id,
                 start.snapshot_id, "full" if start.scan_snapshot else "delta",
                 coordinator_pb2.RecoverySource.Name(response.source))
        if exact and response.source == coordinator_pb2.RECOVERY_SOURCE_STARTUP_OPTIONS and (
            start.snapshot_id != startup[1]
        ):
            raise QueryFailed(
                f"snapshot {startup[1]} of {self.opts.table_id} expired before this query started from it "
                f"(tidemark would start at {start.snapshot_id}); see option \"scan.tag-name\""
            )
        return Offset(start.snapshot_id, BEFORE_FIRST_SPLIT, start.scan_snapshot, None, self.holder)

    def check_replay(
        self, snapshots: TableSnapshots, startup: Callable[[], Tuple[str, int]], start: Offset, end: Offset
    ) -> Optional[Offset]:
        """R4: before planning a batch this runner did not plan itself (the
        logged batch Spark replays after a restart), ask tidemark whether it
        can be replayed exactly. None: replay it as logged; otherwise the
        start tidemark falls back to. Fails with tidemark's guidance.

        The startup options matter only when the server falls back to them
        (no readable checkpoint and no consumer), so `startup` is called only
        then: a `compacted-full` query does not walk back to its compaction,
        and a tag's expiry does not fail, on every restart."""
        try:
            response = self._replay_check(snapshots, UNUSED_STARTUP, start, end)
        except QueryFailed:
            response = None  # a refusal may come of the start it fell back to
        if response is None or response.source == coordinator_pb2.RECOVERY_SOURCE_STARTUP_OPTIONS:
            response = self._replay_check(snapshots, startup(), start, end)
        if response.source == coordinator_pb2.RECOVERY_SOURCE_CHECKPOINT:
            return None
        for warning in response.warnings:
            LOG.warning("tidemark: %s", warning)
        s = response.start
        return Offset(s.snapshot_id, s.index, s.scan_snapshot,
                      s.total_splits if s.HasField("total_splits") else None, self.holder)

    def _replay_check(self, snapshots: TableSnapshots, startup: Tuple[str, int], start: Offset, end: Offset):
        try:
            return self._recovery_position(
                snapshots,
                startup,
                checkpoint=(
                    _pb_offset(start),
                    _pb_offset(end),
                ),
            )
        except TidemarkError as error:
            if error.reason in REPLAY_REFUSALS:
                raise QueryFailed(f"tidemark {error.reason}: {error.message}") from error
            raise

    def commit(self, end: Offset, latest: int) -> None:
        """CommitBatch for a batch Spark committed (a failure fails the query)."""
        started = time.perf_counter()
        response = self.client().commit_batch(
            self.lease, end.batch_id, _pb_offset(end), latest_snapshot=latest
        )
        latency = time.perf_counter() - started
        self.commit_latencies.append(latency)
        for warning in response.warnings:
            LOG.warning("tidemark: %s", warning)
        outcome = coordinator_pb2.CommitOutcome.Name(response.outcome)
        LOG.info("committed %s to %s/%s: %s in %.1f ms", end, self.opts.table_id, self.opts.consumer_id,
                 outcome, latency * 1e3)
        if self.opts.commit_log:
            self._log_commit(end, outcome, response, latency)

    def _log_commit(self, end: Offset, outcome: str, response, latency: float) -> None:
        """Appends one JSON line per commit (an audit trail of what the query
        reported, with the round trip as seen from commit())."""
        record = {
            "end": {k: v for k, v in end.to_json().items() if k not in ("holder", "batchFingerprint")},
            "batch_fingerprint": end.fingerprint,
            "batch_id": end.batch_id,
            "outcome": outcome,
            "next_snapshot": response.next_snapshot if response.HasField("next_snapshot") else None,
            "latency_ms": round(latency * 1e3, 3),
        }
        with open(self.opts.commit_log, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

    def stop(self) -> None:
        keeper, lease = self._keeper, self.lease
        self._keeper, self.lease = None, None
        if keeper is not None and lease is not None:
            try:
                keeper.release()
                LOG.info("released the tidemark lease on %s/%s", self.opts.table_id, self.opts.consumer_id)
            except Exception as error:  # the lease expires on its own
                LOG.warning("could not release the tidemark lease: %s", error)
