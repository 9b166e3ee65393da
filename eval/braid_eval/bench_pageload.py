"""Benchmark: page-load time through braid-proxy, hywf (one split per page
load) against the kernel's ``default``, side by side on the same page set.

On the standard topology, both ends running the scheduler under test, it
loads the same seeded pages (objects fetched over parallel connections
through the braid-proxy SOCKS client, a pause between pages so that each is
a new hywf epoch) and prints median and mean page-load time per scheduler
and their ratio to the first one; with hywf, also the per-page wan1 share
spread and the proxy's join-wait counters (the price of holding a first
flight for the connection's second subflow). Nothing here asserts a target.

Run inside braid's kernel::

    kernel/vm run --timeout 2400 -- python3 -m braid_eval.bench_pageload
    kernel/vm run -- python3 -m braid_eval.bench_pageload --quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from braid_testbed import LinkSpec, StandardTestbed, kernel_has_netem

from .page_split import PageServer, traced_pages
from .proxy_pair import BraidProxyPair
from .transfer import read_mib

WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)


def bench_scheduler(name: str, pages: int, workdir: Path) -> dict[str, float]:
    with StandardTestbed(f"bpl-{name}"[:20], wan1=WAN, wan2=WAN) as tb:
        tb.enable_kernel_pm()
        tb.set_scheduler(name)
        with PageServer(tb), BraidProxyPair(tb, workdir / name) as pair:
            traces = traced_pages(tb, pair.socks, pages)
        nstat = tb.proxy.run(["nstat", "-az"])
        held = read_mib(nstat, "MPTcpExtSchedJoinWait")
        gave_up = read_mib(nstat, "MPTcpExtSchedJoinWaitTimeout")
    if not all(t.result["ok"] for t in traces):
        raise RuntimeError(f"{name}: a page failed its checksum")
    times = [t.seconds for t in traces]
    down = [t.share(1, "down") for t in traces]
    return {"pages": len(times), "median_s": statistics.median(times),
            "mean_s": statistics.fmean(times), "p90_s": sorted(times)[int(0.9 * (len(times) - 1))],
            "wan1_down_share_sd": statistics.pstdev(down),
            "join_waits": held, "join_wait_timeouts": gave_up}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedulers", nargs="+", default=["default", "hywf"],
                   help="first one is the baseline (default: default hywf)")
    p.add_argument("--pages", type=int, default=60, help="page loads per scheduler (default 60)")
    p.add_argument("--quick", action="store_true", help="12 pages per scheduler, for a smoke run")
    p.add_argument("--out", type=Path, default=Path("out/bench-pageload.json"))
    args = p.parse_args()
    if not kernel_has_netem():
        print("bench: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    pages = 12 if args.quick else args.pages
    results = {}
    with tempfile.TemporaryDirectory(prefix="braid-bench-pl-") as tmp:
        for name in args.schedulers:
            print(f"bench: scheduler {name}, {pages} pages", flush=True)
            results[name] = bench_scheduler(name, pages, Path(tmp))
    base = args.schedulers[0]
    print(f"\npage-load benchmark: 2 x {WAN.rate_mbit:g} Mbit/s, {WAN.delay_ms:g} ms WANs, "
          "8 objects per page through braid-proxy; both ends run the scheduler")
    print(f"{'metric':30}" + "".join(f"{n:>10}" for n in args.schedulers)
          + "".join(f"{n + '/' + base:>16}" for n in args.schedulers[1:]))
    for label, key in (("page-load time median (s)", "median_s"), ("page-load time mean (s)", "mean_s"),
                       ("page-load time p90 (s)", "p90_s")):
        print(f"{label:30}" + "".join(f"{results[n][key]:10.3f}" for n in args.schedulers)
              + "".join(f"{results[n][key] / results[base][key]:16.2f}" for n in args.schedulers[1:]))
    for label, key in (("wan1 share sd, per page (down)", "wan1_down_share_sd"),
                       ("first flights held for a join", "join_waits"),
                       ("  of which no join in time", "join_wait_timeouts")):
        print(f"{label:30}" + "".join(f"{results[n][key]:10.2f}" for n in args.schedulers))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
