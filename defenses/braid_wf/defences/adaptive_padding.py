"""Adaptive padding (AP), WTF-PAD-style, applied to a trace.

Juarez, Imani, Perry, Diaz, Wright, "Toward an Efficient Website
Fingerprinting Defense", ESORICS 2016 (WTF-PAD), after Shmatikov & Wang's
adaptive padding (ESORICS 2006). The thesis's HyWF-AP (§6.7) pads with it
before the split.

Each end pads the direction it sends (client: outgoing, proxy: incoming)
with its own state machine and histograms of delays::

    real packet ──> BURST: wait d ~ H_B ──(a real packet first)──> BURST again
                      │ timer fires: send a dummy
                      v
                    GAP: wait d ~ H_G ──(a real packet first)──> BURST
                      │ timer fires: send a dummy, stay in GAP
                      └─ d = infinity (H_G's infinity bin): wait for a real packet

H_B holds the delays between bursts (so a dummy fills a silence that is
long for this traffic), H_G the delays inside bursts (so the fake burst
looks like a real one); H_G's infinity bin ends a fake burst, weighted
1 / (mean real burst length) so fake bursts are as long as real ones on
average. :func:`fit_histograms` builds them from a set of loads (the
thesis's "dataset distribution"), per direction; a burst is a run of
packets in one direction (Wang et al. 2014).

Two limits braid's transport has and WTF-PAD's published
simulator does not:

- **budget**: an end sends a dummy only while its dummy bytes stay within
  ``budget`` x the real bytes it has sent so far (causal: it cannot know
  the rest of the load), so a load's overhead is at most ``budget``;
- **idle**: no dummy more than ``idle`` seconds after the last real packet
  in either direction (default 1 s, the idle threshold the thesis (§6.8,
  after [WG16]) uses to delimit website accesses): padding stops when the
  load has gone idle instead of running on.

A dummy has the size of the last real data its end sent, at most one
packet, as braid's transport pads (a padding frame of its last data
frame's size, at most ``PAD_MAX_BYTES`` on the wire), estimated from the
packets (:func:`dummy_sizes`; packets no larger than an empty frame,
``EMPTY_FRAME_BYTES``, are braid-proxy's FIN and window frames, which
carry no data and do not set the padding's size). A dummy is sent
at its timer's time; real packets are never delayed, so the defence adds
no latency.

Usage::

    hist = fit_histograms(train.traces)
    d = adaptive_padding(trace, np.random.default_rng(1), hist, budget=0.3)

braid's transport (proxy/internal/wire, ``padding_budget``) runs the same
state machine on its frames; :func:`histograms_to_json` writes histograms
in the file format its ``padding_histograms`` key reads (and
:func:`histograms_from_json` reads it back), so the simulator and the
transport can pad with the same distribution.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from braid_wf.defences.defended import Defended, last_real_before, undefended, with_dummies
from braid_wf.trace import Trace

IDLE_S = 1.0
EDGES_S = np.logspace(-6, 2, 8 * 8 + 1)  # 1 us .. 100 s, 8 bins a decade
DIRECTIONS = (1, -1)  # outgoing (the client pads), incoming (the proxy pads)
# braid-proxy's padding frame is at most one packet (wire.PadMaxWire) and
# follows its last data frame's size; a frame without data (FIN, window
# update) is its header and tag only (wire.FrameOverhead).
PAD_MAX_BYTES = 1400
EMPTY_FRAME_BYTES = 35
# How dummies are sized, for the record of a result made with them.
PADDING_MODEL = (f"each its end's last data frame, at most {PAD_MAX_BYTES} bytes "
                 f"(frames of at most {EMPTY_FRAME_BYTES} bytes carry no data)")


@dataclasses.dataclass(frozen=True)
class Histogram:
    """Delays in log-spaced bins (``EDGES_S``), token ``counts`` per bin,
    and the probability of the infinity bin."""

    counts: npt.NDArray[np.float64]
    p_infinity: float

    def __post_init__(self) -> None:
        if len(self.counts) != len(EDGES_S) - 1 or not 0.0 <= self.p_infinity <= 1.0:
            raise ValueError("histogram: one count per bin and 0 <= p_infinity <= 1")
        if self.counts.sum() <= 0 and self.p_infinity < 1.0:
            raise ValueError("histogram: no delays and not all infinity")

    @classmethod
    def of_delays(cls, delays: npt.ArrayLike, p_infinity: float) -> Histogram:
        d = np.clip(np.asarray(delays, dtype=np.float64), EDGES_S[0], EDGES_S[-1] * 0.999)
        counts, _ = np.histogram(d, bins=EDGES_S)
        return cls(counts.astype(np.float64), p_infinity)

    def sample(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
        """n delays (s); inf where the infinity bin was drawn. Uniform in
        log within the drawn bin."""
        out = np.full(n, math.inf)
        finite = rng.random(n) >= self.p_infinity
        k = int(finite.sum())
        if k:
            cdf = np.cumsum(self.counts) / self.counts.sum()
            b = np.minimum(np.searchsorted(cdf, rng.random(k), side="right"), len(cdf) - 1)
            lo, hi = np.log(EDGES_S[b]), np.log(EDGES_S[b + 1])
            out[finite] = np.exp(lo + (hi - lo) * rng.random(k))
        return out


@dataclasses.dataclass(frozen=True)
class ApHistograms:
    """Per direction (+1 out, -1 in): H_B (between bursts), H_G (in bursts)."""

    burst: dict[int, Histogram]
    gap: dict[int, Histogram]


def fit_histograms(traces: Iterable[Trace]) -> ApHistograms:
    """H_B and H_G per direction from real loads: the delay from one packet
    of a direction to its next one goes to H_G when no packet of the other
    direction came between (same burst), to H_B otherwise."""
    within: dict[int, list[npt.NDArray[np.float64]]] = {d: [] for d in DIRECTIONS}
    between: dict[int, list[npt.NDArray[np.float64]]] = {d: [] for d in DIRECTIONS}
    bursts: dict[int, list[int]] = {d: [] for d in DIRECTIONS}
    for tr in traces:
        dirs = tr.directions
        run = np.cumsum(np.concatenate([[1], dirs[1:] != dirs[:-1]])) if len(dirs) else dirs
        for d in DIRECTIONS:
            sel = dirs == d
            t, r = tr.times[sel], run[sel]
            same = r[1:] == r[:-1]
            within[d].append(np.diff(t)[same])
            between[d].append(np.diff(t)[~same])
            if len(r):
                bursts[d] += np.unique(r, return_counts=True)[1].tolist()
    out_b, out_g = {}, {}
    for d in DIRECTIONS:
        if not bursts[d]:
            raise ValueError(f"fit_histograms: no packets in direction {d:+d}")
        mean_burst = float(np.mean(bursts[d]))
        out_g[d] = Histogram.of_delays(np.concatenate(within[d]), p_infinity=min(1.0, 1.0 / mean_burst))
        bw = np.concatenate(between[d])
        # a direction with a single burst per load has no between-burst
        # delay; its in-burst delays stand in
        out_b[d] = Histogram.of_delays(bw if len(bw) else np.concatenate(within[d]), p_infinity=0.0)
    return ApHistograms(out_b, out_g)


JSON_FORMAT = "braid-ap-histograms/1"
_JSON_DIRS = {1: "out", -1: "in"}


def histograms_to_json(hist: ApHistograms) -> str:
    """The histograms as braid's transport reads them (``padding_histograms``):
    the bin edges in seconds and, per direction ("out": the client's, "in":
    the proxy's), H_B ("burst") and H_G ("gap") as counts and p_infinity."""
    doc: dict[str, object] = {"format": JSON_FORMAT, "edges_s": EDGES_S.tolist()}
    for d, name in _JSON_DIRS.items():
        doc[name] = {
            "burst": {"counts": hist.burst[d].counts.tolist(), "p_infinity": hist.burst[d].p_infinity},
            "gap": {"counts": hist.gap[d].counts.tolist(), "p_infinity": hist.gap[d].p_infinity},
        }
    return json.dumps(doc, indent=1) + "\n"


def histograms_from_json(text: str) -> ApHistograms:
    """Inverse of :func:`histograms_to_json` (edges must be ``EDGES_S``)."""
    doc = json.loads(text)
    if doc.get("format") != JSON_FORMAT:
        raise ValueError(f"histograms: format is not {JSON_FORMAT!r}")
    if not np.allclose(doc["edges_s"], EDGES_S, rtol=1e-9):
        raise ValueError("histograms: bin edges differ from EDGES_S")
    burst, gap = {}, {}
    for d, name in _JSON_DIRS.items():
        b, g = doc[name]["burst"], doc[name]["gap"]
        burst[d] = Histogram(np.asarray(b["counts"], dtype=np.float64), float(b["p_infinity"]))
        gap[d] = Histogram(np.asarray(g["counts"], dtype=np.float64), float(g["p_infinity"]))
    return ApHistograms(burst, gap)


def dummy_sizes(trace: Trace, d: int) -> npt.NDArray[np.int64]:
    """For each of the trace's packets in direction d, the size of a dummy
    its end would send after it: the size of its last data frame (packets
    larger than EMPTY_FRAME_BYTES) at most PAD_MAX_BYTES. A frame larger
    than a packet shows as full packets and a shorter tail: a data packet
    right after a full one in the same run is taken as such a tail (the
    frame was at least a packet). Before any data: an empty frame's size."""
    sizes = np.abs(trace.sizes)
    dirs = trace.directions
    out = np.empty(int(np.count_nonzero(dirs == d)), dtype=np.int64)
    size, prev_full, k = EMPTY_FRAME_BYTES, False, 0
    for s, dr in zip(sizes.tolist(), dirs.tolist(), strict=True):
        if dr != d:
            prev_full = False  # the run has ended
            continue
        if s > EMPTY_FRAME_BYTES:
            size = PAD_MAX_BYTES if prev_full else min(s, PAD_MAX_BYTES)
            prev_full = s >= PAD_MAX_BYTES
        out[k] = size
        k += 1
    return out


def _pad_direction(trace: Trace, d: int, rng: np.random.Generator, hist: ApHistograms,
                   budget: float | None, idle: float, real_times: npt.NDArray[np.float64]
                   ) -> tuple[list[float], list[int]]:
    """The dummies one end sends for direction d (times, signed sizes)."""
    sel = trace.directions == d
    t_real = trace.times[sel]
    sent = np.cumsum(np.abs(trace.sizes[sel]))
    size_dummy = dummy_sizes(trace, d)
    burst_delays = hist.burst[d].sample(rng, len(t_real))
    times: list[float] = []
    sizes: list[int] = []
    dummy_bytes = 0
    for k, t in enumerate(t_real):
        next_real = t_real[k + 1] if k + 1 < len(t_real) else math.inf
        fire = t + burst_delays[k]  # BURST: a real packet resets the timer
        while fire < next_real:
            if fire - last_real_before(real_times, fire) > idle:
                break  # the load has gone idle: stop until real traffic
            size = int(size_dummy[k])
            if budget is not None and dummy_bytes + size > budget * sent[k]:
                break  # out of budget until more real bytes are sent
            times.append(fire)
            sizes.append(d * size)
            dummy_bytes += size
            fire += float(hist.gap[d].sample(rng, 1)[0])  # GAP: the fake burst goes on, or ends (inf)
    return times, sizes


def adaptive_padding(trace: Trace, rng: np.random.Generator, histograms: ApHistograms,
                     budget: float | None = None, idle: float = IDLE_S) -> Defended:
    """The load with each end's adaptive padding (one network; split it
    afterwards for HyWF-AP). ``budget``: max dummy bytes per real byte of
    each end (None: unlimited); ``idle``: no padding this long after the
    last real packet."""
    if budget is not None and budget < 0:
        raise ValueError(f"adaptive padding: budget must be >= 0, got {budget}")
    if not 0 < idle < math.inf:
        raise ValueError(f"adaptive padding: idle must be positive and finite, got {idle}")
    times: list[float] = []
    sizes: list[int] = []
    for d in DIRECTIONS:
        t, s = _pad_direction(trace, d, rng, histograms, budget, idle, np.sort(trace.times))
        times += t
        sizes += s
    return with_dummies(undefended(trace), np.asarray(times, dtype=np.float64), np.asarray(sizes, dtype=np.int64))
