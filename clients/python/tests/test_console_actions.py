"""The console acting (issue 55), in real Chromium against a real server:
for the operator role only, every change — revoke, reset, delete, bulk
reset — is planned first (a page that changes nothing), then confirmed,
and the confirmation executes exactly the plan: a consumer that moved or
was taken over since is refused, not overwritten. Viewers see no action
and their forged posts are refused; so are posts without the session's
CSRF token and posts from another origin of the same site."""

from __future__ import annotations

import hashlib
import threading
import urllib.parse

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tidemark import Client, TidemarkError

from test_console import (  # noqa: F401  (fixtures: console, browser)
    TOKENS,
    browser,
    click_and_wait,
    commit,
    console,
    shot,
    sign_in,
    sign_out,
    table_rows,
)


def post_from_page(browser, path: str, fields: dict) -> tuple:
    """A form post from the console's own page (same origin, the session's
    cookie): what a forger with the page open could send."""
    return tuple(
        browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(arguments[0], {method: 'POST', body: new URLSearchParams(arguments[1])})"
            ".then(r => r.text().then(t => done([r.status, t])));",
            path,
            fields,
        )
    )


def consumer_page(base: str, table: str, consumer_id: str) -> str:
    return base + "/consumer?" + urllib.parse.urlencode({"table": table, "id": consumer_id})


def live_lease_id(ops: Client, table: str, consumer_id: str) -> str:
    lease = ops.describe_consumer(table, consumer_id).info.lease
    return lease.lease_id if lease.state == "active" else ""


def test_an_operator_revokes_a_lease_planned_first_then_exactly_the_planned_one(console, browser):
    """Issue 55: the console acts, for operators, plan first: the plan page
    names the lease and changes nothing; the confirmation revokes it, and
    history keeps the principal and the reason."""
    base, ops, names = console["base"], console["ops"], console["names"]
    table = names["orders"]
    query = ops.acquire_lease(table, "act-1", "spark-app-7/query-hung", ttl=600).lease
    commit(ops, query, 0, 3, 5)
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(consumer_page(base, table, "act-1"))
    browser.find_element(By.ID, "reason").send_keys("paged: renewing, not committing")
    click_and_wait(browser, browser.find_element(By.ID, "revoke"))
    plan = browser.find_element(By.ID, "plan").text
    assert plan.startswith("PLAN ONLY") and query.lease_id in plan and "spark-app-7/query-hung" in plan, plan
    assert live_lease_id(ops, table, "act-1") == query.lease_id, "a plan changes nothing"
    shot(browser, "revoke-plan")
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    assert live_lease_id(ops, table, "act-1") == ""
    history = table_rows(browser, "history")
    assert history[0][2] == "LEASE_REVOKE" and history[0][7] == "ops", history[0]
    assert "paged: renewing, not committing" in history[0][8], history[0]
    with pytest.raises(TidemarkError) as fenced:
        ops.renew_lease(query)
    assert fenced.value.reason == "LEASE_NOT_HELD"


def test_a_confirmation_after_the_consumer_changed_revokes_nothing(console, browser):
    """The plan showed one query's lease; another took the consumer over
    before the confirmation: refused (409), the new query keeps running."""
    base, ops, names = console["base"], console["ops"], console["names"]
    table = names["orders"]
    first = ops.acquire_lease(table, "act-2", "query-old", ttl=600).lease
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(consumer_page(base, table, "act-2"))
    click_and_wait(browser, browser.find_element(By.ID, "revoke"))
    assert first.lease_id in browser.find_element(By.ID, "plan").text
    ops.release_lease(first)
    second = ops.acquire_lease(table, "act-2", "query-new", ttl=600).lease
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    assert "changed since the plan" in browser.page_source, browser.page_source
    assert "Nothing was revoked" in browser.page_source, browser.page_source
    assert live_lease_id(ops, table, "act-2") == second.lease_id, "the new query is not fenced"


