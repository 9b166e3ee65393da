"""A lab for mptcpd and gwsteer, on top of braid's testbed library.

Namespaces, veth links, addresses, routes and the guaranteed clean-up of
every process started in a namespace come from ``eval/braid_testbed``
(:class:`~braid_testbed.topology.Topology`,
:class:`~braid_testbed.netns.Namespace`).  This module only adds what
the gwsteer tests and benchmark need on top: a per-test :class:`Lab`
that brings its topologies down even when a test fails, mptcpd with
the freshly built plugin and the subflow listing (polling:
:mod:`braid_testbed.wait`).

Example::

    with Lab() as lab:
        topo = lab.topology()
        topo.node("a", forward=False)
        topo.node("b", forward=False)
        topo.link("a", "e0", "10.0.0.1/24", "b", "e0", "10.0.0.2/24")
        lab.up(topo)
        topo["a"].run(["ping", "-c1", "10.0.0.2"])
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .netns import Namespace, stop_process
from .topology import Topology, interface_counters

#: The checkout's mptcpd-plugins/: gwsteer.so and its tools, as built there.
PLUGIN_DIR = Path(__file__).resolve().parents[2] / "mptcpd-plugins"

MPTCPD = "/usr/libexec/mptcpd"

#: Our namespaces are ``bpm-<tag>-<node>``: distinct from the eval suite's
#: ``braid-`` so each suite's leak checks only see its own.
NS_PREFIX = "bpm-"
_counter = itertools.count()

__all__ = ["MPTCPD", "PLUGIN_DIR", "KernelSubflow", "Lab", "Namespace", "Topology",
           "interface_counters", "kernel_subflows", "popen_text", "start_mptcpd", "stop_process",
           "subflows"]


class GwsteerTopology(Topology):
    """A braid_testbed topology in the gwsteer tests' namespace prefix."""

    ns_prefix = NS_PREFIX


class Lab:
    """The topologies of one test (or benchmark run), always brought down.

    Tags are unique per process and lab, so concurrent test runs never
    share a namespace; leftovers of a crashed run with the same tag are
    purged by braid_testbed when the topology comes up.
    """

    def __init__(self) -> None:
        self.tag = f"{os.getpid()}-{next(_counter)}"
        self._topologies: list[Topology] = []

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def topology(self) -> Topology:
        """A new, empty topology declaration (bring it up with :meth:`up`)."""
        return GwsteerTopology(f"{self.tag}-{len(self._topologies)}")

    def up(self, topo: Topology) -> Topology:
        """Create ``topo``; :meth:`close` removes it and everything running in it."""
        self._topologies.append(topo)
        return topo.up()

    def close(self) -> None:
        """Kill every process in our namespaces, then delete them."""
        for topo in reversed(self._topologies):
            topo.down()
        self._topologies.clear()


def popen_text(ns: Namespace, cmd: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """``ns.popen`` in text mode (str pipes); stopped when the namespace closes."""
    proc: subprocess.Popen[str] = ns.popen(cmd, text=True, **kwargs)  # type: ignore[assignment]
    return proc


def subflows(ns: Namespace, port: int) -> list[tuple[str, str]]:
    """Established TCP subflows to/from ``port`` in ``ns``: (local, remote) pairs."""
    out = ns.run(["ss", "-tnH", "state", "established",
                  f"( dport = :{port} or sport = :{port} )"]).stdout
    pairs = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4:
            pairs.append((cols[2].rsplit(":", 1)[0], cols[3].rsplit(":", 1)[0]))
    return pairs


@dataclass(frozen=True)
class KernelSubflow:
    """One established MPTCP subflow as ``ss -tni`` shows it."""

    local: str
    remote: str
    #: ss's MPTCP subflow flags: b = our backup flag, B = the peer's, j/J = join, m/M = initial.
    flags: str
    #: Local token of the MPTCP connection.
    token: str

    @property
    def backup(self) -> bool:
        """Whether the kernel carries our (local) backup request on this subflow."""
        return "b" in self.flags


_SS_MPTCP = re.compile(r"tcp-ulp-mptcp flags:(\w*) token:\w+\(id:\d+\)/(\w+)")


def kernel_subflows(ns: Namespace, port: int) -> list[KernelSubflow]:
    """Established MPTCP subflows to/from ``port`` in ``ns``, with flags and token."""
    out = ns.run(["ss", "-tniH", "state", "established",
                  f"( dport = :{port} or sport = :{port} )"]).stdout.splitlines()
    found = []
    for head, info in itertools.pairwise(out):
        cols = head.split()
        m = _SS_MPTCP.search(info)
        if head[:1].isspace() or len(cols) < 4 or m is None:
            continue
        found.append(KernelSubflow(cols[2].rsplit(":", 1)[0].strip("[]"),
                                   cols[3].rsplit(":", 1)[0].strip("[]"), m.group(1), m.group(2)))
    return found


def start_mptcpd(ns: Namespace, config: Path, log: Path) -> subprocess.Popen[str]:
    """Run mptcpd with the freshly built gwsteer plugin inside ``ns``.

    The namespace gets the userspace path manager; mptcpd logs (debug
    level) to ``log``.  It stops with the namespace.
    """
    ns.sysctl("net.mptcp.enabled", "1")
    ns.sysctl("net.mptcp.pm_type", "1")
    env = dict(os.environ, BRAID_GWSTEER_CONFIG=str(config))
    with log.open("w") as out:
        return popen_text(ns, [MPTCPD, f"--plugin-dir={PLUGIN_DIR}", "--path-manager=gwsteer",
                               "--load-plugins=gwsteer", "--log=stderr", "-d"],
                          stdout=out, stderr=out, env=env)
