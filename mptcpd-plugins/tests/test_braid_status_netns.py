"""``braid status`` and ``braid exporter`` on a live gwsteer client, host kernel.

The onlink lab (client, gw1, gw2, server; mptcpd with the built plugin on
both ends), one held MPTCP connection, then gw1 cut and restored. Both
commands read the client namespace, as they do on a client box.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from braid_status import cli
from braid_testbed.gateway_topologies import SERVER, Topo, onlink, onlink_gateways
from braid_testbed.mptcpd_lab import PLUGIN_DIR, Lab, stop_process
from braid_testbed.netns import inside
from braid_testbed.wait import TIME_SCALE, wait_for

EXPORTER_PORT = 9477
PROXY_PORT = 9180
# gwsteer's detection with the lab's settings: fail_after (3) x
# probe_interval_ms (100) + probe_timeout_ms (300); the status file follows
# within 20 ms. Room for a loaded machine and one poll of ours on top.
DETECT_S = 0.6
SEEN_DOWN_BOUND_S = DETECT_S + 0.9
# Recovery: hold_ms (500) + recover_after (3) x 100 ms, with the same room
# as test_integration's restore bound.
SEEN_UP_BOUND_S = 3.0

PROXY_METRICS = """\
# HELP braid_proxy_build_info The build this process runs, and its role: always 1.
# TYPE braid_proxy_build_info gauge
braid_proxy_build_info{role="client",version="test"} 1
# TYPE braid_proxy_conns_active gauge
braid_proxy_conns_active 2
braid_proxy_conns_total 17
"""


def status(topo: Topo) -> dict[str, Any]:
    """``braid status --json`` in the client namespace (a thread inside it: no interpreter start)."""
    res = topo.cli.run_main(cli.main, ["status", "--json", "--status", str(topo.tmp / "gateways.json"),
                                       "--proxy-metrics", f"http://127.0.0.1:{PROXY_PORT}/metrics"],
                            timeout=10 * TIME_SCALE)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def up_of(report: dict[str, Any]) -> dict[str, bool]:
    return {g["id"]: g["up"] for g in report["gateways"]["gateways"]}


def wait_report(topo: Topo, what: str, want: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
    """The first ``braid status --json`` report that ``want``s."""
    def check() -> dict[str, Any]:
        report = status(topo)
        return report if want(report) else {}
    return wait_for(what, check, timeout, diagnosis=lambda: json.dumps(status(topo)["connections"]))


def established(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in report["connections"][0]["subflows"] if s["state"] == "ESTAB"]


def scrape(topo: Topo, family: str = "braid_gateway_up") -> dict[str, float]:
    """One HTTP scrape of the exporter running in the client namespace: a gateway family by gateway."""
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{EXPORTER_PORT}/metrics", timeout=5) as resp:
            return str(resp.read().decode())
    text = inside(topo.cli.name, get, timeout=10 * TIME_SCALE)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    return {s.labels["gateway"]: s.value for s in families[family].samples}


def wait_seen(what: str, check: Any, bound: float) -> float:
    start = time.monotonic()
    wait_for(what, check, bound + 5)  # fail with the measured time below, not a bare timeout
    took = time.monotonic() - start
    assert took <= bound * TIME_SCALE, f"{what}: {took:.2f} s (bound {bound} s)"
    return took


def test_status_and_exporter_follow_a_gateway_cut(lab: Lab, tmp: Path) -> None:
    topo = onlink(lab, tmp)
    topo.write_config(onlink_gateways(topo))
    topo.route("install")
    topo.start_pm()
    proxy_dir = tmp / "proxy"
    proxy_dir.mkdir()
    (proxy_dir / "metrics").write_text(PROXY_METRICS)
    fake_proxy = topo.cli.popen([sys.executable, "-m", "http.server", str(PROXY_PORT), "--bind", "127.0.0.1",
                                 "--directory", str(proxy_dir)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exporter = topo.cli.popen([sys.executable, str(PLUGIN_DIR / "braid"), "exporter", "--listen",
                               f"127.0.0.1:{EXPORTER_PORT}", "--status", str(tmp / "gateways.json")],
                              stdout=subprocess.DEVNULL)
    wait_for("gwsteer's status file", (tmp / "gateways.json").exists, 5)
    wait_for("gateways up", lambda: up_of(status(topo)) == {"gw1": True, "gw2": True}, 5)

    server = topo.server()
    release = tmp / "release"
    client = topo.client(300_000, rate=300_000, hold=release)  # 1 s of data, then held open
    report = wait_report(topo, "a connection with both subflows",
                         lambda r: bool(r["connections"]) and len(r["connections"][0]["subflows"]) == 2, 5)
    conn = report["connections"][0]
    assert conn["remote"] == f"{SERVER}:5201"
    assert sorted((s["local"].rsplit(":", 1)[0], s["interface"]) for s in conn["subflows"]) == [
        ("10.1.1.2", "e1"), ("10.1.2.2", "e2")]
    assert set(report["traffic"]["interface"]) == {"e1", "e2"}
    assert report["kernel"]["scheduler"] and report["kernel"]["release"]
    topo.cli.wait_listening(PROXY_PORT, "127.0.0.1", 10 * TIME_SCALE, proc=fake_proxy)
    proxy = status(topo)["proxy"]
    assert proxy["reachable"] and (proxy["role"], proxy["conns_active"], proxy["conns_total"]) == ("client", 2, 17)
    topo.cli.wait_listening(EXPORTER_PORT, "127.0.0.1", 10 * TIME_SCALE, proc=exporter)
    assert scrape(topo) == {"gw1": 1, "gw2": 1}
    text = topo.cli.run_main(cli.main, ["status", "--status", str(tmp / "gateways.json"), "--proxy-metrics",
                                        f"http://127.0.0.1:{PROXY_PORT}/metrics"], 10 * TIME_SCALE).stdout
    print(text)  # the human report, for the log
    assert "gw1" in text and "connections 1 MPTCP" in text and "braid-proxy client test" in text

    topo.cut("gw1")
    down_s = wait_seen("gw1 down in braid status", lambda: not up_of(status(topo))["gw1"], SEEN_DOWN_BOUND_S)
    assert scrape(topo) == {"gw1": 0, "gw2": 1}
    # The lost probes show as probe loss (fail_after of them at least), the
    # gateway still answering has less.
    loss = scrape(topo, "braid_gateway_probe_loss_ratio")
    assert loss["gw1"] > 0 and loss["gw2"] < loss["gw1"], loss
    # gwsteer removes gw1's subflow: it leaves ESTAB (FIN-WAIT-1 while the path is cut).
    report = wait_report(topo, "gw1's subflow closing",
                         lambda r: bool(r["connections"]) and len(established(r)) == 1, 3)
    assert established(report)[0]["interface"] == "e2"

    topo.restore("gw1")
    up_s = wait_seen("gw1 up in braid status", lambda: up_of(status(topo))["gw1"], SEEN_UP_BOUND_S)
    assert scrape(topo) == {"gw1": 1, "gw2": 1}
    print(f"gw1 cut: seen down after {down_s:.2f} s; restored: seen up after {up_s:.2f} s")
    # The transfer is only there to have a connection; the lab stops it and the rest.
    stop_process(client)
    stop_process(server)