def test_a_viewer_sees_no_action_and_forged_posts_are_refused(console, browser):
    """A viewer gets no form, and a post it forges — even with a token
    computed from its own session — is refused; so is an operator's post
    without the page's token."""
    base, ops, names = console["base"], console["ops"], console["names"]
    table = names["orders"]
    lease = ops.acquire_lease(table, "act-3", "query-kept", ttl=600).lease
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(consumer_page(base, table, "act-3"))
    assert not browser.find_elements(By.ID, "revoke-form")
    session = browser.get_cookie("tidemark_console")["value"]
    token = hashlib.sha256(("\0tidemark console csrf\0" + session).encode()).hexdigest()

    fields = {"table": table, "id": "act-3", "csrf": token, "expected_lease_id": lease.lease_id}
    status, body = post_from_page(browser, "/consumer/revoke/confirm", fields)
    assert status == 403 and "operator role" in body, (status, body)
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(consumer_page(base, table, "act-3"))
    status, body = post_from_page(browser, "/consumer/revoke/confirm", {**fields, "csrf": ""})
    assert status == 403 and "CSRF" in body, (status, body)
    assert live_lease_id(ops, table, "act-3") == lease.lease_id


def test_a_cross_site_form_post_is_refused(console, browser):
    """A page of another origin on the same site (same host, another port:
    SameSite lets the cookie through) auto-submits a revoke: refused."""
    import http.server

    base, ops, names = console["base"], console["ops"], console["names"]
    table = names["orders"]
    lease = ops.acquire_lease(table, "act-4", "query-targeted", ttl=600).lease
    attack = (
        "<html><body><form id=f method=post action='" + base + "/consumer/revoke/confirm'>"
        f"<input name=table value='{table}'><input name=id value='act-4'>"
        f"<input name=expected_lease_id value='{lease.lease_id}'><input name=csrf value=''></form>"
        "<script>document.getElementById('f').submit()</script></body></html>"
    ).encode()

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(attack)

        def log_message(self, *args):
            pass

    # Threads of their own: Chrome may open a second connection it never
    # uses, which must not hold the server's one loop.
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker) as site:
        site.daemon_threads = True
        threading.Thread(target=site.serve_forever, daemon=True).start()
        sign_out(browser, base)
        sign_in(browser, base, TOKENS["ops"][0])
        browser.get(f"http://127.0.0.1:{site.server_address[1]}/")
        WebDriverWait(browser, 15).until(lambda d: d.current_url.startswith(base))
        assert "Refused" in browser.page_source, browser.page_source
        site.shutdown()
    assert live_lease_id(ops, table, "act-4") == lease.lease_id, "nothing was revoked"


def next_snapshot(ops: Client, table: str, consumer_id: str):
    info = ops.describe_consumer(table, consumer_id).info
    return info.consumer.next_snapshot if info.HasField("consumer") else None


def fact(browser, name: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f'dd[data-fact="{name}"]').text


def at(ops: Client, table: str, consumer_id: str, snapshot: int, holder: str, latest: int = 20):
    """A consumer at next snapshot `snapshot + 1`, its lease released."""
    lease = ops.acquire_lease(table, consumer_id, holder, ttl=600).lease
    commit(ops, lease, 1, snapshot, latest)
    ops.release_lease(lease)


def test_an_operator_resets_a_consumer_planned_first_then_exactly_as_planned(console, browser):
    base, ops, table = console["base"], console["ops"], console["names"]["orders"]
    at(ops, table, "rs-1", 7, "query-rs-1")
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(consumer_page(base, table, "rs-1"))
    browser.find_element(By.ID, "next-snapshot").send_keys("3")
    browser.find_element(By.ID, "reset-reason").send_keys("replay after the bad deploy")
    click_and_wait(browser, browser.find_element(By.ID, "reset"))
    plan = browser.find_element(By.ID, "plan").text
    assert plan.startswith("PLAN ONLY") and "from next snapshot 8 to 3" in plan, plan
    assert next_snapshot(ops, table, "rs-1") == 8, "a plan changes nothing"
    shot(browser, "reset-plan")
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    assert fact(browser, "Next snapshot") == "3"
    assert next_snapshot(ops, table, "rs-1") == 3
    history = table_rows(browser, "history")
    assert history[0][2] == "RESET" and history[0][3:5] == ["8", "3"] and history[0][7] == "ops", history[0]
    assert "replay after the bad deploy" in history[0][8], history[0]


