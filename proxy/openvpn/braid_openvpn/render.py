"""OpenVPN configurations and route hooks generated from the settings.

Every tunnel is OpenVPN's point-to-point TLS mode (no ``mode server``): one
peer per process, addresses from the tunnel's subnet (.1 proxy, .2 client),
certificates checked both ways (``remote-cert-tls`` plus the peer's name),
tls-crypt on the control channel, AES-256-GCM or ChaCha20-Poly1305 data.

Per-gateway mode (UDP): the client's process binds the tunnel's outer socket
to its gateway's source address (``local``), so the gateway's policy route
(``from <source> lookup <table>``, installed by gwsteer-route or the host's
network set-up) carries it out through that gateway. Its ``route-up`` hook
then makes the tunnel an MPTCP path: a rule ``from <tunnel address>`` to a
table whose route to the proxy's inner address is the tunnel, a main-table
route (metric per tunnel, so the first live tunnel carries a new
connection's first subflow) and a kernel path-manager endpoint
``<tunnel address> dev <tun> subflow``. The ``down`` hook removes the
endpoint (the kernel closes its subflows); when the tunnel comes back the
``route-up`` hook adds it again and the kernel opens a subflow through it on
every live connection. With ``path_manager: gwsteer`` the hooks add no
endpoint: gwsteer has a gateway per tunnel (gwsteer_conf.py), whose source
is the tunnel address, and opens and closes the subflows as its probes
through the tunnel find it up or down.

Full-tunnel mode (TCP over MPTCP): the client's ``route-up`` hook routes the
LAN's networks into the tunnel; the proxy's routes them back to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from braid_openvpn.config import FULL_TABLE, Config, FullTunnel, Tunnel
from braid_openvpn.pki import RolePaths

HEADER = "# managed by braid (braid-openvpn): regenerated at every start, do not edit\n"
#: ip rule preference of a tunnel's table: before the main table (32766).
RULE_PREF_BASE = 5000
DATA_CIPHERS = "AES-256-GCM:CHACHA20-POLY1305"
SOCKET_BUFFER_BYTES = 4 << 20
#: Per-gateway tunnels: a dead gateway is noticed within PING_RESTART_S,
#: which removes its MPTCP endpoint (and so its subflows) at once.
PING_S, PING_RESTART_S = 1, 4
#: The full tunnel is one MPTCP connection that survives a WAN's loss by
#: itself; restart only when the whole connection is gone.
FULL_PING_S, FULL_PING_RESTART_S = 2, 15


@dataclass(frozen=True)
class Instance:
    """One OpenVPN process: its name, config text, hook scripts, and whether
    it must run under ``mptcpize`` (its TCP is MPTCP)."""

    name: str
    dev: str
    config: str
    hooks: dict[str, str]
    mptcp: bool = False


def _common(cfg: Config, dev: str, keys: RolePaths, role: str) -> str:
    peer = cfg.server_name if role == "client" else cfg.client_name
    return (
        HEADER
        + f"dev {dev}\ndev-type tun\ntun-mtu {cfg.tun_mtu}\n"
        + f"{'tls-client' if role == 'client' else 'tls-server'}\n"
        + ("" if role == "client" else "dh none\n")
        + f"remote-cert-tls {'server' if role == 'client' else 'client'}\n"
        + f"verify-x509-name {peer} name\n"
        + f"ca {keys.ca}\ncert {keys.cert}\nkey {keys.key}\ntls-crypt {keys.tls_crypt}\n"
        + f"data-ciphers {DATA_CIPHERS}\n"
        + "verb 3\nmute-replay-warnings\n"
        # The OS default socket buffers (~200 kB) overflowed in bursts (UDP
        # socket-buffer drops, each an inner TCP retransmission, measured by
        # bench_goodput.py); the kernel caps these at net.core.[rw]mem_max.
        + f"sndbuf {SOCKET_BUFFER_BYTES}\nrcvbuf {SOCKET_BUFFER_BYTES}\n"
    )


def _hooks(run_dir: Path, name: str, up: str, down: str) -> tuple[str, dict[str, str]]:
    """Hook lines for the config and the scripts' text (written by the runner)."""
    up_path, down_path = run_dir / f"{name}-up.sh", run_dir / f"{name}-down.sh"
    lines = f"script-security 2\nroute-up '/bin/sh {up_path}'\ndown '/bin/sh {down_path}'\n"
    script = "#!/bin/sh\n" + HEADER
    return lines, {up_path.name: script + up, down_path.name: script + down + "exit 0\n"}


