"""Defences side by side: the attacks against none / hywf / AP /
hywf+AP / FRONT (and any other of the defence catalog's) on one corpus, each
with the bandwidth overhead measured on that corpus.

For every defence but ``none`` the attacker follows the thesis's protocol
(braid_wf.evaluate): it knows the defence, trains on originals plus
protected traces (n_or = n_pr: each training original ``copies`` times and
``copies`` protections of it with fresh randomness) and is scored on
protected test traces (the "model, prot." row; its score on the original
test traces is kept too); ``none`` is trained and scored on originals. The
observer is network 1's: for a split defence it sees its share of the
packets (real and dummy), for a single-path one all of them. Overhead is
all networks' bytes over the originals' (one protection per load, summed
over the corpus), with the per-load median and maximum beside it.

Splits: per repeat one stratified 2/3 : 1/3 split of the whole corpus
(unmonitored loads as one more group); the closed world uses its monitored
loads, the open world all of them, so both worlds and every attack see the
same protected traces. Open world: TPR (a monitored test load given its
site; the recall), WPR (given another monitored site), FPR (an unmonitored
test load given any monitored site) and the precision at a base rate b of
monitored loads among all: b TPR / (b (TPR + WPR) + (1 - b) FPR).

The CPU stages (defence simulation, feature extraction: numpy, one trace
at a time) run in worker processes (braid_wf.parallel), all submitted at
the start, so that they overlap the attacks' training in this process (the
deep attacks on a GPU). The protection of trace i is seeded by (seed,
repeat, copy, i), so the results do not depend on the number of workers.
Cells (world, defence, attack) run in that order (closed world first) and
are reported as each completes (``on_cell``); with a ``deadline`` a cell
whose estimated time (from the attack's time per training trace so far)
would end past it is skipped and marked so. With ``curve_every`` a deep
attack also records its learning curve on the cell's test traces
(braid_wf.deep.train); with ``checkpoints`` (a directory) a deep attack
saves its training there after every epoch, so that the same run started
again goes on from the last epoch of every cell (a finished cell's
training is not done again).

For a split defence each closed-world cell also records its accuracy by
the share of the load's bytes that network 1 carried (``by_share``,
bands of SHARE_BANDS): whether what the attack names comes from loads
that one network carried nearly whole or from evenly split ones is what
tells a split's design where it leaks.

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
import itertools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from braid_wf.attacks import ATTACK_NAMES, DEEP_ATTACKS, UNMONITORED, feature_function, make_attack
from braid_wf.defences.adaptive_padding import fit_histograms
from braid_wf.defences.catalog import ADAPTIVE, Defense, DefenseParams, base_name, make_defense
from braid_wf.evaluate import Score, split_indices
from braid_wf.parallel import chunks, submit, workers
from braid_wf.trace import Dataset, Trace

Features = dict[str, npt.NDArray[Any]]
FeatureFns = dict[str, Callable[[Sequence[Trace]], npt.NDArray[Any]]]
BASE_RATE = 0.1
# Network 1's share of a load's bytes (real and dummy, both directions):
# the lower edges of the bands its accuracy is recorded in, and the key
# the share travels under beside the attacks' features.
SHARE_BANDS = (0.0, 0.2, 0.4, 0.6, 0.8)
SHARE = "share"


@dataclasses.dataclass
class Cell(Score):
    """One attack against one defence in one world: per repeat TPR, FPR
    (open world), WPR (open world: a monitored load given another monitored
    site), the defence-aware model's TPR on the original test traces, and
    precision at the base rate; training traces, seconds, or why skipped;
    a deep attack's learning curve per repeat, if asked for."""

    wpr: list[float] = dataclasses.field(default_factory=list)
    tpr_on_originals: list[float] = dataclasses.field(default_factory=list)
    precision: list[float] = dataclasses.field(default_factory=list)
    curves: list[list[tuple[int, float]]] = dataclasses.field(default_factory=list)
    # per repeat, the epochs a deep attack found done in its checkpoint
    resumed: list[int] = dataclasses.field(default_factory=list)
    # per band of SHARE_BANDS: [test loads, named right], over the repeats
    by_share: list[list[int]] = dataclasses.field(default_factory=list)
    train_size: int = 0
    test_size: int = 0
    seconds: float = 0.0
    skipped: str | None = None

    @property
    def tpr_text(self) -> str:
        return self.skipped_text or self._fmt(self.tpr)

    @property
    def fpr_text(self) -> str:
        return self.skipped_text or self._fmt(self.fpr)

    @property
    def precision_text(self) -> str:
        return self.skipped_text or self._fmt([p for p in self.precision if p == p])

    @property
    def skipped_text(self) -> str | None:
        return f"skipped ({self.skipped})" if self.skipped and not self.tpr else None


