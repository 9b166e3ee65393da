"""Defences side by side: the attacks against none / hywf / AP /
hywf+AP / FRONT (and any other of the defence catalog's) on one corpus, each
with the bandwidth overhead measured on that corpus.

For every defence but ``none`` the attacker follows the thesis's protocol
(braid_wf.evaluate): it knows the defence, trains on originals plus
protected traces (n_or = n_pr) and is scored on protected test traces
("model, prot." row); ``none`` is trained and scored on originals. The
observer is network 1's: for a split defence it sees its share of the
packets (real and dummy), for a single-path one all of them. Overhead is
all networks' bytes over the originals' (one protection per load, summed
over the corpus), with the per-load median and maximum beside it.

AP's histograms are fitted on the corpus itself (the thesis's "dataset
distribution"); ``params`` sets the AP budget, the hywf p-drift and
FRONT's N and W.

Usage::

    rows = compare(ds, ["none", "hywf", "ap", "hywf-ap", "front"], DefenseParams(budget=0.4),
                   attacks=["kfp"], repeats=3, quick=True, open_world=True)
    print(table(rows, ["kfp"]))
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence

import numpy as np

from braid_wf.attacks import ATTACK_NAMES
from braid_wf.defences.adaptive_padding import fit_histograms
from braid_wf.defences.catalog import Defense, DefenseParams, make_defense
from braid_wf.evaluate import Score, evaluate
from braid_wf.trace import Dataset, Trace


@dataclasses.dataclass
class DefenseResult:
    name: str
    overhead: float
    overhead_median: float
    overhead_max: float
    closed: dict[str, Score] = dataclasses.field(default_factory=dict)
    open: dict[str, Score] = dataclasses.field(default_factory=dict)


def measure_overhead(ds: Dataset, defense: Defense, seed: int) -> tuple[float, float, float]:
    """(corpus overhead, per-load median, per-load max) of one protection
    of every load."""
    out = [defense(t, np.random.default_rng([seed, 99, i])) for i, t in enumerate(ds.traces)]
    total = sum(d.total_bytes for d in out) / sum(t.total_bytes for t in ds.traces) - 1.0
    per = [d.overhead for d in out]
    return total, statistics.median(per), max(per)


def observed(defense: Defense) -> Callable[[Trace, np.random.Generator], Trace]:
    return lambda tr, rng: defense(tr, rng).observed


def compare(ds: Dataset, names: Sequence[str], params: DefenseParams, *, attacks: Sequence[str], repeats: int,
            quick: bool, open_world: bool, copies: int = 2, seed: int = 1,
            progress: Callable[[str], None] = lambda s: None) -> list[DefenseResult]:
    if params.histograms is None and any(n in ("ap", "hywf-ap") for n in names):
        params = dataclasses.replace(params, histograms=fit_histograms(ds.traces))
    has_unmonitored = any(lab < 0 for lab in ds.labels)
    if open_world and not has_unmonitored:
        raise ValueError("open world needs unmonitored loads (label -1) in the corpus")
    results = []
    for name in names:
        defense = make_defense(name, params)
        res = DefenseResult(name, *measure_overhead(ds, defense, seed))
        progress(f"{name}: overhead {100 * res.overhead:.1f} % (per load median "
                 f"{100 * res.overhead_median:.1f}, max {100 * res.overhead_max:.1f})")
        protect = None if name == "none" else observed(defense)
        row = "orig" if protect is None else "model_prot"
        for world in ("closed", "open") if open_world else ("closed",):
            for a in attacks:
                progress(f"{name}: {world} world, {a}")
                rows = evaluate(ds, a, repeats=repeats, quick=quick, open_world=world == "open",
                                protect=protect, copies=copies, seed=seed, progress=progress,
                                baseline=protect is None)
                (res.closed if world == "closed" else res.open)[a] = rows[row]
        results.append(res)
    return results


def table(results: list[DefenseResult], attacks: Sequence[str]) -> str:
    """Markdown: defence, overhead, closed-world TPR and open-world TPR / FPR
    per attack (mean ± sd over splits)."""
    has_open = any(r.open for r in results)
    head = ["defence", "overhead % (corpus; per load median / max)"]
    head += [f"{ATTACK_NAMES[a]} closed TPR %" for a in attacks]
    if has_open:
        head += [f"{ATTACK_NAMES[a]} open TPR / FPR %" for a in attacks]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in results:
        cells = [r.name, f"{100 * r.overhead:.1f} ({100 * r.overhead_median:.1f} / {100 * r.overhead_max:.0f})"]
        cells += [r.closed[a].tpr_text if a in r.closed else "n/a" for a in attacks]
        if has_open:
            cells += [f"{r.open[a].tpr_text} / {r.open[a].fpr_text}" if a in r.open else "n/a" for a in attacks]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
