"""Which sites an attack confuses, and whether the confused sites look
alike in what the corpus's site generator varies (``wf confusion``).

One stratified split of the monitored loads (closed world, 2/3 for
training, the split ``wf defenses`` makes with the same seed), one attack
trained and scored, then:

- each site's accuracy (share of its test loads given their own site),
  reported as quantiles: whether the errors are spread over every site or
  sit in a few;
- the site pairs confused most: test loads of either site given the other;
- for a corpus of ``websites.py``'s synthetic sites (captured or
  simulated: their objects are the generator's, fixed by its seed), each
  site's object count and bytes, and how alike confused sites are: the
  share of errors between two sites whose object counts differ by at most
  ``ALIKE_OBJECTS`` and whose total bytes by at most a factor
  ``ALIKE_BYTES``, beside the share of all site pairs that are that alike.
  Errors far more often between alike sites than pairs are alike say
  that the attack tells these sites apart by their size and object count,
  and that the corpus holds sites that differ in little else.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from braid_testbed.websites import site_waves
from braid_wf.attacks import ATTACK_NAMES, make_attack
from braid_wf.evaluate import split_indices
from braid_wf.trace import Dataset

ALIKE_OBJECTS = 2
ALIKE_BYTES = 1.25
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclasses.dataclass(frozen=True)
class SiteShape:
    """What the generator made a site of: its base objects and their bytes."""

    objects: int
    kbytes: float


def site_shape(site: int, seed: int, profile: str = "small") -> SiteShape:
    waves = site_waves(site, seed, profile)
    return SiteShape(sum(len(w) for w in waves), sum(size for w in waves for size, _ in w) / 1000)


def alike(a: SiteShape, b: SiteShape) -> bool:
    return (abs(a.objects - b.objects) <= ALIKE_OBJECTS
            and abs(math.log(a.kbytes / b.kbytes)) <= math.log(ALIKE_BYTES))


@dataclasses.dataclass
class Confusion:
    """One attack's test predictions on one split, summarised."""

    attack: str
    train: int
    test: int
    per_site: dict[int, float]
    pairs: list[tuple[int, int, int]]  # (site, site, confused test loads), most first
    shapes: dict[int, SiteShape] = dataclasses.field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(n for _, _, n in self.pairs)

    @property
    def accuracy(self) -> float:
        return 1 - self.errors / self.test

    def alike_shares(self) -> tuple[float, float] | None:
        """(share of errors between alike sites, share of site pairs
        alike), or None without the sites' shapes."""
        if not self.shapes or not self.errors:
            return None
        between = sum(n for a, b, n in self.pairs if alike(self.shapes[a], self.shapes[b]))
        sites = sorted(self.per_site)
        pairs = list(itertools.combinations(sites, 2))
        return between / self.errors, sum(alike(self.shapes[a], self.shapes[b]) for a, b in pairs) / len(pairs)

    def to_json(self) -> dict[str, Any]:
        return {"attack": self.attack, "train": self.train, "test": self.test, "accuracy": self.accuracy,
                "per_site": {str(s): a for s, a in self.per_site.items()},
                "pairs": [list(p) for p in self.pairs],
                "shapes": {str(s): dataclasses.asdict(v) for s, v in self.shapes.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Confusion:
        return cls(d["attack"], d["train"], d["test"],
                   {int(s): a for s, a in d["per_site"].items()}, [(a, b, n) for a, b, n in d["pairs"]],
                   {int(s): SiteShape(**v) for s, v in d["shapes"].items()})


def tally(truth: Sequence[int], predicted: Sequence[int]) -> tuple[dict[int, float], list[tuple[int, int, int]]]:
    """Per-site accuracy and the confused pairs (either way round), most first."""
    right: Counter[int] = Counter()
    total: Counter[int] = Counter()
    confused: Counter[tuple[int, int]] = Counter()
    for t, p in zip(truth, predicted, strict=True):
        total[t] += 1
        if t == p:
            right[t] += 1
        else:
            confused[(min(t, p), max(t, p))] += 1
    per_site = {s: right[s] / total[s] for s in sorted(total)}
    pairs = sorted(((a, b, n) for (a, b), n in confused.items()), key=lambda p: (-p[2], p[0], p[1]))
    return per_site, pairs


def confusion(ds: Dataset, attack: str, *, quick: bool, seed: int = 1, generator_seed: int | None = None,
              profile: str = "small", progress: Callable[[str], None] = lambda s: None,
              **attack_args: Any) -> Confusion:
    """Train ``attack`` on 2/3 of ``ds``'s monitored loads and tally its
    predictions on the rest; with ``generator_seed`` (the corpus's sites
    are ``websites.py``'s of ``profile`` with that seed), each site's
    shape too."""
    mon = ds.subset(i for i, label in enumerate(ds.labels) if label >= 0)
    train, test = split_indices(mon.labels, np.random.default_rng([seed, 0]))
    model = make_attack(attack, quick, False, seed, progress, **attack_args)
    model.fit([mon.traces[i] for i in train], [mon.labels[i] for i in train])
    truth = [mon.labels[i] for i in test]
    predicted = [int(p) for p in model.predict([mon.traces[i] for i in test])]
    per_site, pairs = tally(truth, predicted)
    shapes = {s: site_shape(s, generator_seed, profile) for s in per_site} if generator_seed is not None else {}
    return Confusion(attack, len(train), len(test), per_site, pairs, shapes)


def generator_seed_of(how: dict[str, Any] | None) -> int | None:
    """The site generator's seed of a collected corpus, from its
    collection.json (``collection.description``), or None."""
    if how is None or how.get("loader") not in ("synthetic", "chromium"):
        return None
    return int(how["seed"])


def _shape_text(s: SiteShape | None) -> str:
    return f"{s.objects} / {s.kbytes:.0f}" if s else "-"


def table(c: Confusion, top: int = 15) -> list[str]:
    """The report's Markdown lines."""
    accs = sorted(c.per_site.values())
    name = ATTACK_NAMES.get(c.attack, c.attack)
    lines = [f"{name}: {100 * c.accuracy:.1f} % of {c.test} test loads ({c.train} training), "
             f"{len(accs)} sites, {c.errors} errors.", "",
             "| per-site accuracy | " + " | ".join(_quantile_name(q) for q in QUANTILES) + " |",
             "|---" * (len(QUANTILES) + 1) + "|",
             "| % | " + " | ".join(f"{100 * float(np.quantile(accs, q)):.0f}" for q in QUANTILES) + " |", ""]
    shown = c.pairs[:top]
    if shown:
        lines += ["| sites | confused test loads | share of errors, cumulative | objects / kB | objects / kB |",
                  "|---" * 5 + "|"]
        cum = 0
        for a, b, n in shown:
            cum += n
            lines.append(f"| {a}, {b} | {n} | {100 * cum / c.errors:.0f} % "
                         f"| {_shape_text(c.shapes.get(a))} | {_shape_text(c.shapes.get(b))} |")
        lines.append("")
    shares = c.alike_shares()
    if shares:
        lines += [f"Alike sites (object counts within {ALIKE_OBJECTS}, total bytes within a factor "
                  f"{ALIKE_BYTES:g}, as the generator made them): {100 * shares[0]:.0f} % of the errors are "
                  f"between such sites, and {100 * shares[1]:.1f} % of all site pairs are such pairs.", ""]
    return lines


def _quantile_name(q: float) -> str:
    return {0.0: "min", 0.5: "median", 1.0: "max"}.get(q, f"p{100 * q:.0f}")
