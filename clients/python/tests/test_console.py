"""The operators' console in a real browser: Debian's chromium, driven by
Selenium through chromium-driver, against the real binary with credentials.

The store is seeded through the API (two tables in a viewer's scope and one
outside it, leased and idle consumers, a full-scan pin, an expired consumer,
a table and a holder named to inject markup), and every page is checked
against what the API reports for the same store. Screenshots go to
target/console-screenshots/ (scripts/console-screenshots.sh copies them into
docs/console/)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from harness import REPO, PaimonTable, TidemarkServer, free_port, wait_for
from tidemark import Client
from tidemark.v1 import admin_pb2, retention_pb2, types_pb2

from conftest import database_url

TOKENS = {
    "ops": ("tdm_console_operator", "operator", []),
    "dbview": ("tdm_console_viewer", "viewer", ["db.*"]),
    "etl": ("tdm_console_worker", "worker", []),
}
HOSTILE_TABLE = "db.<img src=x onerror=alert(1)>"
HOSTILE_HOLDER = "</td><script>alert(1)</script>"
SHOTS = REPO / "target" / "console-screenshots"


def auth_file(path: pathlib.Path, names) -> pathlib.Path:
    lines = []
    for name in names:
        token, role, tables = TOKENS[name]
        lines += [
            "[[token]]",
            f'name = "{name}"',
            f'sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"',
            f'roles = ["{role}"]',
            "tables = [" + ", ".join(f'"{t}"' for t in tables) + "]",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def offset(snapshot: int) -> types_pb2.Offset:
    return types_pb2.Offset(snapshot_id=snapshot, index=0, scan_snapshot=False, total_splits=1)


def commit(client: Client, lease, batch: int, snapshot: int, latest: int):
    return client.commit_batch(lease, batch, offset(snapshot), latest_snapshot=latest)


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    directory = tmp_path_factory.mktemp("console")
    auth = auth_file(directory / "auth.toml", TOKENS)
    console_port = free_port()
    server = TidemarkServer(
        database_url(directory),
        directory / "server.log",
        extra_args=[
            "--auth-file",
            str(auth),
            "--console-listen",
            f"127.0.0.1:{console_port}",
            "--console-refresh",
            "1s",
            "--sweep-interval",
            "0s",
            "--reload-interval",
            "0s",
        ],
    ).start()
    ops = Client(server.endpoint, token=TOKENS["ops"][0], timeout=10.0)
    suffix = os.urandom(3).hex()
    names = {
        "orders": f"db.orders_{suffix}",
        "expiring": f"db.expiring_{suffix}",
        "other": f"other.events_{suffix}",
        "busy": f"db.busy_{suffix}",
        "hostile": HOSTILE_TABLE,
        "hostile_id": f"h-{suffix}",
    }
    seed(ops, names)
    lake = PaimonTable(directory / "warehouse", "db", f"lake_{suffix}")
    for _ in range(4):
        lake.commit()
    ops.admin.RegisterTable(
        admin_pb2.RegisterTableRequest(table=lake.id, location=lake.path, execute=True),
        metadata=ops._metadata,
        timeout=10,
    )
    reader = ops.acquire_lease(lake.id, "reader-1", "spark-app-4/query-d", ttl=600).lease
    commit(ops, reader, 1, 1, 4)
    names["lake"] = lake.id
    yield {
        "server": server,
        "base": f"http://127.0.0.1:{console_port}",
        "ops": ops,
        "names": names,
        "auth": auth,
    }
    ops.close()
    server.stop()


def seed(ops: Client, names: dict) -> None:
    orders = names["orders"]
    # etl-1: leased, at 5 of 9.
    lease = ops.acquire_lease(orders, "etl-1", "spark-app-1/query-a", ttl=600).lease
    commit(ops, lease, 1, 4, 9)
    # etl-2: idle (its lease released), at 3.
    lease2 = ops.acquire_lease(orders, "etl-2", "spark-app-2/query-b", ttl=600).lease
    commit(ops, lease2, 1, 2, 9)
    ops.release_lease(lease2)
    # scan-1: a live lease whose initial full scan pins snapshot 9.
    scan = ops.acquire_lease(orders, "scan-1", "spark-app-3/query-c", ttl=600).lease
    plan = ops.get_recovery_position(orders, "scan-1", 1, 9, lease=scan)
    assert plan.pinned, plan
    # An expired consumer: its table's consumers expire after one second.
    expiring = names["expiring"]
    ops.admin.SetTableOptions(
        admin_pb2.SetTableOptionsRequest(table=expiring, options={"consumer.expiration-time": "1s"}, execute=True),
        metadata=ops._metadata,
        timeout=10,
    )
    old = ops.acquire_lease(expiring, "old-1", "gone-app", ttl=600).lease
    commit(ops, old, 1, 6, 7)
    ops.release_lease(old)
    # Out of the viewer's scope.
    other = ops.acquire_lease(names["other"], "x-1", "secret-app", ttl=600).lease
    commit(ops, other, 1, 11, 12)
    # Markup in a table name and a holder.
    hostile = ops.acquire_lease(HOSTILE_TABLE, names["hostile_id"], HOSTILE_HOLDER, ttl=600).lease
    commit(ops, hostile, 1, 1, 2)
    time.sleep(1.5)


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def no_dialog(driver) -> None:
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    text = alert.text
    alert.dismiss()
    raise AssertionError(f"a dialog fired: {text!r}")


def shot(driver, name: str) -> pathlib.Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, f"{path}: not a real image"
    return path


# What chromedriver says, now and then, instead of "stale element" when a
# page is asked about an element of the page it has just left
# (SeleniumHQ/selenium#15401; selenium's own staleness_of lets it through).
DETACHED_NODE_ERRORS = (
    "Node with given id does not belong to the document",
    "No node with given id found",
)


def page_left(page):
    """A wait condition: true once `page` (the old page's <html>) is no
    longer in the window's document."""

    def left(_driver) -> bool:
        try:
            page.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as e:
            if any(m in (e.msg or "") for m in DETACHED_NODE_ERRORS):
                return True
            raise

    return left


def click_and_wait(driver, element) -> None:
    """Clicks a link or a submit button and waits for the next page (a
    click returns before the navigation it starts has finished)."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 15).until(page_left(page))


def test_a_page_counts_as_left_when_chromedriver_says_its_node_is_gone():
    # CI saw this once in ~70 page changes: the old page's node was asked
    # about mid-navigation and chromedriver answered with an inspector error.
    class Element:
        def __init__(self, error):
            self.error = error

        def is_enabled(self):
            if self.error:
                raise self.error
            return True

    inspector = (
        "unknown error: unhandled inspector error: "
        '{"code":-32000,"message":"Node with given id does not belong to the document"}'
    )
    assert page_left(Element(WebDriverException(inspector)))(None) is True
    assert page_left(Element(StaleElementReferenceException("stale")))(None) is True
    assert page_left(Element(None))(None) is False
    with pytest.raises(WebDriverException, match="session deleted"):
        page_left(Element(WebDriverException("session deleted")))(None)


def sign_in(driver, base: str, token: str) -> None:
    driver.get(base + "/signin")
    driver.find_element(By.ID, "token").send_keys(token)
    click_and_wait(driver, driver.find_element(By.ID, "signin"))


def sign_out(driver, base: str) -> None:
    driver.delete_all_cookies()
    driver.get(base + "/signin")


def table_rows(driver, table_id: str) -> list:
    """A table's cells, read in one go (a refresh may swap the page in
    between two reads of separate elements)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map("
        "row => Array.from(row.cells).map(cell => cell.innerText.trim()))",
        f"#{table_id} tbody tr",
    )


