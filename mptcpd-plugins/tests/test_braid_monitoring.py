"""The monitoring files in mptcpd-plugins/contrib/monitoring: Prometheus's
own promtool checks the alert rules, their unit tests and the example
configuration; the Grafana dashboard is checked against the dashboard JSON
model and its queries by promtool; every metric a rule or a panel reads is
one that ``braid exporter`` or braid-proxy exports."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from braid_status import cli

HERE = Path(__file__).resolve().parent
MONITORING = HERE.parent / "contrib" / "monitoring"
RULES = MONITORING / "braid-alerts.yml"
DASHBOARD = MONITORING / "braid-dashboard.json"
PROXY_PROM = HERE.parent.parent / "proxy" / "internal" / "metrics" / "prom.go"

STATUS = {"version": 1, "updated": "2026-01-01T00:00:00.000Z", "gateways": [
    {"id": gw, "source": src, "up": True, "backup": False, "best": gw == "gw1", "ewma_ms": 1.5, "rtt_ms": 1.0,
     "avmet": 0.5, "last_change": "2026-01-01T00:00:00.000Z", "subflows": 1}
    for gw, src in (("gw1", "10.1.1.2"), ("gw2", "10.1.2.2"))]}

# Prometheus's own series, not an exporter's: a scrape's success.
SYNTHETIC = {"up"}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                "offset", "inf", "nan"}
# Grafana's variables, as a fixed value for promtool.
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "15s", "$instance": ".*", "$gateway": ".*"}
PANEL_TYPES = {"row", "stat", "timeseries", "state-timeline", "table", "gauge", "bargauge", "text"}


def promtool(*args: str) -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool is missing (Debian package prometheus; scripts/install-deps installs it)")
    res = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def exporter_metrics(tmp_path: Path) -> set[str]:
    """Sample names of one ``braid exporter --once`` scrape with two gateways."""
    status = tmp_path / "gateways.json"
    status.write_text(json.dumps(STATUS))
    out = io.StringIO()
    assert cli.main(["exporter", "--once", "--status", str(status)], out=out) == 0
    return {s.name for f in text_string_to_metric_families(out.getvalue()) for s in f.samples}


def proxy_metrics() -> set[str]:
    """braid-proxy's /metrics names, read from its exposition code (prom.go).

    Counters become ``<name>_total``, gauges keep their name; labelled
    families are named where they are added.
    """
    src = PROXY_PROM.read_text()
    def table(var: str) -> list[str]:
        body = re.search(rf"var {var} = map\[string\]string\{{(.*?)\n\}}", src, re.S)
        assert body, var
        return re.findall(r'^\s*"(\w+)":', body.group(1), re.M)
    names = {f"{n.removesuffix('_total')}_total" for n in table("counterHelp")}
    names |= set(table("gaugeHelp"))
    names |= {f"{n}_total" for n in table("counterFuncHelp")}
    names |= {n.removesuffix("_us_total") + "_seconds_total" for n in table("microsecondSums")}
    names |= set(re.findall(r'perKey\("(\w+)"', src)) | {"build_info"}
    assert {"conns_active", "conns_total", "bytes_up_total", "bytes_down_total", "build_info"} <= names
    return {f"braid_proxy_{n}" for n in names}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads (functions, keywords and labels left out)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)                       # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                      # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for m in re.finditer(r"(?<![\w.$])([a-zA-Z_:][\w:]*)\s*(\()?", expr):
        if not m.group(2) and m.group(1).lower() not in PROMQL_WORDS:
            names.add(m.group(1))
    return names


def test_metric_names_of_an_expression() -> None:
    assert metric_names('max by (instance) (rate(braid_a{x="y"}[2m])) / on (instance) sum(braid_b) > 0.95 '
                        'and on (instance) up{job="p"} == 0 or time() - braid_c > 60') == {
        "braid_a", "braid_b", "up", "braid_c"}


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(RULES.read_text())
    return [r for g in data["groups"] for r in g["rules"]]


def dashboard_exprs(dash: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return exprs


def grafana_to_promql(expr: str) -> str:
    for var, value in sorted(GRAFANA_VARS.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, value)
    # label_values(series, label) is Grafana's; the series is the query.
    m = re.fullmatch(r"label_values\((.*),\s*\w+\)", expr)
    return m.group(1) if m else expr


def test_alert_rules_pass_promtool_and_their_unit_tests() -> None:
    assert "SUCCESS: 6 rules found" in promtool("check", "rules", str(RULES))
    promtool("test", "rules", str(HERE / "braid-alerts-test.yml"))
    promtool("check", "config", str(MONITORING / "prometheus.yml"))
    names = {r["alert"] for r in rules()}
    assert {"BraidGatewayDown", "BraidRelayUnreachable", "BraidSingleWANUnderHywf"} <= names


def test_dashboard_follows_grafanas_dashboard_model(tmp_path: Path) -> None:
    dash = json.loads(DASHBOARD.read_text())
    for key, typ in (("uid", str), ("title", str), ("schemaVersion", int), ("panels", list), ("templating", dict),
                     ("time", dict), ("version", int)):
        assert isinstance(dash.get(key), typ), key
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are not unique"
    titles = set()
    for p in dash["panels"]:
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert all(isinstance(g[k], int) for k in "xywh") and 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        titles.add(p["title"])
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"].strip(), p["title"]
        for v in re.findall(r"\$\w+", json.dumps(p["targets"])):
            assert v in GRAFANA_VARS, v
    for want in ("Gateway state", "Probe RTT", "Per-WAN throughput", "Subflows per gateway", "Packet scheduler",
                 "Relay reachable"):
        assert want in titles
    # promtool parses whole rules files, not bare expressions: one recording
    # rule per query.
    exprs = dashboard_exprs(dash)
    generated = tmp_path / "dashboard-rules.yml"
    generated.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
        {"record": f"braid:dashboard_query_{i}", "expr": grafana_to_promql(e)} for i, e in enumerate(exprs)]}]}))
    assert f"SUCCESS: {len(exprs)} rules found" in promtool("check", "rules", str(generated))


def test_every_metric_used_is_exported(tmp_path: Path) -> None:
    exported = exporter_metrics(tmp_path) | proxy_metrics() | SYNTHETIC
    used: dict[str, set[str]] = {}
    for r in rules():
        used[f"alert {r['alert']}"] = metric_names(r["expr"])
    for e in dashboard_exprs(json.loads(DASHBOARD.read_text())):
        used[f"dashboard {e}"] = metric_names(grafana_to_promql(e))
    unknown = {where: sorted(names - exported) for where, names in used.items() if names - exported}
    assert not unknown, unknown
    assert {"braid_gateway_up", "braid_proxy_conns_active", "up"} <= set().union(*used.values())
