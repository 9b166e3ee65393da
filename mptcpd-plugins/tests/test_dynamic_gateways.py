"""Host network-namespace tests of gateways named by their interface.

``interface = e2`` instead of a fixed source: gwsteer (mptcpd's network
monitor) and ``gwsteer-route follow`` (rtnetlink) follow the interface's
address and default route as DHCP, RA or hotplug change them, while one
mptcpd keeps running.  Topology: :func:`onlink` with two gateways; gw1 is
static (10.1.1.2 via 10.1.1.1, the client's main default route), gw2 is
named by its interface e2, whose default route (metric 100) is what a
DHCP client or RA would have installed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from test_integration import _finish, _status

from braid_testbed.gateway_topologies import PORT, ROUTE, SERVER, SERVER6, Topo, onlink
from braid_testbed.mptcpd_lab import PLUGIN_DIR, Lab, popen_text, subflows
from braid_testbed.wait import TIME_SCALE, wait_for
from gwsteer.ss import split_endpoint

#: How soon an address change must show in the subflows (the brief of the feature).
MOVE_S = 2.0

_BYTES_ACKED = re.compile(r"bytes_acked:(\d+)")


def _acked_by_source(topo: Topo) -> dict[str, int]:
    """Bytes acknowledged per local address over the established subflows (ss -tinM)."""
    out = topo.cli.run(["ss", "-tinH", "state", "established", f"( dport = :{PORT} )"]).stdout
    acked: dict[str, int] = {}
    local = None
    for line in out.splitlines():
        cols = line.split()
        if not line[:1].isspace() and len(cols) >= 4:
            local = cols[2].rsplit(":", 1)[0].strip("[]")
        m = _BYTES_ACKED.search(line)
        if m and local is not None:
            acked[local] = acked.get(local, 0) + int(m.group(1))
    return acked


def _locals(topo: Topo) -> set[str]:
    """Local addresses of the established subflows (no brackets around IPv6)."""
    return {local.strip("[]") for local, _ in subflows(topo.cli, PORT)}


def _follow(topo: Topo, notify_socket: Path | None = None) -> subprocess.Popen[str]:
    """Start ``gwsteer-route follow`` in the client (stopped with the namespace), telling
    its readiness to ``notify_socket`` as systemd's ``NOTIFY_SOCKET`` if given."""
    env = {**os.environ, "NOTIFY_SOCKET": str(notify_socket)} if notify_socket else None
    with (topo.tmp / "follow.log").open("w") as log:  # what it changed, for a failing test
        proc = popen_text(topo.cli, [sys.executable, ROUTE, "--config", str(topo.config), "follow"],
                          stdout=log, stderr=subprocess.STDOUT, env=env)
    topo.procs.append(proc)
    return proc


def _has_rule(topo: Topo, source: str, v6: bool = False) -> bool:
    out = topo.cli.run(["ip", "-6" if v6 else "-4", "rule", "show"]).stdout
    return f"from {source} lookup 1001" in out


def _start(lab: Lab, tmp: Path, v6: bool = False) -> Topo:
    """The topology, config, follower and both mptcpds, with both gateways up."""
    # 8 Mbit/s per client link: a 1.5 MB/s transfer needs both gateways.
    topo = onlink(lab, tmp, shape_mbit=8, ipv6=v6)
    if v6:
        gateways = (f"[gateway gw1]\nsource = fc00:1::2\nhops = fc00:1::1\nprobe = {SERVER6}\n"
                    f"[gateway wan]\ninterface = e2\nfamily = ipv6\nprobe = {SERVER6}\n")
        # Behind the main default route (metric 1024): e1 stays the way out.
        topo.cli.run(["ip", "-6", "route", "add", "default", "via", "fc00:2::1", "dev", "e2",
                      "metric", "2000"])
    else:
        gateways = "[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\n[gateway wan]\ninterface = e2\n"
        topo.cli.run(["ip", "route", "add", "default", "via", "10.1.2.1", "dev", "e2", "metric", "100"])
        # A renewed lease's new address is a secondary; keep it when the old primary goes.
        topo.cli.sysctl("net.ipv4.conf.e2.promote_secondaries", "1")
    topo.write_config(gateways)
    _follow(topo)
    first = "fc00:2::2" if v6 else "10.1.2.2"
    wait_for("follower's rule for e2", lambda: _has_rule(topo, first, v6), 15)
    topo.start_pm()
    wait_for("both gateways up", lambda: (st := _status(topo)) != {}
             and st["gw1"]["up"] and st["wan"]["up"], 5)
    assert _status(topo)["wan"]["source"] == first and _status(topo)["wan"]["interface"] == "e2"
    return topo


