"""How the synthetic loader's traces differ from a real browser's on the
same pages (``wf loadercheck``).

``wf collect`` loads the corpus with ``websites.py``'s loader (an object
per connection, drawn request sizes, a wave after the whole previous one)
or, with ``--loader chromium``, as web pages in headless Chromium
(``website_http.py``: the same objects, named by the HTML and by each
other's scripts). Matched by load name, the two collections give:

- per-load statistics of what an observer sees (packets and bytes each
  way, duration, bursts: runs of one direction), medians for each loader
  and the median of the per-load ratio browser / synthetic;
- load time (the loaders' own clocks) and connections per load (the
  browser's, as the server saw them; the synthetic loader opens one per
  object by construction);
- an attack's closed-world accuracy trained and tested within each
  loader's traces, and across them (trained on the synthetic loader's
  traces, tested on the browser's, and the reverse), over the same splits
  of the loads: whether a figure measured on synthetic loads says
  something about a browser's;
- with a defence (``hywf`` by default), the attack's accuracy on network
  1's part of each loader's traces split by the defence's simulator
  (defence-aware, as ``wf defenses``), on the same splits: whether the
  defence's figure on the synthetic corpus holds for a browser's loads.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from braid_wf.attacks import make_attack
from braid_wf.compare import observed
from braid_wf.defences import catalog
from braid_wf.evaluate import evaluate, split_indices
from braid_wf.trace import Dataset, Trace

FEATURES = ("packets out", "packets in", "kB out", "kB in", "duration, ms", "bursts")
# Accuracy rows: (trained on, tested on)
PAIRS = (("synthetic", "synthetic"), ("browser", "browser"), ("synthetic", "browser"), ("browser", "synthetic"))
# Defences the check can apply: the splits, which need nothing fitted on the corpus
DEFENSES = ("hywf", "hywf-drift", "even")


def trace_stats(tr: Trace) -> dict[str, float]:
    """What an observer sees of one load, in numbers."""
    out = tr.sizes > 0
    dirs = np.sign(tr.sizes)
    return {"packets out": float(out.sum()), "packets in": float((~out).sum()),
            "kB out": float(tr.sizes[out].sum()) / 1000, "kB in": float(-tr.sizes[~out].sum()) / 1000,
            "duration, ms": 1000 * tr.duration,
            "bursts": float(1 + np.count_nonzero(dirs[1:] != dirs[:-1])) if len(tr) else 0.0}


@dataclasses.dataclass
class LoaderCheck:
    synthetic: str
    browser: str
    attack: str
    loads: int
    sites: int
    # feature -> [median synthetic, median browser, median per-load ratio browser / synthetic]
    stats: dict[str, list[float]]
    # "trained->tested" -> accuracy per split
    accuracy: dict[str, list[float]]
    load_seconds: list[float]  # median load time: synthetic, browser
    connections: list[float]  # median connections per load: synthetic (= objects), browser
    defense: str | None = None
    # "synthetic" / "browser" -> accuracy per split on network 1 under the defence
    defended: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def matched(a: Dataset, b: Dataset) -> tuple[Dataset, Dataset]:
    """The monitored loads both datasets hold, in one order."""
    b_index = {n: i for i, n in enumerate(b.names)}
    keep = [i for i, n in enumerate(a.names) if n in b_index and a.labels[i] >= 0 and len(a.traces[i])
            and len(b.traces[b_index[n]])]
    return a.subset(keep), b.subset(b_index[a.names[i]] for i in keep)


def _medians(values: dict[str, list[float]], key: str) -> float:
    return float(statistics.median(values[key])) if values.get(key) else float("nan")


def loads_meta(path: Path) -> dict[str, dict[str, Any]]:
    """loads.jsonl by file name: the last line of each load (a retried load
    has several)."""
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("ok"):
            out[r["file"]] = r
    return out


def connections_per_load(served: Path) -> dict[str, int]:
    """Distinct client connections the web server saw per load."""
    peers: dict[str, set[str]] = {}
    for line in served.read_text().splitlines():
        r = json.loads(line)
        peers.setdefault(r["load"], set()).add(r["peer"])
    return {name: len(p) for name, p in peers.items()}


def check(root: Path, synthetic: str, browser: str, synth: Dataset, brow: Dataset, attack: str, *,
          repeats: int, quick: bool, seed: int, defense: str | None = "hywf",
          progress: Callable[[str], None] = lambda s: None) -> LoaderCheck:
    synth, brow = matched(synth, brow)
    if len(synth.traces) < 2 * synth.monitored:
        raise SystemExit(f"loadercheck: {len(synth.traces)} loads in both {synthetic} and {browser}: "
                         "too few to split (at least 2 per site)")
    per: dict[str, dict[str, list[float]]] = {"synthetic": {}, "browser": {}, "ratio": {}}
    for a, b in zip(synth.traces, brow.traces, strict=True):
        sa, sb = trace_stats(a), trace_stats(b)
        for f in FEATURES:
            per["synthetic"].setdefault(f, []).append(sa[f])
            per["browser"].setdefault(f, []).append(sb[f])
            if sa[f] > 0:
                per["ratio"].setdefault(f, []).append(sb[f] / sa[f])
    stats = {f: [_medians(per["synthetic"], f), _medians(per["browser"], f), _medians(per["ratio"], f)]
             for f in FEATURES}
    meta_s = loads_meta(root / synthetic / "loads.jsonl")
    meta_b = loads_meta(root / browser / "loads.jsonl")
    conns = connections_per_load(root / browser / "served.jsonl")
    names = synth.names
    load_seconds = [float(statistics.median(meta_s[n]["seconds"] for n in names if n in meta_s)),
                    float(statistics.median(meta_b[n]["seconds"] for n in names if n in meta_b))]
    connections = [float(statistics.median(meta_s[n]["objects"] for n in names if n in meta_s)),
                   float(statistics.median(conns[n] for n in names if n in conns))]
    sets = {"synthetic": synth, "browser": brow}
    accuracy: dict[str, list[float]] = {f"{t}->{s}": [] for t, s in PAIRS}
    for rep in range(repeats):
        train, test = split_indices(synth.labels, np.random.default_rng([seed, rep]))
        y_test = np.asarray([synth.labels[i] for i in test])
        for trained in ("synthetic", "browser"):
            model = make_attack(attack, quick, False, seed + rep)
            model.fit([sets[trained].traces[i] for i in train], [synth.labels[i] for i in train])
            for tested in ("synthetic", "browser"):
                pred = model.predict([sets[tested].traces[i] for i in test])
                accuracy[f"{trained}->{tested}"].append(float((pred == y_test).mean()))
        progress(f"{attack} split {rep + 1}/{repeats}: " + ", ".join(
            f"{k} {100 * v[-1]:.1f} %" for k, v in accuracy.items()))
    defended: dict[str, list[float]] = {}
    if defense:
        protect = observed(catalog.make_defense(defense))
        for key, ds in sets.items():
            rows = evaluate(ds, attack, repeats=repeats, quick=quick, open_world=False, protect=protect, copies=1,
                            seed=seed, baseline=False)
            defended[key] = rows["model_prot"].tpr
        progress(f"{attack} under {defense}: " + ", ".join(f"{k} {100 * statistics.fmean(v):.1f} %"
                                                          for k, v in defended.items()))
    return LoaderCheck(synthetic, browser, attack, len(names), synth.monitored, stats, accuracy,
                       load_seconds, connections, defense, defended)


def _pct(v: Sequence[float]) -> str:
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return f"{100 * statistics.fmean(v):.1f} ± {100 * sd:.1f}"


def from_json(data: dict[str, Any]) -> list[LoaderCheck]:
    return [LoaderCheck(**c) for c in data["checks"]]


def browser_version(path: Path) -> str | None:
    """The browser a collection's loads.jsonl names (its last load's)."""
    versions = [r.get("browser") for r in loads_meta(path).values()]
    return next((v for v in reversed(versions) if v), None)


def table(checks: Sequence[LoaderCheck]) -> list[str]:
    """Two Markdown tables: what an observer sees of a load under each
    loader, and each attack's accuracy within and across the loaders."""
    if not checks:
        return []
    c = checks[0]  # the loads and their statistics are the same for every attack
    lines = ["| per load (median) | synthetic loader | browser | browser / synthetic, per load |",
             "|---|---|---|---|"]
    lines += [f"| {f} | {s:.1f} | {b:.1f} | {r:.2f} |" for f, (s, b, r) in c.stats.items()]
    lines += [f"| load time, ms (loader's clock) | {1000 * c.load_seconds[0]:.0f} | "
              f"{1000 * c.load_seconds[1]:.0f} | |",
              f"| connections | {c.connections[0]:.0f} (one per object) | {c.connections[1]:.0f} | |", "",
              "| attack | " + " | ".join(f"trained on {k.split('->')[0]}, tested on {k.split('->')[1]}, %"
                                          for k in c.accuracy)
              + "".join(f" | under {c.defense}, network 1, {k} loader, %" for k in c.defended) + " |",
              "|---|" + "---|" * (len(c.accuracy) + len(c.defended))]
    lines += [f"| {x.attack} | " + " | ".join(_pct(v) for v in (*x.accuracy.values(), *x.defended.values())) + " |"
              for x in checks]
    return lines