def api_consumers(ops: Client, table: str) -> dict:
    response = ops.admin.ListConsumers(
        admin_pb2.ListConsumersRequest(table=table, branch="main", page_size=1000),
        metadata=ops._metadata,
        timeout=10,
    )
    return {c.key.consumer_id: c for c in response.consumers}


def test_without_a_session_only_the_sign_in_page_shows(console, browser):
    base = console["base"]
    sign_out(browser, base)
    browser.get(base + "/")
    assert urllib.parse.urlparse(browser.current_url).path == "/signin"
    page = browser.page_source
    for key in ("orders", "expiring", "other", "busy"):
        assert console["names"][key] not in page
    shot(browser, "signin")
    # A direct link to data also lands on the sign-in page.
    browser.get(base + "/table?" + urllib.parse.urlencode({"name": console["names"]["orders"]}))
    assert urllib.parse.urlparse(browser.current_url).path == "/signin"
    assert "etl-1" not in browser.page_source


def test_a_worker_token_is_refused(console, browser):
    base = console["base"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["etl"][0])
    error = browser.find_element(By.ID, "signin-error").text
    assert "needs the viewer or operator role" in error, error
    browser.get(base + "/")
    assert urllib.parse.urlparse(browser.current_url).path == "/signin"
    # Scripts fare no better with the token as a bearer.
    request = urllib.request.Request(base + "/", headers={"Authorization": "Bearer " + TOKENS["etl"][0]})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403


