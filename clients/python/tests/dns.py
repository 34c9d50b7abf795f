"""A small authoritative DNS server on loopback for tests: it answers A
queries for the names it holds with their current addresses (TTL 0), as the
cluster DNS answers for a headless Service's ready pods, and every other
query with an empty NOERROR answer (NXDOMAIN for unknown names)."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Dict, List


class DnsServer:
    def __init__(self) -> None:
        self.records: Dict[str, List[str]] = {}
        self.queries = 0
        self._lock = threading.Lock()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name="test-dns", daemon=True)

    def __enter__(self) -> "DnsServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped = True
        self._socket.close()

    def set(self, name: str, addresses: List[str]) -> None:
        with self._lock:
            self.records[name.lower().rstrip(".")] = list(addresses)

    def _serve(self) -> None:
        while not self._stopped:
            try:
                query, peer = self._socket.recvfrom(512)
            except OSError:
                return
            try:
                self._socket.sendto(self._answer(query), peer)
            except (OSError, ValueError, IndexError, struct.error):
                continue

    def _answer(self, query: bytes) -> bytes:
        ident, _flags, qdcount = struct.unpack("!HHH", query[:6])
        if qdcount != 1:
            raise ValueError("one question per query")
        labels, i = [], 12
        while query[i] != 0:
            length = query[i]
            labels.append(query[i + 1 : i + 1 + length].decode("ascii"))
            i += 1 + length
        question_end = i + 5
        qtype, _qclass = struct.unpack("!HH", query[i + 1 : question_end])
        question = query[12:question_end]
        name = ".".join(labels).lower()
        with self._lock:
            self.queries += 1
            addresses = self.records.get(name)
        # Response, authoritative, recursion available; NXDOMAIN if unknown.
        rcode = 0 if addresses is not None else 3
        answers = b""
        count = 0
        if addresses and qtype == 1:
            for address in addresses:
                # A pointer to the question's name, type A, class IN, TTL 0.
                answers += struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(address)
                count += 1
        header = struct.pack("!HHHHHH", ident, 0x8580 | rcode, 1, count, 0, 0)
        return header + question + answers
