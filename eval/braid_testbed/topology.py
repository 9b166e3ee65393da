"""Declare a topology of namespaces and veth links; bring it up and down.

A :class:`Topology` is a plain declaration (nodes, links with addresses and
shaping, routes, sysctls). ``up()`` creates it, removing any leftover from an
earlier run with the same tag first, so it is idempotent; ``down()`` and the
context manager remove every namespace (which also destroys its veths) and
kill every process started in them, even when the body raised.

Usage::

    topo = Topology("t1")
    topo.node("a", forward=False)
    topo.node("b")
    topo.link("a", "eth0", "10.0.0.1/24", "b", "eth0", "10.0.0.2/24",
              LinkSpec(rate_mbit=10, delay_ms=5))
    with topo:
        topo["a"].run(["ping", "-c1", "10.0.0.2"])
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from pathlib import Path
from types import TracebackType
from typing import Self

from pyroute2 import IPRoute

from .link import LinkSpec, netem_args
from .netns import CommandError, Namespace, inside, leftover_namespaces, purge_namespace

NS_PREFIX = "braid-"
# A link is made in the caller's namespace under a name that starts with
# this, then moved into its own: the only interfaces a topology adds there,
# each for a moment, unless the move fails.
TRANSIENT_LINK_PREFIX = "bt"


@dataclasses.dataclass
class Endpoint:
    """One end of a link: node, interface name in that node, CIDR address."""

    node: str
    ifname: str
    cidr: str

    @property
    def ip(self) -> str:
        return self.cidr.split("/")[0]


@dataclasses.dataclass
class Link:
    """A veth pair; ``a_to_b`` shapes traffic leaving a, ``b_to_a`` leaving b."""

    a: Endpoint
    b: Endpoint
    a_to_b: LinkSpec
    b_to_a: LinkSpec


@dataclasses.dataclass
class Route:
    node: str
    dst: str
    via: str
    table: int | None = None


@dataclasses.dataclass
class Address:
    """An extra address (IPv4 or IPv6) on any interface of a node, e.g. ``lo``."""

    node: str
    ifname: str
    cidr: str


@dataclasses.dataclass
class Rule:
    """Policy rule: traffic from ``src`` looks up ``table``."""

    node: str
    src: str
    table: int


class Topology:
    """Namespaces + veth links + routes, created and destroyed as one unit."""

    #: Namespace names are ``<ns_prefix><tag>-<node>``. A suite with its own
    #: leak check overrides it, so suites running side by side (e.g. the
    #: eval tests and the gwsteer tests) never see each other's namespaces.
    ns_prefix = NS_PREFIX

    def __init__(self, tag: str, spawn_inside: bool = False) -> None:
        if not tag.replace("-", "").isalnum() or len(tag) > 20:
            raise ValueError(f"topology tag must be short and alphanumeric, got {tag!r}")
        self.tag = tag
        self.nodes: dict[str, bool] = {}
        self.links: list[Link] = []
        self.routes: list[Route] = []
        self.rules: list[Rule] = []
        self.addresses: list[Address] = []
        self.sysctls: list[tuple[str, str, str]] = []
        self.ns: dict[str, Namespace] = {}
        # Start commands from a thread inside each namespace (Namespace).
        self.spawn_inside = spawn_inside

    # ---- declaration -------------------------------------------------------
    def node(self, name: str, forward: bool = True) -> None:
        self.nodes[name] = forward

    def link(
        self,
        a: str,
        a_if: str,
        a_cidr: str,
        b: str,
        b_if: str,
        b_cidr: str,
        spec: LinkSpec | None = None,
        reverse: LinkSpec | None = None,
    ) -> Link:
        """Declare a veth link; ``spec`` shapes a->b, ``reverse`` b->a (default: same)."""
        for node in (a, b):
            if node not in self.nodes:
                raise ValueError(f"link references unknown node {node!r}")
        for cidr in (a_cidr, b_cidr):
            ipaddress.ip_interface(cidr)
        fwd = spec or LinkSpec()
        rev = reverse or fwd
        fwd.validate()
        rev.validate()
        link = Link(Endpoint(a, a_if, a_cidr), Endpoint(b, b_if, b_cidr), fwd, rev)
        self.links.append(link)
        return link

    def address(self, node: str, ifname: str, cidr: str) -> None:
        """Declare one more address on ``node``'s ``ifname`` (a link end or ``lo``).

        IPv6 addresses skip duplicate address detection, so they are usable
        as soon as ``up()`` returns.
        """
        if node not in self.nodes:
            raise ValueError(f"address references unknown node {node!r}")
        ipaddress.ip_interface(cidr)
        self.addresses.append(Address(node, ifname, cidr))

    def route(self, node: str, dst: str, via: str, table: int | None = None) -> None:
        self.routes.append(Route(node, dst, via, table))

    def rule(self, node: str, src: str, table: int) -> None:
        self.rules.append(Rule(node, src, table))

    def sysctl(self, node: str, key: str, value: str | int) -> None:
        self.sysctls.append((node, key, str(value)))

    def ns_name(self, node: str) -> str:
        return f"{self.ns_prefix}{self.tag}-{node}"

    def __getitem__(self, node: str) -> Namespace:
        return self.ns[node]

    def endpoint(self, node: str, ifname: str) -> Endpoint:
        for link in self.links:
            for end in (link.a, link.b):
                if end.node == node and end.ifname == ifname:
                    return end
        raise KeyError(f"{node}:{ifname}")

    # ---- lifecycle ---------------------------------------------------------
    def up(self) -> Self:
        """Create everything; a leftover from a crashed run is removed first."""
        self.down()
        try:
            for name, forward in self.nodes.items():
                ns = Namespace(self.ns_name(name), self.spawn_inside)
                self.ns[name] = ns
                ns.sysctls([
                    ("net.ipv4.ip_forward", int(forward)),
                    ("net.ipv6.conf.all.forwarding", int(forward)),
                    # Forwarding nodes must not drop replies that come back on a
                    # different interface than the route would choose.
                    ("net.ipv4.conf.all.rp_filter", 0),
                    ("net.ipv4.conf.default.rp_filter", 0),
                ])
            for i, link in enumerate(self.links):
                self._create_link(i, link)
            # Addresses, then rules, then routes, one `ip -batch` per node.
            commands: dict[str, list[list[str]]] = {node: [] for node in self.nodes}
            for extra in self.addresses:
                commands[extra.node].append(["addr", "add", extra.cidr, "dev", extra.ifname, "nodad"])
            for rule in self.rules:
                commands[rule.node].append(["rule", "add", "from", rule.src, "table", str(rule.table)])
            for route in self.routes:
                cmd = ["route", "replace", route.dst, "via", route.via]
                if route.table is not None:
                    cmd += ["table", str(route.table)]
                commands[route.node].append(cmd)
            for node, cmds in commands.items():
                self.ns[node].batch(cmds)
            for node, key, value in self.sysctls:
                self.ns[node].sysctl(key, value)
        except BaseException:
            self.down()
            raise
        return self

    def _create_link(self, index: int, link: Link) -> None:
        tmp_a, tmp_b = (f"{TRANSIENT_LINK_PREFIX}{index}{side}{id(self) % 10000}" for side in "ab")
        with IPRoute() as ipr:
            ipr.link("add", ifname=tmp_a, kind="veth", peer={"ifname": tmp_b})
            for tmp, end in ((tmp_a, link.a), (tmp_b, link.b)):
                idx = ipr.link_lookup(ifname=tmp)[0]
                ipr.link("set", index=idx, net_ns_fd=self.ns_name(end.node))
        for tmp, end, spec in ((tmp_a, link.a, link.a_to_b), (tmp_b, link.b, link.b_to_a)):
            ns = self.ns[end.node]
            idx = ns.ipr.link_lookup(ifname=tmp)[0]
            ns.ipr.link("set", index=idx, ifname=end.ifname)
            iface = ipaddress.ip_interface(end.cidr)
            ns.ipr.addr("add", index=idx, address=str(iface.ip), prefixlen=iface.network.prefixlen)
            ns.ipr.link("set", index=idx, state="up")
            self.shape(end.node, end.ifname, spec)

    def shape(self, node: str, ifname: str, spec: LinkSpec) -> None:
        """(Re)apply ``spec`` to traffic leaving ``node``'s ``ifname``."""
        spec.validate()
        ns = self.ns[node]
        if spec.emulated:
            # Segmentation offloads hand netem 64 KB super-packets, which
            # defeats per-packet rate and loss emulation: send real MTU frames.
            # One process for both (each costs a second under the VM's TCG).
            ns.run(["sh", "-c", 'ethtool -K "$1" tso off gso off gro off >/dev/null 2>&1; '
                    'shift; exec tc qdisc replace dev "$@"', "shape", ifname, ifname,
                    "root", "netem", *netem_args(spec)])
        else:
            ns.run(["tc", "qdisc", "del", "dev", ifname, "root"], check=False)

    def set_link_state(self, node: str, ifname: str, up: bool) -> None:
        """Cut (``up=False``) or restore one side of a link."""
        self.ns[node].run(["ip", "link", "set", "dev", ifname, "up" if up else "down"])

    def down(self) -> None:
        """Remove every namespace of this topology and every process in them."""
        for ns in self.ns.values():
            ns.close()
        self.ns.clear()
        for name in leftover_namespaces(f"{self.ns_prefix}{self.tag}-"):
            purge_namespace(name)

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()


def interface_counters(ns: Namespace, ifname: str) -> tuple[int, int]:
    """(tx_bytes, rx_bytes) of an interface, from the kernel's link stats
    (the namespace's /proc/net/dev, read from a thread inside it: tests
    poll this while a transfer runs)."""
    def read() -> str:
        return Path("/proc/thread-self/net/dev").read_text()

    for line in inside(ns.name, read).splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() == ifname:
            # receive: bytes packets errs drop fifo frame compressed
            # multicast; then transmit: bytes ...
            values = fields.split()
            return int(values[8]), int(values[0])
    raise CommandError(f"[{ns.name}] no interface {ifname}")


def kernel_has_netem() -> bool:
    """Whether this kernel can emulate links (false on the 6.18 host here)."""
    # per process: suites side by side may probe at once
    with Namespace(f"{NS_PREFIX}netem-probe-{os.getpid()}") as ns:
        probe = ns.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                       check=False)
        return probe.returncode == 0