def _renew(topo: Topo, old: str, new: str, plen: int, v6: bool) -> float:
    """Emulate a lease renewed to another address: new added, old deleted,
    default route re-installed via the same router. Returns when it did."""
    fam = "-6" if v6 else "-4"
    extra = ["nodad"] if v6 else []
    router = "fc00:2::1" if v6 else "10.1.2.1"
    topo.cli.run(["ip", fam, "addr", "add", f"{new}/{plen}", "dev", "e2", *extra])
    topo.cli.run(["ip", fam, "addr", "del", f"{old}/{plen}", "dev", "e2"])
    topo.cli.run(["ip", fam, "route", "replace", "default", "via", router, "dev", "e2",
                  "metric", "2000" if v6 else "100"])
    return time.monotonic()


def _address_change(topo: Topo, old: str, new: str, plen: int, v6: bool) -> None:
    """Mid-transfer renew: within MOVE_S the old subflow is gone and the new
    address's subflow carries data; the transfer arrives byte-exact."""
    dst = SERVER6 if v6 else SERVER
    server = topo.server(bind=dst)
    client = topo.client(4_500_000, rate=1_500_000, dst=dst)
    wait_for("a subflow from e2", lambda: old in _locals(topo), 5)
    wait_for("data from e2's address", lambda: _acked_by_source(topo).get(old, 0) > 50_000, 3,
             diagnosis=lambda: str(_acked_by_source(topo)))
    renewed = _renew(topo, old, new, plen, v6)
    wait_for("subflow moved to the new address", lambda: (
        new in (now := _locals(topo)) and old not in now), MOVE_S)
    start = _acked_by_source(topo).get(new, 0)
    wait_for("data from the new address", lambda: _acked_by_source(topo).get(new, 0) > start + 50_000,
             MOVE_S)
    moved_after = time.monotonic() - renewed
    assert moved_after < MOVE_S * TIME_SCALE, moved_after
    print(f"moved and carrying data {moved_after:.2f} s after the renew")
    status = _status(topo)["wan"]
    assert status["source"] == new and status["up"], status
    cli = topo.cli.run([str(PLUGIN_DIR / "gwsteer-cli"), "--config", str(topo.config), "--json"])
    shown = {g["id"]: g for g in json.loads(cli.stdout)["gateways"]}["wan"]
    assert (shown["interface"], shown["source"]) == ("e2", new), shown
    assert [split_endpoint(s["local"])[0] for s in shown["subflow_list"]] == [new], shown
    wait_for("follower's rule for the new address", lambda: _has_rule(topo, new, v6), 2)
    assert not _has_rule(topo, old, v6)
    _finish(topo, client, server)


def test_follow_says_ready_once_its_routes_are_in(lab: Lab, tmp: Path) -> None:
    """Under systemd (``Type=notify``) mptcpd starts after ``gwsteer-route follow`` says
    READY=1, so that the first subflows leave through their gateways: it says so once
    every gateway's rule is installed, and not before."""
    topo = onlink(lab, tmp)
    topo.write_config("[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\n"
                      "[gateway wan]\ninterface = e2\n")
    topo.cli.run(["ip", "route", "add", "default", "via", "10.1.2.1", "dev", "e2", "metric", "100"])
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(tmp / "notify"))
        notify.settimeout(15 * TIME_SCALE)
        _follow(topo, tmp / "notify")
        message = notify.recv(256)
        rules = topo.cli.run(["ip", "-4", "rule", "show"]).stdout
    assert message == b"READY=1"
    assert "from 10.1.1.2 lookup" in rules and "from 10.1.2.2 lookup" in rules, rules


def test_ipv4_address_change_moves_the_subflow(lab: Lab, tmp: Path) -> None:
    """A DHCP renew to a new address (new added, old deleted, default route
    re-installed) moves e2's subflow to the new address mid-transfer."""
    topo = _start(lab, tmp)
    _address_change(topo, "10.1.2.2", "10.1.2.3", 24, v6=False)


def test_ipv6_address_change_moves_the_subflow(lab: Lab, tmp: Path) -> None:
    """The same for IPv6.  Router advertisements are emulated by adding the
    address (nodad, as after DAD) and the default route directly: what
    gwsteer and gwsteer-route see of RA is exactly that address and route."""
    topo = _start(lab, tmp, v6=True)
    _address_change(topo, "fc00:2::2", "fc00:2::3", 64, v6=True)


