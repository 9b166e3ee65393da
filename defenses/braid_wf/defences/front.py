"""FRONT: zero-delay padding concentrated at the front of the load.

Gong & Wang, "Zero-delay Lightweight Defenses against Website
Fingerprinting", USENIX Security 2020. Each end (client: outgoing, proxy:
incoming) draws, per load,

    n ~ U{1, ..., N}           number of dummies
    w ~ U[W_min, W_max]        padding window (s)
    t_1..t_n ~ Rayleigh(w)     dummy times from the load's start,

so the dummies fall mostly in the first seconds, where WF features are
densest, and differ in amount and spread from load to load. Parameters
N and (W_min, W_max) are per end; the paper evaluated Tor cell traces with
windows of seconds (W_min = 1 s, W_max = 14 s) and N in the thousands of
cells. Loads of braid's synthetic corpus last about 0.6 s, so its
evaluation scales W down (braid_wf.compare says by how much) and picks N for a
comparable overhead.

As everywhere in ``defenses/``: a dummy more than ``idle`` seconds after
the last real packet is not sent (padding stops when the load is idle, as
braid's transport will), a dummy has the size of the last real packet its
end sent (the first, before any), and real packets are not delayed.

Usage::

    d = front(trace, np.random.default_rng(1), n_max=300, w_min=0.05, w_max=0.7)
"""

from __future__ import annotations

import math

import numpy as np

from braid_wf.defences.adaptive_padding import DIRECTIONS, IDLE_S
from braid_wf.defences.defended import Defended, last_real_before, undefended, with_dummies
from braid_wf.trace import Trace

# The paper's Tor setting for the window (s); N is per corpus (see above).
W_MIN_S, W_MAX_S = 1.0, 14.0


def front(trace: Trace, rng: np.random.Generator, n_max: int, w_min: float = W_MIN_S,
          w_max: float = W_MAX_S, idle: float = IDLE_S) -> Defended:
    """The load with FRONT padding from both ends (one network)."""
    if n_max < 1:
        raise ValueError(f"front: N (n_max) must be >= 1, got {n_max}")
    if not 0 < w_min <= w_max < math.inf:
        raise ValueError(f"front: need 0 < W_min <= W_max, got {w_min}, {w_max}")
    if not 0 < idle < math.inf:
        raise ValueError(f"front: idle must be positive and finite, got {idle}")
    real_times = np.sort(trace.times)
    start = float(real_times[0]) if len(real_times) else 0.0
    times: list[float] = []
    sizes: list[int] = []
    for d in DIRECTIONS:
        n = int(rng.integers(1, n_max + 1))
        w = float(rng.uniform(w_min, w_max))
        sel = trace.directions == d
        t_real, s_real = trace.times[sel], np.abs(trace.sizes[sel])
        if not len(t_real):
            continue  # this end sends nothing real: nothing to pad after
        for t in np.sort(start + rng.rayleigh(w, n)):
            if t - last_real_before(real_times, float(t)) > idle:
                continue
            k = max(0, int(np.searchsorted(t_real, t, side="right")) - 1)
            times.append(float(t))
            sizes.append(d * int(s_real[k]))
    return with_dummies(undefended(trace), np.asarray(times, dtype=np.float64), np.asarray(sizes, dtype=np.int64))
