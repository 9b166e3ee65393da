"""Install the routes that make each gateway's hop list true.

"LSRR-style" steering on upstream Linux: a subflow from gateway k's
source address must leave through gateway k.

* On-link gateway (``hops = <next hop>``): a policy rule
  ``from <source> lookup <table>`` and, in that table, a default route
  ``via <next hop> dev <source's interface>``.
* Gateway several hops away (``hops = <SID>, ..., <gateway SID>``): the
  same rule, and a default route that encapsulates in IPv6 with an SRv6
  segment list (IPv4 rides inside, "IPv4-in-SRv6"), i.e. a real loose
  source route.  The gateway node decapsulates with ``seg6local
  End.DX4`` (``End.DX6`` for IPv6) and transit segments run ``End``:
  see :func:`install_decap` and :func:`install_transit`.

Everything this module installs carries the routing protocol number
:data:`BRAID_RTPROT`, so removal finds exactly braid's entries and
nothing else.  Installation validates everything first and rolls back
what it did if the kernel refuses a step: nothing is left half-installed.

Example (as root, in the client's network namespace)::

    >>> from gwsteer.config import load_config
    >>> cfg = load_config("/etc/braid/gateways.conf")   # doctest: +SKIP
    >>> for line in install(cfg): print(line)           # doctest: +SKIP
    gw1: rule from 10.1.1.2 lookup 1000; default via 10.1.1.1 dev eth1 table 1000
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink import rtnl
from pyroute2.netlink.exceptions import NetlinkError

from .config import Config, ConfigError, Gateway, IPAddress

#: rtnetlink protocol number marking braid's rules and routes (shown as "180" by ip).
BRAID_RTPROT = 0xb4  # 180: unused by iproute2 rt_protos

#: Address flags (linux/if_addr.h): DAD still running, DAD failed.
IFA_F_TENTATIVE = 0x40
IFA_F_DADFAILED = 0x08


class RouteError(RuntimeError):
    """The kernel refused a step, or the host does not match the config."""


@dataclass(frozen=True)
class LocalAddress:
    """Where a local address lives."""

    ifindex: int
    ifname: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    #: The far end of a point-to-point link (PPP, LTE): IFA_ADDRESS when it differs from IFA_LOCAL.
    peer: IPAddress | None = None


@dataclass
class Step:
    """One reversible change."""

    description: str
    do: Callable[[], Any]
    undo: Callable[[], Any]


def _family(addr: IPAddress) -> int:
    return socket.AF_INET if addr.version == 4 else socket.AF_INET6


def find_local_address(ipr: IPRoute, addr: IPAddress) -> LocalAddress | None:
    """Return the interface and prefix holding ``addr``, if any.

    On a point-to-point link IFA_LOCAL is our address and IFA_ADDRESS the
    peer's; elsewhere IFA_ADDRESS is ours (IPv6 has no IFA_LOCAL).
    """
    for msg in ipr.get_addr(family=_family(addr)):
        local = msg.get("IFA_LOCAL") or msg.get("IFA_ADDRESS")
        if local != str(addr):
            continue
        ifindex = msg["index"]
        links = ipr.get_links(ifindex)
        ifname = links[0].get("IFLA_IFNAME") if links else str(ifindex)
        network = ipaddress.ip_network(f"{addr}/{msg['prefixlen']}", strict=False)
        address = msg.get("IFA_ADDRESS")
        peer = ipaddress.ip_address(address) if address and address != local else None
        return LocalAddress(ifindex, ifname, network, peer)
    return None


def _on_link(ipr: IPRoute, local: LocalAddress, hop: IPAddress) -> bool:
    """Can ``hop`` be a next hop on ``local``'s interface?

    In the address's prefix, the peer of a point-to-point link, an IPv6
    link-local address (routers advertise those), or, for a /32 or /128
    source, any address the kernel reaches directly on that interface.
    """
    if hop in local.network and local.network.prefixlen < local.network.max_prefixlen:
        return True
    if hop == local.peer or (hop.version == 6 and hop.is_link_local):
        return True
    if local.network.prefixlen < local.network.max_prefixlen:
        return False
    # A host address: the kernel's own route to the hop must be direct, on that interface
    # (no oif in the query: with one, the kernel answers "direct" for anything).
    try:
        found = ipr.route("get", dst=str(hop), family=_family(hop))
    except NetlinkError:
        return False
    return bool(found) and found[0].get("RTA_GATEWAY") is None and found[0].get("RTA_OIF") == local.ifindex


def _read_sysctl(name: str) -> str:
    return Path("/proc/sys/" + name.replace(".", "/")).read_text().strip()


@dataclass(frozen=True)
class Plan:
    """What to install for one gateway, as the host is now."""

    gw: Gateway
    #: The source addresses its rules match: the configured one, or every
    #: usable address of its interface (the plugin picks one of them).
    sources: tuple[IPAddress, ...]
    local: LocalAddress
    #: The next hop (on-link) or the SRv6 segments; empty: a device route
    #: (a point-to-point link whose default route has no gateway).
    hops: tuple[IPAddress, ...]


def table_of(cfg: Config, gw: Gateway) -> int:
    """The routing table of gateway ``gw``."""
    return cfg.get_int("route_table_base") + gw.index


def _rule_args(cfg: Config, gw: Gateway, source: IPAddress) -> dict[str, Any]:
    return {
        "family": _family(source),
        "src": str(source),
        "src_len": source.max_prefixlen,
        "table": table_of(cfg, gw),
        "priority": cfg.get_int("rule_priority") + gw.index,
        "FRA_PROTOCOL": BRAID_RTPROT,
    }


def _onlink(plan: Plan) -> bool:
    return len(plan.hops) <= 1 and all(h.version == plan.gw.version for h in plan.hops)


def _route_args(cfg: Config, plan: Plan) -> dict[str, Any]:
    version = plan.gw.version
    args: dict[str, Any] = {
        "dst": "0.0.0.0/0" if version == 4 else "::/0",
        "family": socket.AF_INET if version == 4 else socket.AF_INET6,
        "table": table_of(cfg, plan.gw),
        "oif": plan.local.ifindex,
        "proto": BRAID_RTPROT,
    }
    if _onlink(plan):
        if plan.hops:
            args["gateway"] = str(plan.hops[0])
    else:
        # pyroute2 0.9 writes "segs" into the SRH as given, i.e. in
        # Segments[] order (last segment first, RFC 8754), while the
        # config lists hops in travel order like iproute2 does: reverse.
        args["encap"] = {"type": "seg6", "mode": "encap",
                         "segs": ",".join(str(h) for h in reversed(plan.hops))}
    return args


def describe(cfg: Config, plan: Plan) -> str:
    """One line saying what will be installed for ``plan``."""
    table = table_of(cfg, plan.gw)
    rule = "; ".join(f"rule from {src} lookup {table}" for src in plan.sources)
    dev = plan.local.ifname
    if _onlink(plan):
        via = f"via {plan.hops[0]} " if plan.hops else ""
        return f"{plan.gw.id}: {rule}; default {via}dev {dev} table {table}"
    segs = ",".join(str(h) for h in plan.hops)
    return f"{plan.gw.id}: {rule}; default encap seg6 mode encap segs {segs} dev {dev} table {table}"


def _check_hops(ipr: IPRoute, cfg: Config, gw: Gateway, local: LocalAddress,
                source: IPAddress, hops: tuple[IPAddress, ...]) -> None:
    section = f"{cfg.path}: [gateway {gw.id}]"
    if len(hops) == 1 and hops[0].version == gw.version:
        if not _on_link(ipr, local, hops[0]):
            raise ConfigError(
                f"{section} hops: {hops[0]} is not on-link for {source} "
                f"({local.ifname}, {local.network}); list SRv6 segments for a "
                "gateway several hops away")
    elif hops:
        try:
            ipr.route("get", dst=str(hops[0]), family=socket.AF_INET6)
        except NetlinkError:
            raise ConfigError(f"{section} hops: first segment {hops[0]} "
                              "is not reachable (no IPv6 route)") from None


def _usable(addr: IPAddress, flags: int) -> bool:
    """A source the plugin would take (gateway_config's usable_address):
    not link-local or loopback; IPv6 not tentative (DAD still running) nor
    failed DAD."""
    if addr.is_link_local or addr.is_loopback or addr.is_multicast or addr.is_unspecified:
        return False
    return not flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED)


def _interface_default(ipr: IPRoute, gw: Gateway, ifindex: int) -> tuple[IPAddress, ...] | None:
    """The next hop of the main table's default route out of ``ifindex``
    (as DHCP or RA installed it): ``(hop,)``, ``()`` for a device route
    (point-to-point), ``None`` if there is none."""
    best: tuple[int, tuple[IPAddress, ...]] | None = None
    family = socket.AF_INET if gw.version == 4 else socket.AF_INET6
    for route in ipr.get_routes(family=family, table=254):
        if route["dst_len"] != 0 or route.get("RTA_OIF") != ifindex:
            continue
        if route["proto"] == BRAID_RTPROT:
            continue
        hop = route.get("RTA_GATEWAY")
        metric = route.get("RTA_PRIORITY") or 0
        hops: tuple[IPAddress, ...] = (ipaddress.ip_address(hop),) if hop else ()
        if best is None or metric < best[0]:
            best = (metric, hops)
    return best[1] if best is not None else None


def plan_interface(ipr: IPRoute, cfg: Config, gw: Gateway) -> Plan | str:
    """Plan a gateway named by its interface as the host is now, or say
    why nothing can be installed yet (the interface, its address or its
    default route is missing: hotplug, DHCP, RA)."""
    assert gw.interface is not None
    found = ipr.link_lookup(ifname=gw.interface)
    if not found:
        return f"interface {gw.interface} is not there"
    ifindex = found[0]
    family = socket.AF_INET if gw.version == 4 else socket.AF_INET6
    sources: list[IPAddress] = []
    local: LocalAddress | None = None
    for msg in ipr.get_addr(family=family, index=ifindex):
        text = msg.get("IFA_LOCAL") or msg.get("IFA_ADDRESS")
        addr = ipaddress.ip_address(text)
        flags = msg.get("IFA_FLAGS") or msg["flags"]
        if gw.source is not None and addr != gw.source:
            continue
        if gw.source is None and not _usable(addr, flags):
            continue
        peer_text = msg.get("IFA_ADDRESS")
        peer = ipaddress.ip_address(peer_text) if peer_text and peer_text != text else None
        sources.append(addr)
        local = LocalAddress(ifindex, gw.interface,
                             ipaddress.ip_network(f"{addr}/{msg['prefixlen']}", strict=False), peer)
    if local is None:
        what = str(gw.source) if gw.source is not None else f"an ipv{gw.version} address"
        return f"interface {gw.interface} has no {what}"
    hops = gw.hops or _interface_default(ipr, gw, ifindex)
    if hops is None:
        return f"interface {gw.interface} has no ipv{gw.version} default route"
    _check_hops(ipr, cfg, gw, local, sources[-1], hops)
    return Plan(gw, tuple(sources), local, hops)


def plan_static(ipr: IPRoute, cfg: Config, gw: Gateway) -> Plan:
    """Plan a gateway with a fixed source and hops; the host must match."""
    assert gw.source is not None
    local = find_local_address(ipr, gw.source)
    if local is None:
        raise ConfigError(f"{cfg.path}: [gateway {gw.id}] source: {gw.source} "
                          "is not an address of this host")
    _check_hops(ipr, cfg, gw, local, gw.source, gw.hops)
    return Plan(gw, (gw.source,), local, gw.hops)


def plan(ipr: IPRoute, cfg: Config, gw: Gateway) -> Plan | str:
    """:func:`plan_interface` for a gateway that names an interface, else
    :func:`plan_static` (which raises :class:`ConfigError` on a mismatch)."""
    return plan_interface(ipr, cfg, gw) if gw.interface is not None else plan_static(ipr, cfg, gw)


def validate_host(ipr: IPRoute, cfg: Config, gateways: list[Gateway]) -> dict[str, Plan | str]:
    """Check the host against the config before touching anything.

    A gateway named by its interface that cannot be installed yet gets
    the reason instead of a plan (not an error: it may appear later).
    """
    return {gw.id: plan(ipr, cfg, gw) for gw in gateways}


def describe_waiting(gw: Gateway, reason: str) -> str:
    """The line for an interface gateway with nothing to install yet."""
    return f"{gw.id}: {reason}; nothing installed yet (gwsteer-route follow installs it)"


def _steps(ipr: IPRoute, cfg: Config, p: Plan) -> list[Step]:
    route = _route_args(cfg, p)
    steps = [Step(f"gateway {p.gw.id}: route",
                  functools.partial(ipr.route, "add", **route),
                  functools.partial(ipr.route, "del", **route))]
    for src in p.sources:
        rule = _rule_args(cfg, p.gw, src)
        steps.append(Step(f"gateway {p.gw.id}: rule from {src}",
                          functools.partial(ipr.rule, "add", **rule),
                          functools.partial(ipr.rule, "del", **rule)))
    return steps


def _apply(ipr: IPRoute, steps: list[Step]) -> None:
    done: list[Step] = []
    for step in steps:
        try:
            step.do()
        except (NetlinkError, OSError) as e:
            for prev in reversed(done):
                # Best effort: an undo that fails leaves nothing worse.
                with contextlib.suppress(NetlinkError, OSError):
                    prev.undo()
            raise RouteError(f"{step.description}: kernel refused: {e}; "
                             "rolled back") from None
        done.append(step)


def _install(ipr: IPRoute, cfg: Config, gateways: list[Gateway]) -> dict[str, Plan | str]:
    where = validate_host(ipr, cfg, gateways)
    tables = {table_of(cfg, g) for g in gateways}
    previous = _snapshot(ipr, tables)
    _remove(ipr, cfg, gateways)
    steps: list[Step] = []
    for gw in gateways:
        p = where[gw.id]
        if isinstance(p, Plan):
            steps += _steps(ipr, cfg, p)
    try:
        _apply(ipr, steps)
    except RouteError as e:
        restored = _restore(ipr, previous)
        raise RouteError(f"{e}; previous steering restored ({restored} of "
                         f"{len(previous)} entries)") from None
    return where


def _line(cfg: Config, gw: Gateway, p: Plan | str) -> str:
    return describe(cfg, p) if isinstance(p, Plan) else describe_waiting(gw, p)


def install(cfg: Config, only: list[str] | None = None) -> list[str]:
    """Install rules and routes for the gateways (all, or ``only``).

    Replaces braid's previous entries of those gateways; if the kernel
    refuses a step, the new entries are removed and the previous ones
    put back, so a failed install leaves the steering that was there.
    Returns one description line per gateway. Gateways with ``route =
    external`` are left to the tool that routes them (a tunnel's hook,
    whose device may not exist yet); naming one in ``only`` is an error.
    A gateway named by its interface is installed for the interface's
    current addresses and default route, or skipped with the reason if
    it has none yet (``follow`` keeps it current).
    """
    named = [cfg.gateway(g) for g in only] if only else list(cfg.gateways)
    external = [gw for gw in named if gw.route == "external"]
    if only and external:
        what = external[0].source or external[0].interface
        raise RouteError(f"gateway {external[0].id}: route = external: another tool routes "
                         f"{what}, gwsteer-route installs nothing for it")
    gateways = [gw for gw in named if gw.route != "external"]
    with IPRoute() as ipr:
        where = _install(ipr, cfg, gateways)
        return [_line(cfg, gw, where[gw.id]) for gw in gateways] + [
            describe_external(gw) for gw in external]


#: rtnetlink multicast groups ``follow`` watches: links, addresses, routes.
_FOLLOW_GROUPS = (rtnl.RTMGRP_LINK | rtnl.RTMGRP_IPV4_IFADDR | rtnl.RTMGRP_IPV6_IFADDR
                  | rtnl.RTMGRP_IPV4_ROUTE | rtnl.RTMGRP_IPV6_ROUTE)

#: Longest time between two looks at the interfaces, should an event be missed.
FOLLOW_RESCAN_S = 1.0

#: After the first event of a burst (address, then its routes), wait this
#: long for the rest before looking.
FOLLOW_SETTLE_S = 0.02


def _drain(mon: IPRoute) -> None:
    """Read every queued event (they only say "look again")."""
    while select.select([mon.fileno()], [], [], 0)[0]:
        mon.get()


def follow(cfg: Config, out: Callable[[str], None] = print,
           stop: threading.Event | None = None,
           ready: Callable[[], None] = lambda: None) -> int:
    """Install every gateway, then keep the interface gateways current.

    A gateway named by its interface follows what DHCP, RA or hotplug do:
    on every change of links, addresses or routes (rtnetlink events, and
    a look every :data:`FOLLOW_RESCAN_S` in case one was missed) its plan
    is made again, and if it differs (another address, another next hop,
    the interface gone) its rules and route are replaced.  Static
    gateways are installed once.  ``ready`` is called once every gateway
    is (systemd's readiness: the unit orders mptcpd after it).  When
    ``stop`` is set (SIGTERM), removes what it installed and returns 0.
    """
    gateways = [gw for gw in cfg.gateways if gw.route != "external"]
    dynamic = [gw for gw in gateways if gw.interface is not None]
    stop = stop if stop is not None else threading.Event()
    with IPRoute() as ipr, IPRoute() as mon:
        mon.bind(groups=_FOLLOW_GROUPS)
        where = _install(ipr, cfg, gateways)
        for gw in gateways:
            out(_line(cfg, gw, where[gw.id]))
        ready()
        applied = {gw.id: where[gw.id] for gw in dynamic}
        while not stop.is_set():
            if select.select([mon.fileno()], [], [], FOLLOW_RESCAN_S)[0]:
                time.sleep(FOLLOW_SETTLE_S)
                _drain(mon)
            for gw in dynamic:
                try:
                    now: Plan | str = plan_interface(ipr, cfg, gw)
                except ConfigError as e:  # e.g. a configured hop not on-link with the new prefix
                    now = str(e)
                except NetlinkError as e:  # the interface went away while we looked
                    now = f"interface {gw.interface}: {e}"
                if now == applied[gw.id]:
                    continue
                _remove(ipr, cfg, [gw])
                if isinstance(now, Plan):
                    try:
                        _apply(ipr, _steps(ipr, cfg, now))
                    except RouteError as e:
                        now = str(e)
                applied[gw.id] = now
                out(_line(cfg, gw, now))
        _remove(ipr, cfg, gateways)
    return 0


def describe_external(gw: Gateway) -> str:
    """The line ``check`` and ``install`` print for a ``route = external``
    gateway."""
    return f"{gw.id}: route = external (another tool routes {gw.source or gw.interface}; nothing installed)"


def _route_args_from(msg: Any) -> dict[str, Any]:
    """Arguments that re-create a dumped route (on-link or seg6 encap)."""
    args: dict[str, Any] = {"family": msg["family"], "dst": _route_dst(msg),
                            "table": msg.get("RTA_TABLE") or msg["table"], "proto": msg["proto"]}
    for attr, key in (("RTA_OIF", "oif"), ("RTA_GATEWAY", "gateway"), ("RTA_PRIORITY", "priority")):
        if msg.get(attr) is not None:
            args[key] = msg.get(attr)
    encap = msg.get("RTA_ENCAP")
    srh = encap.get("SEG6_IPTUNNEL_SRH") if encap is not None else None
    if srh:
        args["encap"] = {"type": "seg6", "mode": srh["mode"], "segs": ",".join(srh["segs"])}
    return args


def _snapshot(ipr: IPRoute, tables: set[int]) -> list[tuple[str, dict[str, Any]]]:
    """braid's rules and routes of ``tables``, as arguments to re-create them."""
    entries: list[tuple[str, dict[str, Any]]] = []
    for family in (socket.AF_INET, socket.AF_INET6):
        for rule in ipr.get_rules(family=family):
            table = rule.get("FRA_TABLE") or rule["table"]
            if rule.get("FRA_PROTOCOL") == BRAID_RTPROT and table in tables:
                entries.append(("rule", {"family": family, "src": rule.get("FRA_SRC"),
                                         "src_len": rule["src_len"], "table": table,
                                         "priority": rule.get("FRA_PRIORITY"),
                                         "FRA_PROTOCOL": BRAID_RTPROT}))
        for route in ipr.get_routes(family=family):
            if route["proto"] == BRAID_RTPROT and (route.get("RTA_TABLE") or route["table"]) in tables:
                entries.append(("route", _route_args_from(route)))
    return entries


def _restore(ipr: IPRoute, entries: list[tuple[str, dict[str, Any]]]) -> int:
    """Re-create snapshot entries (routes first); returns how many came back."""
    restored = 0
    for kind, args in sorted(entries, key=lambda e: e[0] != "route"):
        try:
            if kind == "route":
                ipr.route("replace", **args)
            else:
                ipr.rule("add", **args)
            restored += 1
        except (NetlinkError, OSError):
            pass  # e.g. a route whose interface went down: nothing better to do
    return restored


def _remove(ipr: IPRoute, cfg: Config | None, gateways: list[Gateway] | None) -> int:
    """Delete braid-marked rules and routes (of ``gateways`` if given)."""
    tables: set[int] | None = None
    if cfg is not None and gateways is not None:
        tables = {cfg.get_int("route_table_base") + g.index for g in gateways}
    removed = 0
    for family in (socket.AF_INET, socket.AF_INET6):
        for rule in ipr.get_rules(family=family):
            table = rule.get("FRA_TABLE") or rule["table"]
            if rule.get("FRA_PROTOCOL") != BRAID_RTPROT:
                continue
            if tables is not None and table not in tables:
                continue
            ipr.rule("del", family=family, src=rule.get("FRA_SRC"),
                     src_len=rule["src_len"], table=table,
                     priority=rule.get("FRA_PRIORITY"))
            removed += 1
        # Without a table, pyroute2 dumps every table: braid's entries
        # may be in any (another route_table_base, decap SIDs in main).
        for route in ipr.get_routes(family=family):
            table = route.get("RTA_TABLE") or route["table"]
            if route["proto"] != BRAID_RTPROT or (tables is not None and table not in tables):
                continue
            ipr.route("del", family=family, dst=_route_dst(route), table=table,
                      proto=BRAID_RTPROT)
            removed += 1
    return removed


def _route_dst(route: Any) -> str:
    dst = route.get("RTA_DST")
    if dst is None:
        return "0.0.0.0/0" if route["family"] == socket.AF_INET else "::/0"
    return f"{dst}/{route['dst_len']}"


def uninstall(cfg: Config | None = None, only: list[str] | None = None) -> int:
    """Remove braid's rules and routes; returns how many were removed.

    Without a config, removes every braid-marked entry (also decap and
    transit routes on a gateway node).
    """
    with IPRoute() as ipr:
        if cfg is None:
            return _remove(ipr, None, None)
        gateways = [cfg.gateway(g) for g in only] if only else list(cfg.gateways)
        return _remove(ipr, cfg, gateways)


def _seg6local(sid: str, dev: str | None, encap: dict[str, Any]) -> str:
    try:
        sid_addr = ipaddress.IPv6Address(sid)
    except ValueError:
        raise ConfigError(f"sid: '{sid}' is not an IPv6 address") from None
    with IPRoute() as ipr:
        if dev is None:
            links = [link for link in ipr.get_links() if link.get("IFLA_IFNAME") != "lo"]
            oif = links[0]["index"] if links else 1
        else:
            found = ipr.link_lookup(ifname=dev)
            if not found:
                raise ConfigError(f"dev: no interface named '{dev}'")
            oif = found[0]
        args = {"dst": f"{sid_addr}/128", "family": socket.AF_INET6, "oif": oif,
                "proto": BRAID_RTPROT, "encap": encap}
        existing = [r for r in ipr.get_routes(family=socket.AF_INET6, table=254)
                    if r.get("RTA_DST") == str(sid_addr) and r["dst_len"] == 128]
        if any(r["proto"] != BRAID_RTPROT for r in existing):
            # Never overwrite what an operator (or another tool) put there.
            raise RouteError(f"sid {sid_addr}: a route for it exists and was not installed "
                             "by braid; remove it first")
        try:
            ipr.route("replace" if existing else "add", **args)
        except NetlinkError as e:
            # EOPNOTSUPP here means no lwt encapsulation at all: say which
            # option the kernel lacks rather than only the errno.
            hint = ("; this kernel has no SRv6 routes (CONFIG_IPV6_SEG6_LWTUNNEL: braid's "
                    "kernel and Debian's have them)") if e.code == errno.EOPNOTSUPP else ""
            raise RouteError(f"sid {sid_addr}: kernel refused seg6local route: {e}{hint}") from None
    return f"sid {sid_addr}: seg6local {encap['action']}"


def install_decap(sid: str, nexthop: str, dev: str | None = None) -> str:
    """On the gateway node: decapsulate packets sent to ``sid``.

    IPv4 next hop -> End.DX4, IPv6 next hop -> End.DX6.  Needs
    forwarding enabled for that family on the node.
    """
    try:
        nh = ipaddress.ip_address(nexthop)
    except ValueError:
        raise ConfigError(f"nexthop: '{nexthop}' is not an IP address") from None
    knob = "net.ipv4.ip_forward" if nh.version == 4 else "net.ipv6.conf.all.forwarding"
    if _read_sysctl(knob) != "1":
        raise RouteError(f"{knob} is 0 on this node: the decapsulated packets "
                         "could not be forwarded (enable it first)")
    if nh.version == 4:
        encap = {"type": "seg6local", "action": "End.DX4", "nh4": str(nh)}
    else:
        encap = {"type": "seg6local", "action": "End.DX6", "nh6": str(nh)}
    return _seg6local(sid, dev, encap)


def install_transit(sid: str, dev: str | None = None) -> str:
    """On a transit node of a segment list: plain SRv6 ``End`` for ``sid``."""
    if _read_sysctl("net.ipv6.conf.all.forwarding") != "1":
        raise RouteError("net.ipv6.conf.all.forwarding is 0 on this node: "
                         "End could not forward (enable it first)")
    return _seg6local(sid, dev, {"type": "seg6local", "action": "End"})