def test_a_reset_confirmed_after_the_consumer_moved_changes_nothing(console, browser):
    """The plan saw next snapshot 8; a query committed to 11 before the
    confirmation: refused (409), the query's progress is not overwritten.
    Forced, the plan saw one query's lease; another took the consumer over
    before the confirmation: refused, the new query keeps its lease."""
    base, ops, table = console["base"], console["ops"], console["names"]["orders"]
    at(ops, table, "rs-2", 7, "query-rs-2")
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(consumer_page(base, table, "rs-2"))
    browser.find_element(By.ID, "next-snapshot").send_keys("2")
    click_and_wait(browser, browser.find_element(By.ID, "reset"))
    assert "from next snapshot 8 to 2" in browser.find_element(By.ID, "plan").text
    at(ops, table, "rs-2", 10, "query-rs-2")
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    assert "changed since the plan" in browser.page_source and "Nothing was reset" in browser.page_source
    assert "NEXT_SNAPSHOT_MISMATCH" in browser.page_source or "expected" in browser.page_source, browser.page_source
    assert next_snapshot(ops, table, "rs-2") == 11

    old = ops.acquire_lease(table, "rs-2", "query-old", ttl=600).lease
    browser.get(consumer_page(base, table, "rs-2"))
    browser.find_element(By.ID, "next-snapshot").send_keys("2")
    browser.find_element(By.ID, "reset-force").click()
    click_and_wait(browser, browser.find_element(By.ID, "reset"))
    plan = browser.find_element(By.ID, "plan").text
    assert old.lease_id in plan and "query-old" in plan, plan
    ops.release_lease(old)
    new = ops.acquire_lease(table, "rs-2", "query-new", ttl=600).lease
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    assert "changed since the plan" in browser.page_source, browser.page_source
    assert live_lease_id(ops, table, "rs-2") == new.lease_id, "the new query is not fenced"
    assert next_snapshot(ops, table, "rs-2") == 11
    ops.release_lease(new)


def test_an_operator_deletes_a_consumer_its_dead_query_still_holds(console, browser):
    """Unforced, the plan says a query holds it and names revoke; forced,
    the plan names the lease, and the confirmation deletes the consumer and
    fences that query; history keeps the principal and the reason."""
    base, ops, table = console["base"], console["ops"], console["names"]["orders"]
    dead = ops.acquire_lease(table, "del-1", "query-killed", ttl=600).lease
    commit(ops, dead, 1, 4, 9)
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(consumer_page(base, table, "del-1"))
    click_and_wait(browser, browser.find_element(By.ID, "delete"))
    assert "A query holds this consumer" in browser.page_source and "revoke" in browser.page_source
    browser.get(consumer_page(base, table, "del-1"))
    browser.find_element(By.ID, "delete-reason").send_keys("query killed, consumer retired")
    browser.find_element(By.ID, "delete-force").click()
    click_and_wait(browser, browser.find_element(By.ID, "delete"))
    plan = browser.find_element(By.ID, "plan").text
    assert plan.startswith("PLAN ONLY") and "Deleting would remove del-1" in plan and dead.lease_id in plan, plan
    assert next_snapshot(ops, table, "del-1") == 5, "a plan changes nothing"
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    assert urllib.parse.urlparse(browser.current_url).path == "/table"
    # The key stays (its epoch fences the old query); its consumer is gone.
    assert next_snapshot(ops, table, "del-1") is None
    deleted = ops.list_history(table, "del-1")[0]
    assert deleted.event == "DELETE" and deleted.principal == "ops", deleted
    assert "query killed, consumer retired" in deleted.detail, deleted
    with pytest.raises(TidemarkError) as fenced:
        ops.renew_lease(dead)
    assert fenced.value.reason == "LEASE_NOT_HELD"