def per_gateway_client(cfg: Config, t: Tunnel, keys: RolePaths) -> Instance:
    assert cfg.per_gateway is not None
    inner = cfg.per_gateway.inner_address
    pref = RULE_PREF_BASE + t.table
    up = (
        f"# tunnel {t.dev} through gateway {t.gateway.id} is up: make it an MPTCP path\n"
        f"ip rule del pref {pref} 2>/dev/null\n"
        "set -e\n"
        f"ip rule add pref {pref} from {t.client_ip} lookup {t.table}\n"
        f"ip route replace {inner}/32 dev {t.dev} table {t.table}\n"
        "# a subflow from the tunnel address to anywhere else (the kernel PM tries\n"
        "# every endpoint on every MPTCP connection) fails at once, it never leaks\n"
        "# onto a WAN with an address nobody routes back\n"
        f"ip route replace unreachable default table {t.table}\n"
        f"ip route replace {inner}/32 dev {t.dev} src {t.client_ip} metric {t.table}\n"
    )
    down = ""
    if cfg.per_gateway.path_manager == "kernel":
        up += (f"ip mptcp endpoint delete id {t.endpoint_id} 2>/dev/null || true\n"
               f"ip mptcp endpoint add {t.client_ip} id {t.endpoint_id} dev {t.dev} subflow\n")
        down += (f"# tunnel {t.dev} is down: the kernel closes its subflows with the endpoint\n"
                 f"ip mptcp endpoint delete id {t.endpoint_id} 2>/dev/null\n")
    else:
        up += f"# gwsteer's gateway {t.gateway.id}-tun now answers its probes: it opens the subflows\n"
        down += f"# tunnel {t.dev} is down: gwsteer's probes through it fail and it closes its subflows\n"
    down += (
        f"ip rule del pref {pref} 2>/dev/null\n"
        f"ip route flush table {t.table} 2>/dev/null\n"
    )
    name = f"gw-{t.gateway.id}"
    hook_lines, hooks = _hooks(cfg.run_dir, name, up, down)
    conf = (
        _common(cfg, t.dev, keys, "client")
        + f"# gateway {t.gateway.id}: the outer UDP leaves from its source address\n"
        + f"proto udp\nremote {cfg.proxy_address} {t.port}\nlocal {t.gateway.source}\nlport {t.port}\n"
        + f"ifconfig {t.client_ip} {t.proxy_ip}\n"
        + f"ping {PING_S}\nping-restart {PING_RESTART_S}\nconnect-retry 1 2\nexplicit-exit-notify 1\n"
        + hook_lines
    )
    return Instance(name, t.dev, conf, hooks)


def per_gateway_proxy(cfg: Config, t: Tunnel, keys: RolePaths) -> Instance:
    conf = (
        _common(cfg, t.dev, keys, "proxy")
        + f"# gateway {t.gateway.id}'s tunnel; the peer may move (NAT), float follows it\n"
        + f"proto udp\nlocal {cfg.proxy_address}\nlport {t.port}\nfloat\n"
        + f"ifconfig {t.proxy_ip} {t.client_ip}\n"
        + f"ping {PING_S}\nping-restart {PING_RESTART_S}\npersist-tun\n"
    )
    return Instance(f"gw-{t.gateway.id}", t.dev, conf, {})


def full_client(cfg: Config, f: FullTunnel, keys: RolePaths) -> Instance:
    pref = RULE_PREF_BASE + FULL_TABLE
    up = "# the full tunnel is up: the LAN's traffic goes into it\n"
    down = "# the full tunnel is down\n"
    for i, net in enumerate(f.lan):
        up += f"ip rule del pref {pref + i} 2>/dev/null\n"
        up += f"ip rule add pref {pref + i} from {net} lookup {FULL_TABLE}\n"
        down += f"ip rule del pref {pref + i} 2>/dev/null\n"
    up += f"ip route replace default dev {f.dev} table {FULL_TABLE}\n"
    hook_lines, hooks = _hooks(cfg.run_dir, "full", up, down)
    conf = (
        _common(cfg, f.dev, keys, "client")
        + "# TCP, made MPTCP by mptcpize: one connection over every WAN\n"
        + f"proto tcp-client\nremote {cfg.proxy_address} {f.port}\nnobind\nsocket-flags TCP_NODELAY\n"
        + f"ifconfig {f.client_ip} {f.proxy_ip}\n"
        + f"ping {FULL_PING_S}\nping-restart {FULL_PING_RESTART_S}\nconnect-retry 1 5\n"
        + hook_lines
    )
    return Instance("full", f.dev, conf, hooks, mptcp=True)


def full_proxy(cfg: Config, f: FullTunnel, keys: RolePaths) -> Instance:
    up = "# the full tunnel is up: the client's LAN is behind it\n" + "".join(
        f"ip route replace {net} dev {f.dev}\n" for net in f.lan
    )
    hook_lines, hooks = _hooks(cfg.run_dir, "full", up, "")
    conf = (
        _common(cfg, f.dev, keys, "proxy")
        + f"proto tcp-server\nlocal {cfg.proxy_address}\nlport {f.port}\nsocket-flags TCP_NODELAY\n"
        + f"ifconfig {f.proxy_ip} {f.client_ip}\n"
        + f"ping {FULL_PING_S}\nping-restart {FULL_PING_RESTART_S}\n"
        + hook_lines
    )
    return Instance("full", f.dev, conf, hooks, mptcp=True)


def instances(cfg: Config, role: str, keys: RolePaths, modes: list[str]) -> list[Instance]:
    """Every OpenVPN process of ``role`` for ``modes``."""
    out: list[Instance] = []
    if "per-gateway" in modes and cfg.per_gateway:
        make = per_gateway_client if role == "client" else per_gateway_proxy
        out += [make(cfg, t, keys) for t in cfg.per_gateway.tunnels]
    if "full-tunnel" in modes and cfg.full_tunnel:
        out.append((full_client if role == "client" else full_proxy)(cfg, cfg.full_tunnel, keys))
    return out