@dataclasses.dataclass
class DefenseResult:
    name: str
    overhead: float
    overhead_median: float
    overhead_max: float
    closed: dict[str, Cell] = dataclasses.field(default_factory=dict)
    open: dict[str, Cell] = dataclasses.field(default_factory=dict)


def observed(defense: Defense) -> Callable[[Trace, np.random.Generator], Trace]:
    return lambda tr, rng: defense(tr, rng).observed


def _protected_features(name: str, params: DefenseParams, fns: FeatureFns, traces: Sequence[Trace],
                        keys: Sequence[tuple[int, ...]]) -> Features:
    """In a worker: network 1's view of each trace protected by ``name``
    (rng seeded by its key; ``none``: the trace itself), then every
    attack's features of those views, and under SHARE network 1's share
    of each protected load's bytes."""
    if name == "none":
        seen, share = list(traces), np.ones(len(traces))
    else:
        defend = make_defense(name, params)
        done = [defend(t, np.random.default_rng(k)) for t, k in zip(traces, keys, strict=True)]
        seen = [d.observed for d in done]
        share = np.asarray([d.observed.total_bytes / max(d.total_bytes, 1) for d in done])
    return {SHARE: share, **{a: fn(seen) for a, fn in fns.items()}}


def accuracy_by_share(share: npt.NDArray[np.float64], right: npt.NDArray[np.bool_]) -> list[list[int]]:
    """Per band of SHARE_BANDS: [loads whose network-1 share falls in it,
    of which named right]."""
    band = np.searchsorted(np.asarray(SHARE_BANDS[1:]), share, side="right")
    return [[int((band == b).sum()), int(right[band == b].sum())] for b in range(len(SHARE_BANDS))]


def share_band_names(lower_edges: Sequence[float] = SHARE_BANDS) -> list[str]:
    """The bands' names, e.g. "20-40 %"."""
    edges = [*lower_edges, 1.0]
    return [f"{100 * lo:.0f}-{100 * hi:.0f} %" for lo, hi in itertools.pairwise(edges)]


def _overheads(name: str, params: DefenseParams, traces: Sequence[Trace], keys: Sequence[tuple[int, ...]]
               ) -> list[tuple[int, float]]:
    """In a worker: (all networks' bytes, per-load overhead) of one protection of each trace."""
    defend = make_defense(name, params)
    out = [defend(t, np.random.default_rng(k)) for t, k in zip(traces, keys, strict=True)]
    return [(d.total_bytes, d.overhead) for d in out]


def measure_overhead(ds: Dataset, defense: Defense, seed: int) -> tuple[float, float, float]:
    """(corpus overhead, per-load median, per-load max) of one protection
    of every load."""
    out = [defense(t, np.random.default_rng([seed, 99, i])) for i, t in enumerate(ds.traces)]
    total = sum(d.total_bytes for d in out) / sum(t.total_bytes for t in ds.traces) - 1.0
    per = [d.overhead for d in out]
    return total, statistics.median(per), max(per)


class _Pending:
    """Features computed in chunks by workers, assembled on first use."""

    def __init__(self, parts: list[Future[Features]]) -> None:
        self.parts: list[Future[Features]] | None = parts
        self.value: Features = {}

    def get(self) -> Features:
        if self.parts is not None:
            done = [f.result() for f in self.parts]
            self.value = {a: np.concatenate([d[a] for d in done]) for a in done[0]} if done else {}
            self.parts = None
        return self.value


