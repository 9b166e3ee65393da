"""braid's main job, end to end: two emulated WANs, one MPTCP connection.

Brings up the standard topology in braid's kernel, measures each WAN's RTT,
pushes a checksummed bulk transfer upstream (client -> proxy) and downstream
over a single MPTCP connection each, counts every WAN's bytes from packet
captures, and writes a readable report plus a PNG plot.

Run it through ``make demo`` (which builds and boots the kernel), or inside
the VM::

    kernel/vm run -- python3 -m braid_eval.demo --out out/demo
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from braid_testbed import LinkSpec, StandardTestbed, kernel_has_netem

from .report import format_transfer, plot_wan_throughput
from .transfer import BulkServer, TransferResult, measured_transfer, ping_rtt_ms

WAN1 = LinkSpec(rate_mbit=30, delay_ms=10, jitter_ms=1, queue_pkts=150)
WAN2 = LinkSpec(rate_mbit=20, delay_ms=25, jitter_ms=2, queue_pkts=150)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="braid demo",
        description="Aggregate two emulated WANs with MPTCP in braid's kernel and "
        "report per-WAN bytes on the wire, goodput vs capacity and RTTs.",
    )
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="report directory")
    p.add_argument("--size", default="16M", help="bytes per transfer (default 16M)")
    p.add_argument("--scheduler", default="default",
                   help="MPTCP scheduler on client and proxy (default: default)")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    from braid_testbed.bulk import parse_size

    nbytes = parse_size(args.size)
    if not kernel_has_netem():
        print("demo: this kernel cannot emulate links (no netem); run it in braid's "
              "kernel with `make demo` or `kernel/vm run -- python3 -m braid_eval.demo`",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[TransferResult] = []
    with StandardTestbed("demo", wan1=WAN1, wan2=WAN2) as tb:
        print("demo: standard topology up (client =wan1/wan2=> gw1/gw2 => router => proxy)",
              flush=True)
        tb.enable_kernel_pm()
        tb.set_scheduler(args.scheduler)
        rtts = {wan: ping_rtt_ms(tb, wan) for wan in (1, 2)}
        print(f"demo: idle RTT wan1 {rtts[1]:.1f} ms, wan2 {rtts[2]:.1f} ms", flush=True)
        with BulkServer(tb) as server:
            for mode in ("upload", "download"):
                print(f"demo: {mode} of {nbytes / 2**20:.0f} MiB over one MPTCP connection...",
                      flush=True)
                results.append(measured_transfer(tb, server, nbytes, mode=mode))
    report = [
        "braid demo: one MPTCP connection over two emulated WANs",
        f"kernel {Path('/proc/sys/kernel/osrelease').read_text().strip()}, "
        f"scheduler {args.scheduler!r}, in-kernel path manager",
        f"wan1: {WAN1.rate_mbit:g} Mbit/s, {WAN1.delay_ms:g} ms one-way, idle RTT {rtts[1]:.1f} ms",
        f"wan2: {WAN2.rate_mbit:g} Mbit/s, {WAN2.delay_ms:g} ms one-way, idle RTT {rtts[2]:.1f} ms",
        "",
        *[format_transfer(r) + "\n" for r in results],
        f"finished in {time.monotonic() - started:.0f} s; plot: {args.out / 'wan-throughput.png'}",
    ]
    text = "\n".join(report)
    (args.out / "report.txt").write_text(text + "\n")
    summary = [
        {k: v for k, v in vars(r).items() if k != "wan_packets"} | {"rtt_ms": rtts}
        for r in results
    ]
    (args.out / "report.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_wan_throughput(results, args.out / "wan-throughput.png",
                        f"braid demo: scheduler {args.scheduler!r}")
    print("\n" + text, flush=True)
    ok = all(r.digest_ok and all(r.wan_payload.values()) for r in results)
    if not ok:
        print("demo: FAILED: a checksum mismatched or a WAN carried no data", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
