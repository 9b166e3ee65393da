#!/usr/bin/env python3
"""Page-load time over a private Tor network: tor through the braid bridge
(MPTCP over both WANs) vs the same bridge reached directly over one network
(a vanilla bridge ORPort on WAN1, plain TCP), side by side in one run.

Both clients use the same bridge identity, relays and exit; page loads
alternate between them. A page load is one curl fetching the page (default
300 kB) and --objects small objects (10 kB) over parallel connections,
through tor's SocksPort, timed from start to the last byte (including
curl's start in the namespace, the same for both). Prints medians, p90 and
the braid/direct ratio; never a pass/fail.

On the host kernel the WANs are plain veth (no netem, RTT ~0.06 ms) and the
only scheduler is `default`, so the ratio measures braid's overhead, not
multipath gains. --scheduler and --wan-delay-ms/--wan-rate-mbit need braid's
kernel (kernel/vm run -- python3 proxy/tor/bench.py --scheduler hywf ...).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from braid_eval.progress import Progress
from braid_testbed.privnet import SERVER_PUBLIC, WEB_NAME, WEB_PORT, LinkSpec, PrivateTorNetwork

VANILLA_PORT = 9002


def page_load(net: PrivateTorNetwork, socks_port: int, objects: int, out: Path) -> float:
    urls = [f"http://{WEB_NAME}:{WEB_PORT}/page.bin"] + [
        f"http://{WEB_NAME}:{WEB_PORT}/obj{i}.bin" for i in range(objects)
    ]
    args = ["curl", "-sS", "--fail", "--max-time", "60", "--parallel", "--parallel-immediate",
            "--socks5-hostname", f"127.0.0.1:{socks_port}"]
    for i, u in enumerate(urls):
        args += ["-o", str(out / f"f{i}"), u]
    t0 = time.monotonic()
    r = net.tb.run("c", *args, check=False, timeout=90)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"page load through port {socks_port} failed: {r.stderr}")
    return dt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pages", type=int, default=20, help="page loads per variant (default %(default)s)")
    p.add_argument("--size", type=int, default=300_000, help="page bytes (default %(default)s)")
    p.add_argument("--objects", type=int, default=4, help="extra 10 kB objects per page (default %(default)s)")
    p.add_argument("--scheduler", default="", help="net.mptcp.scheduler on client and proxy (braid's kernel)")
    p.add_argument("--wan-delay-ms", type=float, default=0.0, help="netem delay each way on both WANs (VM)")
    p.add_argument("--wan-rate-mbit", type=float, default=None, help="netem rate on both WANs (VM)")
    a = p.parse_args()
    if not 1 <= a.pages <= 500 or not 0 <= a.objects <= 50 or not 1_000 <= a.size <= 50_000_000:
        p.error("--pages 1..500, --objects 0..50, --size 1000..50000000")
    spec = LinkSpec(rate_mbit=a.wan_rate_mbit, delay_ms=a.wan_delay_ms) if a.wan_delay_ms or a.wan_rate_mbit else None
    with tempfile.TemporaryDirectory(prefix="braid-torbench-") as tmp_s:
        tmp = Path(tmp_s)
        root = tmp / "web"
        root.mkdir()
        root.chmod(0o755)
        (root / "page.bin").write_bytes(secrets.token_bytes(a.size))
        for i in range(a.objects):
            (root / f"obj{i}.bin").write_bytes(secrets.token_bytes(10_000))
        out = tmp / "out"
        out.mkdir()
        t0 = time.monotonic()
        with PrivateTorNetwork(bridge_extra=[f"ORPort {SERVER_PUBLIC}:{VANILLA_PORT} NoAdvertise"],
                               wan1=spec, wan2=spec) as net:
            if a.scheduler:
                for role in ("c", "s"):
                    net.tb.run(role, "sysctl", "-q", "-w", f"net.mptcp.scheduler={a.scheduler}")
                # The bridge side's connections keep their listener's
                # scheduler: a new braid-pt server listens under this one.
                net.restart_pt_server()
            net.web_server(root)
            fpr = net.bridge_line.split()[2]
            net.start_tor("c", "direct", ["SocksPort 127.0.0.1:9060", "UseBridges 1", "ConfluxEnabled 0",
                                          f"Bridge {SERVER_PUBLIC}:{VANILLA_PORT} {fpr}"])
            with net.client(socks_port=9050, control_port=9051) as braid:
                braid.wait_bootstrapped(120)
                net.wait_log("direct", "Bootstrapped 100%", timeout=120)
                print(f"network and both clients ready in {time.monotonic() - t0:.1f} s", flush=True)
                variants = {"braid-bridge (MPTCP, 2 WANs)": 9050, "direct bridge (TCP, WAN1)": 9060}
                for port in variants.values():  # warm-up: circuits built, streams attached
                    page_load(net, port, a.objects, out)
                times: dict[str, list[float]] = {k: [] for k in variants}
                progress = Progress("page loads", a.pages * len(variants), every=10)
                for _ in range(a.pages):
                    for name, port in variants.items():
                        times[name].append(page_load(net, port, a.objects, out))
                        progress.step()
        sched = a.scheduler or "default (host)"
        print(f"\npage = {a.size} B + {a.objects} x 10 kB, {a.pages} loads each, interleaved; scheduler {sched};"
              f" WAN delay {a.wan_delay_ms} ms each way, rate {a.wan_rate_mbit or 'unlimited'} Mbit/s")
        print(f"{'variant':32} {'median ms':>10} {'p90 ms':>10} {'min ms':>10}")
        med = {}
        for name, ts in times.items():
            ts.sort()
            med[name] = statistics.median(ts)
            p90 = ts[min(len(ts) - 1, int(0.9 * len(ts)))]
            print(f"{name:32} {med[name] * 1000:10.1f} {p90 * 1000:10.1f} {ts[0] * 1000:10.1f}")
        names = list(times)
        print(f"ratio braid / direct (median page-load time): {med[names[0]] / med[names[1]]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