def test_a_viewer_sees_its_scope_and_the_api_figures(console, browser):
    base, ops, names = console["base"], console["ops"], console["names"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    assert urllib.parse.urlparse(browser.current_url).path == "/"
    rows = {(r[0], r[1]): r for r in table_rows(browser, "tables")}
    shown = {table for table, _ in rows}
    assert names["orders"] in shown and names["expiring"] in shown and HOSTILE_TABLE in shown
    assert names["other"] not in shown and "secret-app" not in browser.page_source
    for table in (names["orders"], names["expiring"], HOSTILE_TABLE):
        row = rows[(table, "main")]
        listed = api_consumers(ops, table)
        fence = ops.get_retention_fence(table)
        assert int(row[3]) == len(listed), (table, row)
        leased = sum(1 for c in listed.values() if c.lease.state == "active")
        assert int(row[4]) == leased, (table, row)
        assert int(row[5]) == sum(1 for c in listed.values() if c.expired), (table, row)
        assert row[8] == (str(fence.snapshot_fence) if fence.HasField("snapshot_fence") else "—"), (table, row, fence)
    orders = rows[(names["orders"], "main")]
    # etl-2 at 3 of 9 is the worst lag (7 snapshots); the fence is etl-2's 3.
    assert orders[6] == "7" and orders[8] == "3" and "etl-2" in orders[9], orders
    expiring = rows[(names["expiring"], "main")]
    assert expiring[5] == "1" and expiring[8] == "—", expiring
    no_dialog(browser)
    shot(browser, "tables")
    # Outside the scope, a direct link finds nothing.
    browser.get(base + "/table?" + urllib.parse.urlencode({"name": names["other"]}))
    assert "x-1" not in browser.page_source and "in your scope" in browser.find_element(By.ID, "error").text


def test_a_table_page_lists_sorts_and_filters_its_consumers(console, browser):
    base, ops, names = console["base"], console["ops"], console["names"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(base + "/table?" + urllib.parse.urlencode({"name": names["orders"]}))
    listed = api_consumers(ops, names["orders"])
    rows = table_rows(browser, "consumers")

    # Most lagging first by default (the API's lag), unknown lags last, ties by id.
    def lag_first(consumer_id):
        c = listed[consumer_id].consumer
        known = listed[consumer_id].HasField("consumer") and c.HasField("lag")
        return (not known, -c.lag if known else 0, consumer_id)

    assert [r[0] for r in rows] == sorted(listed, key=lag_first), rows
    for r in rows:
        c = listed[r[0]]
        assert r[1] == (str(c.consumer.next_snapshot) if c.HasField("consumer") else "—"), r
        if c.lease.state == "active":
            assert r[6] == c.lease.holder and r[7] == str(c.lease.epoch), r
        else:
            assert r[6] == "—", r
    shot(browser, "table")
    # Sort by position, highest first: etl-1 (5) then etl-2 (3); scan-1 has none.
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "a[data-sort='position']"))
    assert [r[0] for r in table_rows(browser, "consumers")] == ["etl-1", "etl-2", "scan-1"]
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "a[data-sort='position']"))
    assert [r[0] for r in table_rows(browser, "consumers")] == ["etl-2", "etl-1", "scan-1"]
    # Filter by an id pattern.
    box = browser.find_element(By.ID, "q")
    box.clear()
    box.send_keys("etl-*")
    click_and_wait(browser, browser.find_element(By.ID, "filter"))
    assert sorted(r[0] for r in table_rows(browser, "consumers")) == ["etl-1", "etl-2"]
    box = browser.find_element(By.ID, "q")
    box.clear()
    box.send_keys("scan")
    click_and_wait(browser, browser.find_element(By.ID, "filter"))
    assert [r[0] for r in table_rows(browser, "consumers")] == ["scan-1"]


