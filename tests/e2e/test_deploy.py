"""The monitoring files under deploy/: Prometheus's configuration and alert rules pass
promtool, each alert fires on the series that should raise it and not on a healthy one
beside it (deploy/prometheus/alerts_test.yml), and the Grafana dashboard and the alerts
query only metrics the server exports, the dashboard showing every one of them."""

import json
import re
import subprocess

import httpx

from conftest import PROMTOOL, ROOT

DEPLOY = ROOT / "deploy"


def promtool(*args):
    r = subprocess.run([str(PROMTOOL), *args], cwd=DEPLOY / "prometheus", capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_prometheus_config_and_rules_are_valid():
    assert "SUCCESS: 12 rules found" in promtool("check", "rules", "alerts.yml")
    assert "is valid prometheus config" in promtool("check", "config", "prometheus.yml")


def test_alerts_fire_on_the_series_that_should_raise_them():
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml")


def referenced(text):
    """cachegate metric names in PromQL text, histogram series folded into their metric"""
    return {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"cachegate_[a-z_]+", text)}


def test_dashboard_and_alerts_query_what_the_server_exports(server):
    with httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=30) as c:
        text = c.get("/metrics").text
    exported = set(re.findall(r"^# TYPE (cachegate_[a-z_]+) ", text, re.M))
    assert len(exported) > 20

    dash = json.loads((DEPLOY / "grafana" / "cachegate.json").read_text())
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    exprs = []
    for p in panels:
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
        exprs += [t["expr"] for t in p["targets"]]
    shown = referenced("\n".join(exprs))
    assert not shown - exported, f"the dashboard queries metrics the server lacks: {shown - exported}"
    assert not exported - shown, f"metrics with no panel: {exported - shown}"

    alerted = referenced((DEPLOY / "prometheus" / "alerts.yml").read_text())
    assert alerted and not alerted - exported, f"alerts on unknown metrics: {alerted - exported}"
