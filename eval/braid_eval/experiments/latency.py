"""E2, latency against load (thesis ch. 5): Poisson messages over a fast and
a slow path, each scheduler's mean message delay beside the model's curves.

Topology: the standard testbed with wan1 = 30 Mbit/s and wan2 = 5 Mbit/s
(the thesis's example), PROP_MS one-way delay each, deep queues (the model's
queues are infinite). The client sends Poisson messages to the proxy
(messages.py: exponential sizes, mean MEAN_SIZE bytes) at a load swept as a
fraction of the 35 Mbit/s sum; each message's delay runs from its arrival at
the sender to its last byte at the receiver. Configurations (client and
proxy alike):

  bernoulli         adaptive: its own estimates of load and path rates, a
                    run never arriving more than bernoulli_max_lag_us
                    behind the earliest path
  bernoulli-unbounded  adaptive, the split as drawn (bernoulli_max_lag_us 0)
  bernoulli-pstar   fixed split at the model's optimum p*(load)
  bernoulli-plim    fixed capacity-proportional split, 30/35
  default           upstream's scheduler
  delaybal          earliest estimated arrival

The model (latency_model.py) treats each path as an M/M/1 queue of
messages; its curves for p* and p_lim, plus the propagation delay, are
printed beside the measurements. It leaves out TCP itself (congestion
window, acknowledgements), the receiver's reordering wait for a message
split over both paths, and the sender's own scheduling delay under
emulation: the measured delays sit above the model, and the comparison that
matters is between configurations in one run.

Quick mode (the test suite's): two loads, 8 s each. Full mode: loads 0.1 to
0.95, 20 s each, and a plot. ``--runs N`` repeats every point N times,
interleaved (each run its own seed); the report gives each point's median
and range. Both write JSON with every parameter and the kernel version, and
a Markdown report with the target's verdict: adaptive ``bernoulli``'s
median delay within TARGET_RATIO of the best measured reference (the fixed
split at the model's p*, ``delaybal``, ``default``) at every steady load up
to 0.9, and PLIM_FACTOR below the capacity-proportional split at 0.9.

    kernel/vm run -- python3 -m braid_eval.experiments.latency --full --out out/e2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from braid_eval.analysis.provenance import provenance
from braid_eval.experiments.latency_model import (
    lambda0,
    mm1_delay,
    p_lim,
    p_star,
    variable_p_star,
    variable_split_delay,
)
from braid_eval.measure.transfer import BulkServer
from braid_eval.progress import Progress
from braid_testbed import TOOLS_DIR, LinkSpec, StandardTestbed, ip, kernel_has_netem, messages
from braid_testbed.link import netem_args
from braid_testbed.standard import scheduler_testbed
from braid_testbed.topology import interface_counters

MESSAGES_TOOL = TOOLS_DIR / "messages.py"
MESSAGES_PORT = 5202
PROP_MS = 5.0
FAST = LinkSpec(rate_mbit=30, delay_ms=PROP_MS, queue_pkts=2000)
SLOW = LinkSpec(rate_mbit=5, delay_ms=PROP_MS, queue_pkts=2000)
MEAN_SIZE = 4096
# Bytes on the wire per message byte: messages.py's 16-byte frame header
# per message, and per 1448-byte segment 52 bytes of TCP/IP headers with
# timestamps plus MPTCP's 20-byte DSS option.
WIRE_FACTOR = (1 + 16 / MEAN_SIZE) * (1448 + 72) / 1448
CONFIGS = ("bernoulli", "bernoulli-unbounded", "bernoulli-pstar", "bernoulli-plim", "default",
           "delaybal")
# The target: adaptive bernoulli within TARGET_RATIO of the best of these,
# measured on the same wire, at every steady load up to TARGET_MAX_LOAD, and
# PLIM_FACTOR below the capacity-proportional split at TARGET_MAX_LOAD.
REFERENCES = ("bernoulli-pstar", "delaybal", "default")
TARGET_RATIO = 1.2
PLIM_FACTOR = 3.0
TARGET_MAX_LOAD = 0.9
# bernoulli_max_lag_us for adaptive `bernoulli`: the kernel's default
BOUNDED_LAG_US = 2000
QUICK_LOADS = (0.3, 0.85)
# The thesis's variable slow link: 7 <-> 3 Mbit/s (mean 5), leaving each
# state at rate 1/s (mean sojourn 1 s).
VARIABLE_MBIT = (7.0, 3.0)
VARIABLE_LEAVE_RATE = (1.0, 1.0)
SCENARIOS = ("steady", "variable")
FULL_LOADS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


@dataclasses.dataclass
class Point:
    """One configuration at one load: what was measured and what the model says."""

    scenario: str
    config: str
    load: float
    offered_mbit: float
    messages: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    wan1_share: float
    model_pstar_ms: float
    model_plim_ms: float
    run: int = 0


@dataclasses.dataclass
class Summary:
    """One measured field of one configuration at one load, over its runs."""

    median: float
    low: float
    high: float
    runs: int

    def text(self, digits: int, spread: bool = True) -> str:
        """The median, and the range when there are several runs."""
        return f"{self.median:.{digits}f}" + (f" ({self.low:.1f}-{self.high:.1f})"
                                             if spread and self.runs > 1 else "")


def summarise(points: list[Point], field: str = "mean_ms") -> dict[tuple[str, str, float], Summary]:
    """Median and range of ``field`` per (scenario, config, load)."""
    groups: dict[tuple[str, str, float], list[float]] = {}
    for p in points:
        groups.setdefault((p.scenario, p.config, p.load), []).append(getattr(p, field))
    return {key: Summary(statistics.median(v), min(v), max(v), len(v)) for key, v in groups.items()}


@dataclasses.dataclass
class Verdict:
    """Adaptive bernoulli against the best measured reference at one steady load."""

    load: float
    bernoulli_ms: float
    best_config: str
    best_ms: float
    plim_ms: float | None

    @property
    def ratio(self) -> float:
        return self.bernoulli_ms / self.best_ms

    @property
    def met(self) -> bool:
        if self.ratio > TARGET_RATIO:
            return False
        if self.load >= TARGET_MAX_LOAD and self.plim_ms is not None:
            return self.plim_ms >= PLIM_FACTOR * self.bernoulli_ms
        return True


def verdicts(points: list[Point]) -> list[Verdict]:
    """The target per steady load up to TARGET_MAX_LOAD where adaptive
    bernoulli and at least one reference were measured."""
    table = summarise(points)
    out = []
    for load in sorted({p.load for p in points if p.scenario == "steady"}):
        mine = table.get(("steady", "bernoulli", load))
        refs = {c: table[("steady", c, load)] for c in REFERENCES if ("steady", c, load) in table}
        if mine is None or not refs or load > TARGET_MAX_LOAD + 1e-9:
            continue
        best = min(refs, key=lambda c: refs[c].median)
        plim = table.get(("steady", "bernoulli-plim", load))
        out.append(Verdict(load, mine.median, best, refs[best].median,
                           plim.median if plim else None))
    return out


@dataclasses.dataclass
class Reach:
    """How far below `bernoulli-plim` any split can be at TARGET_MAX_LOAD on
    this testbed: the model's optimum there plus what the testbed adds to
    every message, measured as adaptive bernoulli's excess over the model
    at the lowest steady load run (where p* sends on the fast path alone)."""

    excess_ms: float  # the testbed's addition to a message
    floor_ms: float  # the model's optimum at TARGET_MAX_LOAD plus that
    plim_ms: float  # bernoulli-plim measured at TARGET_MAX_LOAD (median)
    model_factor: float  # the model's own p_lim over p* there

    @property
    def factor(self) -> float:
        return self.plim_ms / self.floor_ms


def reachable(points: list[Point]) -> Reach | None:
    """The Reach of these points; None when a point it needs is missing."""
    table = summarise(points)
    models = {p.load: p for p in points if p.scenario == "steady"}
    top = [lo for lo in models if abs(lo - TARGET_MAX_LOAD) < 1e-9]
    if not top:
        return None
    low = min(models)
    mine = table.get(("steady", "bernoulli", low))
    plim = table.get(("steady", "bernoulli-plim", top[0]))
    if mine is None or plim is None or low >= top[0]:
        return None
    excess = mine.median - models[low].model_pstar_ms
    model = models[top[0]]
    return Reach(excess, model.model_pstar_ms + excess, plim.median,
                 model.model_plim_ms / model.model_pstar_ms)


def varying_link_lines(points: list[Point]) -> list[str]:
    """Markdown: the p_lim factor at TARGET_MAX_LOAD on each slow link that
    is not steady. The thesis's published pair (p* against p_lim) is for
    its variable slow link, where a fixed split cannot follow the link."""
    table = summarise(points)
    lines = []
    for scenario in dict.fromkeys(p.scenario for p in points if p.scenario != "steady"):
        load = next((p.load for p in points if p.scenario == scenario
                     and abs(p.load - TARGET_MAX_LOAD) < 1e-9), None)
        if load is None:
            continue
        mine = table.get((scenario, "bernoulli", load))
        plim = table.get((scenario, "bernoulli-plim", load))
        if mine is None or plim is None:
            continue
        refs = {c: table[(scenario, c, load)] for c in REFERENCES if (scenario, c, load) in table}
        best = min(refs, key=lambda c: refs[c].median) if refs else None
        factor = plim.median / mine.median
        pstar_ms, plim_ms = model_ms(load, scenario)
        beside = (f"; the best reference, `{best}`, {refs[best].median:.1f} ms "
                  f"(`bernoulli` at {mine.median / refs[best].median:.2f}x of it)" if best else "")
        lines += [f"On the {scenario} slow link at {load:g}: adaptive `bernoulli` {mine.median:.1f} ms, "
                  f"`bernoulli-plim` {plim.median:.1f} ms, {factor:.1f}x below it (target "
                  f"{PLIM_FACTOR:g}x): {'**met**' if factor >= PLIM_FACTOR else '**not met**'}{beside}; "
                  f"the model puts p_lim {plim_ms / pstar_ms:.2f}x above p* there.", ""]
    return lines


def verdict_lines(points: list[Point]) -> list[str]:
    """Markdown: the target's verdict per steady load and over all, then
    the p_lim factor on a varying slow link."""
    found = verdicts(points)
    if not found:
        return varying_link_lines(points)
    lines = [f"Target: adaptive `bernoulli`'s median delay within {TARGET_RATIO:g}x of the best "
             f"measured of {', '.join(REFERENCES)} at every steady load <= {TARGET_MAX_LOAD:g}, "
             f"and {PLIM_FACTOR:g}x below `bernoulli-plim` at {TARGET_MAX_LOAD:g}:", "",
             "| load | bernoulli, ms | best reference | its ms | ratio | met |", "|---|---|---|---|---|---|"]
    for v in found:
        plim = (f"; p_lim {v.plim_ms:.1f} ms = {v.plim_ms / v.bernoulli_ms:.1f}x"
                if v.load >= TARGET_MAX_LOAD and v.plim_ms is not None else "")
        lines.append(f"| {v.load:.2f} | {v.bernoulli_ms:.2f} | {v.best_config} | {v.best_ms:.2f} | "
                     f"{v.ratio:.2f}{plim} | {'yes' if v.met else '**no**'} |")
    covered = any(v.load >= TARGET_MAX_LOAD for v in found)
    overall = ("**met**" if all(v.met for v in found) and covered else
               "**not met**" if not all(v.met for v in found) else
               f"met at the loads run; {TARGET_MAX_LOAD:g} not run")
    lines += ["", f"Over the loads run: {overall}.", ""]
    reach = reachable(points)
    if reach is not None:
        lines.append(f"What this testbed lets any split reach at {TARGET_MAX_LOAD:g}: the model's "
                     f"optimum plus the {reach.excess_ms:.1f} ms the testbed adds to a message "
                     f"(adaptive `bernoulli`'s excess over the model at the lowest load run), "
                     f"{reach.floor_ms:.1f} ms, {reach.factor:.1f}x below `bernoulli-plim`'s "
                     f"{reach.plim_ms:.1f} ms; the model itself puts p_lim "
                     f"{reach.model_factor:.2f}x above p* there.")
    return [*lines, "", *varying_link_lines(points)]



def service_rates() -> tuple[float, float]:
    """Each path's capacity in messages per second."""
    wire_bits = 8 * MEAN_SIZE * WIRE_FACTOR
    return (FAST.rate_mbit or 0) * 1e6 / wire_bits, (SLOW.rate_mbit or 0) * 1e6 / wire_bits


