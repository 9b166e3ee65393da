"""braid-openvpn's testbed: braid's standard topology plus a LAN behind the client box.

The namespaces, links, routes and clean-up come from ``eval/braid_testbed``
(:class:`~braid_testbed.standard.StandardTestbed`); this module adds the LAN
namespace for full-tunnel mode, the settings file both ends read, the PKI,
and starting ``braid-openvpn run`` (the real CLI) inside a namespace::

    lan 10.50.0.2 --- client ==wan1== gw1 --\\
                             ==wan2== gw2 ---- router --- proxy 10.9.0.2 --- server 10.10.0.2

Example::

    with OvpnTestbed("ov1") as tb:
        settings = tb.write_settings(tmp_path, pki)
        client = tb.braid_openvpn("client", settings["client"], tmp_path / "client.log")
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from . import TOOLS_DIR
from .link import LinkSpec
from .netns import Namespace, stop_process
from .standard import ADDRESSES, StandardTestbed, ip
from .topology import interface_counters
from .wait import scaled, wait_for

REPO = Path(__file__).resolve().parents[2]
#: braid-openvpn's folder: its launcher, run in the namespaces.
PKG = REPO / "proxy" / "openvpn"

LAN_NET, LAN_GW, LAN_HOST = "10.50.0.0/24", "10.50.0.1", "10.50.0.2"
PROXY = ip("proxy", "core")
SERVER = ip("server", "inet")
INNER = "10.200.0.1"
UP_TIMEOUT_S = 30
LISTEN_TIMEOUT_S = scaled(15)
BULK = TOOLS_DIR / "bulk.py"


def settings(pki: Path, run_dir: Path, **overrides: Any) -> dict[str, Any]:
    """The settings file for this topology (both modes), as Ansible would render it."""
    s: dict[str, Any] = {
        "proxy_address": PROXY,
        "pki_dir": str(pki),
        "client_name": "box",
        "server_name": "proxy",
        "run_dir": str(run_dir),
        "gateways": {
            f"gw{i}": {"source": ip("client", f"wan{i}"), "wan": str(_net(ADDRESSES["client"][f"wan{i}"]))}
            for i in (1, 2)
        },
        "per_gateway": {
            "inner_address": INNER,
            "tunnels": [{"gateway": f"gw{i}", "subnet": f"10.200.{i}.0/30", "port": 1194 + i} for i in (1, 2)],
        },
        "full_tunnel": {"subnet": "10.201.0.0/30", "port": 1194, "lan": [LAN_NET], "nat_out": "inet"},
    }
    s.update(overrides)
    return s


def _net(cidr: str) -> str:
    import ipaddress

    return str(ipaddress.ip_interface(cidr).network)


class OvpnTestbed(StandardTestbed):
    """The standard topology plus ``lan`` behind the client box."""

    __test__ = False

    def __init__(self, tag: str, wan: LinkSpec | None = None) -> None:
        """``wan`` shapes both WANs both ways (netem: braid's VM kernel); default raw veth."""
        super().__init__(tag, wan1=wan or LinkSpec(), wan2=wan or LinkSpec())
        self.node("lan", forward=False)
        self.link("client", "lan", f"{LAN_GW}/24", "lan", "up", f"{LAN_HOST}/24")
        self.route("lan", "default", LAN_GW)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: dict[str, Path] = {}  # role -> braid-openvpn's output
        self.run_dirs: dict[str, Path] = {}  # role -> its settings' run_dir (openvpn's logs)

    def write_settings(self, tmp: Path, pki: Path, **overrides: Any) -> dict[str, Path]:
        """One settings file per end (each end has its own run_dir on this one host)."""
        out = {}
        for role in ("client", "proxy"):
            path = tmp / f"{role}.json"
            self.run_dirs[role] = tmp / f"run-{role}"
            path.write_text(json.dumps(settings(pki, self.run_dirs[role], **overrides), indent=1))
            out[role] = path
        return out

    def braid_openvpn(self, role: str, config: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
        """``braid-openvpn run`` in ``role``'s namespace (killed with the testbed)."""
        node = "client" if role == "client" else "proxy"
        self.logs[role] = log
        with open(log, "wb") as out:
            return self[node].popen(
                [str(PKG / "braid-openvpn"), "run", "--config", str(config), "--role", role, *extra],
                stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ),
            )

    def stall_report(self, port: int) -> str:
        """What a stalled transfer to ``port`` leaves to read: each end's
        braid-openvpn events and openvpn's restarts, the TCP subflows with
        their kernel state, and the MPTCP counters that moved."""
        parts = []
        for role, log in self.logs.items():
            parts.append(f"--- {role}: braid-openvpn\n" + _tail(log, 20))
            run_dir = self.run_dirs.get(role)
            for vpn_log in sorted(run_dir.glob("*.log")) if run_dir else []:
                events = [line for line in _tail(vpn_log, 400).splitlines()
                          if any(w in line for w in ("restart", "Inactivity", "SIG", "error", "ERROR"))]
                parts.append(f"--- {role}: {vpn_log.name} (restarts, signals, errors)\n" + "\n".join(events[-10:]))
        for node in ("client", "proxy"):
            ss = self[node].run(["ss", "-tniH", f"( sport = :{port} or dport = :{port} )"], check=False).stdout
            nstat = self[node].run(["nstat", "-saz", "MPTcp*"], check=False).stdout
            moved = [line for line in nstat.splitlines() if line.startswith("MPTcp") and line.split()[1] != "0"]
            parts.append(f"--- {node}: TCP subflows of port {port}\n{ss}--- {node}: MPTCP counters\n"
                         + "\n".join(moved))
        return "\n".join(parts)

    def wan_tx(self) -> tuple[int, int]:
        """Bytes the client sent on wan1, wan2 (kernel link counters)."""
        return tuple(interface_counters(self.client, f"wan{i}")[0] for i in (1, 2))  # type: ignore[return-value]

    def wan_rx(self) -> tuple[int, int]:
        """Bytes the client received on wan1, wan2."""
        return tuple(interface_counters(self.client, f"wan{i}")[1] for i in (1, 2))  # type: ignore[return-value]


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no file)"


