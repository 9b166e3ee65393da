#!/usr/bin/env python3
"""Goodput of braid-openvpn's two modes against plain MPTCP, side by side.

Not a test: prints numbers and ratios, never pass/fail. On braid's standard
topology (client, gw1, gw2, router, proxy, server; each WAN netem-shaped,
by default as the standard testbed's: 20 Mbit/s, 10 ms, 100 packets), rounds
interleave three variants of one bulk transfer (eval/braid_testbed/bulk.py,
byte-checked):

* ``plain``: MPTCP from the client to the proxy, kernel path manager with a
  subflow endpoint on each WAN (no tunnel).
* ``per-gateway``: the same MPTCP transfer to the proxy's inner address,
  each subflow inside its gateway's UDP tunnel (``braid-openvpn run``).
* ``full-tunnel``: a plain TCP transfer from the LAN host to the server,
  through the full tunnel (OpenVPN TCP under mptcpize, over both WANs) and
  the proxy's NAT.

netem needs braid's kernel (the host's has none), so this runs in the VM::

    kernel/vm run --timeout 1200 -- python3 proxy/openvpn/bench_goodput.py

``--no-shaping`` runs on raw veth (the host kernel): CPU-bound figures,
useful only as a check that everything runs. ``--host-tbf`` shapes each
WAN on the host kernel with tbf at ``--wan-rate-mbit`` both ways (no delay:
the host has no netem), which separates the tunnels' cost at the standard
rate on a real CPU from what TCG adds in the VM. Every round starts the
tunnels afresh and stops them after (``braid-openvpn run`` / SIGTERM).
"openvpn cores" is the busiest openvpn process's CPU use during the
transfer (near 1.0: that single-threaded process is the bottleneck),
"machine CPU" the whole machine's (the guest's in the VM; near 1.0: the
CPUs are), "TCP retrans" and "UDP drops" count every TCP sender's
retransmissions and the UDP socket-buffer drops in the client, LAN and
proxy namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from braid_openvpn.config import DEFAULT_TUN_MTU
from braid_openvpn.pki import create
from braid_testbed.link import LinkSpec
from braid_testbed.ovpnnet import BULK, INNER, LAN_HOST, PROXY, SERVER, OvpnTestbed, start_both, stop_both
from braid_testbed.topology import kernel_has_netem

VARIANTS = ("plain", "per-gateway", "full-tunnel")
PLAIN_ENDPOINT_ID = 50
PORT = 5201


def transfer(tb: OvpnTestbed, node: str, host: str, nbytes: int, mode: str, *extra: str) -> float:
    """One byte-checked transfer; returns its goodput in Mbit/s."""
    proc = tb[node].run(["python3", str(BULK), *extra, "send", "--host", host, "--port", str(PORT),
                         "--bytes", str(nbytes), "--mode", mode], check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{node} -> {host} failed: {proc.stderr.strip()}")
    result = json.loads(proc.stdout.splitlines()[-1])
    return float(result["goodput_mbit"])


def openvpn_cpu_s(tb: OvpnTestbed) -> dict[int, float]:
    """CPU seconds (user + system) used so far by each openvpn process of the testbed."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for node in ("client", "proxy"):
        for pid in tb[node].pids():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except FileNotFoundError:
                continue
            name, rest = stat.split("(", 1)[1].rsplit(")", 1)
            if name == "openvpn":
                fields = rest.split()
                out[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return out


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of every CPU of this machine (the guest's, in the VM)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def counters(tb: OvpnTestbed) -> dict[str, int]:
    """Loss counters that explain a slow tunnel: TCP retransmissions (every
    sender: the client, the LAN host, the proxy) and UDP socket-buffer drops
    (the tunnels' openvpn sockets), summed over those namespaces."""
    out = {"tcp_retrans": 0, "udp_buffer_drops": 0}
    for node in ("client", "lan", "proxy"):
        text = tb[node].run(["nstat", "-saz", "TcpRetransSegs", "UdpRcvbufErrors", "UdpSndbufErrors"]).stdout
        for line in text.splitlines():
            name, _, rest = line.partition(" ")
            if name == "TcpRetransSegs":
                out["tcp_retrans"] += int(rest.split()[0])
            elif name in ("UdpRcvbufErrors", "UdpSndbufErrors"):
                out["udp_buffer_drops"] += int(rest.split()[0])
    return out


def run_variant(tb: OvpnTestbed, tmp: Path, pki: Path, variant: str, nbytes: int,
                mode: str, tun_mtu: int) -> dict[str, float]:
    """One transfer: goodput (Mbit/s), the share of the client's WAN bytes on
    wan2, the busiest openvpn process's CPU use (cores; 0 for plain), the
    machine's CPU use (fraction of all CPUs) and the loss counters, all
    during the transfer."""
    before = tb.wan_tx() if mode == "upload" else tb.wan_rx()
    procs = None
    if variant == "plain":
        tb.client.run(["ip", "mptcp", "endpoint", "add", "10.2.0.2", "id", str(PLAIN_ENDPOINT_ID),
                       "dev", "wan2", "subflow"])
    else:
        procs = start_both(tb, tmp, pki, variant, tun_mtu=tun_mtu)
    try:
        ovpn0, cpu0, loss0, t0 = openvpn_cpu_s(tb), machine_cpu(), counters(tb), time.monotonic()
        if variant == "plain":
            mbit = transfer(tb, "client", PROXY, nbytes, mode)
        elif variant == "per-gateway":
            mbit = transfer(tb, "client", INNER, nbytes, mode)
        else:  # the LAN host's ordinary TCP, through the tunnel and the NAT
            mbit = transfer(tb, "lan", SERVER, nbytes, mode, "--tcp")
        ovpn1, cpu1, loss1, wall = openvpn_cpu_s(tb), machine_cpu(), counters(tb), time.monotonic() - t0
    finally:
        if procs is None:
            tb.client.run(["ip", "mptcp", "endpoint", "delete", "id", str(PLAIN_ENDPOINT_ID)])
        else:
            stop_both(procs)
    after = tb.wan_tx() if mode == "upload" else tb.wan_rx()
    d1, d2 = after[0] - before[0], after[1] - before[1]
    return {
        "goodput_mbit": mbit,
        "wan2_share": d2 / max(1, d1 + d2),
        "busiest_openvpn_cores": max(((ovpn1[p] - ovpn0.get(p, 0.0)) / wall for p in ovpn1), default=0.0),
        "machine_cpu_busy": (cpu1[0] - cpu0[0]) / max(1, cpu1[1] - cpu0[1]),
        **{k: loss1[k] - loss0[k] for k in loss0},
    }


def shape_with_tbf(tb: OvpnTestbed, rate_mbit: float, queue_pkts: int) -> None:
    """tbf at ``rate_mbit`` on both ends of each WAN, a queue of
    ``queue_pkts`` full frames (tbf: the host kernel has no netem)."""
    for i in (1, 2):
        for node, dev in (("client", f"wan{i}"), (f"gw{i}", "lan")):
            tb[node].run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate_mbit:g}mbit",
                          "burst", "32kb", "limit", str(queue_pkts * 1514)])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default %(default)s)")
    p.add_argument("--mib", type=int, default=48,
                   help="MiB per transfer (default %(default)s: long enough that slow start, longer "
                   "through a tunnel, weighs little)")
    p.add_argument("--mode", choices=["upload", "download"], default="upload")
    p.add_argument("--wan-rate-mbit", type=float, default=20.0)
    p.add_argument("--wan-delay-ms", type=float, default=10.0, help="each way")
    p.add_argument("--wan-queue-pkts", type=int, default=100)
    p.add_argument("--tun-mtu", type=int, default=DEFAULT_TUN_MTU, help="tunnels' inner MTU (default %(default)s)")
    p.add_argument("--no-shaping", action="store_true", help="raw veth (host kernel; CPU-bound figures)")
    p.add_argument("--host-tbf", action="store_true",
                   help="host kernel: tbf at --wan-rate-mbit on each WAN, both ways, no delay (no netem there)")
    p.add_argument("--json", type=Path, help="also write the results here")
    a = p.parse_args()
    if not 1 <= a.rounds <= 20 or not 1 <= a.mib <= 4096:
        p.error("--rounds must be 1-20 and --mib 1-4096")
    if os.geteuid() != 0:
        p.error("needs root (network namespaces)")
    wan = None
    if not a.no_shaping and not a.host_tbf:
        if not kernel_has_netem():
            p.error("this kernel has no netem: run in braid's VM (kernel/vm run -- ...) or pass --no-shaping")
        wan = LinkSpec(rate_mbit=a.wan_rate_mbit, delay_ms=a.wan_delay_ms, queue_pkts=a.wan_queue_pkts)
    nbytes = a.mib << 20
    results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="braid-ovpn-bench-") as td:
        tmp = Path(td)
        pki = tmp / "pki"
        create(pki, "box", "proxy")
        with OvpnTestbed(f"ovb{os.getpid() % 10000}", wan=wan) as tb:
            for ns in (tb.client, tb.proxy):
                ns.run(["ip", "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"])
            if a.host_tbf:
                shape_with_tbf(tb, a.wan_rate_mbit, a.wan_queue_pkts)
            tb.proxy.popen(["python3", str(BULK), "serve", "--port", str(PORT)], stdout=subprocess.DEVNULL)
            tb.server.popen(["python3", str(BULK), "--tcp", "serve", "--port", str(PORT)], stdout=subprocess.DEVNULL)
            tb.proxy.wait_listening(PORT, timeout=60)
            tb.server.wait_listening(PORT, timeout=60)
            for r in range(a.rounds):
                for v in VARIANTS:
                    rdir = tmp / f"{v}-{r}"
                    rdir.mkdir()
                    res = run_variant(tb, rdir, pki, v, nbytes, a.mode, a.tun_mtu)
                    results[v].append(res)
                    print(f"round {r + 1} {v:12s} {res['goodput_mbit']:8.1f} Mbit/s  wan2 share "
                          f"{res['wan2_share']:.2f}  busiest openvpn {res['busiest_openvpn_cores']:.2f} cores  "
                          f"machine CPU {res['machine_cpu_busy']:.2f}  TCP retrans {res['tcp_retrans']}  "
                          f"UDP buffer drops {res['udp_buffer_drops']}", flush=True)
    shaping = f"2 x {a.wan_rate_mbit:g} Mbit/s tbf, no delay, {a.wan_queue_pkts} pkts" if a.host_tbf else \
        "raw veth (no netem)" if wan is None else \
        f"2 x {a.wan_rate_mbit:g} Mbit/s, {a.wan_delay_ms:g} ms each way, {a.wan_queue_pkts} pkts"
    print(f"\n{a.mode}, {a.mib} MiB per transfer, {a.rounds} rounds, WANs: {shaping}, tun_mtu {a.tun_mtu}, "
          f"LAN host {LAN_HOST} (medians)")
    plain = statistics.median(r["goodput_mbit"] for r in results["plain"])
    print(f"{'variant':14s}{'Mbit/s':>8s}{'min':>7s}{'max':>7s}{'vs plain':>10s}{'wan2':>6s}"
          f"{'openvpn cores':>15s}{'machine CPU':>13s}{'TCP retrans':>13s}{'UDP drops':>11s}")
    summary: dict[str, dict[str, object]] = {}
    for v in VARIANTS:
        runs = results[v]
        ms = [r["goodput_mbit"] for r in runs]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{v:14s}{med['goodput_mbit']:8.1f}{min(ms):7.1f}{max(ms):7.1f}{med['goodput_mbit'] / plain:9.2f}x"
              f"{med['wan2_share']:6.2f}{med['busiest_openvpn_cores']:15.2f}{med['machine_cpu_busy']:13.2f}"
              f"{med['tcp_retrans']:13.0f}{med['udp_buffer_drops']:11.0f}")
        summary[v] = {"runs": runs, "medians": med, "ratio_vs_plain": med["goodput_mbit"] / plain}
    if a.json:
        a.json.write_text(json.dumps({"mode": a.mode, "mib": a.mib, "wans": shaping, "tun_mtu": a.tun_mtu,
                                       "results": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