def test_a_consumer_page_shows_its_history_and_the_commands(console, browser):
    base, ops, names = console["base"], console["ops"], console["names"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(base + "/consumer?" + urllib.parse.urlencode({"table": names["orders"], "id": "etl-1"}))
    facts = dict(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('#consumer dt')).map("
            "dt => [dt.innerText.trim(), dt.nextElementSibling.innerText.trim()])"
        )
    )
    described = ops.describe_consumer(names["orders"], "etl-1")
    info = described.info
    assert facts["Next snapshot"] == str(info.consumer.next_snapshot)
    assert facts["Lease holder"] == info.lease.holder and facts["Lease epoch"] == str(info.lease.epoch)
    # Who holds it, as the API says it: the Python SDK's user-agent leads
    # the client name, the peer is the loopback address it called from.
    assert info.lease.client.startswith("tidemark-python/"), info.lease.client
    assert facts["Lease client"] == info.lease.client
    assert facts["Lease caller"] == info.lease.peer and info.lease.peer.startswith("127.0.0.1:"), info.lease.peer
    assert facts["Lease state"].split(" (")[0] == info.lease.activity.split(" (")[0], (facts, info.lease.activity)
    assert facts["Lag (snapshots)"] == str(info.consumer.lag)
    history = ops.list_history(names["orders"], "etl-1")
    assert [r[0] for r in table_rows(browser, "history")] == [str(h.id) for h in history]
    reset = browser.find_element(By.ID, "cli-reset").text
    assert reset == f"tidemark consumers reset {names['orders']} etl-1 5 --branch main", reset
    assert "tidemark.v1.Admin/RevokeLease" in browser.find_element(By.ID, "grpcurl-revoke").text
    shot(browser, "consumer")


