"""The trace-level simulators against the wire.

braid's privacy figures at scale come from simulated defences applied to
undefended loads (``braid_wf.compare``); they stand only if an attack does
as well on what a network's observer captured as on what the simulator
makes of the same loads. For a condition collected in braid's kernel
(``wf collect --condition hywf``: ``OUT/hywf/wan1`` is network 1's capture,
``OUT/hywf/all`` both networks merged, i.e. the load as a single path
would carry it), each attack is evaluated twice with the same splits of
the same loads, under the thesis's defence-aware protocol
(``braid_wf.evaluate``: trained on originals plus protected traces, scored
on protected test traces):

  wire       the protected traces are the captures of network 1
  simulated  the protected traces are network 1's part of the originals
             protected by the condition's simulator (one copy per load,
             as on the wire)

The simulator holds for an attack when the two accuracies are within
TOLERANCE_POINTS of each other. Each split gives one difference (both
columns share it), and the standard error of their mean says whether the
run's splits resolve the tolerance: the split of the loads and the random
split of the traces move one split's accuracy by several points (k-FP on
600 loads: the difference's sd over splits is about 5 points), so a check
is resolved with at least MIN_SPLITS splits and a standard error of at
most RESOLVED_SE_POINTS. ``--update`` replaces some checks of an earlier
file (e.g. more splits for one attack). Beside the accuracies,
:func:`structure` compares what the attacks read: how long the runs of
one network are in each direction (a split in long runs hides more of a
page than one that thins it evenly), how many packets and bytes padding
added, and how far past the page's last real packet it ran. The originals of a padded
condition (``hywf-ap``) cannot come from its own capture, which holds
the dummies: they come from an unpadded capture of the same loads
(``--originals``, by default the ``hywf`` condition's ``all``); loads
are matched by name (site and instance fix a load's content).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from braid_wf.compare import observed
from braid_wf.conditions import LONG_BURST
from braid_wf.defences import catalog
from braid_wf.defences.adaptive_padding import ApHistograms, histograms_from_json
from braid_wf.evaluate import evaluate
from braid_wf.trace import Dataset, Trace, read_trace

T = TypeVar("T")
TOLERANCE_POINTS = 5.0
# A difference whose standard error is above this does not tell +-5 apart;
# fewer splits than this do not estimate that error.
RESOLVED_SE_POINTS = TOLERANCE_POINTS / 2
MIN_SPLITS = 10
# A collected condition and the simulator of what its kernel and transport
# do (a ``-1conn`` collection is the same defence over one connection;
# ``tor-hywf`` is hywf on Tor mode's one connection to the bridge).
SIMULATOR = {"hywf": "hywf", "hywf-long": f"hywf:ncons={LONG_BURST}", "hywf-ap": "hywf-ap",
             "hywf-ap-long": f"hywf-ap:ncons={LONG_BURST}", "even": "even", "tor-hywf": "hywf"}
# braid-proxy pads with these unless told otherwise (wf collect's default)
PROXY_HISTOGRAMS = Path(__file__).resolve().parents[2] / "proxy/internal/padding/default_histograms.json"


def simulator_of(condition: str) -> str:
    """The simulator's name for a collected condition, e.g. hywf-ap-1conn -> hywf-ap."""
    base = condition.removesuffix("-1conn")
    if base not in SIMULATOR:
        raise ValueError(f"no simulator for condition {condition!r}; one of {', '.join(SIMULATOR)} "
                         "(optionally -1conn)")
    return SIMULATOR[base]


def proxy_histograms() -> ApHistograms:
    """The delay histograms braid-proxy pads with by default."""
    return histograms_from_json(PROXY_HISTOGRAMS.read_text())


