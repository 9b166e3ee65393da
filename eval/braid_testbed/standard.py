"""braid's standard topology, used by every experiment and VM test::

              wan1 (shaped)          gw1
    client ==================== gw1 ---- \\
           ==================== gw2 ---- router ---- proxy ---- server
              wan2 (shaped)          gw2

The client reaches the proxy over two separately shaped WANs, each through
its own gateway; the proxy is the far MPTCP end and forwards to the server
(the Internet). Source-based policy routing on the client sends each source
address out of its own WAN, as a multihomed box does. Addresses live in
:data:`ADDRESSES`, the one place that names them.

Usage::

    with StandardTestbed("demo", wan1=LinkSpec(rate_mbit=20, delay_ms=10)) as tb:
        tb.enable_kernel_pm()
        with tb.capture_wan(1) as cap:
            ...
        print(cap.summary())
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from pyroute2 import MPTCP

from .capture import WanCapture
from .link import LinkSpec
from .netns import Namespace, inside
from .topology import Topology

# node -> interface -> CIDR. One source of truth for the standard addresses.
ADDRESSES: dict[str, dict[str, str]] = {
    "client": {"wan1": "10.1.0.2/24", "wan2": "10.2.0.2/24"},
    "gw1": {"lan": "10.1.0.1/24", "up": "10.11.0.2/24"},
    "gw2": {"lan": "10.2.0.1/24", "up": "10.12.0.2/24"},
    "router": {"gw1": "10.11.0.1/24", "gw2": "10.12.0.1/24", "core": "10.9.0.1/24"},
    "proxy": {"core": "10.9.0.2/24", "inet": "10.10.0.1/24"},
    "server": {"inet": "10.10.0.2/24"},
}
WAN_TABLE_BASE = 100  # client routing table for WAN i is 100 + i

DEFAULT_WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)


def ip(node: str, ifname: str) -> str:
    """Address of ``node``'s interface, e.g. ``ip("proxy", "core")``."""
    return ADDRESSES[node][ifname].split("/")[0]