def message_rate(load: float) -> float:
    mu1, mu2 = service_rates()
    return load * (mu1 + mu2)


def variable_slow_path() -> tuple[float, float, float, float]:
    """(mu_h, mu_l, a_h, a_l) of the variable slow link, in messages/s."""
    _, mu2 = service_rates()
    per_mbit = mu2 / (SLOW.rate_mbit or 1)
    return (VARIABLE_MBIT[0] * per_mbit, VARIABLE_MBIT[1] * per_mbit, *VARIABLE_LEAVE_RATE)


def optimal_share(load: float, scenario: str) -> float:
    """The model's p*: the fast path's delay-optimal share."""
    mu1, mu2 = service_rates()
    if scenario == "variable":
        return variable_p_star(message_rate(load), mu1, variable_slow_path())
    return p_star(mu1, mu2, message_rate(load))


def model_ms(load: float, scenario: str = "steady") -> tuple[float, float]:
    """The model's mean delay at p* and at p_lim, propagation included."""
    mu1, mu2 = service_rates()
    lam = message_rate(load)
    best, prop = optimal_share(load, scenario), p_lim(mu1, mu2)
    if scenario == "variable":
        slow = variable_slow_path()
        return (1e3 * variable_split_delay(best, lam, mu1, slow) + PROP_MS,
                1e3 * variable_split_delay(prop, lam, mu1, slow) + PROP_MS)
    return (1e3 * mm1_delay([best, 1 - best], [mu1, mu2], lam) + PROP_MS,
            1e3 * mm1_delay([prop, 1 - prop], [mu1, mu2], lam) + PROP_MS)


