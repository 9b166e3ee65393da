"""The thesis's evaluation protocol for WF attacks (§6.1, §6.6).

Closed world: monitored loads only, a stratified split (2/3 train) repeated
``repeats`` times; TPR = share of test loads given their own site.
Open world: monitored and unmonitored loads, each split 2/3 : 1/3; TPR as
before on the monitored test loads, FPR = share of unmonitored test loads
given any monitored site.

The defended rows follow the thesis: the attacker knows the defence and
does not know whether a trace is protected, so it trains on originals plus
protected traces with n_or = n_pr: each training original is duplicated
``copies`` times and protected ``copies`` times with fresh randomness
(``protect``), or, for captured traces, the protected captures of the same
loads are used (``protected``). The same model is scored on original test
traces ("HyWF model, orig.") and protected ones ("HyWF model, prot.").
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from braid_eval.progress import duration, eta
from braid_wf.attacks import UNMONITORED, make_attack
from braid_wf.trace import Dataset, Trace

Protect = Callable[[Trace, np.random.Generator], Trace]


@dataclasses.dataclass
class Score:
    tpr: list[float] = dataclasses.field(default_factory=list)
    fpr: list[float] = dataclasses.field(default_factory=list)

    @staticmethod
    def _fmt(v: list[float]) -> str:
        if not v:
            return "n/a"
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        return f"{100 * statistics.mean(v):.1f}±{100 * sd:.1f}"

    @property
    def tpr_text(self) -> str:
        return self._fmt(self.tpr)

    @property
    def fpr_text(self) -> str:
        return self._fmt(self.fpr)


def split_indices(labels: list[int], rng: np.random.Generator, train_frac: float = 2 / 3
                  ) -> tuple[list[int], list[int]]:
    """Stratified per site (and for the unmonitored loads as one group)."""
    train: list[int] = []
    test: list[int] = []
    for site in sorted(set(labels)):
        idx = [i for i, lab in enumerate(labels) if lab == site]
        rng.shuffle(idx)
        cut = max(1, round(len(idx) * train_frac)) if len(idx) > 1 else len(idx)
        train += idx[:cut]
        test += idx[cut:]
    return train, test


def score(pred: npt.NDArray[np.int64], truth: list[int]) -> tuple[float, float | None]:
    y = np.asarray(truth)
    mon = y >= 0
    tpr = float((pred[mon] == y[mon]).mean()) if mon.any() else float("nan")
    fpr = float((pred[~mon] != UNMONITORED).mean()) if (~mon).any() else None
    return tpr, fpr


def evaluate(orig: Dataset, attack: str, *, repeats: int, quick: bool, open_world: bool,
             protect: Protect | None = None, protected: Dataset | None = None, copies: int = 1,
             shuffle_labels: bool = False, seed: int = 1, baseline: bool = True,
             progress: Callable[[str], None] = lambda s: None) -> dict[str, Score]:
    """Scores per row: "orig" (trained and tested on originals) and, with a
    defence, "model_orig" / "model_prot" (trained on originals + protected).
    ``baseline=False`` (with a defence) skips the "orig" model, which does
    not depend on the defence: comparing defences needs it once."""
    if not baseline and not (protect or protected):
        raise ValueError("baseline=False needs a defence (protect or protected)")
    if not open_world:
        orig = orig.subset(i for i, lab in enumerate(orig.labels) if lab >= 0)
    prot_by_name: dict[str, Trace] = {}
    if protected is not None:
        prot_by_name = dict(zip(protected.names, protected.traces, strict=True))
        keep = [i for i, n in enumerate(orig.names) if n in prot_by_name]
        orig = orig.subset(keep)
    rows = {"orig": Score()} if baseline else {}
    if protect or protected:
        rows["model_orig"] = Score()
        rows["model_prot"] = Score()
    started = time.monotonic()
    for rep in range(repeats):
        rng = np.random.default_rng([seed, rep])
        train, test = split_indices(orig.labels, rng)
        y_train = [orig.labels[i] for i in train]
        if shuffle_labels:
            y_train = list(rng.permutation(y_train))
        y_test = [orig.labels[i] for i in test]

        def protected_of(i: int, rng: np.random.Generator = rng) -> Trace:
            if protected is not None:
                return prot_by_name[orig.names[i]]
            assert protect is not None
            return protect(orig.traces[i], rng)

        msg = f"{attack} rep {rep + 1}/{repeats}:"
        if baseline:
            model = make_attack(attack, quick, open_world, seed + rep, progress)
            model.fit([orig.traces[i] for i in train], y_train)
            t, f = score(model.predict([orig.traces[i] for i in test]), y_test)
            _record(rows["orig"], t, f)
            msg += f" orig TPR {100 * t:.1f}"
            if f is not None:
                msg += f" FPR {100 * f:.1f}"
        if protect or protected:
            n = copies if protected is None else 1
            xs = [orig.traces[i] for i in train] * n + [protected_of(i) for _ in range(n) for i in train]
            ys = y_train * (2 * n)
            model = make_attack(attack, quick, open_world, seed + rep, progress)
            model.fit(xs, ys)
            t, f = score(model.predict([orig.traces[i] for i in test]), y_test)
            _record(rows["model_orig"], t, f)
            t2, f2 = score(model.predict([protected_of(i) for i in test]), y_test)
            _record(rows["model_prot"], t2, f2)
            msg += f" model on orig {100 * t:.1f}, on prot {100 * t2:.1f}"
            if f2 is not None:
                msg += f" FPR {100 * f2:.1f}"
        elapsed = time.monotonic() - started
        progress(f"{msg} ({duration(elapsed)}"
                 + (f", {eta(rep + 1, repeats, elapsed)})" if rep + 1 < repeats else ")"))
    return rows


def _record(row: Score, tpr: float, fpr: float | None) -> None:
    row.tpr.append(tpr)
    if fpr is not None:
        row.fpr.append(fpr)


def summary(rows: dict[str, Score]) -> dict[str, Any]:
    return {k: {"tpr": v.tpr, "fpr": v.fpr} for k, v in rows.items()}
