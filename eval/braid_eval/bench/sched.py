"""Benchmark: braid schedulers vs the kernel's ``default``, side by side.

On the standard topology (both ends running the scheduler under test) it
measures, in one run:

* bulk goodput upstream and downstream (mean of ``--runs`` transfers: a
  random-split scheduler draws a new split per connection, so only the mean
  over many draws is a stable figure), also as a fraction of the sum of the
  WAN capacities and of what each transfer's own split allows;
* 1 KiB request/response latency while a bulk upload loads the WANs;
* 1 KiB request/response latency on two WANs with 1% loss each (no load),
  where the tail is retransmission timeouts (``redundant``'s use case);
* on heterogeneous WANs (20 Mbit/s with 10 ms RTT, 5 Mbit/s with 150 ms):
  bulk goodput as a fraction of the 25 Mbit/s sum, and 1 KiB
  request/response latency without load (``delaybal``'s and
  ``bernoulli``'s case: a short path that a queue-only choice gives up).

and prints each braid scheduler's ratio to ``default``. Numbers are whatever
this machine measures; nothing here asserts a target.

Run inside braid's kernel::

    kernel/vm run -- python3 -m braid_eval.bench.sched --schedulers default hywf bernoulli delaybal redundant

The thesis's Poisson-message sweep (delay against load, against the
model's optimum) is E2: ``python3 -m braid_eval.experiments.latency``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

from braid_eval.analysis.provenance import provenance
from braid_eval.bench.comparison import text_table
from braid_eval.measure.transfer import BULK_TOOL, BulkServer, measured_transfer, request_response, sched_bursts_moved
from braid_eval.progress import Progress
from braid_testbed import LinkSpec, StandardTestbed, ip, kernel_has_netem

EQUAL_WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)
LOSSY_WAN = LinkSpec(rate_mbit=20, delay_ms=10, loss_pct=1.0, queue_pkts=100)
SHORT_WAN = LinkSpec(rate_mbit=20, delay_ms=5, queue_pkts=100)
LONG_WAN = LinkSpec(rate_mbit=5, delay_ms=75, queue_pkts=100)
# E[min(C/s, C/(1-s))] / 2C for s ~ U[0, 1] on two equal WANs
UNIFORM_SPLIT_BOUND = math.log(2)


def split_limited_capacity(share1: float) -> float:
    """Most a connection can get when a fraction share1 of its bytes must take
    wan1: min(C1 / s, C2 / (1 - s)), at most C1 + C2. A random split (hywf)
    gives up capacity by design: see UNIFORM_SPLIT_BOUND."""
    c1 = c2 = EQUAL_WAN.rate_mbit or 0.0
    limits = [c1 + c2]
    if share1 > 0:
        limits.append(c1 / share1)
    if share1 < 1:
        limits.append(c2 / (1 - share1))
    return min(limits)


def rr_under_load(tb: StandardTestbed, server: BulkServer, requests: int) -> dict[str, float]:
    """1 KiB request/response latency while a bulk upload runs alongside."""
    base = ["python3", str(BULK_TOOL), "send", "--host", ip("proxy", "core"),
            "--port", str(server.port)]
    load = tb.client.popen([*base, "--bytes", "1G", "--mode", "upload"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)  # let the load reach steady state
        latency: dict[str, float] = request_response(tb, server, requests, timeout=300)["latency_ms"]
    finally:
        load.kill()
        load.wait()
    return latency


# The benchmark's parts, each on its own testbed; --parts picks some.
PARTS = ("equal", "lossy", "hetero")


def bench_scheduler(name: str, runs: int, nbytes: int, requests: int,
                    parts: tuple[str, ...] = PARTS, progress: Progress | None = None) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in PARTS:
        if part not in parts:
            continue
        if part == "equal":
            out |= on_equal_wans(name, runs, nbytes, requests)
        elif part == "lossy":
            out |= rr_on_lossy_wans(name, requests)
        else:
            out |= on_heterogeneous_wans(name, max(1, runs // 2), nbytes, requests)
        if progress:
            progress.step(f"scheduler {name}, {part} WANs done")
    return out


def on_equal_wans(name: str, runs: int, nbytes: int, requests: int) -> dict[str, float]:
    """Bulk goodput both ways and 1 KiB request/response under load on two
    equal WANs."""
    with StandardTestbed(f"bench-{name}"[:20], wan1=EQUAL_WAN, wan2=EQUAL_WAN) as tb:
        tb.enable_kernel_pm()
        tb.set_scheduler(name)
        out: dict[str, float] = {}
        with BulkServer(tb) as server:
            for mode in ("upload", "download"):
                goodputs, efficiency = [], []
                sender = "client" if mode == "upload" else "proxy"
                for i in range(runs):
                    before = sched_bursts_moved(tb, sender)
                    r = measured_transfer(tb, server, nbytes, mode=mode, seed=i + 1)
                    moved = sched_bursts_moved(tb, sender) - before
                    if not r.digest_ok:
                        raise RuntimeError(f"{name} {mode}: checksum mismatch")
                    goodputs.append(r.goodput_mbit)
                    share = r.wan_share(1)
                    allowed = split_limited_capacity(share)
                    efficiency.append(r.goodput_mbit / allowed)
                    print(f"  {name:8} {mode:8} run {i + 1}: {r.goodput_mbit:6.2f} Mbit/s, "
                          f"wan1 share {share:.2f} (the split allows {allowed:.1f} Mbit/s), "
                          f"{moved} bursts moved off a stuck subflow",
                          flush=True)
                out[f"{mode}_mbit"] = statistics.mean(goodputs)
                out[f"{mode}_split_eff"] = statistics.mean(efficiency)
                out[f"{mode}_capacity"] = out[f"{mode}_mbit"] / tb.wan_capacity_mbit()
            lat = rr_under_load(tb, server, requests)
            out["rr_p50_ms"], out["rr_p90_ms"] = lat["p50"], lat["p90"]
            print(f"  {name:8} 1 KiB rr under load: p50 {lat['p50']:.1f} ms, "
                  f"p90 {lat['p90']:.1f} ms", flush=True)
    return out


def on_heterogeneous_wans(name: str, runs: int, nbytes: int, requests: int) -> dict[str, float]:
    """Bulk upload goodput over the short fast and the long slow WAN, as a
    fraction of their sum, and 1 KiB request/response latency alone."""
    with StandardTestbed(f"bench-h-{name}"[:20], wan1=SHORT_WAN, wan2=LONG_WAN) as tb:
        tb.enable_kernel_pm()
        tb.set_scheduler(name)
        with BulkServer(tb) as server:
            goodput = statistics.mean(
                measured_transfer(tb, server, nbytes, mode="upload", seed=i + 1).goodput_mbit
                for i in range(runs))
            lat: dict[str, float] = request_response(tb, server, requests)["latency_ms"]
        capacity = tb.wan_capacity_mbit()
    print(f"  {name:8} heterogeneous WANs: upload {goodput:.1f} Mbit/s ({goodput / capacity:.2f} of "
          f"{capacity:g}), 1 KiB rr p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms", flush=True)
    return {"hetero_upload_capacity": goodput / capacity, "hetero_rr_p50_ms": lat["p50"],
            "hetero_rr_p99_ms": lat["p99"]}


def rr_on_lossy_wans(name: str, requests: int) -> dict[str, float]:
    """1 KiB request/response on two WANs that each lose LOSSY_WAN's share
    of packets, without other load: the tail is made of retransmission
    timeouts, which a redundant scheduler avoids."""
    with StandardTestbed(f"bench-l-{name}"[:20], wan1=LOSSY_WAN, wan2=LOSSY_WAN) as tb:
        tb.enable_kernel_pm()
        tb.set_scheduler(name)
        with BulkServer(tb) as server:
            lat: dict[str, float] = request_response(tb, server, requests * 5)["latency_ms"]
    print(f"  {name:8} 1 KiB rr, {LOSSY_WAN.loss_pct:g}% loss WANs: p50 {lat['p50']:.1f} ms, "
          f"p99 {lat['p99']:.1f} ms", flush=True)
    return {"lossy_rr_p50_ms": lat["p50"], "lossy_rr_p99_ms": lat["p99"]}


ROWS = [("upload goodput (Mbit/s)", "upload_mbit"),
        ("  of WAN capacity", "upload_capacity"),
        ("  of what its split allows", "upload_split_eff"),
        ("download goodput (Mbit/s)", "download_mbit"),
        ("  of WAN capacity", "download_capacity"),
        ("  of what its split allows", "download_split_eff"),
        ("1 KiB rr p50 under load (ms)", "rr_p50_ms"),
        ("1 KiB rr p90 under load (ms)", "rr_p90_ms"),
        ("1 KiB rr p50, 1% loss (ms)", "lossy_rr_p50_ms"),
        ("1 KiB rr p99, 1% loss (ms)", "lossy_rr_p99_ms"),
        ("hetero: upload of capacity", "hetero_upload_capacity"),
        ("hetero: 1 KiB rr p50 (ms)", "hetero_rr_p50_ms"),
        ("hetero: 1 KiB rr p99 (ms)", "hetero_rr_p99_ms")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedulers", nargs="+",
                   default=["default", "hywf", "bernoulli", "delaybal", "redundant"],
                   help="first one is the baseline (default: default hywf bernoulli delaybal redundant)")
    p.add_argument("--runs", type=int, default=8, help="bulk transfers per direction")
    p.add_argument("--size", default="8M", help="bytes per bulk transfer")
    p.add_argument("--requests", type=int, default=200, help="request/response exchanges")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                   help="equal: bulk goodput and rr under load on two equal WANs; lossy: rr on two "
                   "1%%-loss WANs; hetero: a short fast and a long slow WAN (default: all)")
    p.add_argument("--out", type=Path, default=Path("out/bench-sched.json"))
    args = p.parse_args()
    from braid_testbed.bulk import parse_size

    if not kernel_has_netem():
        print("bench: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    results = {}
    progress = Progress("bench", len(args.schedulers) * len(set(args.parts)))
    for name in args.schedulers:
        print(f"bench: scheduler {name}", flush=True)
        results[name] = bench_scheduler(name, args.runs, parse_size(args.size), args.requests,
                                        tuple(args.parts), progress)
    print(f"\nscheduler benchmark: 2 x {EQUAL_WAN.rate_mbit:g} Mbit/s, "
          f"{EQUAL_WAN.delay_ms:g} ms WANs; both ends run the scheduler")
    print("\n".join(text_table(results, args.schedulers, ROWS)))
    print(f"(a split drawn uniformly on [0, 1] allows on average {UNIFORM_SPLIT_BOUND:.2f} of the "
          "WAN capacity: that is hywf's price for privacy, not a loss in the scheduler)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    params = {"schedulers": args.schedulers, "runs": args.runs, "size": args.size, "requests": args.requests,
              "parts": args.parts, **provenance()}
    args.out.write_text(json.dumps({"params": params, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
