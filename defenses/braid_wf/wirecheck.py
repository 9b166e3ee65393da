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
TOLERANCE_POINTS of each other. The originals of a padded condition
(``hywf-ap``) cannot come from its own capture, which holds the dummies:
they come from an unpadded capture of the same loads (``--originals``,
by default the ``hywf`` condition's ``all``); loads are matched by name
(site and instance fix a load's content).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from braid_wf.compare import observed
from braid_wf.defences import catalog
from braid_wf.defences.adaptive_padding import ApHistograms, histograms_from_json
from braid_wf.evaluate import evaluate
from braid_wf.trace import Dataset

TOLERANCE_POINTS = 5.0
# A collected condition and the simulator of what its kernel and transport
# do (a ``-1conn`` collection is the same defence over one connection).
SIMULATOR = {"hywf": "hywf", "hywf-ap": "hywf-ap", "even": "even"}
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
    on protected test traces, per repeat, on the wire and simulated."""

    condition: str
    attack: str
    loads: int
    wire: list[float]
    simulated: list[float]

    @property
    def difference_points(self) -> float:
        return 100 * (statistics.fmean(self.wire) - statistics.fmean(self.simulated))

    @property
    def holds(self) -> bool:
        return abs(self.difference_points) <= TOLERANCE_POINTS


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
                       seed=seed, baseline=False, progress=progress)
    simulated = evaluate(orig, attack, repeats=repeats, quick=quick, open_world=False, protect=protect,
                         copies=1, seed=seed, baseline=False, progress=progress)
    return Check(condition, attack, len(orig.traces), on_wire["model_prot"].tpr,
                 simulated["model_prot"].tpr)


def to_json(checks: Sequence[Check], meta: dict[str, Any]) -> dict[str, Any]:
    return {"meta": {**meta, "tolerance_points": TOLERANCE_POINTS},
            "checks": [dataclasses.asdict(c) for c in checks]}


def from_json(data: dict[str, Any]) -> list[Check]:
    return [Check(**c) for c in data["checks"]]


def _mean_sd(values: Sequence[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.1f} ± {100 * sd:.1f}"


def table(checks: Sequence[Check]) -> list[str]:
    """Markdown rows: per condition and attack, wire against simulated."""
    lines = ["| condition | attack | loads | on the wire, % | simulated, % | difference, points | "
             f"within ±{TOLERANCE_POINTS:g} |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {c.condition} | {c.attack} | {c.loads} | {_mean_sd(c.wire)} | {_mean_sd(c.simulated)} "
              f"| {c.difference_points:+.1f} | {'yes' if c.holds else '**no**'} |" for c in checks]
    return lines
