"""Tiny network-namespace lab for the gwsteer tests and benchmark.

Everything is created under a unique prefix (``bpm-<pid>-<n>-``) and
torn down by the context managers even when a test fails.  No netem is
needed (the host has none); ``tbf`` shapes links when asked.

Example::

    with Lab() as lab:
        a, b = lab.netns("a"), lab.netns("b")
        lab.link(a, "e0", "10.0.0.1/24", b, "e0", "10.0.0.2/24")
        a.run("ping", "-c1", "10.0.0.2")
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PLUGIN_DIR = HERE.parent
MPTCPD = "/usr/libexec/mptcpd"
_counter = itertools.count()


def sh(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a command, capture its output, raise with stderr on failure."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


class Netns:
    """One network namespace."""

    def __init__(self, lab: Lab, name: str) -> None:
        self.lab = lab
        self.name = name
        sh("ip", "netns", "add", name)
        self.run("ip", "link", "set", "lo", "up")
        self.sysctl("net.ipv4.conf.all.rp_filter", "0")
        self.sysctl("net.ipv4.conf.default.rp_filter", "0")

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a command inside the namespace."""
        return sh("ip", "netns", "exec", self.name, *args, check=check, timeout=timeout)

    def popen(self, *args: str, stdout: Any = subprocess.DEVNULL,
              stderr: Any = subprocess.DEVNULL, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start a process inside the namespace; the lab kills it at exit."""
        p = subprocess.Popen(["ip", "netns", "exec", self.name, *args], stdout=stdout,
                             stderr=stderr, text=True, env=env, start_new_session=True)
        self.lab.processes.append(p)
        return p

    def sysctl(self, key: str, value: str) -> None:
        """Set a sysctl in this namespace."""
        self.run("sysctl", "-qw", f"{key}={value}")

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``ip <args>`` in this namespace."""
        return sh("ip", "-n", self.name, *args, check=check)

    def counters(self, dev: str) -> tuple[int, int]:
        """(tx_bytes, rx_bytes) of ``dev``: bytes counted on the wire."""
        out = json.loads(self.ip("-s", "-j", "link", "show", "dev", dev).stdout)
        stats = out[0]["stats64"]
        return int(stats["tx"]["bytes"]), int(stats["rx"]["bytes"])

    def subflows(self, port: int) -> list[tuple[str, str]]:
        """Established TCP subflows to/from ``port``: (local, remote) pairs."""
        out = self.run("ss", "-tnH", "state", "established",
                       f"( dport = :{port} or sport = :{port} )").stdout
        pairs = []
        for line in out.splitlines():
            cols = line.split()
            if len(cols) >= 4:
                pairs.append((cols[2].rsplit(":", 1)[0], cols[3].rsplit(":", 1)[0]))
        return pairs

    def forward(self) -> None:
        """Enable IPv4 and IPv6 forwarding."""
        self.sysctl("net.ipv4.ip_forward", "1")
        self.sysctl("net.ipv6.conf.all.forwarding", "1")


class Lab:
    """Owns namespaces and processes; cleans everything up on exit."""

    def __init__(self) -> None:
        self.prefix = f"bpm-{os.getpid()}-{next(_counter)}-"
        self.namespaces: list[Netns] = []
        self.processes: list[subprocess.Popen[str]] = []

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def netns(self, short: str) -> Netns:
        """Create namespace ``<prefix><short>``."""
        ns = Netns(self, self.prefix + short)
        self.namespaces.append(ns)
        return ns

    def link(self, a: Netns, a_dev: str, a_addr: str | Sequence[str],
             b: Netns, b_dev: str, b_addr: str | Sequence[str]) -> None:
        """Create a veth pair between two namespaces and address both ends."""
        sh("ip", "link", "add", a_dev, "netns", a.name, "type", "veth",
           "peer", "name", b_dev, "netns", b.name)
        for ns, dev, addrs in ((a, a_dev, a_addr), (b, b_dev, b_addr)):
            for addr in [addrs] if isinstance(addrs, str) else addrs:
                family = "-6" if ":" in addr else "-4"
                ns.ip(family, "addr", "add", addr, "dev", dev, "nodad")
            ns.ip("link", "set", dev, "up")

    def stop(self, p: subprocess.Popen[str], sig: int = signal.SIGTERM, wait: float = 5) -> None:
        """Stop one process we started (its whole session)."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
                p.wait(timeout=wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=wait)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass

    def close(self) -> None:
        """Kill our processes, delete our namespaces."""
        for p in self.processes:
            self.stop(p)
        self.processes.clear()
        for ns in reversed(self.namespaces):
            sh("ip", "netns", "del", ns.name, check=False)
        self.namespaces.clear()


def start_mptcpd(ns: Netns, config: Path, log: Path) -> subprocess.Popen[str]:
    """Run mptcpd with the freshly built gwsteer plugin inside ``ns``."""
    ns.sysctl("net.mptcp.enabled", "1")
    ns.sysctl("net.mptcp.pm_type", "1")
    env = dict(os.environ, BRAID_GWSTEER_CONFIG=str(config))
    out = log.open("w")
    p = ns.popen(MPTCPD, f"--plugin-dir={PLUGIN_DIR}", "--path-manager=gwsteer",
                 "--load-plugins=gwsteer", "--log=stderr", "-d",
                 stdout=out, stderr=out, env=env)
    return p


# Under braid's VM (software-emulated CPU) everything runs several times
# slower than on the host; stretch the waits rather than the expectations.
TIME_SCALE = 6.0 if os.environ.get("BRAID_IN_VM") == "1" else 1.0


def wait_for(cond: Any, timeout: float, step: float = 0.05, what: str = "condition") -> Any:
    """Poll ``cond()`` until truthy; return its value or raise."""
    end = time.monotonic() + timeout * TIME_SCALE
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)
