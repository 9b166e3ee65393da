"""Side-by-side tables of benchmark figures: each scheduler's figure, then
each one's ratio to the first scheduler (the baseline). One generator for
the terminal (bench.sched, bench.pageload) and for RESULTS.md (analysis.summary), so
that both show the same rows and the same ratios.

A row is (label, key). A label that starts with a space qualifies the row
above it ("  of WAN capacity"); rows whose key the baseline lacks (parts of
a benchmark that were not run) are left out; a ratio to a zero baseline is
shown as "-". :func:`paired_ratio` compares two conditions item by item
(the same pages under each) where a ratio of two medians would mix in how
the items differ.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Iterator, Sequence

Results = dict[str, dict[str, float]]
Row = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class PairedRatio:
    """The median over items of one condition's figure divided by the
    baseline's on the same item, with a distribution-free confidence
    interval for that median (at least ``level`` coverage; with too few
    items for it, the smallest and largest ratio)."""

    median: float
    low: float
    high: float
    items: int
    level: float = 0.95


def paired_ratio(values: Sequence[float], base: Sequence[float], level: float = 0.95) -> PairedRatio:
    """Per-item ratios ``values[i] / base[i]``: the same pages under two
    conditions, so that how long a page takes anyway cancels out (the
    medians of two runs of differently sized pages do not tell 10 % apart
    with tens of pages). The interval is the order statistics whose
    binomial tail probabilities leave at most (1 - level) / 2 outside
    each side; ValueError for unpaired or empty input or a zero base."""
    if len(values) != len(base) or not values:
        raise ValueError(f"paired_ratio: need the same nonzero count of items (got {len(values)}, {len(base)})")
    if any(b <= 0 for b in base):
        raise ValueError("paired_ratio: a baseline figure <= 0 has no ratio")
    ratios = sorted(v / b for v, b in zip(values, base, strict=True))
    n = len(ratios)
    # Leaving out m ratios on each side misses the median with probability
    # 2 P(Bin(n, 1/2) <= m): leave out the most that keeps it within the level.
    cdf = itertools.accumulate(math.comb(n, i) / 2**n for i in range(n // 2))
    out = max((m for m, p in enumerate(cdf) if p <= (1 - level) / 2), default=0)
    return PairedRatio(statistics.median(ratios), ratios[out], ratios[n - 1 - out], n, level)


def ratio(value: float, base: float) -> str:
    """value / base to two decimals, "-" when base is 0."""
    return f"{value / base:.2f}" if base else "-"


def _present(results: Results, schedulers: list[str], rows: list[Row]) -> Iterator[tuple[str, str, str]]:
    """(label, label for a cell that keeps no indent, key) of each row the
    baseline measured."""
    parent = ""
    for label, key in rows:
        if label.startswith(" "):
            flat = f"{parent}, {label.strip()}"
        else:
            parent, flat = label.split(" (")[0], label
        if key in results[schedulers[0]]:
            yield label, flat, key


def text_table(results: Results, schedulers: list[str], rows: list[Row], digits: int = 2) -> list[str]:
    """For a terminal: columns at least one space wider than their names."""
    base = schedulers[0]
    label_width = max(28, *(len(label) + 2 for label, _ in rows))
    widths = [max(10, len(n) + 1) for n in schedulers]
    ratio_widths = [max(16, len(n) + len(base) + 2) for n in schedulers[1:]]
    header = f"{'metric':{label_width}}" + "".join(f"{n:>{w}}" for n, w in zip(schedulers, widths, strict=True))
    header += "".join(f"{n + '/' + base:>{w}}" for n, w in zip(schedulers[1:], ratio_widths, strict=True))
    lines = [header]
    for label, _flat, key in _present(results, schedulers, rows):
        line = f"{label:{label_width}}" + "".join(f"{results[n][key]:{w}.{digits}f}"
                                                  for n, w in zip(schedulers, widths, strict=True))
        line += "".join(f"{ratio(results[n][key], results[base][key]):>{w}}"
                        for n, w in zip(schedulers[1:], ratio_widths, strict=True))
        lines.append(line)
    return lines


def markdown_table(results: Results, schedulers: list[str], rows: list[Row], digits: int = 2) -> list[str]:
    """For RESULTS.md: a Markdown cell keeps no indent, so a qualifying row
    names the row it qualifies."""
    base = schedulers[0]
    lines = ["| metric | " + " | ".join(schedulers) + " | "
             + " | ".join(f"{n}/{base}" for n in schedulers[1:]) + " |",
             "|---" * (2 * len(schedulers)) + "|"]
    for _label, flat, key in _present(results, schedulers, rows):
        cells = [f"{results[n][key]:.{digits}f}" for n in schedulers]
        cells += [ratio(results[n][key], results[base][key]) for n in schedulers[1:]]
        lines.append(f"| {flat} | " + " | ".join(cells) + " |")
    return lines
