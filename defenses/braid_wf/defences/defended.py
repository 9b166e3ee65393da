"""A defended page load: what each network's observer sees, with every
packet traced back to the original load or marked as a dummy.

Every simulator in this directory returns a :class:`Defended`. Each part
(one per network; one part for a single-path defence) carries, per packet,
``origin``: the index of the original packet it is, or -1 for a dummy
(padding). That one array gives the three things the evaluation and the
tests need:

- the observers' traces (``parts``),
- the bandwidth overhead, all networks' bytes over the original's
  (:meth:`Defended.overhead`),
- the original load back, by dropping the dummies (:meth:`Defended.real`),
  which is how the tests check that no defence loses, moves or resizes a
  real packet.

Usage::

    d = adaptive_padding(trace, rng, histograms, budget=0.3)
    seen = d.parts[0]            # network 1's observer
    print(d.overhead)            # e.g. 0.27
    back = d.real()              # dummies removed: the original load, exactly
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from braid_wf.trace import Trace

Origin = npt.NDArray[np.int64]
DUMMY = -1


@dataclasses.dataclass
class Defended:
    """``parts[i]``: network i's trace; ``origins[i][j]``: the original
    packet index of its packet j, or DUMMY."""

    original: Trace
    parts: tuple[Trace, ...]
    origins: tuple[Origin, ...]

    def __post_init__(self) -> None:
        if len(self.parts) != len(self.origins) or not self.parts:
            raise ValueError("one origin array per part, at least one part")
        for p, o in zip(self.parts, self.origins, strict=True):
            if len(p) != len(o):
                raise ValueError("one origin per packet")

    @property
    def observed(self) -> Trace:
        """What network 1's observer sees (the trace the attacks score)."""
        return self.parts[0]

    @property
    def total_bytes(self) -> int:
        return sum(p.total_bytes for p in self.parts)

    @property
    def dummy_bytes(self) -> int:
        return sum(int(np.abs(p.sizes[o == DUMMY]).sum()) for p, o in zip(self.parts, self.origins, strict=True))

    @property
    def overhead(self) -> float:
        """Extra bytes on all networks over the original load's bytes."""
        base = self.original.total_bytes
        return self.total_bytes / base - 1.0 if base else 0.0

    def dummy_times(self) -> npt.NDArray[np.float64]:
        return np.sort(np.concatenate([p.times[o == DUMMY] for p, o in zip(self.parts, self.origins, strict=True)]))

    def real(self) -> Trace:
        """The real packets of all parts, in original order; raises if a
        real packet is missing or appears twice."""
        idx = np.concatenate([o[o != DUMMY] for o in self.origins])
        if len(idx) != len(self.original) or len(np.unique(idx)) != len(idx):
            raise ValueError(f"{len(idx)} real packets for an original of {len(self.original)}")
        times = np.concatenate([p.times[o != DUMMY] for p, o in zip(self.parts, self.origins, strict=True)])
        sizes = np.concatenate([p.sizes[o != DUMMY] for p, o in zip(self.parts, self.origins, strict=True)])
        order = np.argsort(idx, kind="stable")
        return Trace(times[order], sizes[order])


def undefended(trace: Trace) -> Defended:
    return Defended(trace, (trace,), (np.arange(len(trace), dtype=np.int64),))


def with_dummies(base: Defended, times: npt.NDArray[np.float64], sizes: npt.NDArray[np.int64]) -> Defended:
    """``base`` (a single-part load) with dummy packets added at ``times``
    (signed ``sizes``); a dummy at the same time as a real packet goes after
    it. Dummies are not delayed or reordered among themselves."""
    if len(base.parts) != 1:
        raise ValueError("padding applies to an unsplit load (pad before the split)")
    part, origin = base.parts[0], base.origins[0]
    t = np.concatenate([part.times, np.asarray(times, dtype=np.float64)])
    s = np.concatenate([part.sizes, np.asarray(sizes, dtype=np.int64)])
    o = np.concatenate([origin, np.full(len(times), DUMMY, dtype=np.int64)])
    order = np.argsort(t, kind="stable")
    return Defended(base.original, (Trace(t[order], s[order]),), (o[order],))


def split_by(base: Defended, on1: npt.NDArray[np.bool_]) -> Defended:
    """A single-part load split over two networks: ``on1[j]`` sends its
    packet j on network 1. Dummies travel like real packets."""
    if len(base.parts) != 1:
        raise ValueError("split applies to an unsplit load")
    part, origin = base.parts[0], base.origins[0]
    parts = (Trace(part.times[on1], part.sizes[on1]), Trace(part.times[~on1], part.sizes[~on1]))
    return Defended(base.original, parts, (origin[on1], origin[~on1]))


def last_real_before(real_times: npt.NDArray[np.float64], t: float) -> float:
    """Time of the last real packet (sorted ``real_times``) at or before t;
    -inf when there is none."""
    i = int(np.searchsorted(real_times, t, side="right"))
    return float(real_times[i - 1]) if i else float("-inf")