@dataclasses.dataclass
class Check:
    """One attack under one condition: the defence-aware model's accuracy
    on protected test traces, per repeat, on the wire and simulated, and
    the attack's on the unsplit loads (trained and tested on the
    originals: that it works on these loads; empty in checks recorded
    before it was kept)."""

    condition: str
    attack: str
    loads: int
    wire: list[float]
    simulated: list[float]
    undefended: list[float] = dataclasses.field(default_factory=list)

    @property
    def difference_points(self) -> float:
        return 100 * (statistics.fmean(self.wire) - statistics.fmean(self.simulated))

    @property
    def difference_se_points(self) -> float:
        """Standard error of the mean difference over the splits (each
        split's wire and simulated accuracies share its loads); nan with
        one split."""
        diffs = [100 * (w - s) for w, s in zip(self.wire, self.simulated, strict=True)]
        return statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")

    @property
    def holds(self) -> bool:
        return abs(self.difference_points) <= TOLERANCE_POINTS

    @property
    def resolved(self) -> bool:
        """Enough splits to estimate the difference's standard error, and
        that error at most RESOLVED_SE_POINTS."""
        return len(self.wire) >= MIN_SPLITS and self.difference_se_points <= RESOLVED_SE_POINTS


def replaced(old: Sequence[T], new: Sequence[T], key: Callable[[T], Hashable]) -> list[T]:
    """``old`` with each item that ``new`` has for the same key replaced,
    in place; the rest of ``new`` after them."""
    fresh = {key(x): x for x in new}
    out = [fresh.pop(key(x), x) for x in old]
    return out + list(fresh.values())


def merged(old: Sequence[Check], new: Sequence[Check]) -> list[Check]:
    """Checks of an earlier run with this run's for the same condition and attack."""
    return replaced(old, new, lambda c: (c.condition, c.attack))


def matched(originals: Dataset, wire: Dataset) -> tuple[Dataset, Dataset]:
    """Both cut to the monitored loads present in both, in the same order."""
    have = set(wire.names)
    keep = [i for i, (name, label) in enumerate(zip(originals.names, originals.labels, strict=True))
            if label >= 0 and name in have]
    orig = originals.subset(keep)
    by_name = {n: i for i, n in enumerate(wire.names)}
    return orig, wire.subset(by_name[n] for n in orig.names)


def check(condition: str, originals: Dataset, wire: Dataset, attack: str, *, params: catalog.DefenseParams,
          repeats: int, quick: bool, seed: int = 1,
          progress: Callable[[str], None] = lambda s: None) -> Check:
    """``attack`` on ``condition``'s captures of network 1 and on the
    simulator's protection of the same loads, with the same splits."""
    orig, wire = matched(originals, wire)
    if len(set(orig.labels)) < 2:
        raise ValueError(f"{condition}: fewer than two monitored sites captured in both datasets")
    protect = observed(catalog.make_defense(simulator_of(condition), params))
    on_wire = evaluate(orig, attack, repeats=repeats, quick=quick, open_world=False, protected=wire,
                       seed=seed, progress=progress)
    simulated = evaluate(orig, attack, repeats=repeats, quick=quick, open_world=False, protect=protect,
                         copies=1, seed=seed, baseline=False, progress=progress)
    return Check(condition, attack, len(orig.traces), on_wire["model_prot"].tpr,
                 simulated["model_prot"].tpr, on_wire["orig"].tpr)


def to_json(checks: Sequence[Check], meta: dict[str, Any], structures: Sequence[Structure] = ()
            ) -> dict[str, Any]:
    return {"meta": {**meta, "tolerance_points": TOLERANCE_POINTS},
            "checks": [dataclasses.asdict(c) for c in checks],
            "structure": [{**dataclasses.asdict(r),  # JSON has no nan: null
                           "runs_behind_links": [None if math.isnan(v) else v for v in r.runs_behind_links]}
                          for r in structures]}


def from_json(data: dict[str, Any]) -> list[Check]:
    return [Check(**c) for c in data["checks"]]