def test_the_fence_picture_marks_the_holders(console, browser):
    base, ops, names = console["base"], console["ops"], console["names"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(base + "/fence?" + urllib.parse.urlencode({"table": names["orders"], "snapshot": "4"}))
    explained = ops.retention.ExplainRetention(
        retention_pb2.ExplainRetentionRequest(table=names["orders"]),
        metadata=ops._metadata,
        timeout=10,
    )
    rows = table_rows(browser, "holders")
    assert [(r[0], r[2]) for r in rows] == [(h.consumer_id, str(h.snapshot)) for h in explained.holders], rows
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#fence-picture .holder-label")]
    assert len(labels) == len(explained.holders) and any("scan-1 @ 9 (pin)" in t for t in labels), labels
    answer = browser.find_element(By.ID, "answer").text
    assert "at or above the fence (3)" in answer and "etl-2" in answer and "etl-1" not in answer, answer
    shot(browser, "fence")


def test_markup_in_names_and_holders_is_text(console, browser):
    base = console["base"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(base + "/")
    no_dialog(browser)
    click_and_wait(browser, browser.find_element(By.LINK_TEXT, HOSTILE_TABLE))
    no_dialog(browser)
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(HOSTILE_TABLE)
    rows = {r[0]: r for r in table_rows(browser, "consumers")}
    assert rows[console["names"]["hostile_id"]][6] == HOSTILE_HOLDER, rows
    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script")
    click_and_wait(browser, browser.find_element(By.LINK_TEXT, console["names"]["hostile_id"]))
    no_dialog(browser)
    assert HOSTILE_TABLE in browser.find_element(By.ID, "cli-reset").text
    time.sleep(2.5)  # two refreshes swap the page's content in
    no_dialog(browser)
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed-at")
    with urllib.request.urlopen(
        urllib.request.Request(base + "/", headers={"Authorization": "Bearer " + TOKENS["dbview"][0]}), timeout=10
    ) as response:
        policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


def test_a_registered_table_shows_lag_in_time_the_mirror_and_its_snapshots(console, browser):
    base, ops, names = console["base"], console["ops"], console["names"]
    lake = names["lake"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    rows = {r[0]: r for r in table_rows(browser, "tables")}
    assert rows[lake][2].endswith(lake.split(".")[1]), rows[lake]
    browser.get(base + "/table?" + urllib.parse.urlencode({"name": lake}))
    listed = api_consumers(ops, lake)["reader-1"]
    # The mirror writes the consumer's file within its interval (1 s).
    wait_for(
        lambda: table_rows(browser, "consumers")[0][8] == "in sync (2)",
        15,
        "the mirror column to show the file written",
    )
    row = table_rows(browser, "consumers")[0]
    assert row[1] == "2" and row[2] == str(listed.consumer.lag) == "3", row
    assert row[3] != "—", row  # snapshot 2 has waited since its commit
    browser.get(base + "/consumer?" + urllib.parse.urlencode({"table": lake, "id": "reader-1"}))
    facts = dict(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('#consumer dt')).map("
            "dt => [dt.innerText.trim(), dt.nextElementSibling.innerText.trim()])"
        )
    )
    assert facts["Mirror file state"].startswith("PRESENT, shows 2"), facts
    assert facts["Latest snapshot"] == "4", facts
    browser.get(base + "/fence?" + urllib.parse.urlencode({"table": lake}))
    assert "holds snapshots 1 to 4" in browser.page_source
    shot(browser, "fence-registered")


def test_the_page_stays_correct_while_workers_commit(console, browser):
    base, ops, names = console["base"], console["ops"], console["names"]
    busy = names["busy"]
    stop = threading.Event()
    errors = []
    workers = 16

    def work(i: int) -> None:
        try:
            client = Client(console["server"].endpoint, token=TOKENS["ops"][0], timeout=10.0)
            lease = client.acquire_lease(busy, f"w-{i:02d}", f"worker-{i}", ttl=600).lease
            batch = 0
            while not stop.is_set():
                batch += 1
                commit(client, lease, batch, batch, batch + 2)
            client.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    try:
        sign_out(browser, base)
        sign_in(browser, base, TOKENS["dbview"][0])
        time.sleep(1.0)
        browser.get(base + "/table?" + urllib.parse.urlencode({"name": busy}))
        seen = set()
        deadline = time.monotonic() + 20
        while len(seen) < 3 and time.monotonic() < deadline:
            refreshed = browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed-at")
            rows = table_rows(browser, "consumers")
            after = {k: c.consumer.next_snapshot for k, c in api_consumers(ops, busy).items() if c.HasField("consumer")}
            if refreshed:
                seen.add(refreshed)
            for r in rows:
                if r[1] != "—" and r[0] in after:
                    # The page was read between the two API reads only
                    # loosely; a position never runs ahead of the API's.
                    assert int(r[1]) <= after[r[0]], (r, after[r[0]])
            time.sleep(0.3)
        assert len(seen) >= 3, "the page did not refresh itself"
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors
    final = {k: c.consumer.next_snapshot for k, c in api_consumers(ops, busy).items()}
    assert len(final) == workers
    time.sleep(2.5)
    rows = table_rows(browser, "consumers")
    assert {r[0]: int(r[1]) for r in rows} == final
    no_dialog(browser)
    shot(browser, "busy")


def test_a_reload_that_removes_the_token_ends_its_session(console, browser):
    base = console["base"]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    assert urllib.parse.urlparse(browser.current_url).path == "/"
    auth_file(console["auth"], ["ops", "etl"])
    console["server"].process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        browser.get(base + "/")
        if urllib.parse.urlparse(browser.current_url).path == "/signin":
            break
        time.sleep(0.2)
    assert urllib.parse.urlparse(browser.current_url).path == "/signin"
    auth_file(console["auth"], TOKENS)
    console["server"].process.send_signal(signal.SIGHUP)
