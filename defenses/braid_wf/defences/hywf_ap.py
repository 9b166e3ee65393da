"""HyWF-AP: adaptive padding, then the HyWF split (thesis §6.7).

Henri, EPFL thesis 9056 (2018), §6.7, Tables 6.4-6.6: padding the original
trace first and splitting the padded one ("AP before") beat splitting
first and padding each network's part ("AP after"), and reached an
open-world k-FP TPR of 1.9-10 % at 28-65 % overhead, far below either
defence alone. Dummies are split like real packets: each observer sees
its share of both.

Optionally with the thesis's dynamic p (``n_chp`` > 0; thesis 100): each
end's p drifts around a per-load mean p_d ~ U[0, 1], redrawn after a
geometric number of packets of mean n_chp (hywf_sim.drifting_p).

Usage::

    d = hywf_ap(trace, rng, fit_histograms(corpus), budget=0.4, n_chp=100)
    seen_by_network1 = d.parts[0]
"""

from __future__ import annotations

import numpy as np

from braid_wf.defences.adaptive_padding import IDLE_S, ApHistograms, adaptive_padding
from braid_wf.defences.defended import Defended, split_by
from braid_wf.defences.hywf_sim import NCONS, hywf_wire_mask
from braid_wf.trace import Trace


def hywf_ap(trace: Trace, rng: np.random.Generator, histograms: ApHistograms, budget: float | None = None,
            idle: float = IDLE_S, n_chp: int = 0, ncons: int = NCONS) -> Defended:
    padded = adaptive_padding(trace, rng, histograms, budget, idle)
    return split_by(padded, hywf_wire_mask(padded.parts[0], rng, ncons=ncons, n_chp=n_chp))
