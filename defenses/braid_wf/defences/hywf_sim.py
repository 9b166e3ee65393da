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

p-drift (thesis §6.7, the dynamic p of HyWF-AP): with ``n_chp`` > 0 each
end draws a mean p_d ~ U[0, 1] per access instead, and p itself is drawn
uniformly on [0, 2 p_d] (p_d <= 1/2) or [2 p_d - 1, 1] (p_d > 1/2), redrawn
after a geometric number of packets of mean ``n_chp`` (thesis: 100). The
share of each network over a load is still about p_d ~ U[0, 1]; within
the load it wanders.

On the wire the bursts do not follow each other: both subflows drain at
once. Data a sender holds together (a flight: one direction's packets
closer than FLIGHT_GAP_S) is dealt out in send order, burst by burst, but
each network sends its share of the flight at its own pace, the ACK clock
releasing PER_TURN segments on one subflow, then on the other, until one
has sent all it was given and the other sends the rest alone
(``1100110011...0000`` in time order; braid's kernel under ``hywf``).
So one network's observer sees a flight thinned to its share over most
of the flight's length, not whole bursts with gaps between them.
:func:`hywf_mask` is the scheduler's decision (bursts in send order, what
the kernel's burst statistics measure); :func:`hywf_wire_mask` is what
each network then carries in time order, and what the observers see.
A network carries the packet of each time slot it holds: inside a flight
nearly every packet is full-sized, so which of the flight's packets fills
which slot hardly shows.

Usage::

    wan1, wan2 = hywf_split(trace, rng)
    wan1, wan2 = hywf_split(trace, rng, n_chp=100)       # with p-drift
    on1 = hywf_wire_mask(trace, rng)                     # True: network 1
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from braid_wf.trace import Trace

NCONS = 20
N_CHP = 100  # the thesis's mean packets between p redraws (0 = no drift)
# One direction's packets closer than this were queued together, and
# the subflows' turns in a flight: fitted to the run lengths of one network's
# packets in braid's kernel (two 20 Mbit/s, 10 ms WANs; downstream runs of
# 9.6 packets over braid-proxy, 23.6 over Tor mode's bridge; this model
# 9.0 and 23.1, the sequential split 48 and 51), two segments per ACK.
FLIGHT_GAP_S = 0.004
PER_TURN = 2
# How the observers' split is made, for the record of a result made with it.
SPLIT_MODEL = (f"bursts in send order, both networks draining each flight at once "
               f"(flights: packets < {1000 * FLIGHT_GAP_S:g} ms apart; turns of {PER_TURN})")


def _geometric_runs(n: int, mean: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """Lengths of consecutive runs of Geometric(1/mean) packets (support
    1, 2, ...) that cover n packets: the last may reach past n. Drawn in
    bulk, not one run at a time: the per-run Python loop made the VM tests
    that simulate bursts spend most of their time here (under braid's
    emulated VM every Python step costs tens of times its host time)."""
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    if mean <= 1:
        return np.ones(n, dtype=np.int64)
    chunks, covered = [], 0
    while covered < n:
        # the runs still needed on average, plus a margin: one draw nearly always covers n
        chunk = rng.geometric(1.0 / mean, size=(n - covered) // mean + 4 * int(np.sqrt(n / mean)) + 16)
        chunks.append(chunk)
        covered += int(chunk.sum())
    runs = np.concatenate(chunks)
    return runs[: int(np.searchsorted(np.cumsum(runs), n)) + 1]


def drifting_p(n: int, p_mean: float, n_chp: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """p per packet for n packets: uniform around ``p_mean`` on the widest
    interval inside [0, 1] centred on it, redrawn after Geometric(1/n_chp)
    packets (support 1, 2, ...; mean n_chp)."""
    lo, hi = (0.0, 2 * p_mean) if p_mean <= 0.5 else (2 * p_mean - 1, 1.0)
    runs = _geometric_runs(n, n_chp, rng)
    return np.repeat(rng.uniform(lo, hi, size=len(runs)), runs)[:n]


def bursty_choice(n: int, p: float | npt.NDArray[np.float64], ncons: int,
                   rng: np.random.Generator) -> npt.NDArray[np.bool_]:
    """For n packets: True where the packet goes on network 1. Bursts of
    1 + Geometric0(1/ncons) packets (mean ncons), each on network 1 w.p. p
    (with p per packet: the p at the burst's first packet)."""
    bursts = _geometric_runs(n, ncons, rng)
    if isinstance(p, np.ndarray):
        starts = np.cumsum(bursts) - bursts
        p = p[starts]
    return np.repeat(rng.random(len(bursts)) < p, bursts)[:n]


def _turns(n: int, per_turn: int) -> npt.NDArray[np.int64]:
    full, rest = divmod(n, per_turn)
    return np.array([per_turn] * full + ([rest] if rest else []), dtype=np.int64)


def _flight_order(first: int, second: int, per_turn: int) -> npt.NDArray[np.bool_]:
    """Time order of a flight whose first packet's network sends ``first``
    packets and the other ``second``: True where the first network sends.
    Turns of ``per_turn`` alternate while both have packets left."""
    ta, tb = _turns(first, per_turn), _turns(second, per_turn)
    m = min(len(ta), len(tb))
    sizes = np.concatenate([np.column_stack([ta[:m], tb[:m]]).ravel(), ta[m:], tb[m:]])
    flags = np.concatenate([np.tile([True, False], m), np.ones(len(ta) - m, bool), np.zeros(len(tb) - m, bool)])
    return np.repeat(flags, sizes)


def drain_concurrently(times: npt.NDArray[np.float64], send_order: npt.NDArray[np.bool_],
                       flight_gap: float = FLIGHT_GAP_S, per_turn: int = PER_TURN) -> npt.NDArray[np.bool_]:
    """One direction's packets (``times`` sorted), dealt to network 1
    where ``send_order`` is True: which time slots network 1 holds once
    both networks drain each flight at once."""
    if flight_gap < 0 or per_turn < 1:
        raise ValueError(f"flight_gap must be >= 0 (got {flight_gap}), per_turn >= 1 (got {per_turn})")
    out = np.empty(len(times), dtype=bool)
    if not len(times):
        return out
    cuts = np.flatnonzero(np.diff(times) > flight_gap) + 1
    for start, end in zip(np.r_[0, cuts], np.r_[cuts, len(times)], strict=True):
        dealt = send_order[start:end]
        n1 = int(dealt.sum())
        first_on1 = bool(dealt[0])
        first, second = (n1, end - start - n1) if first_on1 else (end - start - n1, n1)
        order = _flight_order(first, second, per_turn)
        out[start:end] = order if first_on1 else ~order
    return out


def _part(trace: Trace, mask: np.ndarray) -> Trace:
    return Trace(trace.times[mask], trace.sizes[mask])


def hywf_mask(trace: Trace, rng: np.random.Generator, ncons: int = NCONS,
              p_client: float | None = None, p_proxy: float | None = None,
              n_chp: int = 0) -> npt.NDArray[np.bool_]:
    """True for the packets HyWF sends on network 1: the client splits the
    outgoing packets, the proxy the incoming ones, each with its own p
    (with ``n_chp``: its own mean p_d, p drifting around it)."""
    if ncons < 1 or n_chp < 0:
        raise ValueError(f"hywf: ncons must be >= 1 (got {ncons}), n_chp >= 0 (got {n_chp})")
    pc = rng.random() if p_client is None else p_client
    pp = rng.random() if p_proxy is None else p_proxy
    on1 = np.empty(len(trace), dtype=bool)
    out = trace.sizes > 0
    for sel, p in ((out, pc), (~out, pp)):
        n = int(sel.sum())
        ps: float | npt.NDArray[np.float64] = drifting_p(n, p, n_chp, rng) if n_chp else p
        on1[sel] = bursty_choice(n, ps, ncons, rng)
    return on1


def hywf_wire_mask(trace: Trace, rng: np.random.Generator, ncons: int = NCONS,
                   p_client: float | None = None, p_proxy: float | None = None, n_chp: int = 0,
                   flight_gap: float = FLIGHT_GAP_S, per_turn: int = PER_TURN) -> npt.NDArray[np.bool_]:
    """True for the time slots network 1 holds: :func:`hywf_mask`'s
    bursts, each direction's flights drained by both networks at once."""
    dealt = hywf_mask(trace, rng, ncons, p_client, p_proxy, n_chp)
    on1 = np.empty(len(trace), dtype=bool)
    for sel in (trace.sizes > 0, trace.sizes <= 0):
        on1[sel] = drain_concurrently(trace.times[sel], dealt[sel], flight_gap, per_turn)
    return on1


def hywf_split(trace: Trace, rng: np.random.Generator, ncons: int = NCONS,
               p_client: float | None = None, p_proxy: float | None = None,
               n_chp: int = 0) -> tuple[Trace, Trace]:
    """The two networks' partial traces under HyWF (independent p per end),
    as each network's observer sees them."""
    on1 = hywf_wire_mask(trace, rng, ncons, p_client, p_proxy, n_chp)
    return _part(trace, on1), _part(trace, ~on1)


def even_mask(trace: Trace, rng: np.random.Generator) -> npt.NDArray[np.bool_]:
    """Round-robin-style even split: packets alternate, per direction,
    starting on a random network."""
    on1 = np.empty(len(trace), dtype=bool)
    for d in (trace.sizes > 0, trace.sizes < 0):
        k = int(d.sum())
        on1[d] = (np.arange(k) + int(rng.integers(2))) % 2 == 0
    return on1


def even_split(trace: Trace, rng: np.random.Generator) -> tuple[Trace, Trace]:
    on1 = even_mask(trace, rng)
    return _part(trace, on1), _part(trace, ~on1)


def single(trace: Trace, rng: np.random.Generator) -> tuple[Trace, Trace]:
    """No split: everything on network 1."""
    return trace, Trace(trace.times[:0], trace.sizes[:0])


SPLITS = {"hywf": hywf_split, "even": even_split, "single": single}
