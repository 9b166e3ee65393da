"""Readable reports and plots of transfers measured on the testbed.

Usage::

    text = format_transfer(result, rtts)
    plot_wan_throughput(result, Path("out/demo/upload.png"))
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from braid_eval.measure.transfer import TransferResult

BIN_S = 0.25


def format_transfer(r: TransferResult) -> str:
    """A few aligned lines: per-WAN bytes and shares, goodput vs capacity."""
    total = sum(r.wan_payload.values())
    lines = [
        f"{r.mode:<8} {r.nbytes / 2**20:7.1f} MiB in {r.seconds:6.2f} s   "
        f"checksum {'OK' if r.digest_ok else 'MISMATCH'}",
    ]
    for wan in sorted(r.wan_payload):
        lines.append(
            f"  wan{wan} carried {r.wan_payload[wan] / 2**20:7.2f} MiB "
            f"({100 * r.wan_share(wan):5.1f}% of {total / 2**20:.2f} MiB on the wire)"
        )
    lines.append(
        f"  goodput {r.goodput_mbit:6.2f} Mbit/s = {r.capacity_ratio:.2f} x "
        f"the sum of shaped WAN capacities ({r.capacity_mbit:g} Mbit/s)"
    )
    return "\n".join(lines)


def binned_mbit(events: Iterable[tuple[float, int]], t0: float,
                bin_s: float = BIN_S) -> tuple[list[float], list[float]]:
    """(time, bytes) events as a rate per ``bin_s`` bin from ``t0``: bin
    start times and Mbit/s, empty bins included; ([], []) for no events."""
    bins: dict[int, int] = {}
    for t, n in events:
        k = int((t - t0) / bin_s)
        bins[k] = bins.get(k, 0) + n
    if not bins:
        return [], []
    ks = range(max(bins) + 1)
    return [k * bin_s for k in ks], [bins.get(k, 0) * 8 / bin_s / 1e6 for k in ks]


def plot_wan_throughput(results: list[TransferResult], path: Path, title: str) -> None:
    """One panel per transfer: data throughput of each WAN over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(8, 3 * len(results)), squeeze=False)
    for ax, r in zip(axes[:, 0], results, strict=True):
        starts = [p[0].ts for p in r.wan_packets.values() if p]
        t0 = min(starts) if starts else 0.0
        for wan, packets in sorted(r.wan_packets.items()):
            xs, ys = binned_mbit(((p.ts, p.payload_len) for p in packets if p.payload_len), t0)
            if xs:
                ax.plot(xs, ys, label=f"wan{wan}", drawstyle="steps-post")
        ax.axhline(r.goodput_mbit, color="grey", linestyle="--", label="end-to-end goodput")
        ax.set_title(f"{r.mode}: {r.capacity_ratio:.2f} x capacity ({r.capacity_mbit:g} Mbit/s)")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("Mbit/s on the wire")
        ax.legend(loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