def _features(pool: Executor | None, jobs: int, name: str, params: DefenseParams, fns: FeatureFns,
              ds: Dataset, idx: Sequence[int], key: Callable[[int], tuple[int, ...]]) -> _Pending:
    parts = []
    for r in chunks(len(idx), 4 * jobs, least=64):
        sel = [idx[j] for j in r]
        parts.append(submit(pool, _protected_features, name, params, fns, [ds.traces[i] for i in sel],
                            [key(i) for i in sel]))
    return _Pending(parts)


def _key(*parts: int) -> tuple[int, ...]:
    """A protection's seed: (seed, repeat, copy (0: the test trace), trace index)."""
    return parts


def precision_at(base_rate: float, tpr: float, wpr: float, fpr: float) -> float:
    """Share of the loads classified as a monitored site that are that site,
    when monitored loads are ``base_rate`` of all loads."""
    den = base_rate * (tpr + wpr) + (1 - base_rate) * fpr
    return base_rate * tpr / den if den > 0 else float("nan")


def compare(ds: Dataset, names: Sequence[str], params: DefenseParams, *, attacks: Sequence[str], repeats: int,
            quick: bool, open_world: bool, copies: int = 2, seed: int = 1, jobs: int = 1,
            epochs: int | None = None, tam_seconds: float | None = None, deadline: float | None = None,
            start: float | None = None, base_rate: float = BASE_RATE, curve_every: int = 0,
            checkpoints: Path | None = None, progress: Callable[[str], None] = lambda s: None,
            on_cell: Callable[[list[DefenseResult]], None] = lambda r: None) -> list[DefenseResult]:
    """Every (world, defence, attack) cell; ``deadline`` in seconds from
    ``start`` (time.monotonic(); default now)."""
    t0 = time.monotonic() if start is None else start
    if params.histograms is None and any(base_name(n) in ADAPTIVE for n in names):
        params = dataclasses.replace(params, histograms=fit_histograms(ds.traces))
    y = np.asarray(ds.labels, dtype=np.int64)
    has_unmonitored = bool((y < 0).any())
    if open_world and not has_unmonitored:
        raise ValueError("open world needs unmonitored loads (label -1) in the corpus")
    used = [i for i in range(len(y)) if open_world or y[i] >= 0]
    fns = {a: feature_function(a, quick, tam_seconds) for a in attacks}

    def say(msg: str) -> None:
        progress(f"[{time.monotonic() - t0:5.0f} s] {msg}")

    splits = []
    for rep in range(repeats):
        tr_idx, te_idx = split_indices([int(y[i]) for i in used], np.random.default_rng([seed, rep]))
        splits.append((np.asarray([used[j] for j in tr_idx]), np.asarray([used[j] for j in te_idx])))
    results = [DefenseResult(n, math.nan, math.nan, math.nan) for n in names]
    with workers(jobs) as pool:
        # Everything the CPU does is queued now, in the order it is needed.
        stage = time.monotonic()
        orig = _features(pool, jobs, "none", params, fns, ds, list(range(len(y))), partial(_key))
        overheads: dict[str, Future[list[tuple[int, float]]] | list[Future[list[tuple[int, float]]]]] = {}
        prot: dict[tuple[str, int], tuple[list[_Pending], _Pending]] = {}
        for name in names:
            if name == "none":
                continue
            overheads[name] = [submit(pool, _overheads, name, params, [ds.traces[i] for i in r],
                                      [(seed, 99, i) for i in r]) for r in chunks(len(y), 4 * jobs, least=64)]
            for rep, (train, test) in enumerate(splits):
                cps = [_features(pool, jobs, name, params, fns, ds, list(train), partial(_key, seed, rep, 1 + c))
                       for c in range(copies)]
                prot[(name, rep)] = (cps, _features(pool, jobs, name, params, fns, ds, list(test),
                                                    partial(_key, seed, rep, 0)))
        f0 = orig.get()
        say(f"features of the {len(y)} original loads: {time.monotonic() - stage:.1f} s "
            f"({1000 * (time.monotonic() - stage) / len(y):.2f} ms per load with {jobs} workers)")
        total_orig = sum(t.total_bytes for t in ds.traces)
        for res in results:
            if res.name == "none":
                res.overhead = res.overhead_median = res.overhead_max = 0.0
                continue
            ov = overheads[res.name]
            per = [x for f in (ov if isinstance(ov, list) else [ov]) for x in f.result()]
            res.overhead = sum(b for b, _ in per) / total_orig - 1.0
            res.overhead_median = statistics.median(o for _, o in per)
            res.overhead_max = max(o for _, o in per)
            say(f"{res.name}: overhead {100 * res.overhead:.1f} % (per load median "
                f"{100 * res.overhead_median:.1f}, max {100 * res.overhead_max:.0f})")

        worlds = ["closed", "open"] if open_world else ["closed"]
        cells = [(w, r, a) for w in worlds for r in results for a in attacks]
        rate: dict[str, float] = {}  # seconds per training trace, per attack (lowest seen)

        def size(world: str, res: DefenseResult) -> int:
            train = splits[0][0]
            n = int((y[train] >= 0).sum()) if world == "closed" else len(train)
            return n if res.name == "none" else 2 * copies * n

        def left(after: int) -> str:
            est = [rate.get(a, math.nan) * size(w, r) * repeats for w, r, a in cells[after:]]
            known = [e for e in est if e == e]
            return (f"ETA {sum(known):.0f} s for {len(est)} cells"
                    + (f" ({len(est) - len(known)} not yet timed)" if len(known) < len(est) else ""))

        for n_cell, (world, res, a) in enumerate(cells):
            cell = Cell()
            (res.closed if world == "closed" else res.open)[a] = cell
            cell.train_size = size(world, res)
            for rep, (train, test) in enumerate(splits):
                elapsed = time.monotonic() - t0
                est = rate.get(a, 0.0) * cell.train_size
                if deadline is not None and elapsed + est > deadline:
                    cell.skipped = f"deadline: {elapsed:.0f} + ~{est:.0f} s > {deadline:.0f} s"
                    say(f"{world} world, {res.name}, {ATTACK_NAMES[a]}: skipped, {cell.skipped}")
                    break
                tr = train[y[train] >= 0] if world == "closed" else train
                te_mask = y[test] >= 0 if world == "closed" else np.ones(len(test), bool)
                te = test[te_mask]
                keep = y[train] >= 0 if world == "closed" else np.ones(len(train), bool)
                stage = time.monotonic()
                share = None
                if res.name == "none":
                    x, ys = f0[a][tr], y[tr]
                    x_test, x_orig = f0[a][te], None
                else:
                    cps, tst = prot[(res.name, rep)]
                    feats = [c.get()[a][keep] for c in cps]
                    x = np.concatenate([f0[a][tr]] * copies + feats)
                    ys = np.tile(y[tr], 2 * copies)
                    seen_test = tst.get()
                    x_test, x_orig = seen_test[a][te_mask], f0[a][te]
                    share = seen_test[SHARE][te_mask]
                waited = time.monotonic() - stage
                say(f"{world} world, {res.name}, {ATTACK_NAMES[a]} (cell {n_cell + 1}/{len(cells)}, rep "
                    f"{rep + 1}/{repeats}): {len(x)} training, {len(x_test)} test traces"
                    + (f"; waited {waited:.1f} s for the workers' features" if waited > 0.5 else ""))
                stage = time.monotonic()
                model = make_attack(a, quick, world == "open", seed + rep, say, epochs=epochs,
                                    tam_seconds=tam_seconds, n_jobs=jobs, curve_every=curve_every,
                                    checkpoints=checkpoints)
                truth, labels = y[te], [int(v) for v in ys]
                if curve_every and a in DEEP_ATTACKS:
                    from braid_wf.deep.train import DeepAttack

                    assert isinstance(model, DeepAttack)
                    model.fit_features(x, labels, held_out=(x_test, truth))
                    cell.curves.append(model.curve)
                else:
                    model.fit_features(x, labels)
                resumed = getattr(model, "resumed_from", 0)
                cell.resumed.append(resumed)
                pred = model.predict_features(x_test)
                mon = truth >= 0
                t = float((pred[mon] == truth[mon]).mean())
                cell.tpr.append(t)
                msg = f"TPR {100 * t:.1f} %"
                if share is not None and world == "closed" and (share < 1).any():  # a split defence
                    bands = accuracy_by_share(share, pred == truth)
                    cell.by_share = [[n + m, r + q] for (n, r), (m, q) in
                                     zip(cell.by_share or [[0, 0]] * len(bands), bands, strict=True)]
                    msg += " (by network 1's share: " + ", ".join(
                        f"{band} {100 * r / n:.1f} of {n}" if n else f"{band} none"
                        for band, (n, r) in zip(share_band_names(), bands, strict=True)) + ")"
                if world == "open":
                    w = float(((pred[mon] != truth[mon]) & (pred[mon] != UNMONITORED)).mean())
                    f = float((pred[~mon] != UNMONITORED).mean())
                    cell.wpr.append(w)
                    cell.fpr.append(f)
                    cell.precision.append(precision_at(base_rate, t, w, f))
                    msg += f", FPR {100 * f:.1f} %, precision@{base_rate:g} {cell.precision[-1]:.3f}"
                if x_orig is not None:
                    cell.tpr_on_originals.append(float((model.predict_features(x_orig)[mon] == truth[mon]).mean()))
                    msg += f" (on original test loads {100 * cell.tpr_on_originals[-1]:.1f} %)"
                secs = time.monotonic() - stage
                cell.seconds += secs
                cell.test_size = len(te)
                # The lowest so far: a first fit of a shape also compiles (deep attacks);
                # a training carried on from a checkpoint did only part of the work.
                if not resumed:
                    rate[a] = min(rate.get(a, math.inf), secs / max(len(x), 1))
                say(f"{world} world, {res.name}, {ATTACK_NAMES[a]}: {msg}; {secs:.1f} s "
                    f"({1000 * secs / max(len(x), 1):.2f} ms per training trace); {left(n_cell + 1)}")
            on_cell(results)
    return results