class StandardTestbed(Topology):
    """client -- wan1/wan2 -- gw1/gw2 -- router -- proxy -- server."""

    def __init__(
        self,
        tag: str,
        wan1: LinkSpec = DEFAULT_WAN,
        wan2: LinkSpec = DEFAULT_WAN,
        wan1_down: LinkSpec | None = None,
        wan2_down: LinkSpec | None = None,
    ) -> None:
        """``wanN`` shapes upstream (client -> gw); ``wanN_down`` downstream (default same)."""
        super().__init__(tag, spawn_inside=True)
        self.wan_specs = {1: (wan1, wan1_down or wan1), 2: (wan2, wan2_down or wan2)}
        self.node("client", forward=False)
        for name in ("gw1", "gw2", "router", "proxy"):
            self.node(name)
        self.node("server", forward=False)
        a = ADDRESSES
        for i in (1, 2):
            up, down = self.wan_specs[i]
            self.link("client", f"wan{i}", a["client"][f"wan{i}"],
                      f"gw{i}", "lan", a[f"gw{i}"]["lan"], up, down)
            self.link(f"gw{i}", "up", a[f"gw{i}"]["up"], "router", f"gw{i}", a["router"][f"gw{i}"])
            self.route(f"gw{i}", "default", ip("router", f"gw{i}"))
            self.route("router", f"10.{i}.0.0/24", ip(f"gw{i}", "up"))
            table = WAN_TABLE_BASE + i
            self.rule("client", ip("client", f"wan{i}"), table)
            self.route("client", "default", ip(f"gw{i}", "lan"), table=table)
        self.link("router", "core", a["router"]["core"], "proxy", "core", a["proxy"]["core"])
        self.link("proxy", "inet", a["proxy"]["inet"], "server", "inet", a["server"]["inet"])
        self.route("client", "default", ip("gw1", "lan"))
        self.route("router", "10.10.0.0/24", ip("proxy", "core"))
        self.route("proxy", "default", ip("router", "core"))
        self.route("server", "default", ip("proxy", "inet"))

    @property
    def client(self) -> Namespace:
        return self["client"]

    @property
    def server(self) -> Namespace:
        return self["server"]

    @property
    def proxy(self) -> Namespace:
        return self["proxy"]

    @property
    def proxy_ip(self) -> str:
        return ip("proxy", "core")

    def wan_capacity_mbit(self, direction: str = "up") -> float:
        """Sum of the shaped WAN rates in one direction ("up" or "down");
        NaN when a WAN is not rate-limited (its capacity is undefined)."""
        k = 0 if direction == "up" else 1
        rates = [self.wan_specs[i][k].rate_mbit for i in (1, 2)]
        return math.nan if None in rates else float(sum(r for r in rates if r))

    def enable_kernel_pm(self, subflows: int = 2) -> None:
        """In-kernel path manager: the client adds a subflow from wan2's address."""
        for node in ("client", "proxy"):
            self[node].sysctls([("net.mptcp.enabled", 1), ("net.mptcp.pm_type", 0)])
            self[node].batch([["mptcp", "endpoint", "flush"],
                              ["mptcp", "limits", "set", "subflow", str(subflows),
                               "add_addr_accepted", str(subflows)],
                              *([self._wan2_endpoint()] if node == "client" else [])])

    def add_wan2_endpoint(self) -> None:
        """The client's subflow endpoint on wan2's address: each connection
        joins a subflow from it."""
        self.client.run(["ip", *self._wan2_endpoint()])

    @staticmethod
    def _wan2_endpoint() -> list[str]:
        return ["mptcp", "endpoint", "add", ip("client", "wan2"), "dev", "wan2", "subflow"]

    def wan2_endpoint_deletion(self) -> Callable[[], None]:
        """What makes the network behind wan2 go away for MPTCP, ready to
        call: the client deletes its wan2 endpoint, and every connection
        removes its wan2 subflow (the peer hears REMOVE_ADDR) while the link
        stays up. The endpoint's id is looked up now, and the deletion is
        one netlink request from this process: a command would cost a second
        of the emulated CPU under the VM's TCG, right at the moment measured."""
        address = ip("client", "wan2")
        ids = [words[words.index("id") + 1]
               for words in map(str.split, self.client.run(["ip", "mptcp", "endpoint", "show"]).stdout.splitlines())
               if words and words[0] == address and "id" in words]
        if not ids:
            raise KeyError(f"the client has no MPTCP endpoint {address}")
        endpoint = int(ids[0])

        def request() -> None:
            with MPTCP() as pm:
                pm.endpoint("del", id=endpoint)

        def delete() -> None:
            inside(self.client.name, request)

        return delete

    def set_scheduler(self, name: str) -> None:
        """Select the MPTCP packet scheduler on both ends (both send data)."""
        for node in ("client", "proxy"):
            self[node].sysctl("net.mptcp.scheduler", name)

    @contextmanager
    def changed_sysctls(self, nodes: tuple[str, ...], values: Mapping[str, int | str]) -> Iterator[None]:
        """Set sysctls in ``nodes``; the previous values come back afterwards,
        pass or fail."""
        saved = {(node, key): self[node].run(["sysctl", "-n", key]).stdout.strip()
                 for node in nodes for key in values}
        try:
            for node in nodes:
                for key, value in values.items():
                    self[node].sysctl(key, value)
            yield
        finally:
            for (node, key), value in saved.items():
                self[node].sysctl(key, value)

    def cut_wan(self, i: int) -> None:
        """Take WAN i down on the client side (cable pulled)."""
        self.set_link_state("client", f"wan{i}", up=False)

    def restore_wan(self, i: int) -> None:
        self.set_link_state("client", f"wan{i}", up=True)
        table = WAN_TABLE_BASE + i
        self.client.run(["ip", "route", "replace", "default", "via", ip(f"gw{i}", "lan"),
                         "table", str(table)])
        if i == 1:
            self.client.run(["ip", "route", "replace", "default", "via", ip("gw1", "lan")])

    def blackhole_wan(self, i: int, on: bool = True) -> None:
        """WAN i's gateway silently drops everything it forwards, both ways
        (no link event, nothing comes back), as a dead upstream looks;
        ``on=False`` ends it (no-op if it was not on).

        Blackhole routes on the gateway (upstream) and the router (towards
        the gateway's LAN), set by netlink from this process: a command
        would cost a second of the emulated CPU under braid's VM, during the
        failover a test measures."""
        gw, router = self[f"gw{i}"].ipr, self["router"].ipr
        lan = str(ipaddress.ip_interface(ADDRESSES[f"gw{i}"]["lan"]).network)
        if on:
            gw.route("replace", dst="0.0.0.0/0", type="blackhole")
            router.route("replace", dst=lan, type="blackhole")
        else:
            gw.route("replace", dst="0.0.0.0/0", gateway=ip("router", f"gw{i}"))
            router.route("replace", dst=lan, gateway=ip(f"gw{i}", "up"))

    def capture_wan(self, i: int, snaplen: int = 128) -> WanCapture:
        """Capture what network i's operator sees: gw i's client-facing side."""
        return WanCapture(self[f"gw{i}"], "lan", f"wan{i}", snaplen=snaplen)


@contextmanager
def scheduler_testbed(tag: str, scheduler: str, wan1: LinkSpec,
                      wan2: LinkSpec) -> Iterator[StandardTestbed]:
    """A standard testbed with the kernel path manager on and ``scheduler``
    at both ends (client and proxy); removed afterwards, pass or fail."""
    tb = StandardTestbed(tag, wan1=wan1, wan2=wan2)
    tb.up()
    try:
        tb.enable_kernel_pm()
        tb.set_scheduler(scheduler)
        yield tb
    finally:
        tb.down()
