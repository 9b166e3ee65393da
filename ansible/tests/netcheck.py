"""Tiny TCP servers and clients for checking firewall rules with real connections.

A server answers every connection with its tag and closes; a client prints
what it got, ``timeout`` (dropped) or ``refused`` (reset). Both run inside a
braid_testbed namespace, bounded in time::

    ns.popen(server_cmd(1081, "redirected"))
    assert connect(ns, "203.0.113.1", 80) == "redirected"
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from braid_testbed.netns import Namespace
from braid_testbed.topology import Topology, interface_counters

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


def server_cmd(port: int, answer: str) -> list[str]:
    return ["python3", "-c", _SERVER, str(port), answer]


def connect(ns: Namespace, host: str, port: int, uid: int | None = None) -> str:
    """Connect from ``ns`` (as ``uid`` if given); return the answer, 'timeout' or 'refused'."""
    cmd = ["python3", "-c", _CLIENT, host, str(port), str(CONNECT_TIMEOUT_S)]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    return ns.run(cmd, timeout=CONNECT_TIMEOUT_S + 10).stdout.strip()


def socks_download(ns: Namespace, url: str, dest: Path, wans: tuple[str, ...] = (), timeout_s: int = 60
                   ) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """Download ``url`` into ``dest`` through braid-proxy client's SOCKS port in ``ns``
    (127.0.0.1:1080): curl's result (its stdout: the bytes downloaded) and the bytes
    each of ``wans`` (interfaces of ``ns``) received meanwhile."""
    before = [interface_counters(ns, wan)[1] for wan in wans]
    got = ns.run(["curl", "-sS", "--max-time", str(timeout_s), "--socks5", "127.0.0.1:1080", "-o", str(dest),
                  "-w", "%{size_download}", url], check=False, timeout=timeout_s + 30)
    return got, [interface_counters(ns, wan)[1] - b for wan, b in zip(wans, before, strict=True)]
