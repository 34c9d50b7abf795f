"""An HTTP proxy in front of an S3-compatible server that holds every PUT for
a while before passing it on (GET, HEAD, LIST and DELETE pass at once), as a
store under load answers writes late: a writer's put then lands after other
writers' later changes, which is the interleaving the object-store tests
need to see often.

    python slow_puts_proxy.py LISTEN_PORT TARGET_PORT PUT_DELAY_MS
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def serve(listen_port: int, target_port: int, put_delay: float) -> None:
    local = threading.local()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args):  # quiet
            pass

        def _upstream(self) -> http.client.HTTPConnection:
            if getattr(local, "connection", None) is None:
                local.connection = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
            return local.connection

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if self.command == "PUT":
                time.sleep(put_delay)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            for attempt in range(2):
                try:
                    upstream = self._upstream()
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                    break
                except (http.client.HTTPException, OSError):
                    local.connection = None
                    if attempt:
                        raise
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", listen_port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) / 1000.0)
