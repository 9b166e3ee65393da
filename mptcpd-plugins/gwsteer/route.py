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
import functools
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from .config import Config, ConfigError, Gateway, IPAddress

#: rtnetlink protocol number marking braid's rules and routes (shown as "180" by ip).
BRAID_RTPROT = 0xb4  # 180: unused by iproute2 rt_protos


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


def _default_dst(addr: IPAddress) -> str:
    return "0.0.0.0/0" if addr.version == 4 else "::/0"


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


def _rule_args(cfg: Config, gw: Gateway) -> dict[str, Any]:
    return {
        "family": _family(gw.source),
        "src": str(gw.source),
        "src_len": gw.source.max_prefixlen,
        "table": cfg.get_int("route_table_base") + gw.index,
        "priority": cfg.get_int("rule_priority") + gw.index,
        "FRA_PROTOCOL": BRAID_RTPROT,
    }


def _route_args(cfg: Config, gw: Gateway, local: LocalAddress) -> dict[str, Any]:
    args: dict[str, Any] = {
        "dst": _default_dst(gw.source),
        "family": _family(gw.source),
        "table": cfg.get_int("route_table_base") + gw.index,
        "oif": local.ifindex,
        "proto": BRAID_RTPROT,
    }
    if gw.steering == "onlink":
        args["gateway"] = str(gw.hops[0])
    else:
        # pyroute2 0.9 writes "segs" into the SRH as given, i.e. in
        # Segments[] order (last segment first, RFC 8754), while the
        # config lists hops in travel order like iproute2 does: reverse.
        args["encap"] = {"type": "seg6", "mode": "encap",
                         "segs": ",".join(str(h) for h in reversed(gw.hops))}
    return args


def describe(cfg: Config, gw: Gateway, local: LocalAddress) -> str:
    """One line saying what will be installed for ``gw``."""
    table = cfg.get_int("route_table_base") + gw.index
    rule = f"rule from {gw.source} lookup {table}"
    if gw.steering == "onlink":
        return f"{gw.id}: {rule}; default via {gw.hops[0]} dev {local.ifname} table {table}"
    segs = ",".join(str(h) for h in gw.hops)
    return f"{gw.id}: {rule}; default encap seg6 mode encap segs {segs} dev {local.ifname} table {table}"


def validate_host(ipr: IPRoute, cfg: Config, gateways: list[Gateway]) -> dict[str, LocalAddress]:
    """Check the host against the config before touching anything."""
    where: dict[str, LocalAddress] = {}
    for gw in gateways:
        section = f"{cfg.path}: [gateway {gw.id}]"
        local = find_local_address(ipr, gw.source)
        if local is None:
            raise ConfigError(f"{section} source: {gw.source} is not an address of this host")
        if gw.steering == "onlink":
            if not _on_link(ipr, local, gw.hops[0]):
                raise ConfigError(
                    f"{section} hops: {gw.hops[0]} is not on-link for {gw.source} "
                    f"({local.ifname}, {local.network}); list SRv6 segments for a "
                    "gateway several hops away")
        else:
            try:
                ipr.route("get", dst=str(gw.hops[0]), family=socket.AF_INET6)
            except NetlinkError:
                raise ConfigError(f"{section} hops: first segment {gw.hops[0]} "
                                  "is not reachable (no IPv6 route)") from None
        where[gw.id] = local
    return where


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


def install(cfg: Config, only: list[str] | None = None) -> list[str]:
    """Install rules and routes for the gateways (all, or ``only``).

    Replaces braid's previous entries of those gateways; if the kernel
    refuses a step, the new entries are removed and the previous ones
    put back, so a failed install leaves the steering that was there.
    Returns one description line per gateway. Gateways with ``route =
    external`` are left to the tool that routes them (a tunnel's hook,
    whose device may not exist yet); naming one in ``only`` is an error.
    """
    named = [cfg.gateway(g) for g in only] if only else list(cfg.gateways)
    external = [gw for gw in named if gw.route == "external"]
    if only and external:
        raise RouteError(f"gateway {external[0].id}: route = external: another tool routes "
                         f"{external[0].source}, gwsteer-route installs nothing for it")
    gateways = [gw for gw in named if gw.route != "external"]
    with IPRoute() as ipr:
        where = validate_host(ipr, cfg, gateways)
        tables = {cfg.get_int("route_table_base") + g.index for g in gateways}
        previous = _snapshot(ipr, tables)
        _remove(ipr, cfg, gateways)
        steps: list[Step] = []
        for gw in gateways:
            rule = _rule_args(cfg, gw)
            route = _route_args(cfg, gw, where[gw.id])
            steps.append(Step(f"gateway {gw.id}: route",
                              functools.partial(ipr.route, "add", **route),
                              functools.partial(ipr.route, "del", **route)))
            steps.append(Step(f"gateway {gw.id}: rule",
                              functools.partial(ipr.rule, "add", **rule),
                              functools.partial(ipr.rule, "del", **rule)))
        try:
            _apply(ipr, steps)
        except RouteError as e:
            restored = _restore(ipr, previous)
            raise RouteError(f"{e}; previous steering restored ({restored} of "
                             f"{len(previous)} entries)") from None
        return [describe(cfg, gw, where[gw.id]) for gw in gateways] + [
            describe_external(gw) for gw in external]


def describe_external(gw: Gateway) -> str:
    """The line ``check`` and ``install`` print for a ``route = external``
    gateway."""
    return f"{gw.id}: route = external (another tool routes {gw.source}; nothing installed)"


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
            raise RouteError(f"sid {sid_addr}: kernel refused seg6local route: {e}") from None
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
