"""HyWF and the other splits, applied to a whole trace: what each network's
observer would see had the load been split that way (thesis §6.5).

The WF evaluation's attacker knows the defence and trains on traces
protected with fresh randomness (thesis §6.1); this is how those protected
training traces are made from original ones, and how the host-only quick
mode stands in for the kernel's ``hywf`` scheduler.

HyWF (Algorithm 2): per website access each end draws its own p ~ U[0, 1]
(the client for outgoing packets, the proxy for incoming ones); packets go
in bursts of geometric length (mean ``ncons``), each burst on network 1
with probability p.

Usage::

    wan1, wan2 = hywf_split(trace, rng)
"""

from __future__ import annotations

import numpy as np

from wftrace import Trace

NCONS = 20


def _bursty_choice(n: int, p: float, ncons: int, rng: np.random.Generator) -> np.ndarray:
    """For n packets: True where the packet goes on network 1. Bursts of
    1 + Geometric0(1/ncons) packets (mean ncons), each on network 1 w.p. p."""
    out = np.empty(n, dtype=bool)
    i = 0
    while i < n:
        burst = 1 + (int(rng.geometric(1.0 / ncons)) - 1 if ncons > 1 else 0)
        out[i : i + burst] = rng.random() < p
        i += burst
    return out


def _part(trace: Trace, mask: np.ndarray) -> Trace:
    return Trace(trace.times[mask], trace.sizes[mask])


def hywf_split(trace: Trace, rng: np.random.Generator, ncons: int = NCONS,
               p_client: float | None = None, p_proxy: float | None = None) -> tuple[Trace, Trace]:
    """The two networks' partial traces under HyWF (independent p per end)."""
    pc = rng.random() if p_client is None else p_client
    pp = rng.random() if p_proxy is None else p_proxy
    on1 = np.empty(len(trace), dtype=bool)
    out = trace.sizes > 0
    on1[out] = _bursty_choice(int(out.sum()), pc, ncons, rng)
    on1[~out] = _bursty_choice(int((~out).sum()), pp, ncons, rng)
    return _part(trace, on1), _part(trace, ~on1)


def even_split(trace: Trace, rng: np.random.Generator) -> tuple[Trace, Trace]:
    """Round-robin-style even split: packets alternate, per direction,
    starting on a random network."""
    on1 = np.empty(len(trace), dtype=bool)
    for d in (trace.sizes > 0, trace.sizes < 0):
        k = int(d.sum())
        on1[d] = (np.arange(k) + int(rng.integers(2))) % 2 == 0
    return _part(trace, on1), _part(trace, ~on1)


def single(trace: Trace, rng: np.random.Generator) -> tuple[Trace, Trace]:
    """No split: everything on network 1."""
    return trace, Trace(trace.times[:0], trace.sizes[:0])


SPLITS = {"hywf": hywf_split, "even": even_split, "single": single}
