"""An HTTP proxy in front of an S3-compatible server that holds every PUT for
a while before passing it on (GET, HEAD, LIST and DELETE pass at once), as a
store under load answers writes late: a writer's put then lands after other
writers' later changes, which is the interleaving the object-store tests
need to see often.

    python slow_puts_proxy.py LISTEN_PORT TARGET_PORT PUT_DELAY_MS [--log FILE] [--answer-lost]
                              [--hang-while FILE]

--log FILE appends "PUT <path>" to FILE as each PUT arrives (before it is
held), so a test can act while a given put is in flight.
--answer-lost passes each PUT on twice and answers with the second reply:
the first lands, its answer is "lost" and the writer's retry is what it
hears (a conditional put then fails its condition against its own write),
as a store answering 500 after committing, or a dropped connection, makes
a client's retry do.
--hang-while FILE holds every request unanswered for as long as FILE exists
(the connection accepted, no byte sent back), as a store behind a network
partition or a black-holed endpoint does.
"""

from __future__ import annotations

import argparse
import http.client
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def serve(
    listen_port: int, target_port: int, put_delay: float, log: str | None, answer_lost: bool, hang_while: str | None
) -> None:
    local = threading.local()
    log_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args):  # quiet
            pass

        def _upstream(self) -> http.client.HTTPConnection:
            if getattr(local, "connection", None) is None:
                local.connection = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
            return local.connection

        def _send_upstream(self, body, headers) -> tuple:
            """One request upstream (again once on a fresh connection if the
            kept one was closed); (response, its body)."""
            for attempt in range(2):
                try:
                    upstream = self._upstream()
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    return response, response.read()
                except (http.client.HTTPException, OSError):
                    local.connection = None
                    if attempt:
                        raise
            raise AssertionError("unreachable")

        def _forward(self) -> None:
            if hang_while:
                while os.path.exists(hang_while):
                    time.sleep(0.05)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if self.command == "PUT":
                if log:
                    with log_lock, open(log, "a") as f:
                        f.write(f"PUT {self.path}\n")
                time.sleep(put_delay)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if self.command == "PUT" and answer_lost:
                self._send_upstream(body, headers)  # lands; its answer is lost
            response, payload = self._send_upstream(body, headers)
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _forward_unless_gone(self) -> None:
            try:
                self._forward()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a held request past its timeout)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward_unless_gone

    server = ThreadingHTTPServer(("127.0.0.1", listen_port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("listen_port", type=int)
    parser.add_argument("target_port", type=int)
    parser.add_argument("put_delay_ms", type=int)
    parser.add_argument("--log")
    parser.add_argument("--answer-lost", action="store_true")
    parser.add_argument("--hang-while")
    args = parser.parse_args()
    serve(args.listen_port, args.target_port, args.put_delay_ms / 1000.0, args.log, args.answer_lost, args.hang_while)
