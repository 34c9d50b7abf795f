"""The console behind a round-robin Service: three replicas on one database
behind HAProxy balancing every request in turn (as a Service without
session affinity, with a readiness check), a real browser (Debian's
chromium through chromium-driver) signed in once.

The session lives in the database, so it keeps working across 20 page
loads spread over all three replicas, one of them restarted in between;
and signing out through any replica ends it on every replica at once."""

from __future__ import annotations

import csv
import io
import os
import pathlib
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from selenium.webdriver.common.by import By

from harness import TidemarkServer, free_port, wait_for
from conftest import database_url
from test_console import TOKENS, auth_file, browser, click_and_wait, sign_in  # noqa: F401 (fixture)

REPLICAS = 3
PAGE_LOADS = 20


def haproxy_binary() -> str:
    path = os.environ.get("HAPROXY")
    if not path or not pathlib.Path(path).exists():
        pytest.fail("HAProxy is needed (scripts/test.sh fetches it: source scripts/lib/tools.sh; ensure_haproxy)")
    return path


def haproxy_config(front: int, stats: int, consoles: list) -> str:
    servers = "\n".join(
        f"  server r{i} 127.0.0.1:{port} check inter 200ms fall 1 rise 1" for i, port in enumerate(consoles)
    )
    statics = servers.replace("server r", "server s")
    return f"""global
  maxconn 256
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  # A new server connection for every request, so every request is
  # balanced on its own; a request to a replica that just went away is
  # sent to another, as a Service's retry would.
  option http-server-close
  retries 3
  option redispatch 1
frontend console
  bind 127.0.0.1:{front}
  # A page's stylesheet and script (no session needed) are balanced apart,
  # so the pages themselves take turns over the replicas.
  use_backend statics if {{ path_beg /static/ }}
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /static/console.css
{servers}
backend statics
  balance roundrobin
  option httpchk GET /static/console.css
{statics}
listen stats
  bind 127.0.0.1:{stats}
  stats enable
  stats uri /stats
"""


def served_per_replica(stats_port: int) -> dict:
    """Requests each replica answered so far, from HAProxy's own count."""
    with urllib.request.urlopen(f"http://127.0.0.1:{stats_port}/stats;csv", timeout=5) as answer:
        text = answer.read().decode()
    rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
    return {r["svname"]: int(r["stot"] or 0) for r in rows if r["pxname"] == "replicas" and r["svname"].startswith("r")}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def direct_status(port: int, cookie: str) -> tuple:
    """A replica's answer to `/` with the session cookie, bypassing the
    balancer: (status, where it redirects)."""
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Cookie": f"tidemark_console={cookie}"})
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status, ""
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", "")


@pytest.fixture
def behind_a_service(tmp_path):
    auth = auth_file(tmp_path / "auth.toml", TOKENS)
    url = database_url(tmp_path)
    consoles = [free_port() for _ in range(REPLICAS)]
    replicas = [
        TidemarkServer(
            url,
            tmp_path / f"replica-{i}.log",
            extra_args=[
                "--auth-file",
                str(auth),
                "--console-listen",
                f"127.0.0.1:{port}",
                "--console-refresh",
                "0s",
                "--sweep-interval",
                "0s",
                "--shutdown-drain",
                "300ms",
            ],
        )
        for i, port in enumerate(consoles)
    ]
    for replica in replicas:
        replica.start()
    front, stats = free_port(), free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(front, stats, consoles))
    log = open(tmp_path / "haproxy.log", "wb")
    balancer = subprocess.Popen([haproxy_binary(), "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        def answering() -> bool:
            try:
                return len(served_per_replica(stats)) == REPLICAS
            except OSError:
                return False

        wait_for(answering, 10, "HAProxy's stats")
        yield {"base": f"http://127.0.0.1:{front}", "stats": stats, "consoles": consoles, "replicas": replicas}
    finally:
        balancer.terminate()
        balancer.wait(timeout=10)
        log.close()
        for replica in replicas:
            replica.stop()


def test_a_session_works_on_every_replica_across_a_restart_and_ends_everywhere_at_sign_out(behind_a_service, browser):
    base, stats = behind_a_service["base"], behind_a_service["stats"]
    browser.delete_all_cookies()
    sign_in(browser, base, TOKENS["dbview"][0])
    assert urllib.parse.urlparse(browser.current_url).path == "/", browser.current_url
    cookie = browser.get_cookie("tidemark_console")["value"]
    before = served_per_replica(stats)

    restarted = behind_a_service["replicas"][1]
    for load in range(PAGE_LOADS):
        if load == PAGE_LOADS // 2:
            # A replica restarts (a rollout's pod, a crash): its sessions
            # were never its own.
            restarted.stop()
            restarted.start()
        browser.get(base + "/")
        path = urllib.parse.urlparse(browser.current_url).path
        assert path == "/", f"page load {load + 1} of {PAGE_LOADS} ended at {browser.current_url}"
        assert "dbview" in browser.find_element(By.TAG_NAME, "header").text, f"page load {load + 1}: not signed in"

    after = served_per_replica(stats)
    served = {name: after[name] - before.get(name, 0) for name in after}
    assert all(n >= 3 for n in served.values()), f"the page loads were not spread over the replicas: {served}"

    # The same session, on each replica directly.
    for port in behind_a_service["consoles"]:
        assert direct_status(port, cookie) == (200, ""), f"replica on {port} refused the session"

    # Sign-out through whichever replica the balancer picks ends it on all.
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "form[action='/signout'] button"))
    assert urllib.parse.urlparse(browser.current_url).path == "/signin"
    for port in behind_a_service["consoles"]:
        status, location = direct_status(port, cookie)
        assert status in (302, 303, 307) and location.endswith("/signin"), (port, status, location)
    browser.get(base + "/")
    assert urllib.parse.urlparse(browser.current_url).path == "/signin"