def _mean_sd(values: Sequence[float]) -> tuple[float | None, float | None]:
    v = [x for x in values if x == x]
    if not v:
        return None, None
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def _finite(x: float) -> float | None:
    return x if x == x and math.isfinite(x) else None


def to_json(results: list[DefenseResult], attacks: Sequence[str], base_rate: float) -> dict[str, Any]:
    """The results as plain JSON values (NaN as null): per defence its
    overheads and, per world and attack, the per-repeat lists, their mean
    and sd, sizes, seconds and ``skipped``; ``curve``: per repeat the
    learning curve's [epoch, accuracy] pairs, if recorded;
    ``resumed_from_epoch``: per repeat, the epochs a deep attack's training
    found done in its checkpoint, where any did."""
    out: dict[str, Any] = {}
    for r in results:
        d: dict[str, Any] = {"overhead": _finite(r.overhead), "overhead_median": _finite(r.overhead_median),
                             "overhead_max": _finite(r.overhead_max), "closed": {}, "open": {}}
        for world, cells in (("closed", r.closed), ("open", r.open)):
            for a, c in cells.items():
                e: dict[str, Any] = {"attack": ATTACK_NAMES[a]}
                fields = ["tpr", "tpr_on_originals"] + (["fpr", "wpr", "precision"] if world == "open" else [])
                for f in fields:
                    v = [_finite(x) for x in getattr(c, f)]
                    e[f] = v
                    e[f + "_mean"], e[f + "_sd"] = _mean_sd([x for x in v if x is not None])
                if world == "closed":
                    e["accuracy_mean"] = e["tpr_mean"]
                else:
                    e["recall_mean"] = e["tpr_mean"]
                    e["base_rate"] = base_rate
                e.update(train_size=c.train_size, test_size=c.test_size, repeats_done=len(c.tpr),
                         seconds=round(c.seconds, 2), skipped=c.skipped)
                if c.curves:
                    e["curve"] = [[[epoch, acc] for epoch, acc in curve] for curve in c.curves]
                if any(c.resumed):  # its seconds are this run's part of the training only
                    e["resumed_from_epoch"] = c.resumed
                if c.by_share:
                    e["by_share"] = [{"share_from": lo, "loads": n, "right": r}
                                     for lo, (n, r) in zip(SHARE_BANDS, c.by_share, strict=True)]
                d[world][a] = e
        out[r.name] = d
    return out


