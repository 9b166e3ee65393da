"""E1b, Binder's time-varying scenario: goodput over time while gw1's path
steps through Binder's Table 2 (RTT 85-110 ms, loss 1e-7 to 1e-2, then
total loss at 36 s), for single-gateway TCP through gw1 and braid's
schedulers over both gateways.

Binder (Boccassi, Fayed and Marina, ACM LCDNet 2013, Table 2) plotted 1-second goodput
averages of one flow: single-path TCP "collapses soon after 30 seconds when
loss probability reaches 0.01", Binder "consistently provides higher
goodput", with drops at 15 s and 26 s; no recovery time is given for the
total failure at 36 s.

Here: E1's testbed (two 10 Mbit/s gateways, 40 ms one way each), one upload
per configuration that runs through the whole schedule; gw1's link is
re-shaped (both directions: RTT/2 each way, the loss probability each way)
at each step. The receiver writes its byte count every 0.25 s
(``bulk.py serve --progress``), so goodput per 1-s bin is what arrived in
order at the application. The quick mode runs the same steps three times
faster (1 s each) with TCP and ``default`` only; the last step (total loss)
lasts 3 s in both modes (LAST_STEP_S), from when it took effect.

    kernel/vm run -- python3 -m braid_eval.experiments.timevarying                      # quick, ~3 min
    kernel/vm run --timeout 3600 -- python3 -m braid_eval.experiments.timevarying --full --out out/e1b
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

from braid_eval.analysis.provenance import provenance
from braid_eval.experiments.aggregation import GATEWAY, TCP_PORT, impair_gw1
from braid_eval.measure.transfer import BULK_PORT, BULK_TOOL, BulkServer
from braid_eval.progress import Progress
from braid_testbed import StandardTestbed, ip, kernel_has_netem
from braid_testbed.netns import stop_process
from braid_testbed.standard import scheduler_testbed

# Binder's Table 2: (time s, gw1 path RTT ms, loss probability). The table
# has no row for 30 s: the 27 s state holds until 33 s.
TABLE_2 = ((0, 85, 1e-7), (3, 90, 1e-6), (6, 95, 1e-5), (9, 100, 1e-4), (12, 105, 1e-3),
           (15, 85, 1e-7), (18, 90, 1e-6), (21, 95, 1e-5), (24, 100, 1e-4), (27, 105, 1e-3),
           (33, 110, 1e-2), (36, 110, 1.0))
# The last state (total loss) is held this many real seconds at any time
# scale (Binder's plot ends at ~39 s): long enough to see a failover. It is
# counted from when the blackhole took effect: re-shaping runs late under
# TCG, and once ran 4.4 s late, after the run's planned end, so that the
# dead step had no time at all and measured 0 (2026-11-26).
LAST_STEP_S = 3.0
CONFIGS = ("tcp-gw1", "default", "hywf", "bernoulli", "delaybal", "redundant")
QUICK_CONFIGS = ("tcp-gw1", "default")
# More than two 10 Mbit/s links carry in the schedule's 39 s: the upload
# is stopped by the schedule's end, never by running out.
UPLOAD_BYTES = 128 << 20


@dataclasses.dataclass
class Run:
    config: str
    time_scale: float
    # goodput per second of schedule time, Mbit/s (bin i: [i, i+1) s)
    per_second: list[float]
    # mean goodput per Table 2 step, Mbit/s, in the table's order
    per_step: list[float]


def schedule(time_scale: float) -> list[tuple[float, float, float]]:
    """(start s, one-way delay ms, loss %) per step, times scaled."""
    return [(t * time_scale, rtt / 2, loss * 100) for t, rtt, loss in TABLE_2]


def shape_gw1(tb: StandardTestbed, delay_ms: float, loss_pct: float, blackholed: bool) -> bool:
    """One step of the schedule on gw1's path; returns whether gw1 now
    blackholes. Total loss is a silent blackhole at gw1 (netem takes loss
    below 100 %), as a dead upstream looks: no link event, nothing comes
    back; it is applied first, since each command takes a while under TCG."""
    dead = loss_pct >= 100
    if dead and not blackholed:
        tb.blackhole_wan(1)
    impair_gw1(tb, 0.0 if dead else loss_pct, delay_ms)
    if blackholed and not dead:
        tb.blackhole_wan(1, on=False)
    return dead


def last_step(time_scale: float) -> float:
    """The last step's length in schedule seconds."""
    return LAST_STEP_S / time_scale


