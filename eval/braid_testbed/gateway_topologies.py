"""Gateway topologies for gwsteer's tests and experiment E3 (network
namespaces, no netem).

``onlink``::

    cli e1 10.1.1.2 --- 10.1.1.1 gw1 10.9.1.1 --- 10.9.1.2 \\
                                                          srv 10.99.0.1 (lo)
    cli e2 10.1.2.2 --- 10.1.2.1 gw2 10.9.2.1 --- 10.9.2.2 /

``twohop`` (the client's default route and r1's default route go via
gw1; gw2 is reached only through an SRv6 segment list r1 -> gw2)::

    cli e0 10.1.0.2, 10.1.0.3, fc00:1::2 --- r1 --- gw1 --- srv
                                              \\--- gw2 --/
    r1 End SID fc00:e::1, gw2 End.DX4 SID fc00:2::d4
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import TOOLS_DIR
from .mptcpd_lab import PLUGIN_DIR, Lab, Namespace, Topology, popen_text, start_mptcpd
from .wait import TIME_SCALE

ROUTE = str(PLUGIN_DIR / "gwsteer-route")
BULK = str(TOOLS_DIR / "bulk.py")
SERVER = "10.99.0.1"
SERVER6 = "fc00:99::1"
PORT = 5201


@dataclass
class Topo:
    """Namespaces and facts of a built topology."""

    lab: Lab
    tmp: Path
    net: Topology
    cli: Namespace
    srv: Namespace
    gws: dict[str, Namespace]
    sources: dict[str, str]
    client_dev: dict[str, str]
    cut_dev: dict[str, str] = field(default_factory=dict)
    config: Path = Path()
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def write_config(self, gateways: str, extra: str = "") -> Path:
        """Write the client config (global section + gateway sections)."""
        self.config = self.tmp / "client.conf"
        self.config.write_text(
            "[gwsteer]\n"
            f"probe_target = {SERVER}\n"
            f"status_file = {self.tmp}/gateways.json\n"
            "probe_interval_ms = 100\nprobe_timeout_ms = 300\n"
            "hold_ms = 500\n"
            f"{extra}\n{gateways}")
        return self.config

    def cut(self, gw: str) -> None:
        """Make gateway ``gw`` stop forwarding (nftables drop, invisible to the client)."""
        ns = self.gws[gw]
        ns.run(["nft", "add table inet braidcut"])
        ns.run(["nft", "add chain inet braidcut forward_drop "
                "{ type filter hook forward priority 0; policy drop; }"])

    def restore(self, gw: str) -> None:
        """Undo :meth:`cut`."""
        self.gws[gw].run(["nft", "delete table inet braidcut"])

    def in_flight(self, gw: str) -> int:
        """Bytes the client's TCP connections and MPTCP subflows through
        ``gw`` (its source address) to PORT have sent and not had
        acknowledged (snd_nxt - snd_una, from ss): what they hold in flight
        if ``gw`` dies now."""
        out = self.cli.run(["ss", "-tinH", "state", "established", "src", self.sources[gw],
                            "dport", "=", f":{PORT}"]).stdout
        return sum(unacked_bytes(line) for line in out.splitlines())

    def route(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run gwsteer-route in the client namespace."""
        # An interpreter start plus pyroute2's import take tens of seconds in braid's VM.
        return self.cli.run([ROUTE, "--config", str(self.config), *args], check=check,
                            timeout=60 * TIME_SCALE)

    def start_pm(self, proxy_extra: str = "") -> None:
        """Start mptcpd+gwsteer on the client (client) and server (proxy)."""
        self.start_proxy_pm(proxy_extra)
        self.start_client_pm()

    def start_proxy_pm(self, proxy_extra: str = "") -> subprocess.Popen[str]:
        """Start mptcpd+gwsteer in the proxy role on the server."""
        proxy_conf = self.tmp / "proxy.conf"
        proxy_conf.write_text(
            f"[gwsteer]\nrole = proxy\nstatus_file = {self.tmp}/proxy.json\n{proxy_extra}\n")
        proc = start_mptcpd(self.srv, proxy_conf, self.tmp / "proxy.log")
        self.procs.append(proc)
        return proc

    def start_client_pm(self, log: str = "client.log") -> subprocess.Popen[str]:
        """Start mptcpd+gwsteer in the client role on the client."""
        proc = start_mptcpd(self.cli, self.config, self.tmp / log)
        self.procs.append(proc)
        return proc

    def server(self, progress: str = "received", timeout: float = 60,
               bind: str = SERVER) -> subprocess.Popen[bytes]:
        """Start bulk.py's receiver for one upload on srv; return once it
        listens. Its byte count goes to ``progress`` (received_bytes()).

        A client started before the listener exists is refused, and how
        long an interpreter takes to start varies (seconds in braid's
        emulated VM), so wait for the socket rather than for a fixed time.
        """
        proc = self.srv.popen([sys.executable, BULK, "serve", "--bind", bind, "--port", str(PORT),
                               "--count", "1", "--progress", str(self.tmp / progress),
                               "--timeout", str(timeout * TIME_SCALE)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.srv.wait_listening(PORT, bind, 10 * TIME_SCALE, proc=proc)
        return proc

    def received_bytes(self, progress: str = "received") -> int:
        """What the receiver last counted (0 if nothing arrived)."""
        path = self.tmp / progress
        lines = path.read_text().split() if path.exists() else []
        return int(lines[-1]) if lines else 0

    def client(self, nbytes: int, rate: float = 0, source: str | None = None,
               seconds: float | None = None, hold: Path | None = None,
               dst: str = SERVER) -> subprocess.Popen[str]:
        """Start a checksummed upload on cli (stdout: bulk.py's JSON line),
        paced at ``rate`` bytes/s if given, stopped after ``seconds``.

        With ``hold`` the sender keeps the connection open after the data
        until that file exists (create it to let the transfer finish).
        """
        args = [sys.executable, BULK, "send", "--host", dst, "--port", str(PORT),
                "--bytes", str(nbytes), "--timeout", str(60 * TIME_SCALE)]
        args += ["--mode", "paced", "--rates", f"{rate * 8 / 1e6:g}"] if rate else ["--mode", "upload"]
        if source:
            args += ["--source", source]
        if seconds is not None:
            args += ["--seconds", str(seconds)]
        if hold is not None:
            args += ["--hold-file", str(hold)]
        return popen_text(self.cli, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _shape(ns: Namespace, dev: str, mbit: int) -> None:
    """tbf, not netem: the host kernel has no netem."""
    ns.run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
            "burst", "32kb", "latency", "50ms"])


def unacked_bytes(ss_info: str) -> int:
    """snd_nxt - snd_una of one socket from its ``ss -i`` line: the data
    bytes sent once (bytes_sent less bytes_retrans) less those acknowledged
    (bytes_acked counts the SYN); 0 where the line has no byte counts."""
    counts = {k: int(v) for k, v in re.findall(r"\b(bytes_sent|bytes_retrans|bytes_acked):(\d+)", ss_info)}
    if "bytes_sent" not in counts:
        return 0
    acked = max(counts.get("bytes_acked", 1) - 1, 0)
    return max(counts["bytes_sent"] - counts.get("bytes_retrans", 0) - acked, 0)


def onlink(lab: Lab, tmp: Path, shape_mbit: int = 0, gateways: int = 2,
           ipv6: bool = False) -> Topo:
    """Client with ``gateways`` on-link gateways to one server.

    With ``ipv6`` every link also carries fc00:<k>::/64 (client side) and
    fc00:9<k>::/64 (server side), and the server has SERVER6.
    """
    net = lab.topology()
    net.node("cli", forward=False)
    net.node("srv", forward=False)
    net.address("srv", "lo", f"{SERVER}/32")
    if ipv6:
        net.address("srv", "lo", f"{SERVER6}/128")
    for k in range(1, gateways + 1):
        gw = f"gw{k}"
        net.node(gw)
        net.link("cli", f"e{k}", f"10.1.{k}.2/24", gw, "c", f"10.1.{k}.1/24")
        net.link(gw, "s", f"10.9.{k}.1/24", "srv", f"g{k}", f"10.9.{k}.2/24")
        net.route(gw, f"{SERVER}/32", f"10.9.{k}.2")
        net.route("srv", f"10.1.{k}.0/24", f"10.9.{k}.1")
        if ipv6:
            net.address("cli", f"e{k}", f"fc00:{k}::2/64")
            net.address(gw, "c", f"fc00:{k}::1/64")
            net.address(gw, "s", f"fc00:9{k}::1/64")
            net.address("srv", f"g{k}", f"fc00:9{k}::2/64")
            net.route(gw, f"{SERVER6}/128", f"fc00:9{k}::2")
            net.route("srv", f"fc00:{k}::/64", f"fc00:9{k}::1")
    net.route("cli", "default", "10.1.1.1")
    if ipv6:
        net.route("cli", "::/0", "fc00:1::1")
    lab.up(net)
    gws = {f"gw{k}": net[f"gw{k}"] for k in range(1, gateways + 1)}
    topo = Topo(lab, tmp, net, net["cli"], net["srv"], gws,
                sources={gw: f"10.1.{gw[2:]}.2" for gw in gws},
                client_dev={gw: f"e{gw[2:]}" for gw in gws},
                cut_dev={gw: "s" for gw in gws})
    if shape_mbit:
        for dev in topo.client_dev.values():
            _shape(topo.cli, dev, shape_mbit)
    return topo


def onlink_gateways(topo: Topo, backup: tuple[str, ...] = ()) -> str:
    """Gateway sections for :func:`onlink`."""
    text = ""
    for gw_id, source in topo.sources.items():
        k = gw_id[2:]
        text += (f"[gateway {gw_id}]\nsource = {source}\nhops = 10.1.{k}.1\n"
                 f"backup = {'true' if gw_id in backup else 'false'}\n")
    return text


def twohop(lab: Lab, tmp: Path) -> Topo:
    """Build the SRv6 two-hop topology; returns it with gw2 decap installed."""
    net = lab.topology()
    net.node("cli", forward=False)
    net.node("srv", forward=False)
    for name in ("r1", "gw1", "gw2"):
        net.node(name)
    net.address("srv", "lo", f"{SERVER}/32")
    net.link("cli", "e0", "10.1.0.2/24", "r1", "c", "10.1.0.1/24")
    net.address("cli", "e0", "10.1.0.3/24")
    net.address("cli", "e0", "fc00:1::2/64")
    net.address("r1", "c", "fc00:1::1/64")
    net.link("r1", "g1", "10.2.1.1/24", "gw1", "r", "10.2.1.2/24")
    net.link("r1", "g2", "10.2.2.1/24", "gw2", "r", "10.2.2.2/24")
    net.address("r1", "g2", "fc00:12::1/64")
    net.address("gw2", "r", "fc00:12::2/64")
    net.link("gw1", "s", "10.9.1.1/24", "srv", "g1", "10.9.1.2/24")
    net.link("gw2", "s", "10.9.2.1/24", "srv", "g2", "10.9.2.2/24")
    net.route("cli", "default", "10.1.0.1")
    net.route("cli", "default", "fc00:1::1")
    net.route("r1", "default", "10.2.1.2")          # plain traffic: gw1
    net.route("r1", "fc00:2::/64", "fc00:12::2")
    net.route("gw1", f"{SERVER}/32", "10.9.1.2")
    net.route("gw1", "10.1.0.0/24", "10.2.1.1")
    net.route("gw2", f"{SERVER}/32", "10.9.2.2")
    net.route("gw2", "10.1.0.0/24", "10.2.2.1")
    net.route("srv", "10.1.0.2/32", "10.9.1.1")
    net.route("srv", "10.1.0.3/32", "10.9.2.1")     # return via gw2
    lab.up(net)
    net["r1"].run([ROUTE, "transit", "--sid", "fc00:e::1", "--dev", "c"])
    net["gw2"].run([ROUTE, "decap", "--sid", "fc00:2::d4", "--nexthop", "10.9.2.2", "--dev", "s"])
    topo = Topo(lab, tmp, net, net["cli"], net["srv"],
                {"gw1": net["gw1"], "gw2": net["gw2"], "r1": net["r1"]},
                {"gw1": "10.1.0.2", "gw2": "10.1.0.3"}, {"gw1": "e0", "gw2": "e0"})
    topo.write_config("[gateway gw1]\nsource = 10.1.0.2\nhops = 10.1.0.1\n"
                      "[gateway gw2]\nsource = 10.1.0.3\nhops = fc00:e::1, fc00:2::d4\n")
    return topo