def configure(tb: StandardTestbed, config: str, load: float, scenario: str) -> None:
    """Scheduler and its sysctls on both ends for one configuration."""
    scheduler = config.split("-")[0]
    tb.set_scheduler(scheduler)
    if scheduler != "bernoulli":
        return
    mu1, mu2 = service_rates()
    fixed = {"bernoulli-pstar": optimal_share(load, scenario),
             "bernoulli-plim": p_lim(mu1, mu2)}.get(config)
    for node in ("client", "proxy"):
        tb[node].sysctl("net.mptcp.bernoulli_adaptive", 0 if fixed is not None else 1)
        if fixed is not None:
            tb[node].sysctl("net.mptcp.bernoulli_permille", round(1000 * fixed))
        else:
            tb[node].sysctl("net.mptcp.bernoulli_max_lag_us",
                            0 if config == "bernoulli-unbounded" else BOUNDED_LAG_US)


def run_point(tb: StandardTestbed, scenario: str, config: str, load: float, seconds: float,
              seed: int, run: int = 0) -> Point:
    configure(tb, config, load, scenario)
    before = [interface_counters(tb.client, f"wan{w}")[0] for w in (1, 2)]
    proc = tb.client.run_main(messages.main, ["send", "--host", ip("proxy", "core"), "--port", str(MESSAGES_PORT),
                                              "--rate", f"{message_rate(load):.3f}", "--size", str(MEAN_SIZE),
                                              "--seconds", str(seconds), "--seed", str(seed)],
                              timeout=seconds + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"{config} at load {load}: messages.py failed ({proc.returncode}): "
                           f"{proc.stderr.strip()}")
    sent = [interface_counters(tb.client, f"wan{w}")[0] - b for w, b in zip((1, 2), before, strict=True)]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    pstar_ms, plim_ms = model_ms(load, scenario)
    return Point(scenario=scenario, config=config, load=load, offered_mbit=out["offered_mbit"],
                 messages=out["messages"],
                 mean_ms=out["mean_ms"], p50_ms=out["p50_ms"], p99_ms=out["p99_ms"],
                 wan1_share=sent[0] / max(1, sum(sent)), model_pstar_ms=pstar_ms,
                 model_plim_ms=plim_ms, run=run)


