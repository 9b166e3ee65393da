"""braid's fingerprinting defences against the privacy goal, one row each,
from every result that bears on it.

The goal: against the strongest attack, closed-world accuracy on one
network's traces at most WF_TARGET_PCT, at most WF_OVERHEAD_PCT more bytes
and at most WF_TIME_PCT more page-load time than ``default``.

The accuracies are those of ``braid-wf defenses`` runs on the captured
corpus of web-shaped sites (the corpus closest to real pages), the highest
of each attack over every run of it against the defence; a row is the
defence with the mean burst it ran with (``hywf`` in a run with ``--ncons
100`` is ``hywf:ncons=100``). The overheads are the bandwidth the simulator
adds on that corpus and, where the page-load benchmark ran the defence's
condition in braid's kernel, its bytes and page-load time on the wire
(the time as the median of per-page ratios with its confidence interval;
a further run of the benchmark adds its own ratio beside the first).

A defence meets the goal only when every published attack (k-FP, DF,
Tik-Tok, RF) ran against it for its paper's epochs, none is above the
accuracy bound, both bandwidth figures are within theirs, and the
page-load time's whole interval is within its bound in every run; it
misses it when a figure is beyond its bound (for the page-load time, the
whole interval in every run: one run's interval covers its own pages,
not how far the next run moves); otherwise it is not established, and
the row says what is missing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from braid_eval.bench.comparison import PairedRatio, paired_ratio
from braid_wf.attacks import ATTACK_NAMES
from braid_wf.deep.train import RECIPES
from braid_wf.defences.catalog import NAMES, SETTINGS, parse_spec
from braid_wf.defences.hywf_sim import NCONS
from braid_wf.wirecheck import SIMULATOR

WF_TARGET_PCT = 30.0  # closed-world accuracy on one network's traces, strongest attack
WF_OVERHEAD_PCT = 40.0  # at most this bandwidth overhead
WF_TIME_PCT = 10.0  # at most this page-load time overhead
GOAL_ATTACKS = ("kfp", "df", "tiktok", "rf")  # the attacks the goal is judged against


def defence_label(defence: str, meta: dict[str, Any]) -> str:
    """The defence with the mean burst it ran with where that is not
    hywf's default: ``hywf`` in a run with ``--ncons 100`` and the row
    ``hywf:ncons=100`` are both ``hywf:ncons=100``."""
    base, own = parse_spec(defence)
    ncons = own.get("ncons", (meta.get("params") or {}).get("ncons", NCONS))
    own.pop("ncons", None)
    if base in SETTINGS["ncons"][1] and ncons != NCONS:
        own["ncons"] = ncons
    return base + "".join(f":{k}={v}" for k, v in sorted(own.items()))


@dataclass
class Evidence:
    """What the results say about one defence."""

    accuracy: dict[str, tuple[float, int | None]] = field(default_factory=dict)  # attack -> (highest, epochs)
    most_epochs: dict[str, int] = field(default_factory=dict)  # deep attack -> the longest training run
    overhead: float | None = None  # simulated bandwidth overhead on the corpus, the largest seen
    wire_bytes: float | None = None  # bytes on the wire per page over default's
    page_time: PairedRatio | None = None
    page_time_again: list[PairedRatio] = field(default_factory=list)  # further runs of the benchmark
    page_time_median: float | None = None  # median over default's, where pages were not kept


def web_runs(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of the full-size attacks on the captured corpus of
    web-shaped sites (a quick run's attacks are not the published ones)."""
    return [r for r in runs if (r["meta"].get("collection") or {}).get("profile") == "web"
            and r["meta"].get("full", True)]


def _catalog_name(condition: str) -> str | None:
    """The defence a page-load benchmark condition runs, None for a bare
    scheduler (the benchmark also compares schedulers)."""
    name = SIMULATOR.get(condition, condition)
    try:
        return defence_label(name, {})
    except ValueError:
        return None


