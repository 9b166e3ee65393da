"""``braid exporter``'s status page in headless Chromium, on a live gwsteer
client (host kernel).

The onlink lab of test_braid_status_netns.py (client, gw1, gw2, server;
mptcpd with the built plugin), the exporter and a stand-in braid-proxy
metrics endpoint in the client namespace, and Debian's Chromium driven
by playwright-core (tests/browser, ``npm ci`` by scripts/install-deps) in
the same namespace: the page shows both gateways and the relay, its
throughput graph's data rises during an upload, the upload is a row of
the page loads table, and a cut gateway shows
down, with the state change listed. The screenshot is left in
out/status-page.png.

Without the browser or its driver the page's server side is still
checked (test_braid_status.py); this test is skipped then.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from braid_testbed.gateway_topologies import SERVER, Topo, onlink, onlink_gateways
from braid_testbed.mptcpd_lab import PLUGIN_DIR, Lab, stop_process
from braid_testbed.netns import inside
from braid_testbed.wait import TIME_SCALE, wait_for

BROWSER_DIR = Path(__file__).resolve().parent / "browser"
DRIVER = BROWSER_DIR / "drive.mjs"
CHROMIUM = "/usr/bin/chromium"
OUT = PLUGIN_DIR.parent / "out"
PORT = 9477
PROXY_PORT = 9180
PROXY_METRICS = """\
# TYPE braid_proxy_build_info gauge
braid_proxy_build_info{role="client",version="test"} 1
# TYPE braid_proxy_conns_active gauge
braid_proxy_conns_active 1
# TYPE braid_proxy_conns_total counter
braid_proxy_conns_total 3
"""
# The page samples every 0.5 s here and polls as often; gwsteer takes
# ~0.6 s to call a cut gateway down (test_braid_status_netns.py).
SEEN_DOWN_BOUND_S = 3.0


class Browser:
    """drive.mjs in a namespace: one JSON command a line, one JSON answer a line."""

    def __init__(self, topo: Topo, url: str) -> None:
        self.proc = topo.cli.popen(["node", str(DRIVER), url], cwd=str(BROWSER_DIR), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.answer(30)  # Chromium started and the page loaded

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def answer(self, timeout: float) -> Any:
        try:
            line = self.lines.get(timeout=timeout * TIME_SCALE)
        except queue.Empty:
            raise TimeoutError("the browser driver did not answer") from None
        if not line:
            assert self.proc.stderr is not None
            raise RuntimeError(f"the browser driver ended: {self.proc.stderr.read().decode()[-2000:]}")
        reply = json.loads(line)
        assert reply["ok"], reply
        assert not reply.get("errors"), reply["errors"]  # no script error on the page
        return reply.get("value")

    def command(self, **cmd: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.proc.stdin.flush()
        return self.answer(15)

    def eval(self, js: str) -> Any:
        return self.command(eval=js)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            stop_process(self.proc)


# What the page shows, read from its DOM (and the graph's data from the uPlot instance drawing it).
CARDS = "Object.fromEntries([...document.querySelectorAll('.gw')].map(e => [e.dataset.gateway, e.dataset.state]))"
RATES = ("Object.fromEntries([...document.querySelectorAll('.gw')].map(e => [e.dataset.gateway, "
         "Number(e.dataset.rateBps)]))")
# Per series (label): the number of points and the largest value drawn.
GRAPH = ("(() => { const c = window.braidStatus.chart; if (!c) return null; return Object.fromEntries("
         "c.series.slice(1).map((s, i) => [s.label, [c.data[i + 1].length, "
         "Math.max(0, ...c.data[i + 1].filter(v => v !== null))]])); })()")
RELAY = "[document.getElementById('relay').dataset.state, document.getElementById('relay').textContent]"
EVENTS = "[...document.querySelectorAll('#events li')].map(e => e.textContent)"
# The page loads table: per row the peer, its bytes and its WAN cells.
PAGES = ("[...document.querySelectorAll('#pages tbody tr[data-peer]')].map(r => [r.dataset.peer, "
         "Number(r.dataset.bytes), [...r.querySelectorAll('.wan')].map(w => w.dataset.wan)])")


def test_status_page_shows_gateways_traffic_and_a_cut(lab: Lab, tmp: Path) -> None:
    # Without node there is no browser driver: skipped. With it,
    # scripts/install-deps installs chromium and the npm packages, so a
    # missing one is a failure, not a skip that would hide the page's test.
    if not shutil.which("node"):
        pytest.skip("needs node (the browser driver, playwright-core, runs on it)")
    assert Path(CHROMIUM).exists() and (BROWSER_DIR / "node_modules").is_dir(), \
        "Debian's chromium or tests/browser's npm packages are missing: run scripts/install-deps"
    started = time.monotonic()
    topo = onlink(lab, tmp)
    topo.write_config(onlink_gateways(topo))
    topo.route("install")
    topo.start_pm()
    (tmp / "proxy").mkdir()
    (tmp / "proxy" / "metrics").write_text(PROXY_METRICS)
    topo.cli.popen([sys.executable, "-m", "http.server", str(PROXY_PORT), "--bind", "127.0.0.1",
                    "--directory", str(tmp / "proxy")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exporter = topo.cli.popen([sys.executable, str(PLUGIN_DIR / "braid"), "exporter", "--listen",
                               f"127.0.0.1:{PORT}", "--status", str(tmp / "gateways.json"), "--page-interval", "0.5",
                               "--proxy-metrics", f"http://127.0.0.1:{PROXY_PORT}/metrics"],
                              stdout=subprocess.DEVNULL)
    wait_for("gwsteer's status file", (tmp / "gateways.json").exists, 5)
    topo.cli.wait_listening(PORT, "127.0.0.1", 10 * TIME_SCALE, proc=exporter)
    topo.cli.wait_listening(PROXY_PORT, "127.0.0.1", 10 * TIME_SCALE)

    def api() -> dict[str, Any]:
        def get() -> dict[str, Any]:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/api/status", timeout=5) as resp:
                data: dict[str, Any] = json.loads(resp.read())
                return data
        return inside(topo.cli.name, get, timeout=10 * TIME_SCALE)

    wait_for("both gateways up", lambda: {g["id"]: g["up"] for g in api()["gateways"]} == {"gw1": True, "gw2": True}, 5)
    browser = Browser(topo, f"http://127.0.0.1:{PORT}/")
    try:
        wait_for("both gateways up on the page", lambda: browser.eval(CARDS) == {"gw1": "up", "gw2": "up"}, 5)
        wait_for("the relay on the page", lambda: browser.eval(RELAY)[0] == "up", 5)
        assert "braid-proxy client test: reachable" in browser.eval(RELAY)[1]
        idle = browser.eval(GRAPH)
        assert set(idle) == {"gw1 sent", "gw1 received", "gw2 sent", "gw2 received"}, idle

        # 2 s of upload at 1 MB/s: the graph's sent series rise (on the
        # gateway or gateways the kernel's scheduler picks).
        topo.server()
        client = topo.client(2_000_000, rate=1_000_000)

        def sending() -> dict[str, list[float]]:
            graph: dict[str, list[float]] = browser.eval(GRAPH)
            return graph if max(graph[f"{gw} sent"][1] for gw in ("gw1", "gw2")) > 100_000 else {}
        moving = wait_for("throughput on the graph", sending, 8,
                          diagnosis=lambda: f"graph {browser.eval(GRAPH)}; api {api()['gateways']}")
        assert all(moving[s][0] > idle[s][0] for s in idle), (idle, moving)  # new points drawn
        rates = browser.eval(RATES)
        print(f"graph during the upload: {moving}; cards: {rates}")
        # The upload is a page load to the server in the table, with a cell per WAN it has a subflow on.
        loads = wait_for("the upload in the page loads table", lambda: [
            r for r in browser.eval(PAGES) if r[0] == SERVER and r[1] > 100_000 and r[2]], 5,
            diagnosis=lambda: json.dumps(api()["pages"]))
        print(f"page loads on the page: {loads}")

        topo.cut("gw1")
        cut_at = time.monotonic()
        wait_for("gw1 down on the page", lambda: browser.eval(CARDS) == {"gw1": "down", "gw2": "up"},
                 SEEN_DOWN_BOUND_S + 5)
        down_s = time.monotonic() - cut_at
        assert down_s <= SEEN_DOWN_BOUND_S * TIME_SCALE, f"gw1 down on the page after {down_s:.2f} s"
        events = wait_for("gw1's change listed", lambda: [e for e in browser.eval(EVENTS)
                                                          if "gw1 down" in e and "before the page" not in e], 3)
        OUT.mkdir(exist_ok=True)
        browser.command(screenshot=str(OUT / "status-page.png"))
        print(f"gw1 cut: down on the page after {down_s:.2f} s; events {events}; "
              f"whole test {time.monotonic() - started:.1f} s")
    finally:
        browser.close()
    stop_process(client)