def duration(time_scale: float) -> float:
    """The run's length in real seconds."""
    return (TABLE_2[-1][0] + last_step(time_scale)) * time_scale


def goodput_bins(samples: list[tuple[float, int]], start: float, seconds: float, bin_s: float) -> list[float]:
    """Mbit/s per bin from cumulative (time, bytes) samples, linearly
    interpolated between samples; bins after the last sample hold its count."""
    def at(t: float) -> float:
        if not samples or t <= samples[0][0]:
            return 0.0 if not samples or t < samples[0][0] else float(samples[0][1])
        for (t0, b0), (t1, b1) in itertools.pairwise(samples):
            if t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else float(b1)
        return float(samples[-1][1])

    edges = [start + i * bin_s for i in range(round(seconds / bin_s) + 1)]
    return [(at(b) - at(a)) * 8 / (b - a) / 1e6 for a, b in itertools.pairwise(edges)]


def read_progress(path: Path, since: float) -> list[tuple[float, int]]:
    """(time, bytes) samples of the first upload that began after ``since``
    (an earlier upload, stopped just before, may still write its last line)."""
    rows = [line.split() for line in path.read_text().splitlines()] if path.exists() else []
    older = {p for t, p, _ in rows if float(t) < since}
    new = [r for r in rows if float(r[0]) >= since and r[1] not in older]
    if not new:
        return []
    port = new[0][1]
    return [(float(t), int(b)) for t, p, b in new if p == port]


def delivered_between(samples: list[tuple[float, int]], a: float, b: float) -> float:
    """Mbit/s that arrived between times a and b (interpolated samples)."""
    return goodput_bins(samples, a, b - a, b - a)[0] if b > a else 0.0


def run_config(tb: StandardTestbed, config: str, time_scale: float, progress: Path) -> Run:
    """One upload through the whole schedule; gw1 re-shaped at each step."""
    steps = schedule(time_scale)
    shape_gw1(tb, steps[0][1], steps[0][2], blackholed=False)
    if config != "tcp-gw1":
        tb.set_scheduler(config)
    cmd = ["python3", str(BULK_TOOL)] + (["--tcp"] if config == "tcp-gw1" else [])
    cmd += ["send", "--host", ip("proxy", "core"), "--port", str(TCP_PORT if config == "tcp-gw1" else BULK_PORT),
            "--bytes", str(UPLOAD_BYTES)]
    begin = time.time()
    sender = tb.client.popen(cmd)
    blackholed = False
    applied = []  # when each step took effect: commands take a while under TCG
    try:
        # The schedule's clock starts with the first byte at the receiver.
        deadline = time.monotonic() + 30
        while not (samples := read_progress(progress, begin)):
            if time.monotonic() > deadline or sender.poll() is not None:
                raise RuntimeError(f"e1b {config}: no byte arrived in 30 s")
            time.sleep(0.05)
        start = samples[0][0]
        applied.append(start)
        for t, delay_ms, loss_pct in steps[1:]:
            time.sleep(max(0.0, start + t - time.time()))
            blackholed = shape_gw1(tb, delay_ms, loss_pct, blackholed)
            applied.append(time.time())
        end = max(start + duration(time_scale), applied[-1] + LAST_STEP_S)
        time.sleep(max(0.0, end - time.time()))
    finally:
        stop_process(sender)
        shape_gw1(tb, GATEWAY.delay_ms, 0.0, blackholed)
    samples = read_progress(progress, begin)
    # Bins of one schedule second each (the plot); a step's goodput is
    # what arrived between the moments it took effect and the next did.
    per_second = goodput_bins(samples, start, duration(time_scale), time_scale)
    per_step = [delivered_between(samples, a, b) for a, b in itertools.pairwise([*applied, end])]
    lag = max(a - (start + t) for a, (t, _, _) in zip(applied, steps, strict=True))
    if lag > 0.25 * time_scale:
        print(f"e1b {config}: a step took effect up to {lag:.2f} s late", flush=True)
    return Run(config, time_scale, per_second, per_step)