def endpoint_ids(ns: Namespace) -> set[int]:
    """The kernel path manager's endpoint ids in ``ns``."""
    out = ns.run(["ip", "-j", "mptcp", "endpoint", "show"]).stdout
    return {int(e["id"]) for e in json.loads(out or "[]")}


def mptcp_subflow_sources(ns: Namespace, port: int) -> list[str]:
    """Local addresses of the established TCP subflows to ``port`` in ``ns``
    (``ss``: every MPTCP subflow is a TCP socket; a subflow bound to a
    device shows as ``addr%dev``)."""
    out = ns.run(["ss", "-tnH", "state", "established", f"dport = :{port}"]).stdout
    return [line.split()[2].rsplit(":", 1)[0].split("%")[0] for line in out.splitlines() if line.strip()]


def start_both(tb: OvpnTestbed, tmp: Path, pki: Path, mode: str,
               **overrides: Any) -> dict[str, subprocess.Popen[bytes]]:
    """Start braid-openvpn on the proxy, then the client (settings changed by
    ``overrides``); wait until every tunnel is up."""
    cfg = tb.write_settings(tmp, pki, **overrides)
    procs = {}
    for role in ("proxy", "client"):
        procs[role] = tb.braid_openvpn(role, cfg[role], tmp / f"{role}-cli.log", "--mode", mode)
    names = ["gw-gw1", "gw-gw2"] if mode == "per-gateway" else ["full"]

    def all_up() -> bool:
        for role, proc in procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{role} braid-openvpn exited {proc.returncode}: "
                                     + (tmp / f"{role}-cli.log").read_text())
        text = (tmp / "client-cli.log").read_text()
        return all(f"tunnel {n} up" in text for n in names)

    wait_for("client tunnels up", all_up, UP_TIMEOUT_S)
    if mode == "per-gateway":
        if overrides.get("per_gateway", {}).get("path_manager", "kernel") == "kernel":
            wait_for("both tunnel endpoints", lambda: {101, 102} <= endpoint_ids(tb.client), 10)
        for i in (1, 2):  # each tunnel carries packets to the proxy's inner address
            wait_for(f"ping through tunnel {i}", functools.partial(_pings, tb.client, f"10.200.{i}.2"), 10)
    else:  # the tunnel's MPTCP connection has its second subflow
        wait_for("a subflow per WAN under the full tunnel",
                 lambda: len(mptcp_subflow_sources(tb.client, 1194)) == 2, 15)
    return procs


def _pings(ns: Namespace, source: str) -> bool:
    """One ping from ``source`` in ``ns`` to the proxy's inner address is answered."""
    return ns.run(["ping", "-c1", "-W1", "-I", source, INNER], check=False).returncode == 0


def stop_both(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    """Stop ``braid-openvpn run`` on both ends (SIGTERM: it undoes its host changes)."""
    for role in ("client", "proxy"):
        if stop_process(procs[role], wait=10) not in (0, None):
            raise AssertionError(f"{role} braid-openvpn did not stop cleanly: {procs[role].returncode}")
