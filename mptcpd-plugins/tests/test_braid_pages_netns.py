"""Page loads as ``braid exporter`` and ``braid status`` see them, on the
host kernel in network namespaces.

The onlink lab (client, gw1, gw2, server; mptcpd with the built plugin on
both ends, so each connection gets a subflow on e1 and on e2), the
exporter in the client namespace sampling every 0.1 s with an idle time
of 300 ms (the host kernel has no hywf and its sysctls: the rules are
given on the command line; its scheduler is the default one, so the
split is whatever that did). Two uploads to the one server, the second
started once the first's page has closed; each connection is held open,
idle, after its data and the server's reply, so that ``ss`` still lists what its subflows
carried when the test reads it. The exporter must report two pages for
the server whose bytes per WAN are exactly what the subflows carried
(``ss``'s ``tcp_info`` counters, the tracker's own source, read while the
connection is idle) and agree with the bytes the client's interfaces sent
on the wire: at least what each subflow had acknowledged, at most what it
sent plus 10 % for headers and acknowledgements plus 20 kB for gwsteer's
probes and the handshakes. (TCP counts a segment as sent when it hands
it to the interface: one that the client's own shaper drops at a full
queue, or the veth at its peer's full backlog, is counted, never reaches
the wire, and is sent again. What was acknowledged crossed the wire.)
``braid status --json`` returns the same pages.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from braid_status import cli
from braid_testbed.gateway_topologies import PORT, SERVER, Topo, onlink, onlink_gateways
from braid_testbed.mptcpd_lab import PLUGIN_DIR, Lab, stop_process
from braid_testbed.netns import inside
from braid_testbed.wait import TIME_SCALE, wait_for

EXPORTER_PORT = 9477
URL = f"http://127.0.0.1:{EXPORTER_PORT}"
IDLE_MS = 300
INTERVAL_S = 0.1
NBYTES = 400_000
RATE = 1_000_000  # bytes/s: 0.4 s of data per page load ...
SHAPE_MBIT = 6  # ... more than one WAN carries (750 kB/s): the default scheduler spills onto the second
#: A page's payload is a few hundred kB; the reply page after a release is a few bytes.
BIG = 100_000
HEADERS = 0.10
SLACK = 20_000


def pages(topo: Topo) -> list[dict[str, Any]]:
    """The exporter's page loads for the server, newest first."""
    def get() -> dict[str, Any]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{URL}/api/pages", timeout=5) as resp:
            data: dict[str, Any] = json.loads(resp.read())
            return data
    return [p for p in inside(topo.cli.name, get, timeout=10 * TIME_SCALE)["pages"] if p["peer"] == SERVER]


def status(topo: Topo) -> dict[str, Any]:
    res = topo.cli.run_main(cli.main, ["status", "--json", "--no-gateways", "--exporter", URL],
                            timeout=10 * TIME_SCALE)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def tx_counters(topo: Topo, counter: str) -> dict[str, int]:
    """A transmit counter (``bytes``, ``dropped``) of the client's WAN interfaces."""
    links = json.loads(topo.cli.run(["ip", "-j", "-s", "link", "show"]).stdout)
    return {link["ifname"]: int(link["stats64"]["tx"][counter]) for link in links if link["ifname"] in ("e1", "e2")}


def tx_bytes(topo: Topo) -> dict[str, int]:
    """Bytes the client's WAN interfaces sent, from their counters."""
    return tx_counters(topo, "bytes")


def drops(topo: Topo) -> dict[str, tuple[int, int]]:
    """Packets the client's WAN interfaces dropped so far: at their
    shapers (tbf) and at the veth itself (the peer's backlog full)."""
    veth = tx_counters(topo, "dropped")
    out = {}
    for dev in ("e1", "e2"):
        qdiscs = json.loads(topo.cli.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout)
        out[dev] = (sum(int(q.get("drops", 0)) for q in qdiscs), veth[dev])
    return out


def big(ps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in ps if p["bytes"] >= BIG]


def subflow_bytes(report: dict[str, Any], old: set[str]) -> dict[str, dict[str, int]]:
    """The one connection to the server not in ``old`` (tokens): its
    subflows' bytes per interface, sent, acknowledged (less the SYN's one,
    which ``bytes_acked`` counts) and received.

    It is held open by the client; the server has sent its reply and
    closed its side (CLOSE-WAIT) or is about to."""
    (conn,) = [c for c in report["connections"] if c["remote"] == f"{SERVER}:{PORT}" and c["token"] not in old]
    old.add(conn["token"])
    out: dict[str, dict[str, int]] = {}
    for s in conn["subflows"]:
        w = out.setdefault(s["interface"], {"sent": 0, "acked": 0, "received": 0})
        w["sent"] += s["bytes_sent"]
        w["acked"] += max(s["bytes_acked"] - 1, 0)
        w["received"] += s["bytes_received"]
    return out


