"""Balancing by connection with the Python SDK and real DNS (issue 19):
three `tidemark serve` replicas on 127.0.0.2, .3 and .4 on one port, a
small DNS server answering for a headless Service's name with the replicas
that are ready, and grpcio resolving through it (`dns://<server>/<name>`).
A replica added later gets its share of connections within two max
connection ages; workers see zero failed calls across connection rotations
and a rolling restart of every replica."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

from dns import DnsServer
from harness import TidemarkServer

from tidemark import Client, TidemarkError
from tidemark.client import offset

MAX_AGE = 3.0
WORKERS = 12
NAME = "tidemark-headless.test"
REPLICAS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def common_port() -> int:
    while True:
        with socket.socket() as probe:
            probe.bind((REPLICAS[0], 0))
            port = probe.getsockname()[1]
            try:
                for host in REPLICAS[1:]:
                    with socket.socket() as other:
                        other.bind((host, port))
                return port
            except OSError:
                continue


def connections(port: int) -> list:
    """Established TCP connections per replica, on the servers' side."""
    counts = [0, 0, 0]
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, state = fields[1], fields[3]
            ip_hex, port_hex = local.split(":")
            if state != "01" or int(port_hex, 16) != port:
                continue
            ip = str(ipaddress.IPv4Address(int(ip_hex, 16).to_bytes(4, "little")))
            if ip in REPLICAS:
                counts[REPLICAS.index(ip)] += 1
    return counts


def test_connections_spread_to_a_new_replica_and_survive_a_rolling_restart(tmp_path, unique):
    from conftest import database_url

    url = database_url(tmp_path)
    port = common_port()
    args = ["--max-connection-age", f"{int(MAX_AGE)}s", "--shutdown-drain", "1s", "--sweep-interval", "0s"]
    replicas = [
        TidemarkServer(url, tmp_path / f"replica-{n}.log", args, host=host, port=port) for n, host in enumerate(REPLICAS)
    ]
    stop = threading.Event()
    failures: list = []
    calls = [0]
    prefix = unique("balance")

    def worker(n: int, endpoint: str) -> None:
        client = Client(endpoint, timeout=10.0)
        try:
            lease = client.acquire_lease(f"db.{prefix}", f"w{n}", holder=f"worker-{n}").lease
            batch = 0
            while not stop.is_set():
                batch += 1
                try:
                    client.commit_batch(lease, batch, offset(batch + 1, 0, False, 1), latest_snapshot=batch + 5)
                    if batch % 10 == 0:
                        client.renew_lease(lease)
                except TidemarkError as error:
                    failures.append(f"worker {n}: {error}")
                calls[0] += 1
                time.sleep(0.02)
        except TidemarkError as error:
            failures.append(f"worker {n} acquire: {error}")
        finally:
            client.close()

    with DnsServer() as dns:
        for replica in replicas[:2]:
            replica.start()
        dns.set(NAME, REPLICAS[:2])
        endpoint = f"dns://127.0.0.1:{dns.port}/{NAME}:{port}"
        threads = [threading.Thread(target=worker, args=(n, endpoint), daemon=True) for n in range(WORKERS)]
        try:
            for thread in threads:
                thread.start()
            time.sleep(1.5)
            before = connections(port)
            print(f"two replicas: {before}")
            assert before[2] == 0
            assert sum(before) == WORKERS, f"one connection per worker: {before}"

            replicas[2].start()
            dns.set(NAME, REPLICAS)
            # Sampled every 250 ms for two max ages: the most the new replica
            # held (reconnections pick at random; one sample could be unlucky).
            best, joined = connections(port), time.monotonic()
            while time.monotonic() - joined < 2 * MAX_AGE:
                time.sleep(0.25)
                now = connections(port)
                if now[2] > best[2]:
                    best = now
            print(f"two max ages after adding a replica, at best: {best}; now {connections(port)}")
            assert best[2] >= WORKERS // 6, f"the new replica's connections at best: {best}"

            for n, replica in enumerate(replicas):
                dns.set(NAME, [r for r in REPLICAS if r != REPLICAS[n]])
                replica.stop()
                replica.start()
                dns.set(NAME, REPLICAS)
                time.sleep(0.5)
            time.sleep(2 * MAX_AGE)
            print(f"after a rolling restart: {connections(port)}; {dns.queries} DNS queries")
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            for replica in replicas:
                replica.stop()
    print(f"{calls[0]} calls, {len(failures)} failed")
    assert calls[0] > 500
    assert not failures, failures[:5]