def sweep(configs: tuple[str, ...], time_scale: float, progress: Path, tag: str = "e1b") -> list[Run]:
    runs = []
    with (scheduler_testbed(tag, "default", GATEWAY, GATEWAY) as tb,
          BulkServer(tb, args=("--progress", str(progress))),
          BulkServer(tb, port=TCP_PORT, mptcp=False, args=("--progress", str(progress)))):
        steps = Progress("e1b", len(configs))
        for config in configs:
            t0 = time.monotonic()
            run = run_config(tb, config, time_scale, progress)
            runs.append(run)
            steps.step(f"{config:9} mean {statistics.mean(run.per_second):5.2f} Mbit/s, "
                       f"after the total loss of gw1 {run.per_step[-1]:5.2f}, {time.monotonic() - t0:.0f} s")
    return runs


def report(runs: list[Run], params: dict[str, object]) -> str:
    lines = ["# E1b: Binder's time-varying scenario (Table 2)", "",
             f"Two gateways of {GATEWAY.rate_mbit:g} Mbit/s, 80 ms RTT; gw1's path steps through Binder's "
             f"Table 2 (time scale {params['time_scale']}: one table second is {params['time_scale']} s); "
             f"one upload per configuration; kernel {params['kernel']}, braid {params['braid']}, "
             f"{params['date']}. Mean goodput per step in Mbit/s, at the receiving application.", "",
             "| t (s) | RTT (ms) | loss | " + " | ".join(r.config for r in runs) + " |",
             "|---" * (len(runs) + 3) + "|"]
    for i, (t, rtt, loss) in enumerate(TABLE_2):
        lines.append(f"| {t} | {rtt} | {loss:g} | " + " | ".join(f"{r.per_step[i]:.1f}" for r in runs) + " |")
    lines += ["", "| whole run, mean | | | " + " | ".join(f"{statistics.mean(r.per_second):.1f}" for r in runs)
              + " |", "",
              "Published (Binder, Fig. for Table 2, one flow, 1-s averages; no numbers in the text): "
              "single-path TCP collapses soon after 30 s when the loss reaches 1e-2; Binder consistently "
              "above it, with drops at 15 s and 26 s; nothing reported after the total loss at 36 s. "
              "braid's numbers are measured in braid's kernel on emulated links."]
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for r in runs:
        ax.step(range(len(r.per_second)), r.per_second, where="post", label=r.config)
    for t, rtt, loss in TABLE_2:
        ax.axvline(t, color="0.85", lw=0.8, zorder=0)
        ax.text(t + 0.1, ax.get_ylim()[1] * 0.97, f"{rtt} ms\n{loss:g}", fontsize=6, va="top")
    ax.set_xlabel("schedule time (s)")
    ax.set_ylabel("goodput (Mbit/s, 1-s bins)")
    ax.set_title("E1b: gw1 steps through Binder's Table 2", fontsize=10)
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true",
                   help="every scheduler, Binder's own time scale (quick: TCP and default, 3x faster)")
    p.add_argument("--configs", nargs="+", choices=CONFIGS,
                   help="configurations to run (default: by mode; tcp-gw1 is the baseline)")
    p.add_argument("--out", type=Path, default=Path("out/e1b"))
    args = p.parse_args()
    if not kernel_has_netem():
        print("e1b: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    time_scale = 1.0 if args.full else 1 / 3
    configs = tuple(args.configs) if args.configs else CONFIGS if args.full else QUICK_CONFIGS
    args.out.mkdir(parents=True, exist_ok=True)
    progress = (args.out / "progress.txt").resolve()
    progress.unlink(missing_ok=True)
    params: dict[str, object] = {"mode": "full" if args.full else "quick", "time_scale": round(time_scale, 3),
                                 "configs": configs, "table_2": TABLE_2, "last_step_s": LAST_STEP_S,
                                 "gateway": dataclasses.asdict(GATEWAY), **provenance()}
    runs = sweep(configs, time_scale, progress)
    (args.out / "e1b.json").write_text(json.dumps(
        {"params": params, "runs": [dataclasses.asdict(r) for r in runs]}, indent=1) + "\n")
    text = report(runs, params)
    (args.out / "e1b.md").write_text(text)
    plot(runs, args.out / "e1b.png")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