def test_a_bulk_reset_from_the_table_page_executes_exactly_its_plan(console, browser):
    """The plan lists every selected consumer (a leased one as skipped,
    with where it would have gone); one that moves before the confirmation
    is refused, the others are reset to exactly their planned positions."""
    base, ops, table = console["base"], console["ops"], console["names"]["busy"]
    at(ops, table, "bulk-1", 5, "q-b1")
    at(ops, table, "bulk-2", 7, "q-b2")
    held = ops.acquire_lease(table, "bulk-3", "q-b3", ttl=600).lease
    commit(ops, held, 1, 6, 9)
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["ops"][0])
    browser.get(base + "/table?" + urllib.parse.urlencode({"name": table}))
    browser.find_element(By.ID, "including").send_keys("bulk-.*")
    Select(browser.find_element(By.ID, "bulk-target")).select_by_value("snapshot")
    browser.find_element(By.ID, "bulk-value").send_keys("2")
    browser.find_element(By.ID, "bulk-reason").send_keys("reprocess since 2")
    click_and_wait(browser, browser.find_element(By.ID, "bulk-reset"))
    rows = {r[0]: r for r in table_rows(browser, "plan-rows")}
    assert rows["bulk-1"][2:5] == ["6", "2", "would reset"], rows
    assert rows["bulk-2"][2:5] == ["8", "2", "would reset"], rows
    assert rows["bulk-3"][2:4] == ["7", "2"] and rows["bulk-3"][4].startswith("WOULD BE SKIPPED: LEASE_HELD"), rows
    assert browser.find_element(By.ID, "plan").text.startswith("PLAN ONLY")
    assert [next_snapshot(ops, table, c) for c in ("bulk-1", "bulk-2", "bulk-3")] == [6, 8, 7]
    shot(browser, "bulk-reset-plan")
    at(ops, table, "bulk-2", 9, "q-b2")
    click_and_wait(browser, browser.find_element(By.ID, "confirm"))
    done = {r[0]: r for r in table_rows(browser, "plan-rows")}
    assert browser.find_element(By.ID, "plan").text.startswith("DONE: 1 of 2"), browser.page_source
    assert done["bulk-1"][4] == "reset" and done["bulk-2"][4].startswith("REFUSED: NEXT_SNAPSHOT_MISMATCH"), done
    assert "bulk-3" not in done
    assert [next_snapshot(ops, table, c) for c in ("bulk-1", "bulk-2", "bulk-3")] == [2, 10, 7]
    reset = ops.list_history(table, "bulk-1")[0]
    assert reset.event == "RESET" and reset.principal == "ops" and "reprocess since 2" in reset.detail, reset
    assert live_lease_id(ops, table, "bulk-3") == held.lease_id


def test_a_viewer_sees_no_reset_or_delete_and_its_forged_posts_change_nothing(console, browser):
    base, ops, table = console["base"], console["ops"], console["names"]["orders"]
    at(ops, table, "rs-3", 7, "query-rs-3")
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(consumer_page(base, table, "rs-3"))
    assert not browser.find_elements(By.ID, "reset-form") and not browser.find_elements(By.ID, "delete-form")
    browser.get(base + "/table?" + urllib.parse.urlencode({"name": table}))
    assert not browser.find_elements(By.ID, "bulk-reset-form")
    session = browser.get_cookie("tidemark_console")["value"]
    token = hashlib.sha256(("\0tidemark console csrf\0" + session).encode()).hexdigest()
    key = {"table": table, "id": "rs-3", "csrf": token}
    plan = '[{"id": "rs-3", "old": 8, "new": 1, "lease": ""}]'
    for path, fields in (
        ("/consumer/reset/confirm", {**key, "next_snapshot": "1", "expected_next_snapshot": "8"}),
        ("/consumer/delete/confirm", {**key, "expected_next_snapshot": "8"}),
        ("/table/reset/confirm", {"table": table, "csrf": token, "plan": plan}),
    ):
        status, body = post_from_page(browser, path, fields)
        assert status == 403 and "operator role" in body, (path, status, body)
    assert next_snapshot(ops, table, "rs-3") == 8


def test_a_consumer_page_charts_its_lag_at_each_commit_and_now(console, browser):
    """Each commit's history row keeps the latest snapshot it reported, so
    the page draws the lag then (latest - next + 1), oldest first, and the
    lag now last; the API's history carries the same figure."""
    base, ops = console["base"], console["ops"]
    table = console["names"]["orders"] + "_chart"
    lease = ops.acquire_lease(table, "chart-1", "query-chart", ttl=600).lease
    commit(ops, lease, 1, 2, 10)  # next 3 of 10: lag 8
    commit(ops, lease, 2, 6, 12)  # next 7 of 12: lag 6
    commit(ops, lease, 3, 11, 12)  # next 12 of 12: lag 1
    assert [e.latest_snapshot for e in ops.list_history(table, "chart-1") if e.event == "ADVANCE"] == [12, 12]
    sign_out(browser, base)
    sign_in(browser, base, TOKENS["dbview"][0])
    browser.get(consumer_page(base, table, "chart-1"))
    dots = browser.execute_script(
        "return Array.from(document.querySelectorAll('#lag-chart circle'))"
        ".map(c => [c.getAttribute('class'), Number(c.getAttribute('data-lag')), Number(c.getAttribute('cy'))]);"
    )
    assert [(kind, lag) for kind, lag, _ in dots] == [("commit", 8), ("commit", 6), ("commit", 1), ("now", 1)], dots
    heights = [cy for _, _, cy in dots]
    assert heights[0] < heights[1] < heights[2], "a higher lag is drawn higher"
    assert fact(browser, "Lag (snapshots)") == "1"
    shot(browser, "lag-chart")