def test_ipv6_source_skips_unfit_addresses(lab: Lab, tmp: Path) -> None:
    """An IPv6 address added beside e2's current one takes the gateway only if
    it is fit for new connections: not one still in duplicate address
    detection, nor a deprecated one (preferred lifetime over); a fit one does
    (a renew). The lab's prefixes are all unique local, so the rank of a
    global address over a ULA is not part of this test."""
    topo = _start(lab, tmp, v6=True)

    def source() -> str:
        return str(_status(topo)["wan"]["source"])

    # DAD takes a second on the veth: tentative meanwhile, then fit.
    topo.cli.run(["ip", "-6", "addr", "add", "fc00:2::7/64", "dev", "e2"])
    topo.cli.run(["ip", "-6", "addr", "add", "fc00:2::8/64", "dev", "e2", "nodad", "preferred_lft", "0"])
    time.sleep(0.5 * TIME_SCALE)
    assert source() == "fc00:2::2", _status(topo)["wan"]
    # The current address goes: the one that passed DAD takes over, not the deprecated one.
    wait_for("DAD done", lambda: "tentative" not in topo.cli.run(
        ["ip", "-6", "addr", "show", "dev", "e2"]).stdout, 5)
    topo.cli.run(["ip", "-6", "addr", "del", "fc00:2::2/64", "dev", "e2"])
    wait_for("the source moved to the fit address", lambda: source() == "fc00:2::7", MOVE_S,
             diagnosis=lambda: str(_status(topo)["wan"]))
    # Only the deprecated one left: still valid, so the gateway keeps a source.
    topo.cli.run(["ip", "-6", "addr", "del", "fc00:2::7/64", "dev", "e2"])
    wait_for("the deprecated address, for want of another", lambda: source() == "fc00:2::8", MOVE_S,
             diagnosis=lambda: str(_status(topo)["wan"]))


def test_interface_removed_and_recreated(lab: Lab, tmp: Path) -> None:
    """Hotplug: e2's veth pair deleted (the gateway goes down at once, its
    subflow goes), then re-created with the same names (it comes back after
    the probe hysteresis and the connection gains a subflow on it) -- one
    mptcpd throughout; the connection's data arrives byte-exact."""
    topo = _start(lab, tmp)
    gw2 = topo.net.ns_name("gw2")
    server = topo.server()
    release = tmp / "release"
    client = topo.client(1_000_000, rate=200_000, hold=release)
    wait_for("a subflow from e2", lambda: "10.1.2.2" in _locals(topo), 5)
    mptcpd = topo.procs[-1]

    topo.cli.run(["ip", "link", "del", "e2"])
    unplugged = time.monotonic()
    wait_for("gateway down", lambda: not _status(topo)["wan"]["up"], 1)
    down_after = time.monotonic() - unplugged
    assert _status(topo)["wan"]["source"] == "", _status(topo)["wan"]
    wait_for("e2's subflow gone", lambda: "10.1.2.2" not in _locals(topo), 2)
    wait_for("follower's rule gone", lambda: not _has_rule(topo, "10.1.2.2"), 2)
    # install/check skip a gateway whose interface is not there (hotplug): no error.
    check = topo.route("check")
    assert "wan: interface e2 is not there; nothing installed yet" in check.stdout, check.stdout

    topo.cli.run(["ip", "link", "add", "e2", "type", "veth", "peer", "name", "c", "netns", gw2])
    topo.gws["gw2"].run(["ip", "addr", "add", "10.1.2.1/24", "dev", "c"])
    topo.gws["gw2"].run(["ip", "link", "set", "c", "up"])
    topo.cli.run(["ip", "addr", "add", "10.1.2.2/24", "dev", "e2"])
    topo.cli.run(["ip", "link", "set", "e2", "up"])
    topo.cli.run(["ip", "route", "add", "default", "via", "10.1.2.1", "dev", "e2", "metric", "100"])
    plugged = time.monotonic()
    wait_for("gateway up again", lambda: _status(topo)["wan"]["up"], 5)
    wait_for("a new subflow from e2", lambda: "10.1.2.2" in _locals(topo), 5)
    back_after = time.monotonic() - plugged
    assert mptcpd.poll() is None, "mptcpd must not have restarted"
    assert _has_rule(topo, "10.1.2.2")
    print(f"down after {down_after:.2f} s, subflow back after {back_after:.2f} s")
    release.touch()
    _finish(topo, client, server)