class SlowLinkModulator:
    """Alternates wan2's upstream rate between VARIABLE_MBIT's two values
    with exponential sojourns, in a thread, for the lifetime of a with-block
    (netem's rate changes in place: its queue is kept)."""

    def __init__(self, tb: StandardTestbed, seed: int) -> None:
        self.tb, self.rng = tb, random.Random(seed)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _set(self, mbit: float) -> None:
        spec = dataclasses.replace(SLOW, rate_mbit=mbit)
        self.tb.client.run(["tc", "qdisc", "change", "dev", "wan2", "root", "netem", *netem_args(spec)])

    def _run(self) -> None:
        state = 0
        while not self.stop.is_set():
            self._set(VARIABLE_MBIT[state])
            self.stop.wait(self.rng.expovariate(VARIABLE_LEAVE_RATE[state]))
            state = 1 - state

    def __enter__(self) -> SlowLinkModulator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._set(SLOW.rate_mbit or 0)


def sweep(configs: tuple[str, ...], loads: tuple[float, ...], seconds: float,
          scenario: str = "steady", tag: str = "e2", runs: int = 1) -> Iterator[Point]:
    """Every configuration at every load on one testbed, runs times,
    interleaved so that a slow spell of the machine touches every
    configuration alike (each point is a new connection, so it takes the
    scheduler set just before it)."""
    progress = Progress(f"e2 {scenario}", runs * len(configs) * len(loads))
    order = [(r, lo, c) for r in range(runs) for lo in loads for c in configs]
    with (scheduler_testbed(tag, "default", FAST, SLOW) as tb,
          BulkServer(tb, port=MESSAGES_PORT, tool=MESSAGES_TOOL)):
        for i, (run, load, config) in enumerate(order):
            t0 = time.monotonic()
            if scenario == "variable":
                with SlowLinkModulator(tb, seed=1 + i):
                    point = run_point(tb, scenario, config, load, seconds, seed=1 + i, run=run)
            else:
                point = run_point(tb, scenario, config, load, seconds, seed=1 + i, run=run)
            progress.step(f"run {run + 1}/{runs} load {load:.2f} {config:19} "
                          f"mean {point.mean_ms:7.2f} ms p99 {point.p99_ms:7.1f} ms  "
                          f"wan1 {point.wan1_share:.2f}  (model p* {point.model_pstar_ms:.2f}, "
                          f"p_lim {point.model_plim_ms:.2f}), {time.monotonic() - t0:.0f} s")
            yield point