def table(results: list[DefenseResult], attacks: Sequence[str], base_rate: float = BASE_RATE) -> str:
    """Markdown: defence, overhead, closed-world TPR and open-world TPR / FPR
    and precision / recall per attack (mean ± sd over splits)."""
    has_open = any(r.open for r in results)
    head = ["defence", "overhead % (corpus; per load median / max)"]
    head += [f"{ATTACK_NAMES[a]} closed TPR %" for a in attacks]
    if has_open:
        head += [f"{ATTACK_NAMES[a]} open TPR / FPR %" for a in attacks]
        head += [f"{ATTACK_NAMES[a]} open precision@{base_rate:g} / recall" for a in attacks]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in results:
        ov = "n/a" if r.overhead != r.overhead else \
            f"{100 * r.overhead:.1f} ({100 * r.overhead_median:.1f} / {100 * r.overhead_max:.0f})"
        cells = [r.name, ov]
        cells += [r.closed[a].tpr_text if a in r.closed else "n/a" for a in attacks]
        if has_open:
            cells += [(r.open[a].skipped_text or f"{r.open[a].tpr_text} / {r.open[a].fpr_text}")
                      if a in r.open else "n/a" for a in attacks]
            cells += [(r.open[a].skipped_text or f"{_prec(r.open[a])} / {_mean_text(r.open[a].tpr, 2)}")
                      if a in r.open else "n/a" for a in attacks]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mean_text(v: Sequence[float], digits: int) -> str:
    m, _ = _mean_sd(v)
    return "n/a" if m is None else f"{m:.{digits}f}"