def test_exporter_and_status_show_two_page_loads_per_wan(lab: Lab, tmp: Path) -> None:
    started = time.monotonic()
    topo = onlink(lab, tmp, shape_mbit=SHAPE_MBIT)
    topo.write_config(onlink_gateways(topo))
    topo.route("install")
    topo.start_pm()
    exporter = topo.cli.popen([sys.executable, str(PLUGIN_DIR / "braid"), "exporter", "--listen",
                               f"127.0.0.1:{EXPORTER_PORT}", "--status", str(tmp / "gateways.json"),
                               "--page-interval", str(INTERVAL_S), "--page-idle-ms", str(IDLE_MS),
                               "--page-scope", "1"], stdout=subprocess.DEVNULL)
    status_file = tmp / "gateways.json"
    wait_for("both gateways up", lambda: status_file.exists() and all(
        g["up"] for g in json.loads(status_file.read_text() or "{}").get("gateways", [{"up": False}])), 5)
    topo.cli.wait_listening(EXPORTER_PORT, "127.0.0.1", 10 * TIME_SCALE, proc=exporter)

    carried: list[dict[str, dict[str, int]]] = []
    tokens: set[str] = set()
    for i in (1, 2):
        before = tx_bytes(topo)
        server = topo.server(progress=f"received{i}")
        hold = tmp / f"release{i}"
        client = topo.client(NBYTES, rate=RATE, hold=hold)
        def received(n: int = i) -> bool:
            return topo.received_bytes(f"received{n}") >= NBYTES
        wait_for(f"upload {i} received", received, 10)

        # Held open and idle: its page closes after IDLE_MS without bytes.
        def closed(n: int = i) -> list[dict[str, Any]]:
            done = [p for p in big(pages(topo)) if not p["open"]]
            return done if len(done) == n else []
        seen = wait_for(f"page {i} closed", closed, 5, diagnosis=lambda: json.dumps(pages(topo)))
        report = status(topo)
        sub = subflow_bytes(report, tokens)
        wire = {w: n - before[w] for w, n in tx_bytes(topo).items()}
        carried.append(sub)
        page = seen[0]
        print(f"page {i}: {json.dumps(page['wans'])}; subflows {sub}; wire tx {wire}; "
              f"dropped so far (shaper, veth) {drops(topo)}")
        assert set(sub) == {"e1", "e2"} and all(v["sent"] for v in sub.values()), sub  # both WANs carried
        assert {w: (v["sent"], v["received"]) for w, v in page["wans"].items()} == \
            {w: (v["sent"], v["received"]) for w, v in sub.items()}
        assert sum(v["acked"] for v in sub.values()) >= NBYTES
        for w, v in sub.items():
            assert v["acked"] <= wire[w] <= v["sent"] * (1 + HEADERS) + SLACK, (w, v, wire)
        shares = [page["wans"][w]["share"] for w in ("e1", "e2")]
        assert abs(sum(shares) - 1) < 1e-9, shares
        hold.touch()
        assert client.wait(10 * TIME_SCALE) == 0
        server.wait(10 * TIME_SCALE)
        # The server's reply after the release is a page of its own (or lost with the
        # connection's close): let it close before the next page load starts.
        wait_for("no page open", lambda: not [p for p in pages(topo) if p["open"]], 5)

    report = status(topo)
    assert report["pages_error"] == "" and report["pages"]["idle_ms"] == IDLE_MS
    second, first = big([p for p in report["pages"]["pages"] if p["peer"] == SERVER])
    for page, sub in ((first, carried[0]), (second, carried[1])):
        assert {w: v["bytes"] for w, v in page["wans"].items()} == \
            {w: v["sent"] + v["received"] for w, v in sub.items()}
        assert page["connections"] == 1 and not page["open"]
    assert second["start"] >= first["end"] + IDLE_MS / 1000
    text = topo.cli.run_main(cli.main, ["status", "--no-gateways", "--exporter", URL], 10 * TIME_SCALE).stdout
    print(text)
    assert "recent page loads" in text and "not hywf" in text
    print(f"whole test {time.monotonic() - started:.1f} s")
    stop_process(exporter)
