"""The demo's failover pane: one gateway cut and restored under gwsteer,
with its timeline drawn from per-packet time stamps.

An upload runs through two gateways (20 Mbit/s each) with gwsteer steering
one subflow through each; gw1 stops forwarding for a while (an nftables
drop on the gateway, invisible to the client's own links) and comes back.
The pane reports when gwsteer declared gw1 down, how soon the connection's
in-order delivery held 90 % of what gw2 alone carries, the longest stall,
and when gw1 carried new data again; the plot shows each gateway's data
and the in-order delivery around the cut. The set-up and the metrics are
E3's (experiments.failover, experiments.failover_metrics), one gwsteer cycle.

It runs on this machine's kernel, before ``make demo`` boots braid's:
gwsteer's path management does not depend on braid's schedulers, and
mptcpd under emulation would take minutes. Needs root and the plugin
built (``make -C mptcpd-plugins``).

    python3 -m braid_eval.demo.failover --out out/demo
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from braid_eval.analysis.report import binned_mbit
from braid_eval.experiments.failover import (
    FAIL_AFTER,
    PROBE_INTERVAL_MS,
    RECOVER_SHARE,
    T_CUT,
    Cycle,
    Run,
    calibrate,
    capture_cycle,
    measure_cycle,
    missing_prerequisite,
)
from braid_eval.experiments.failover_metrics import in_order_delivery

BIN_S = 0.1
REPORT = "failover.txt"
PLOT = "failover-timeline.png"


def _s(v: float | None) -> str:
    return "never" if v is None else f"{v:.2f} s"


def describe(run: Run, capacity: float, outage: float) -> list[str]:
    kernel = Path("/proc/sys/kernel/osrelease").read_text().strip()
    return [
        f"gateway failover under gwsteer (this machine's kernel {kernel}; two 20 Mbit/s "
        f"gateways, gw1 cut {T_CUT:g} s into an upload for {outage:g} s):",
        f"  gwsteer declared gw1 down after {_s(run.detect_s)} ({FAIL_AFTER} lost probes, "
        f"{PROBE_INTERVAL_MS} ms apart)",
        f"  in-order delivery back to {100 * RECOVER_SHARE:.0f} % of gw2 alone "
        f"({capacity * 8 / 1e6:.1f} Mbit/s): {_s(run.t90_s)} after the cut; longest stall {run.gap_s:.2f} s",
        f"  after the restore gw1 carried new data again after {_s(run.first_gw1_s)}, "
        f"25 % of a path for a second after {_s(run.reuse_s)}",
        f"  transfer {'byte-exact' if run.byte_exact and run.capture_matches else 'NOT BYTE-EXACT'} "
        f"({run.bytes / 2**20:.1f} MiB); timeline: {PLOT}",
    ]


def plot_timeline(c: Cycle, mbit: int, path: Path) -> None:
    """Each gateway's data on the wire and the in-order delivery, in
    BIN_S bins around the cut (the metrics themselves are per packet).
    In-order delivery comes in bursts when a hole is filled; the axis
    stops at 2.5 paths' rate so that the links stay readable."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = c.cut - T_CUT
    fig, ax = plt.subplots(figsize=(9, 3.8))
    delivery = in_order_delivery([p for pkts in c.packets.values() for p in pkts])
    series = {f"through {link.replace('g', 'gw')} (wire)": [(p.ts, p.payload_len) for p in pkts if p.payload_len]
              for link, pkts in sorted(c.packets.items())}
    series["in order at the server"] = [
        (t, n - prev) for t, n, prev in zip(delivery.times, delivery.total, [0, *delivery.total], strict=False)]
    for label, events in series.items():
        xs, ys = binned_mbit(events, t0, BIN_S)
        if xs:
            ax.plot(xs, ys, drawstyle="steps-post", label=label,
                    linestyle="--" if label.startswith("in order") else "-")
    ax.set_ylim(0, 2.5 * mbit)
    marks = [("gw1 cut", c.cut), ("gw1 restored", c.restored)]
    marks += [(f"gwsteer: gw1 {k}", v) for k, v in sorted(c.seen.items(), key=lambda kv: kv[1])]
    for label, t in marks:
        ax.axvline(t - t0, color="grey", linestyle=":")
        ax.text(t - t0, ax.get_ylim()[1] * 0.97, f" {label}", rotation=90, va="top", fontsize=8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"Mbit/s ({BIN_S * 1000:.0f} ms bins)")
    ax.set_title("gwsteer failover: data per gateway and in-order delivery")
    ax.legend(loc="lower left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="report directory")
    p.add_argument("--outage", type=float, default=2.0, help="seconds gw1 is cut (default 2)")
    args = p.parse_args()
    if not 0 < args.outage <= 30:
        p.error("--outage must be in (0, 30] seconds")
    if missing := missing_prerequisite():
        print(f"demo failover: {missing}", file=sys.stderr)
        return 2
    mbit = 20
    print(f"demo failover: gw2 alone for the reference, then an upload with gw1 cut for {args.outage:g} s "
          "(about 15 s)...", flush=True)
    capacity = calibrate(mbit)
    cycle = capture_cycle("gwsteer", mbit, args.outage, after=4.0)
    run = measure_cycle("gwsteer", args.outage, 0, cycle, capacity)
    lines = describe(run, capacity, args.outage)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / REPORT).write_text("\n".join(lines) + "\n")
    plot_timeline(cycle, mbit, args.out / PLOT)
    print("\n".join(lines), flush=True)
    ok = run.byte_exact and run.capture_matches and run.detect_s is not None and run.first_gw1_s is not None
    if not ok:
        print("demo failover: FAILED: the transfer was not byte-exact, gw1 was never declared "
              "down, or it carried nothing after the restore", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