def _prec(c: Cell) -> str:
    return _mean_text(c.precision, 2)


def plot(results: list[DefenseResult], attacks: Sequence[str], path: Path, title: str,
         base_rate: float = BASE_RATE) -> None:
    """Accuracy (closed-world TPR) against bandwidth overhead, one point per
    defence and attack; with open-world results, recall and precision at
    the base rate beside it. PNG, SVG or PDF by ``path``'s suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, str, Callable[[Cell], list[float]]]] = [
        ("closed", "closed world: accuracy", lambda c: c.tpr)]
    if any(r.open for r in results):
        panels += [("open", "open world: TPR (recall)", lambda c: c.tpr),
                   ("open", f"open world: precision at base rate {base_rate:g}", lambda c: c.precision)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    markers = "osD^vP*Xh<>"
    for ax, (world, label, values) in zip(axes[0], panels, strict=True):
        for k, a in enumerate(attacks):
            pts = []
            for r in results:
                c = (r.closed if world == "closed" else r.open).get(a)
                m, sd = _mean_sd(values(c)) if c is not None else (None, None)
                if m is not None and r.overhead == r.overhead:
                    pts.append((100 * r.overhead, 100 * m, 100 * (sd or 0.0), r.name))
            if not pts:
                continue
            xs, ys, es, names = zip(*pts, strict=True)
            ax.errorbar(xs, ys, yerr=es, marker=markers[k % len(markers)], linestyle="none", capsize=3,
                        label=ATTACK_NAMES[a])
            for x, yv, n in zip(xs, ys, names, strict=True):
                ax.annotate(n, (x, yv), textcoords="offset points", xytext=(4, 3), fontsize=7)
        ax.set_xlabel("bandwidth overhead % (all networks' bytes over the original's)")
        ax.set_ylabel("%")
        ax.set_ylim(-2, 102)
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


__all__ = ["BASE_RATE", "Cell", "DefenseResult", "compare", "measure_overhead", "observed", "plot",
           "precision_at", "table", "to_json"]
