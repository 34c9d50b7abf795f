"""The monitoring component (deploy/monitoring): its alert rules pass
`promtool check rules` and their unit tests (`promtool test rules`), and the
bodies the manifest validator cannot check (it skips unknown kinds) are
checked here: every rule and dashboard query names only metrics the server
exports, reads the fleet gauges across replicas with max(), and every alert
links to a runbook section that exists."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess

import yaml

from test_manifests import DEPLOY, REPO, objects, one, render, validate

MONITORING = DEPLOY / "monitoring"
# Gauges of the whole fleet, written by the one collecting replica: rules
# must aggregate them across replicas.
FLEET_GAUGES = {
    "tidemark_consumer_lag_snapshots",
    "tidemark_consumer_lag_seconds",
    "tidemark_consumer_behind_idle_seconds",
    "tidemark_consumers",
    "tidemark_retention_fence",
    "tidemark_retention_fence_lag_snapshots",
    "tidemark_leases_live",
    "tidemark_history_rows",
    "tidemark_history_oldest_age_seconds",
}


def exported_metrics() -> set:
    """Every metric name the server defines (crates/*/src), with a
    histogram's series suffixes."""
    names = set()
    sources = [
        REPO / "crates/tidemark-server/src/metrics.rs",
        REPO / "crates/tidemark-service/src/metrics.rs",
        REPO / "crates/tidemark-store/src/postgres/group_commit.rs",
        REPO / "crates/tidemark-store/src/postgres/group_read.rs",
    ]
    for source in sources:
        names |= set(re.findall(r'"(tidemark_[a-z_]+)"', source.read_text()))
    names |= {f"tidemark_rpc_duration_seconds{suffix}" for suffix in ("_bucket", "_sum", "_count")}
    return names


def metrics_in(expr: str) -> set:
    return set(re.findall(r"\btidemark_[a-z_]+\b", expr))


def anchors(markdown: pathlib.Path) -> set:
    """GitHub's heading anchors of a Markdown file."""
    found = set()
    for line in markdown.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            found.add(slug)
    return found


def rule_groups() -> list:
    body = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert body["apiVersion"] == "monitoring.coreos.com/v1" and body["kind"] == "PrometheusRule"
    return body["spec"]["groups"]


def promtool() -> str:
    tool = os.environ.get("PROMTOOL") or shutil.which("promtool")
    assert tool, "promtool is needed (scripts/test.sh fetches it: source scripts/lib/tools.sh; ensure_promtool)"
    return tool


def test_the_example_renders_validates_and_ships_everything(tmp_path):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(render("examples/monitoring"))
    result = validate(rendered)
    assert result.returncode == 0, result.stdout + result.stderr
    objs = objects("examples/monitoring")
    one(objs, "PrometheusRule", "tidemark")
    monitor = one(objs, "ServiceMonitor", "tidemark")
    dashboard = one(objs, "ConfigMap", "tidemark-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["tidemark.json"])["uid"] == "tidemark"
    # The ServiceMonitor finds the Service that has the metrics port.
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [
        o for o in objs
        if o["kind"] == "Service" and all(o["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
    ]
    ports = {p["name"] for s in services for p in s["spec"]["ports"]}
    assert services and {e["port"] for e in monitor["spec"]["endpoints"]} <= ports, (selector, ports)


def test_promtool_checks_the_rules_and_their_unit_tests_pass(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups()}))
    shutil.copy(MONITORING / "tests" / "alerts-test.yaml", tmp_path / "alerts-test.yaml")
    check = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    tested = subprocess.run(
        [promtool(), "test", "rules", "alerts-test.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # The required alerts are there and each has a unit test.
    tests = (MONITORING / "tests" / "alerts-test.yaml").read_text()
    for alert in [
        "TidemarkConsumerStuck",
        "TidemarkFenceBlockingExpiration",
        "TidemarkMirrorBacklog",
        "TidemarkDatabaseUnavailable",
    ]:
        assert f"alertname: {alert}" in tests, f"{alert} has no unit test"


def test_promtool_fails_a_broken_rule(tmp_path):
    """The check above can fail: a rule with a syntax error is refused."""
    broken = tmp_path / "rules.yaml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"alert": "A", "expr": "max(tidemark_up"}]}]}))
    check = subprocess.run([promtool(), "check", "rules", str(broken)], capture_output=True, text=True)
    assert check.returncode != 0


def test_rule_bodies_name_exported_metrics_aggregate_fleet_gauges_and_link_runbooks():
    exported = exported_metrics()
    runbook = anchors(REPO / "docs" / "runbook.md")
    alerts = [rule for group in rule_groups() for rule in group["rules"]]
    assert len({rule["alert"] for rule in alerts}) == len(alerts), "alert names are unique"
    for rule in alerts:
        name, expr = rule["alert"], rule["expr"]
        assert re.fullmatch(r"Tidemark[A-Z][A-Za-z]+", name), name
        assert re.fullmatch(r"\d+[smh]", rule["for"]), f"{name}: for"
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), name
        unknown = metrics_in(expr) - exported
        assert not unknown, f"{name} reads metrics the server does not export: {unknown}"
        for gauge in metrics_in(expr) & FLEET_GAUGES:
            assert re.search(rf"max(\s+by\s*\([^)]*\))?\s*\(\s*{gauge}\b", expr), f"{name}: {gauge} without max()"
        url = rule["annotations"]["runbook_url"]
        prefix = "https://github.com/tidemark/tidemark/blob/main/docs/runbook.md#"
        assert url.startswith(prefix), url
        assert url[len(prefix):] in runbook, f"{name}: no runbook section {url}"


def test_the_dashboard_queries_exported_metrics():
    exported = exported_metrics()
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) >= 15
    for expr in exprs:
        unknown = metrics_in(expr) - exported
        assert not unknown, f"{expr}: {unknown}"
        for gauge in metrics_in(expr) & FLEET_GAUGES:
            assert re.search(rf"max(\s+by\s*\([^)]*\))?\s*\(\s*{gauge}\b", expr), f"{expr}: {gauge} without max()"
    used = set().union(*(metrics_in(e) for e in exprs))
    for required in ["tidemark_consumer_lag_snapshots", "tidemark_errors_total", "tidemark_history_rows", "tidemark_database_ready"]:
        assert required in used, required


def test_the_stuck_alert_and_the_runbook_say_what_an_unregistered_table_cannot_tell():
    """Issue 55: on a table tidemark has not registered, "latest" is the highest
    snapshot any consumer reported, so when every consumer of the table stops,
    none is behind and TidemarkConsumerStuck never fires. The alert and the
    runbook's section say so and name the fix."""
    stuck = next(r for g in rule_groups() for r in g["rules"] if r.get("alert") == "TidemarkConsumerStuck")
    description = " ".join(stuck["annotations"]["description"].split())
    assert "not registered" in description and "tidemark tables register" in description, description
    runbook = (REPO / "docs" / "runbook.md").read_text()
    section = runbook[runbook.index("## A consumer is stuck") :]
    section = section[: section.index("\n## ", 3)]
    assert "tidemark tables register" in section and "every consumer" in section, section
