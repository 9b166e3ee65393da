#!/usr/bin/env python3
"""Failover benchmark: gwsteer vs the in-kernel path manager.

Same namespaces, same endpoints, same policy routes, same tbf-shaped
gateway paths; only the client's path manager differs.  Per run:

1. unpaced MPTCP upload through two gateways (gw1 carries the initial
   subflow), 50 ms goodput bins at the receiver;
2. at T_CUT gw1 stops forwarding (nftables drop on gw1, invisible to the
   client's links);
3. "recovery" = time from the cut until a 500 ms window of goodput
   reaches 90% of the surviving capacity (a gw2-only transfer measured
   in a calibration run);
4. at T_CUT + the outage length gw1 forwards again; "re-use" = time
   from then until the client sends >= 25% of a path's rate through gw1
   again (interface counters sampled every 20 ms, i.e. counted on the
   wire), and "first packet" = time until the first data segment from
   gw1's source reaches the server through gw1 (tcpdump on the server's
   gw1 link, per packet, kernel time stamps).

Detection is set equal for both: gwsteer declares a gateway down after
FAIL_AFTER lost probes (one per PROBE_INTERVAL_MS, PROBE_TIMEOUT_MS
each), and the in-kernel PM's scheduler marks a subflow stale after
FAIL_AFTER retransmissions (net.mptcp.stale_loss_cnt, default 4).  The
outage length is swept (--outages).

Prints the median (and min/max) of every metric for both managers.
Usage: sudo ./bench.py [--runs 5] [--mbit 20] [--outages 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from netlab import Lab, interface_counters, start_mptcpd, stop_process
from topology import Topo, onlink, onlink_gateways

T_CUT = 3.0
AFTER_S = 8.0
WINDOW_BINS = 10  # 10 x 50 ms
#: Detection settings, the same for both path managers (see the docstring).
FAIL_AFTER = 3
PROBE_INTERVAL_MS = 100  # tests/topology.py writes these two into the config
PROBE_TIMEOUT_MS = 300


def _setup(lab: Lab, tmp: Path, mbit: int, mode: str) -> Topo:
    topo = onlink(lab, tmp, shape_mbit=mbit)
    topo.write_config(onlink_gateways(topo),
                      extra=f"fail_after = {FAIL_AFTER}\nrecover_after = 3\n")
    topo.route("install")
    topo.srv.sysctl("net.mptcp.pm_type", "0")
    topo.srv.run(["ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"])
    if mode == "gwsteer":
        start_mptcpd(topo.cli, topo.config, tmp / "client.log")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            status = tmp / "gateways.json"
            if status.exists() and all(g["up"] for g in json.loads(status.read_text())["gateways"]):
                break
            time.sleep(0.05)
    else:
        topo.cli.sysctl("net.mptcp.pm_type", "0")
        topo.cli.sysctl("net.mptcp.stale_loss_cnt", FAIL_AFTER)
        topo.cli.run(["ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "0"])
        for k, dev in ((1, "e1"), (2, "e2")):
            topo.cli.run(["ip", "mptcp", "endpoint", "add", f"10.1.{k}.2", "dev", dev, "subflow"])
    return topo


def _goodput(recv: dict[str, object], since: float) -> list[tuple[float, float]]:
    """(time since ``since``, bytes/s) per bin."""
    bins = recv["bins"]
    assert isinstance(bins, list)
    start = float(str(recv["start_mono"]))
    width = int(str(recv["bin_ms"])) / 1000
    return [(start + i * width - since, b / width) for i, b in enumerate(bins)]


def calibrate(mbit: int) -> float:
    """Goodput of one gw2-only TCP transfer: the surviving capacity."""
    with TemporaryDirectory() as d, Lab() as lab:
        tmp = Path(d)
        tmp.chmod(0o755)
        topo = onlink(lab, tmp, shape_mbit=mbit)
        topo.write_config(onlink_gateways(topo))
        topo.route("install")
        server = topo.server()
        time.sleep(0.2)
        client = topo.client(10**9, source="10.1.2.2", seconds=4)
        client.communicate(timeout=30)
        server.wait(timeout=10)
        recv = json.loads((tmp / "recv.json").read_text())
        rates = [b / 0.05 for b in recv["bins"][10:-2]]  # skip slow start, tail
        return float(statistics.median(rates))


def _first_packet_after(pcap: Path, since_wall: float) -> float | None:
    """Seconds from ``since_wall`` to the first data segment in ``pcap``."""
    out = subprocess.run(["tcpdump", "-n", "-tt", "-r", str(pcap)], capture_output=True,
                         text=True, check=False).stdout
    for line in out.splitlines():
        stamp, _, rest = line.partition(" ")
        if "length 0" in rest or "length" not in rest:
            continue
        if float(stamp) >= since_wall:
            return float(stamp) - since_wall
    return None


def run_once(mode: str, mbit: int, surviving: float, cut_s: float) -> dict[str, float | None]:
    """One cut/restore cycle; returns recovery and re-use times (s)."""
    with TemporaryDirectory() as d, Lab() as lab:
        tmp = Path(d)
        tmp.chmod(0o755)
        topo = _setup(lab, tmp, mbit, mode)
        total = T_CUT + cut_s + AFTER_S
        pcap = tmp / "g1.pcap"
        dump = topo.srv.popen(["tcpdump", "-i", "g1", "-n", "-s", "96", "-U", "-w", str(pcap),
                               "tcp and src 10.1.1.2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # tcpdump attaches
        server = topo.server(timeout=total + 30)
        time.sleep(0.2)
        client = topo.client(10**10, seconds=total)
        start = time.monotonic()
        time.sleep(T_CUT)
        topo.cut("gw1")
        cut = time.monotonic()
        time.sleep(cut_s)
        topo.restore("gw1")
        restored = time.monotonic()
        restored_wall = time.time()
        reuse: float | None = None
        threshold = 0.25 * mbit * 1e6 / 8 * 0.2   # bytes per 200 ms
        samples: list[tuple[float, int]] = []
        while time.monotonic() - restored < AFTER_S - 0.5:
            samples.append((time.monotonic(), interface_counters(topo.cli, "e1")[0]))
            old = [s for s in samples if s[0] <= samples[-1][0] - 0.2]
            if reuse is None and old and samples[-1][1] - old[-1][1] >= threshold:
                reuse = old[-1][0] - restored
            time.sleep(0.02)
        out, _ = client.communicate(timeout=60)
        server.wait(timeout=30)
        stop_process(dump, wait=5)
        first_packet = _first_packet_after(pcap, restored_wall)
        ok = json.loads(out)["ok"] if out else False
        recv = json.loads((tmp / "recv.json").read_text())
        series = _goodput(recv, cut)
        recovery: float | None = None
        for i, (t, _rate) in enumerate(series):
            if t < 0 or t > cut_s - WINDOW_BINS * 0.05:
                continue
            window = [r for _, r in series[i:i + WINDOW_BINS]]
            if len(window) == WINDOW_BINS and statistics.mean(window) >= 0.9 * surviving:
                recovery = t
                break
        before = [r for t, r in series if -2.0 <= t < 0]
        del start
        return {"recovery_s": recovery, "reuse_s": reuse, "first_packet_s": first_packet,
                "ok": float(ok),
                "pre_cut_mbit": statistics.mean(before) * 8 / 1e6 if before else 0.0}


def _fmt(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    missing = len(values) - len(got)
    if not got:
        return "never"
    text = f"{statistics.median(got):6.2f} s (min {min(got):.2f}, max {max(got):.2f})"
    return text + (f", {missing} never" if missing else "")


def main() -> int:
    """Run the benchmark and print the table."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--mbit", type=int, default=20, help="tbf rate of each gateway path")
    p.add_argument("--outages", default="1,2,4",
                   help="comma-separated outage lengths in seconds (default 1,2,4)")
    args = p.parse_args()
    outages = [float(x) for x in args.outages.split(",")]
    surviving = calibrate(args.mbit)
    print(f"surviving capacity (gw2 alone): {surviving * 8 / 1e6:.1f} Mbit/s; "
          f"paths shaped to {args.mbit} Mbit/s each; cut at {T_CUT}s; detection: "
          f"{FAIL_AFTER} losses (gwsteer probes every {PROBE_INTERVAL_MS} ms, "
          f"timeout {PROBE_TIMEOUT_MS} ms; kernel stale_loss_cnt {FAIL_AFTER})", flush=True)
    exact = True
    for cut_s in outages:
        results: dict[str, list[dict[str, float | None]]] = {"gwsteer": [], "kernel": []}
        for i in range(args.runs):
            for mode in ("gwsteer", "kernel"):
                r = run_once(mode, args.mbit, surviving, cut_s)
                results[mode].append(r)
                print(f"outage {cut_s:g}s run {i + 1} {mode:8s} recovery={r['recovery_s']} "
                      f"reuse={r['reuse_s']} first-packet={r['first_packet_s']} "
                      f"byte-exact={bool(r['ok'])} pre-cut={r['pre_cut_mbit']:.1f} Mbit/s", flush=True)
        print()
        print(f"{'outage ' + format(cut_s, 'g') + ' s, median of ' + str(args.runs):<36} "
              f"{'gwsteer':<40} in-kernel PM")
        for key, label in (("recovery_s", "cut -> goodput >= 90% surviving"),
                           ("reuse_s", "restore -> gw1 carries data again"),
                           ("first_packet_s", "restore -> first gw1 packet (pcap)")):
            print(f"{label:<36} {_fmt([r[key] for r in results['gwsteer']]):<40} "
                  f"{_fmt([r[key] for r in results['kernel']])}")
        print()
        exact = exact and all(r["ok"] for rs in results.values() for r in rs)
    print(f"all transfers byte-exact: {exact}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