def report(points: list[Point], params: dict[str, object]) -> str:
    """Markdown: per scenario, mean delays per load with the model's curves
    beside them, and wan1's share of the bytes against p*."""
    mu1, mu2 = service_rates()
    lines = ["# E2: message delay against load (thesis ch. 5)", "",
             f"wan1 {FAST.rate_mbit:g} Mbit/s, wan2 {SLOW.rate_mbit:g} Mbit/s ('variable': "
             f"{VARIABLE_MBIT[0]:g} <-> {VARIABLE_MBIT[1]:g} Mbit/s, mean sojourn 1 s), "
             f"{PROP_MS:g} ms one way each; Poisson messages, exponential sizes, mean "
             f"{MEAN_SIZE} B; {params['seconds']} s per point; kernel {params['kernel']}.",
             f"Model: M/M/1 per path (Markov-modulated for 'variable'); lambda0 = "
             f"{lambda0(mu1, mu2) / (mu1 + mu2):.2f} of capacity (below it p* = 1: the fast "
             "path alone). Model delays include the propagation delay.", ""]
    tables = {field: summarise(points, field) for field in ("mean_ms", "p99_ms", "wan1_share")}
    runs = max((s.runs for s in tables["mean_ms"].values()), default=1)
    for scenario in dict.fromkeys(p.scenario for p in points):
        mine = [p for p in points if p.scenario == scenario]
        configs = list(dict.fromkeys(p.config for p in mine))
        loads = sorted({p.load for p in mine})

        def cells(load: float, field: str, spread: bool = False, scenario: str = scenario,
                  configs: list[str] = configs) -> str:
            got = [tables[field].get((scenario, c, load)) for c in configs]
            return " | ".join("-" if g is None else g.text(2, spread) for g in got)

        heading = ("Mean message delay, ms (measured; model on the right)"
                   + (f": median of {runs} runs (range)" if runs > 1 else "") + ":")
        lines += [f"## {scenario} slow link", "", heading,
                  "", "| load | " + " | ".join(configs) + " | model p* | model p_lim |",
                  "|---" * (len(configs) + 3) + "|"]
        for load in loads:
            pstar_ms, plim_ms = model_ms(load, scenario)
            lines.append(f"| {load:.2f} | {cells(load, 'mean_ms', spread=True)} | {pstar_ms:.2f} "
                         f"| {plim_ms:.2f} |")
        lines += ["", "99th percentile, ms:", "", "| load | " + " | ".join(configs) + " |",
                  "|---" * (len(configs) + 1) + "|"]
        lines += [f"| {load:.2f} | {cells(load, 'p99_ms')} |" for load in loads]
        lines += ["", "wan1's share of the bytes sent:", "",
                  "| load | " + " | ".join(configs) + " | p* |", "|---" * (len(configs) + 2) + "|"]
        lines += [f"| {load:.2f} | {cells(load, 'wan1_share')} | {optimal_share(load, scenario):.2f} |"
                  for load in loads]
        lines.append("")
    lines += verdict_lines(points)
    lines += ["Published (thesis ch. 5; model, 1400-byte packets): at 29 of 35 Mbit/s with the "
              "variable slow link, 3.9 ms with p* against 51 ms with p_lim; its WiFi testbed: "
              "6 ms against 25 ms at 64 Mbit/s. braid's figures above are measured on emulated "
              "links in braid's kernel; the published ones are the thesis's."]
    return "\n".join(lines) + "\n"


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(p.scenario for p in points))
    table = summarise(points)
    fig, axes = plt.subplots(1, len(scenarios), figsize=(6.5 * len(scenarios), 4.5), squeeze=False)
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        mine = [p for p in points if p.scenario == scenario]
        for config in dict.fromkeys(p.config for p in mine):
            loads = sorted({p.load for p in mine if p.config == config})
            got = [table[(scenario, config, lo)] for lo in loads]
            ax.errorbar(loads, [g.median for g in got],
                        yerr=[[g.median - g.low for g in got], [g.high - g.median for g in got]],
                        marker="o", capsize=2, label=config)
        grid = [i / 100 for i in range(5, 97)]
        curves = [model_ms(lo, scenario) for lo in grid]
        ax.plot(grid, [c[0] for c in curves], "k--", label="model, p*")
        ax.plot(grid, [c[1] for c in curves], "k:", label="model, p_lim")
        ax.set_yscale("log")
        ax.set_title(f"{scenario} slow link")
        ax.set_xlabel("load (fraction of 35 Mbit/s)")
        ax.set_ylabel("mean message delay (ms)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true",
                   help="all loads, both slow links, longer runs, a plot (quick: 2 loads, steady)")
    p.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    p.add_argument("--scenarios", nargs="+", choices=SCENARIOS,
                   help="slow link kinds (quick: steady; full: steady variable)")
    p.add_argument("--loads", type=float, nargs="+",
                   help="fractions of the 35 Mbit/s capacity, each in (0, 1) (default: by mode)")
    p.add_argument("--seconds", type=float, help="per point (quick 8, full 20)")
    p.add_argument("--runs", type=int, default=1,
                   help="repeat every point this many times, interleaved (median and range reported)")
    p.add_argument("--out", type=Path, default=Path("out/e2"))
    p.add_argument("--replot", action="store_true",
                   help="only redo the report and plot from OUT/e2.json (no VM needed)")
    args = p.parse_args()
    if args.replot:
        saved = json.loads((args.out / "e2.json").read_text())
        points = [Point(**pt) for pt in saved["points"]]
        (args.out / "e2.md").write_text(report(points, saved["params"]))
        plot(points, args.out / "e2.png")
        print(f"e2: wrote {args.out / 'e2.md'} and {args.out / 'e2.png'}")
        return 0
    if not kernel_has_netem():
        print("e2: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    loads = tuple(args.loads or (FULL_LOADS if args.full else QUICK_LOADS))
    if any(not 0 < lo < 1 for lo in loads):
        p.error("--loads: each must be a fraction of capacity in (0, 1)")
    if args.runs < 1:
        p.error("--runs: at least 1")
    scenarios = args.scenarios or (list(SCENARIOS) if args.full else ["steady"])
    seconds = args.seconds or (20.0 if args.full else 8.0)
    params: dict[str, object] = {"mode": "full" if args.full else "quick", "loads": loads,
                                 "scenarios": scenarios, "configs": args.configs,
                                 "seconds": seconds, "runs": args.runs, "mean_size": MEAN_SIZE, "prop_ms": PROP_MS,
                                 "fast_mbit": FAST.rate_mbit, "slow_mbit": SLOW.rate_mbit,
                                 "variable_mbit": VARIABLE_MBIT, "seeds": "1 + point index (runs interleaved)",
                                 **provenance()}
    points = [pt for scenario in scenarios
              for pt in sweep(tuple(args.configs), loads, seconds, scenario, runs=args.runs)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "e2.json").write_text(json.dumps(
        {"params": params, "points": [dataclasses.asdict(pt) for pt in points]}, indent=1) + "\n")
    text = report(points, params)
    (args.out / "e2.md").write_text(text)
    if args.full:
        plot(points, args.out / "e2.png")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