def _defence_conditions(bench: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(baseline, condition, defence label) for each defence a page-load
    benchmark run measured against ``default``, the goal's baseline; none
    for a run against another baseline."""
    base, *conditions = bench["params"]["conditions"]
    if base != "default":
        return []
    return [(base, cond, label) for cond in conditions if (label := _catalog_name(cond)) is not None]


def evidence(runs: Iterable[dict[str, Any]], bench: dict[str, Any] | None,
             again: Iterable[dict[str, Any]] = ()) -> dict[str, Evidence]:
    """Per defence label, from ``braid-wf defenses`` results, the
    page-load benchmark's run of the defences and further runs of some of
    them (``again``: their page-load times only)."""
    rows: dict[str, Evidence] = {}
    for run in web_runs(runs):
        meta = run["meta"]
        for defence, row in run["results"].items():
            ev = rows.setdefault(defence_label(defence, meta), Evidence())
            if row.get("overhead") is not None:
                ev.overhead = max(ev.overhead or 0.0, row["overhead"])
            for attack, cell in row["closed"].items():
                if cell.get("tpr_mean") is None:
                    continue
                epochs = (meta.get("epochs") or RECIPES[attack].epochs) if attack in RECIPES else None
                if epochs is not None:
                    ev.most_epochs[attack] = max(epochs, ev.most_epochs.get(attack, 0))
                if cell["tpr_mean"] > ev.accuracy.get(attack, (-1.0, None))[0]:
                    ev.accuracy[attack] = (cell["tpr_mean"], epochs)
    if bench:
        results, times = bench["results"], bench.get("page_times_s")
        for base, cond, label in _defence_conditions(bench):
            ev = rows.setdefault(label, Evidence())
            ev.wire_bytes = results[cond]["wire_kb_per_page"] / results[base]["wire_kb_per_page"]
            if times:
                ev.page_time = paired_ratio(times[cond], times[base])
            else:
                ev.page_time_median = results[cond]["median_s"] / results[base]["median_s"]
    for run in again:
        if not (times := run.get("page_times_s")):
            continue
        for base, cond, label in _defence_conditions(run):
            if label in rows:
                rows[label].page_time_again.append(paired_ratio(times[cond], times[base]))
    return rows


def page_time_goal(r: PairedRatio) -> bool | None:
    """The page-load time bound against the whole interval of the
    per-page ratios: True inside it, False wholly beyond it, None when the
    pages do not resolve it."""
    if 100 * (r.low - 1) > WF_TIME_PCT:
        return False
    return True if 100 * (r.high - 1) <= WF_TIME_PCT else None


def verdict(ev: Evidence) -> str:
    """met, **not met**, or not established with what is missing."""
    measured = [(max((acc for acc, _ in ev.accuracy.values()), default=None), WF_TARGET_PCT),
                (ev.overhead, WF_OVERHEAD_PCT),
                (None if ev.wire_bytes is None else ev.wire_bytes - 1, WF_OVERHEAD_PCT),
                (None if ev.page_time_median is None else ev.page_time_median - 1, WF_TIME_PCT)]
    outcomes = {page_time_goal(r) for r in [ev.page_time, *ev.page_time_again] if r is not None}
    time_inside = next(iter(outcomes)) if len(outcomes) == 1 else None
    if time_inside is False or any(value is not None and 100 * value > bound for value, bound in measured):
        return "**not met**"
    missing = [ATTACK_NAMES[a] for a in GOAL_ATTACKS if a not in ev.accuracy]
    short = [f"{ATTACK_NAMES[a]} {n} of {RECIPES[a].epochs} epochs" for a, n in ev.most_epochs.items()
             if n < RECIPES[a].epochs]
    gaps = ([f"{', '.join(missing)} not run"] if missing else []) + (
        [f"trained for {', '.join(short)}"] if short else [])
    if ev.page_time is None and ev.page_time_median is None:
        gaps.append("page-load time not measured")
    elif ev.page_time is None:
        gaps.append("page-load time without a confidence interval")
    elif len(outcomes) > 1:
        gaps.append(f"page-load time runs disagree ({1 + len(ev.page_time_again)} runs)")
    elif time_inside is None:
        gaps.append(f"page-load time not resolved by {ev.page_time.items} pages")
    if ev.wire_bytes is None:
        gaps.append("bytes on the wire not measured")
    return "met" if not gaps else f"not established: {'; '.join(gaps)}"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * (ratio - 1):+.1f}"


def _order(label: str) -> tuple[bool, int, tuple[float, ...]]:
    """`none` first, then the catalog's order, settings by value."""
    base, own = parse_spec(label)
    return label != "none", NAMES.index(base), tuple(v for _, v in sorted(own.items()))


def _ratio_text(r: PairedRatio) -> str:
    return f"{_pct(r.median)} ({_pct(r.low)} to {_pct(r.high)}, {r.items} pages)"


def goal_section(runs: Iterable[dict[str, Any]], bench: dict[str, Any] | None,
                 again: Iterable[dict[str, Any]] = ()) -> list[str]:
    """The section, or nothing when no run on the web-shaped corpus is there."""
    runs = list(runs)
    if not web_runs(runs):
        return []
    rows = evidence(runs, bench, again)
    sites = sorted({int(n) for r in web_runs(runs) if (n := r["meta"].get("sites"))})
    corpus = (f"{sites[0]} sites, chance {100 / sites[0]:.2g} %" if len(sites) == 1 else
              f"runs of {', '.join(map(str, sites))} sites" if sites else "sites as each run records")
    lines = ["## Website fingerprinting: braid's defences against the privacy goal", "",
             f"(goal: against the strongest attack, closed-world accuracy of one network's observer <= "
             f"{WF_TARGET_PCT:g} %, at <= +{WF_OVERHEAD_PCT:g} % bandwidth and <= +{WF_TIME_PCT:g} % page-load "
             f"time over `default`. Accuracy: the captured corpus of web-shaped sites, {corpus}, "
             "defences simulated, the highest of each attack over every run of it in the sections below. "
             "Bandwidth: simulated on that corpus / on the wire in the page-load benchmark; page-load time: "
             "the benchmark's median of per-page ratios, 95 % CI, then a further run's where one was made)", "",
             "| defence | strongest attack, % | every attack run, % | bandwidth overhead %, simulated / wire "
             "| page-load time overhead % | goal |",
             "|---|---|---|---|---|---|"]
    for label, ev in sorted(rows.items(), key=lambda kv: _order(kv[0])):
        ranked = sorted(ev.accuracy.items(), key=lambda kv: -kv[1][0])
        strongest = f"{ATTACK_NAMES[ranked[0][0]]} {100 * ranked[0][1][0]:.1f}" if ranked else "-"
        every = ", ".join(f"{ATTACK_NAMES[a]} {100 * acc:.1f}" + (f" ({epochs} ep.)" if epochs is not None else "")
                          for a, (acc, epochs) in ranked) or "-"
        sim = "-" if ev.overhead is None else f"{100 * ev.overhead:+.1f}"
        if ev.page_time:
            time_text = "; again ".join(_ratio_text(r) for r in [ev.page_time, *ev.page_time_again])
        else:
            time_text = _pct(ev.page_time_median) + (" (median)" if ev.page_time_median is not None else "")
        goal = "undefended" if label == "none" else verdict(ev)
        lines.append(f"| {label} | {strongest} | {every} | {sim} / {_pct(ev.wire_bytes)} | {time_text} | {goal} |")
    return [*lines, ""]