def structures_from_json(data: dict[str, Any]) -> list[Structure]:
    def pair(values: Sequence[float | None]) -> tuple[float, float]:
        a, b = (math.nan if v is None else float(v) for v in values)
        return a, b

    return [Structure(r["condition"], r["loads"], pair(r["runs_up"]), pair(r["runs_down"]),
                      pair(r["extra_packets"]), pair(r["extra_bytes"]), pair(r["tail_s"]),
                      pair(r.get("runs_behind_links", (None, None))))
            for r in data.get("structure", [])]


def _mean_sd(values: Sequence[float]) -> str:
    if not values:
        return "—"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.1f} ± {100 * sd:.1f}"


def _verdict(c: Check) -> str:
    return ("yes" if c.holds else "**no**") + ("" if c.resolved else " (too few splits)")


def table(checks: Sequence[Check]) -> list[str]:
    """Markdown rows: per condition and attack, wire against simulated."""
    lines = ["| condition | attack | loads | splits | undefended, % | on the wire, % | simulated, % | "
             f"difference ± se, points | within ±{TOLERANCE_POINTS:g} |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {c.condition} | {c.attack} | {c.loads} | {len(c.wire)} | {_mean_sd(c.undefended)} "
              f"| {_mean_sd(c.wire)} | {_mean_sd(c.simulated)} | {c.difference_points:+.1f} ± "
              f"{c.difference_se_points:.1f} | {_verdict(c)} |"
              for c in checks]
    return lines


def structures_merged(old: Sequence[Structure], new: Sequence[Structure]) -> list[Structure]:
    return replaced(old, new, lambda s: s.condition)


def mean_runs(parts: Sequence[Trace], direction: int) -> float:
    """Mean length, in packets, of the runs of one direction's packets
    (1 outgoing, -1 incoming) that cross the same network, the networks'
    traces (times from the load's start) merged in time; nan if none."""
    sel = [np.sign(p.sizes) == direction for p in parts]
    times = np.concatenate([p.times[s] for p, s in zip(parts, sel, strict=True)])
    if not len(times):
        return float("nan")
    network = np.concatenate([np.full(int(s.sum()), i) for i, s in enumerate(sel)])[
        np.argsort(times, kind="stable")]
    return len(network) / (1 + int(np.count_nonzero(np.diff(network))))


def behind_links(parts: Sequence[Trace], rate_mbit: float) -> list[Trace]:
    """``parts`` as a capture past each network's link sees them: each
    network's packets, one direction at a time, leave a queue that sends
    at ``rate_mbit`` (a packet leaves once it has come and the one before
    it has left, plus its own time on the link).

    The wire's captures are taken past the links' queues (a gateway's
    client-facing side). When a burst moves from one network to the other
    faster than a link drains, the first network's queue still empties as
    the second's starts, and in the networks' merged time order their
    packets alternate: runs come out shorter than the simulator's parts
    show, which keep each packet's time in the original load."""
    byte_s = rate_mbit * 1e6 / 8
    out = []
    for p in parts:
        times = p.times.copy()
        for direction in (1, -1):
            i = np.flatnonzero(np.sign(p.sizes) == direction)
            on_link = np.abs(p.sizes[i]) / byte_s
            sent = np.cumsum(on_link)
            # leave_k = sent_k + max over j <= k of (come_j - sent_(j-1))
            times[i] = sent + np.maximum.accumulate(p.times[i] - (sent - on_link))
        order = np.argsort(times, kind="stable")
        out.append(Trace(times[order], p.sizes[order]))
    return out


@dataclasses.dataclass
class Structure:
    """How one condition's loads cross the networks, (wire, simulated):
    medians over loads of the mean run of one network's packets upstream
    and downstream (:func:`mean_runs`), and of the packets and bytes the
    load gained over its original (padding; 0 when unpadded), and how much
    later than the original's its last packet comes (adaptive padding runs
    up to its idle bound past a page's last real packet, if a connection
    is open to carry it). ``runs_behind_links``: the simulated runs (up,
    down) as a capture past links of the collection's rate would see them
    (:func:`behind_links`; nan for unshaped links or an older record)."""

    condition: str
    loads: int
    runs_up: tuple[float, float]
    runs_down: tuple[float, float]
    extra_packets: tuple[float, float]
    extra_bytes: tuple[float, float]
    tail_s: tuple[float, float]
    runs_behind_links: tuple[float, float] = (math.nan, math.nan)


