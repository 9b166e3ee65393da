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

Usage::

    params = DefenseParams(budget=0.4, n_chp=100, histograms=fit_histograms(corpus.traces))
    defend = make_defense("hywf-ap", params)
    d = defend(trace, np.random.default_rng(7))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

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


def make_defense(name: str, params: DefenseParams | None = None) -> Defense:
    p = params or DefenseParams()
    if name in ("ap", "hywf-ap") and p.histograms is None:
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
