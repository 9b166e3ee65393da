"""Tiny TCP servers and clients for checking firewall rules with real connections.

A server answers every connection with its tag and closes; a client prints
what it got, ``timeout`` (dropped) or ``refused`` (reset). Both run inside a
braid_testbed namespace, bounded in time::

    ns.popen(server_cmd(1081, "redirected"))
    assert connect(ns, "203.0.113.1", 80) == "redirected"
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from braid_testbed.netns import Namespace
from braid_testbed.topology import Topology, interface_counters

# The web server of the booted tests: behind every relay.
WEB_ADDRESS = "203.0.113.80"

# A dropped SYN shows as a timeout: long enough for a veth round trip under load.
CONNECT_TIMEOUT_S = 2.0

_SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16)
while True:
    c, _ = s.accept(); c.sendall(sys.argv[2].encode()); c.close()
"""
_CLIENT = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print(c.recv(64).decode() or "empty")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print(f"error {e.errno}")
"""


class FirewallTopology(Topology):
    """Namespaces of the deployment tests: a prefix of their own (``bans-``)."""

    ns_prefix = "bans-"


def tag(suffix: str) -> str:
    """A topology tag unique to this test process."""
    return f"{os.getpid() % 100000}{suffix}"


def web_side_source(relay_index: int) -> str:
    """The address relay number ``relay_index`` (1, 2, ...) of :func:`box_topology`
    reaches web from: whom web's log names for a request through it."""
    return "203.0.113.1" if relay_index == 1 else f"198.18.{relay_index}.1"


def box_topology(suffix: str, box: str, uplinks: Sequence[tuple[str, str]], relays: Mapping[str, str],
                 dead_uplink: tuple[str, str] | None = None) -> FirewallTopology:
    """A client box, its gateways, relays and a web server, as the booted tests run them.

    ``box`` has one uplink ``wanN`` per (its address/prefix, its gateway's
    address) in ``uplinks``, to gateway ``gwN``; every gateway leads to every
    relay of ``relays`` (name: its braid-proxy address, on its ``lo``), each
    relay to ``web`` (:data:`WEB_ADDRESS`, from :func:`web_side_source`).
    ``dead_uplink`` is one more uplink whose gateway leads nowhere. The box's
    main table routes by its first uplink, as that uplink's DHCP would."""
    topo = FirewallTopology(tag(suffix))
    every = [*uplinks, *([dead_uplink] if dead_uplink is not None else [])]
    for node in (box, *(f"gw{n}" for n in range(1, len(every) + 1)), *relays, "web"):
        topo.node(node)
    for n, (box_cidr, hop) in enumerate(every, start=1):
        wan = ipaddress.ip_interface(box_cidr).network
        topo.link(box, f"wan{n}", box_cidr, f"gw{n}", "eth0", f"{hop}/{wan.prefixlen}")
        if n > len(uplinks):
            continue  # the dead uplink
        for r, (relay, address) in enumerate(relays.items(), start=1):
            net = f"10.{r + 2}.{n}"
            topo.link(f"gw{n}", f"eth{r}", f"{net}.1/24", relay, f"eth{n}", f"{net}.2/24")
            topo.route(f"gw{n}", f"{address}/32", f"{net}.2")
            topo.route(relay, str(wan), f"{net}.1")
    for r, (relay, address) in enumerate(relays.items(), start=1):
        source = web_side_source(r)
        if r == 1:
            topo.link(relay, "eth0", f"{source}/24", "web", "eth0", f"{WEB_ADDRESS}/24")
        else:
            web_side = f"198.18.{r}.2"
            topo.link(relay, "eth0", f"{source}/24", "web", f"eth{r - 1}", f"{web_side}/24")
            topo.route(relay, f"{WEB_ADDRESS}/32", web_side)
        topo.address(relay, "lo", f"{address}/32")
    topo.route(box, "default", uplinks[0][1])
    return topo


def server_cmd(port: int, answer: str) -> list[str]:
    return ["python3", "-c", _SERVER, str(port), answer]


def connect(ns: Namespace, host: str, port: int, uid: int | None = None) -> str:
    """Connect from ``ns`` (as ``uid`` if given); return the answer, 'timeout' or 'refused'."""
    cmd = ["python3", "-c", _CLIENT, host, str(port), str(CONNECT_TIMEOUT_S)]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    return ns.run(cmd, timeout=CONNECT_TIMEOUT_S + 10).stdout.strip()


def socks_download(ns: Namespace, url: str, dest: Path, wans: tuple[str, ...] = (), timeout_s: int = 60,
                   socks: str | None = "127.0.0.1:1080") -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """Download ``url`` into ``dest`` through braid-proxy client's SOCKS port in ``ns``
    (``socks``; None: a plain connection, as the box's transparent redirect
    takes it): curl's result (its stdout: the bytes downloaded) and the bytes
    each of ``wans`` (interfaces of ``ns``) received meanwhile."""
    before = [interface_counters(ns, wan)[1] for wan in wans]
    proxy = ["--socks5", socks] if socks else []
    got = ns.run(["curl", "-sS", "--max-time", str(timeout_s), *proxy, "-o", str(dest),
                  "-w", "%{size_download}", url], check=False, timeout=timeout_s + 30)
    return got, [interface_counters(ns, wan)[1] - b for wan, b in zip(wans, before, strict=True)]


def subflow_sources(ns: Namespace, port: int) -> set[str]:
    """Local addresses of the established TCP sockets (MPTCP subflows included) to a remote port."""
    out = ns.run(["ss", "-Htn", "state", "established", "dst", f":{port}"]).stdout
    return {line.split()[-2].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()}