def _wire_loads(root: Path, condition: str, originals: Path, names: Sequence[str]
                ) -> Iterator[tuple[Trace, tuple[Trace, Trace]]]:
    """(original, (network 1, network 2)) per load captured in both, times
    from the load's start."""
    for name in names:
        nets = [root / condition / wan / name for wan in ("wan1", "wan2")]
        if (originals / name).exists() and all(n.exists() for n in nets):
            yield read_trace(originals / name, rebase=False), (
                read_trace(nets[0], rebase=False), read_trace(nets[1], rebase=False))


def _shape(parts: Sequence[Trace], original: Trace) -> tuple[float, float, float, float, float]:
    """Runs upstream and downstream, extra packets and bytes, and the
    tail (s), of one load's networks against its original."""
    last = max((float(p.times[-1]) for p in parts if len(p)), default=float("nan"))
    return (mean_runs(parts, 1), mean_runs(parts, -1), sum(len(p) for p in parts) / len(original) - 1,
            sum(p.total_bytes for p in parts) / original.total_bytes - 1, last - float(original.times[-1]))


def structure(condition: str, root: Path, originals: Path, names: Sequence[str],
              params: catalog.DefenseParams, seed: int = 1,
              link_mbit: float | None = None) -> Structure | None:
    """``condition``'s captures of both networks beside its simulator
    applied to the originals of the same loads (``names``), and, given the
    links' rate, the simulated runs behind them; None when no load was
    captured on both networks."""
    defend = catalog.make_defense(simulator_of(condition), params)
    wire_rows, sim_rows, linked_rows = [], [], []
    for i, (orig, wire) in enumerate(_wire_loads(root, condition, originals, names)):
        if not len(orig):
            continue
        wire_rows.append(_shape(wire, orig))
        parts = defend(orig, np.random.default_rng((seed, i))).parts
        sim_rows.append(_shape(parts, orig))
        if link_mbit is not None:
            linked = behind_links(parts, link_mbit)
            linked_rows.append((mean_runs(linked, 1), mean_runs(linked, -1)))
    if not wire_rows:
        return None
    wire_med, sim_med = (np.nanmedian(np.array(rows), axis=0) for rows in (wire_rows, sim_rows))
    runs_up, runs_down, packets, nbytes, tail = (
        (float(w), float(m)) for w, m in zip(wire_med, sim_med, strict=True))
    behind = (math.nan, math.nan)
    if linked_rows:
        up, down = np.nanmedian(np.array(linked_rows), axis=0)
        behind = (float(up), float(down))
    return Structure(condition, len(wire_rows), runs_up, runs_down, packets, nbytes, tail, behind)


def structure_table(rows: Sequence[Structure]) -> list[str]:
    """Markdown rows: per condition, wire against simulated, and the
    simulated runs as a capture past the links would see them."""
    lines = ["| condition | loads | run upstream, packets | run downstream, packets | extra packets | "
             "extra bytes | tail, ms | simulated runs behind the links, up / down |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.condition} | {r.loads} | {r.runs_up[0]:.1f} / {r.runs_up[1]:.1f} | "
              f"{r.runs_down[0]:.1f} / {r.runs_down[1]:.1f} | {100 * r.extra_packets[0]:.0f} / "
              f"{100 * r.extra_packets[1]:.0f} % | {100 * r.extra_bytes[0]:.0f} / {100 * r.extra_bytes[1]:.0f} % | "
              f"{1000 * r.tail_s[0]:.0f} / {1000 * r.tail_s[1]:.0f} | "
              + (" / ".join(f"{v:.1f}" for v in r.runs_behind_links)
                 if not any(map(math.isnan, r.runs_behind_links)) else "—") + " |"
              for r in rows]
    return lines
