"""Every trace-level defence by name, with its parameters, as one callable
``(trace, rng) -> Defended``: what the privacy evaluation
(braid_wf.compare, ``wf defenses``) applies to a corpus.

=========  ==============================================================
none       the load as it is (one network)
even       round-robin-style even split (hywf_sim.even_mask)
hywf       HyWF (thesis Algorithm 2; hywf_sim.hywf_wire_mask), as the kernel does it
hywf-drift HyWF with the thesis's p-drift (n_chp, default 100)
ap         adaptive padding, WTF-PAD-style (adaptive_padding.py)
hywf-ap    adaptive padding, then HyWF (hywf_ap.py; thesis §6.7)
front      FRONT (Gong & Wang 2020; front.py)
=========  ==============================================================

A name may carry settings of its own after colons, so that one run
compares a defence at several settings: ``hywf:ncons=100`` is ``hywf``
with bursts of 100 packets on average, whatever the run's ``DefenseParams``
say (:data:`SETTINGS` lists which setting applies to which defence).

Usage::

    params = DefenseParams(budget=0.4, n_chp=100, histograms=fit_histograms(corpus.traces))
    defend = make_defense("hywf-ap", params)
    d = defend(trace, np.random.default_rng(7))
    defend = make_defense("hywf:ncons=100", params)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from braid_wf.defences.adaptive_padding import IDLE_S, ApHistograms, adaptive_padding
from braid_wf.defences.defended import Defended, split_by, undefended
from braid_wf.defences.front import W_MAX_S, W_MIN_S, front
from braid_wf.defences.hywf_ap import hywf_ap
from braid_wf.defences.hywf_sim import N_CHP, NCONS, even_mask, hywf_wire_mask
from braid_wf.trace import Trace

Defense = Callable[[Trace, np.random.Generator], Defended]
NAMES = ("none", "even", "hywf", "hywf-drift", "ap", "hywf-ap", "front")
SPLITS = ("even", "hywf", "hywf-drift", "hywf-ap")  # two networks' traces
PADDING = ("ap", "hywf-ap", "front")
ADAPTIVE = ("ap", "hywf-ap")  # pad with adaptive padding's delay histograms


@dataclasses.dataclass
class DefenseParams:
    """``budget``: AP's dummy bytes per real byte (None: unlimited);
    ``idle``: no padding this long after the last real packet (s);
    ``n_chp``: hywf-ap's p-drift (0: off; ``hywf-drift`` uses it, or
    100 when it is 0; plain ``hywf`` never drifts); ``ncons``: the hywf
    splits' mean burst in packets (the kernel's ``hywf_ncons``); ``front_n``, ``front_w``: FRONT's
    N and (W_min, W_max); ``histograms``: AP's, fitted on a corpus."""

    budget: float | None = None
    idle: float = IDLE_S
    n_chp: int = 0
    ncons: int = NCONS
    front_n: int = 300
    front_w: tuple[float, float] = (W_MIN_S, W_MAX_S)
    histograms: ApHistograms | None = None


# Which DefenseParams field a name may set for itself (NAME:FIELD=VALUE),
# its type, and the defences it changes.
SETTINGS: dict[str, tuple[type, tuple[str, ...]]] = {
    "ncons": (int, ("hywf", "hywf-drift", "hywf-ap")),
    "n_chp": (int, ("hywf-drift", "hywf-ap")),
    "budget": (float, ADAPTIVE),
    "idle": (float, (*ADAPTIVE, "front")),
    "front_n": (int, ("front",)),
}


def check_params(p: DefenseParams, names: Mapping[str, str] | None = None) -> None:
    """ValueError unless every setting is in its range, naming each field
    as ``names`` say (e.g. a command's flags) or by its own name."""
    bad = [f"{(names or {}).get(field, field)} {rule} (got {value})" for field, value, ok, rule in (
        ("budget", p.budget, p.budget is None or p.budget >= 0, ">= 0"), ("idle", p.idle, p.idle > 0, "> 0"),
        ("n_chp", p.n_chp, p.n_chp >= 0, ">= 0"), ("ncons", p.ncons, p.ncons >= 1, ">= 1"),
        ("front_n", p.front_n, p.front_n >= 1, ">= 1")) if not ok]
    if bad:
        raise ValueError(f"need {', '.join(bad)}")


def base_name(spec: str) -> str:
    """The catalog name of a defence named with its settings:
    ``hywf:ncons=100`` -> ``hywf``."""
    return spec.split(":", 1)[0]


def parse_spec(spec: str) -> tuple[str, dict[str, int | float]]:
    """(catalog name, settings) of NAME[:FIELD=VALUE]...; ValueError,
    saying why, for an unknown name, a setting that does not apply to it,
    or a value out of range."""
    name, *parts = spec.split(":")
    if name not in NAMES:
        raise ValueError(f"unknown defence {name!r}; choose from {', '.join(NAMES)}")
    settings: dict[str, int | float] = {}
    for part in parts:
        field, eq, value = part.partition("=")
        kind, applies = SETTINGS.get(field, (int, ()))
        if not eq or name not in applies:
            usable = [f for f, (_, to) in SETTINGS.items() if name in to]
            raise ValueError(f"defence {spec!r}: " + (f"{name} takes no settings" if not usable else
                             f"{part!r} is not FIELD=VALUE with FIELD one of {', '.join(usable)}"))
        try:
            settings[field] = kind(value)
        except ValueError:
            raise ValueError(f"defence {spec!r}: {field} needs a{'n integer' if kind is int else ' number'}, "
                             f"got {value!r}") from None
    try:
        check_params(dataclasses.replace(DefenseParams(), **settings))  # type: ignore[arg-type]
    except ValueError as err:
        raise ValueError(f"defence {spec!r}: {err}") from None
    return name, settings


def make_defense(spec: str, params: DefenseParams | None = None) -> Defense:
    """The defence named ``spec`` (a catalog name, with settings of its
    own if any), with ``params`` for whatever it does not set."""
    name, settings = parse_spec(spec)
    p = dataclasses.replace(params or DefenseParams(), **settings)  # type: ignore[arg-type]
    if name in ADAPTIVE and p.histograms is None:
        raise ValueError(f"defence {name!r} needs AP histograms (adaptive_padding.fit_histograms)")
    hist = p.histograms
    if name == "none":
        return lambda tr, rng: undefended(tr)
    if name == "even":
        return lambda tr, rng: split_by(undefended(tr), even_mask(tr, rng))
    if name == "hywf":
        return lambda tr, rng: split_by(undefended(tr), hywf_wire_mask(tr, rng, p.ncons))
    if name == "hywf-drift":
        n_chp = p.n_chp or N_CHP
        return lambda tr, rng: split_by(undefended(tr), hywf_wire_mask(tr, rng, p.ncons, n_chp=n_chp))
    if name == "ap":
        assert hist is not None
        return lambda tr, rng: adaptive_padding(tr, rng, hist, p.budget, p.idle)
    if name == "hywf-ap":
        assert hist is not None
        return lambda tr, rng: hywf_ap(tr, rng, hist, p.budget, p.idle, p.n_chp, p.ncons)
    if name == "front":
        return lambda tr, rng: front(tr, rng, p.front_n, p.front_w[0], p.front_w[1], p.idle)
    raise ValueError(f"unknown defence {name!r}; choose from {', '.join(NAMES)}")
