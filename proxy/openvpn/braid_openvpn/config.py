"""braid-openvpn's settings: one JSON file for both ends, one validator.

The same file (rendered by the Ansible roles, or written by hand) describes
the client box and the proxy; ``braid-openvpn run --role client|proxy`` picks
its side. Everything is checked here before any process starts, and each
error names the setting (``tunnels[1].subnet``), so a bad file changes
nothing on the machine.

Example::

    >>> cfg = parse({
    ...     "proxy_address": "10.9.0.2",
    ...     "gateways": {"gw1": {"source": "10.1.0.2", "wan": "10.1.0.0/24"}},
    ...     "per_gateway": {"tunnels": [{"gateway": "gw1", "subnet": "10.200.1.0/30", "port": 1195}]},
    ... })
    >>> t = cfg.per_gateway.tunnels[0]
    >>> (t.dev, str(t.client_ip), str(t.proxy_ip), t.table)
    ('ovpn-gw1', '10.200.1.2', '10.200.1.1', 201)
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IPv4 = ipaddress.IPv4Address
Net = ipaddress.IPv4Network

DEFAULT_RUN_DIR = "/run/braid-openvpn"
DEFAULT_PKI_DIR = "/etc/braid/openvpn/pki"
DEFAULT_INNER_ADDRESS = "10.200.0.1"
PATH_MANAGERS = ("kernel", "gwsteer")
DEFAULT_FULL_PORT = 1194
#: Policy routing table of tunnel i (0-based) is TABLE_BASE + i + 1; the
#: full tunnel's LAN table is FULL_TABLE. Chosen clear of gwsteer's and the
#: testbed's tables (100-102).
TABLE_BASE = 200
FULL_TABLE = 250
#: MPTCP endpoint id of tunnel i is ENDPOINT_ID_BASE + i + 1 (ids are 1..255).
ENDPOINT_ID_BASE = 100
#: Inner MTU. An outer packet is the inner one plus 52 bytes (IPv4/UDP 28,
#: OpenVPN's AEAD data-channel header and tag 24; measured: 1400 -> 1452,
#: 1448 -> 1500, never fragmented). 1400 leaves room for PPPoE or another
#: tunnel under the WAN; 1448 fits a clean 1500-byte WAN exactly.
DEFAULT_TUN_MTU = 1400
GATEWAY_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,9}$")  # ovpn-<id> fits IFNAMSIZ
CERT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ConfigError(ValueError):
    """Bad settings; the message names the setting."""


@dataclass(frozen=True)
class Gateway:
    """One gateway of the client box: its source address and its WAN subnet."""

    id: str
    source: IPv4
    wan: Net


@dataclass(frozen=True)
class Tunnel:
    """One per-gateway UDP tunnel (index = its position in ``tunnels``)."""

    index: int
    gateway: Gateway
    subnet: Net
    port: int

    @property
    def dev(self) -> str:
        return f"ovpn-{self.gateway.id}"

    @property
    def proxy_ip(self) -> IPv4:
        return self.subnet.network_address + 1

    @property
    def client_ip(self) -> IPv4:
        return self.subnet.network_address + 2

    @property
    def table(self) -> int:
        return TABLE_BASE + self.index + 1

    @property
    def endpoint_id(self) -> int:
        return ENDPOINT_ID_BASE + self.index + 1


@dataclass(frozen=True)
class PerGateway:
    """Per-gateway tunnel mode: MPTCP subflows inside one UDP tunnel per gateway.

    ``inner_address`` is the proxy's address as seen through the tunnels
    (on its loopback): MPTCP applications on the client box connect to it.
    """

    inner_address: IPv4
    tunnels: tuple[Tunnel, ...]
    #: Who gives each connection a subflow per tunnel: ``kernel`` (an
    #: in-kernel path-manager endpoint per tunnel, net.mptcp.pm_type 0) or
    #: ``gwsteer`` (gwsteer's gateways ``<id>-tun``, pm_type 1, as braid's
    #: Ansible roles run it; ``braid-openvpn gwsteer-gateways`` prints them).
    path_manager: str = "kernel"


@dataclass(frozen=True)
class FullTunnel:
    """Full-tunnel mode (Binder): the LAN's IP traffic inside one OpenVPN
    TCP tunnel whose TCP is MPTCP, NATed at the proxy."""

    subnet: Net
    port: int
    lan: tuple[Net, ...]
    nat_out: str | None
    dev: str = "ovpn-full"

    @property
    def proxy_ip(self) -> IPv4:
        return self.subnet.network_address + 1

    @property
    def client_ip(self) -> IPv4:
        return self.subnet.network_address + 2


@dataclass(frozen=True)
class Config:
    proxy_address: IPv4
    pki_dir: Path
    client_name: str
    server_name: str
    run_dir: Path
    tun_mtu: int
    gateways: dict[str, Gateway]
    per_gateway: PerGateway | None
    full_tunnel: FullTunnel | None

    def modes(self) -> list[str]:
        """The modes this file configures, in start order."""
        return [m for m, s in (("per-gateway", self.per_gateway), ("full-tunnel", self.full_tunnel)) if s]


def load(path: Path) -> Config:
    """Read and validate a settings file."""
    try:
        raw = json.loads(path.read_text())
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not JSON: {err}") from None
    try:
        return parse(raw)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


# ---- the validator ---------------------------------------------------------

_TOP = {"proxy_address", "pki_dir", "client_name", "server_name", "run_dir", "tun_mtu",
        "gateways", "per_gateway", "full_tunnel"}


def _keys(obj: Any, where: str, allowed: set[str], required: set[str]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: must be an object")
    prefix = f"{where}." if where else ""
    for k in obj:
        if k not in allowed:
            raise ConfigError(f"{prefix}{k}: unknown setting (known: {', '.join(sorted(allowed))})")
    for k in sorted(required - obj.keys()):
        raise ConfigError(f"{prefix}{k}: missing")
    return obj


def _addr(value: Any, name: str) -> IPv4:
    try:
        return IPv4(value)
    except (ValueError, TypeError):
        raise ConfigError(f"{name}: not an IPv4 address: {value!r}") from None


def _net(value: Any, name: str) -> Net:
    try:
        return Net(value, strict=True)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{name}: not an IPv4 network (address/prefix, host bits zero): {value!r} ({err})") from None


def _port(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        raise ConfigError(f"{name}: must be a port number 1-65535, got {value!r}")
    return value


def _name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not CERT_NAME.match(value):
        raise ConfigError(f"{name}: must be a certificate name ([A-Za-z0-9_.-], at most 64), got {value!r}")
    return value


def parse(raw: Any) -> Config:
    """Validate decoded JSON; raise :class:`ConfigError` naming the first bad setting."""
    top = _keys(raw, "", _TOP, {"proxy_address", "gateways"})
    proxy = _addr(top["proxy_address"], "proxy_address")
    mtu = top.get("tun_mtu", DEFAULT_TUN_MTU)
    if not isinstance(mtu, int) or isinstance(mtu, bool) or not 576 <= mtu <= 9000:
        raise ConfigError(f"tun_mtu: must be 576-9000, got {mtu!r}")

    gws_raw = top["gateways"]
    if not isinstance(gws_raw, dict) or not gws_raw:
        raise ConfigError("gateways: must be a non-empty object {id: {source, wan}}")
    gateways: dict[str, Gateway] = {}
    for gid, g in gws_raw.items():
        where = f"gateways.{gid}"
        if not GATEWAY_ID.match(gid):
            raise ConfigError(f"{where}: gateway id must be 1-10 of [a-z0-9_-], starting with a letter or digit")
        g = _keys(g, where, {"source", "wan"}, {"source", "wan"})
        gw = Gateway(gid, _addr(g["source"], f"{where}.source"), _net(g["wan"], f"{where}.wan"))
        if gw.source not in gw.wan:
            raise ConfigError(f"{where}.source: {gw.source} is not inside {where}.wan {gw.wan}")
        if proxy in gw.wan:
            raise ConfigError(f"proxy_address: {proxy} lies inside {where}.wan {gw.wan}")
        gateways[gid] = gw

    # Every subnet braid routes into a tunnel, by the setting that names it:
    # none may overlap a WAN (the tunnel's own packets would loop into it) or
    # another tunnel.
    claimed: list[tuple[str, Net]] = [(f"gateways.{g.id}.wan", g.wan) for g in gateways.values()]

    def claim(name: str, net: Net) -> None:
        for other, onet in claimed:
            if net.overlaps(onet):
                gw = other.split(".")[1] if other.startswith("gateways.") else None
                what = f" (the WAN of gateway {gw})" if gw else ""
                raise ConfigError(f"{name}: {net} overlaps {other} = {onet}{what}")
        if proxy in net:
            raise ConfigError(f"{name}: {net} contains proxy_address {proxy}")
        claimed.append((name, net))

    per_gateway = None
    ports: dict[int, str] = {}
    if "per_gateway" in top:
        pg = _keys(top["per_gateway"], "per_gateway", {"inner_address", "tunnels", "path_manager"}, {"tunnels"})
        inner = _addr(pg.get("inner_address", DEFAULT_INNER_ADDRESS), "per_gateway.inner_address")
        pm = pg.get("path_manager", "kernel")
        if pm not in PATH_MANAGERS:
            raise ConfigError(f"per_gateway.path_manager: must be one of {', '.join(PATH_MANAGERS)}, got {pm!r}")
        claim("per_gateway.inner_address", Net(f"{inner}/32"))
        if not isinstance(pg["tunnels"], list) or not pg["tunnels"]:
            raise ConfigError("per_gateway.tunnels: must be a non-empty list")
        tunnels: list[Tunnel] = []
        for i, t in enumerate(pg["tunnels"]):
            where = f"per_gateway.tunnels[{i}]"
            t = _keys(t, where, {"gateway", "subnet", "port"}, {"gateway", "subnet", "port"})
            gid = t["gateway"]
            if gid not in gateways:
                raise ConfigError(f"{where}.gateway: unknown gateway {gid!r} (known: {', '.join(gateways)})")
            if any(x.gateway.id == gid for x in tunnels):
                raise ConfigError(f"{where}.gateway: gateway {gid!r} already has a tunnel")
            subnet = _net(t["subnet"], f"{where}.subnet")
            if subnet.prefixlen > 30:
                raise ConfigError(f"{where}.subnet: {subnet} is too small for two tunnel addresses (at most /30)")
            claim(f"{where}.subnet", subnet)
            port = _port(t["port"], f"{where}.port")
            if port in ports:
                raise ConfigError(f"{where}.port: {port} already used by {ports[port]}")
            ports[port] = where
            tunnels.append(Tunnel(i, gateways[gid], subnet, port))
        per_gateway = PerGateway(inner, tuple(tunnels), pm)

    full = None
    if "full_tunnel" in top:
        ft = _keys(top["full_tunnel"], "full_tunnel", {"subnet", "port", "lan", "nat_out"}, {"subnet", "lan"})
        subnet = _net(ft["subnet"], "full_tunnel.subnet")
        if subnet.prefixlen > 30:
            raise ConfigError(f"full_tunnel.subnet: {subnet} is too small for two tunnel addresses (at most /30)")
        claim("full_tunnel.subnet", subnet)
        port = _port(ft.get("port", DEFAULT_FULL_PORT), "full_tunnel.port")
        if port in ports:
            raise ConfigError(f"full_tunnel.port: {port} already used by {ports[port]}")
        if not isinstance(ft["lan"], list) or not ft["lan"]:
            raise ConfigError("full_tunnel.lan: must be a non-empty list of the LAN's networks")
        lan = tuple(_net(n, f"full_tunnel.lan[{i}]") for i, n in enumerate(ft["lan"]))
        for i, n in enumerate(lan):
            claim(f"full_tunnel.lan[{i}]", n)
        nat_out = ft.get("nat_out")
        if nat_out is not None and (not isinstance(nat_out, str) or not re.match(r"^[A-Za-z0-9_.-]{1,15}$", nat_out)):
            raise ConfigError(f"full_tunnel.nat_out: must be an interface name, got {nat_out!r}")
        full = FullTunnel(subnet, port, lan, nat_out)

    if per_gateway is None and full is None:
        raise ConfigError("per_gateway, full_tunnel: configure at least one mode")
    return Config(
        proxy_address=proxy,
        pki_dir=Path(top.get("pki_dir", DEFAULT_PKI_DIR)),
        client_name=_name(top.get("client_name", "client"), "client_name"),
        server_name=_name(top.get("server_name", "proxy"), "server_name"),
        run_dir=Path(top.get("run_dir", DEFAULT_RUN_DIR)),
        tun_mtu=mtu,
        gateways=gateways,
        per_gateway=per_gateway,
        full_tunnel=full,
    )
