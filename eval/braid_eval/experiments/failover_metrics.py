"""Failover metrics on per-packet timelines (E3, failover.py).

Everything here works on packet time stamps, never on averaging windows,
so a stall cannot hide inside a bin:

* :func:`in_order_delivery` rebuilds, from server-side captures of every
  subflow, the MPTCP connection's in-order delivery: after each packet,
  how many data bytes (data sequence numbers from the DSS mappings) the
  receiver holds without a hole. A packet lost with gw1 leaves a hole
  that stalls delivery until it is re-sent on another subflow, however
  busy gw2's link looks meanwhile.
* :func:`sustained_from` is the recovery definition. For a cumulative
  byte curve D(t) (a step function rising at packet times), a rate R and
  a slack S, it returns the earliest time r in [start, horizon] such that

      D(t2) - D(t1) >= R * (t2 - t1) - S     for every r <= t1 < t2 <= horizon,

  i.e. from r on, every interval, however short or long, delivers at
  least R per second less a fixed slack of a few packets. One stall of
  S / R seconds anywhere after r violates it, so r moves past the stall.
  ``None`` if the condition does not hold for at least ``hold`` seconds
  before the horizon (a curve that never recovers would otherwise
  "recover" in its last S / R seconds).
* :func:`longest_gap`: the longest time without in-order progress that
  overlaps an interval (the stall around a cut).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from braid_testbed.pcap import TcpPacket

SEQ_MOD = 1 << 32


@dataclass(frozen=True)
class Delivery:
    """A cumulative byte curve: ``total[i]`` bytes by time ``times[i]``.
    ``from_start``: the curve counts from the connection's first data
    byte (for a curve rebuilt from captures, whether a mapping placed the
    first subflow's first data; see :func:`in_order_delivery`)."""

    times: list[float]
    total: list[int]
    from_start: bool = True

    def at(self, t: float) -> int:
        """Bytes delivered by time ``t`` (the curve is right-continuous)."""
        i = bisect.bisect_right(self.times, t)
        return self.total[i - 1] if i else 0


def cumulative(events: Iterable[tuple[float, int]]) -> Delivery:
    """The curve of (time, bytes) events, in time order."""
    times: list[float] = []
    total: list[int] = []
    run = 0
    for t, n in sorted(events):
        run += n
        if times and times[-1] == t:
            total[-1] = run
        else:
            times.append(t)
            total.append(run)
    return Delivery(times, total)


def in_order_delivery(packets: Iterable[TcpPacket],
                      useful: list[TcpPacket] | None = None) -> Delivery:
    """In-order MPTCP data delivery at the receiver, from its captures.

    ``packets``: every client-to-server packet of one MPTCP connection,
    from all subflows' captures (any order). A data packet's data
    sequence comes from the DSS mapping covering its subflow sequence
    (RFC 8684 3.3.1: relative to the subflow's ISN, taken from its SYN);
    the mapping may ride on a later packet (the first data packet carries
    MP_CAPABLE, not DSS), and when none does, the curve starts at the
    lowest byte a mapping placed: ``from_start`` says whether that is the
    connection's first (the first SYN's subflow's first data byte; whether
    the sender's first write shares a mapping with the data after it
    depends on how the scheduler batched them). Data sequence numbers are taken modulo 2^32
    relative to the lowest one seen (braid's transfers are far below
    4 GiB). Retransmissions and re-injections of bytes already held in
    order add nothing; a packet no captured mapping covers is left out
    (its bytes then show as a hole that never fills, which the caller's
    byte check catches). ``useful``, if given, receives the packets that
    carried bytes beyond the in-order point when they arrived (not
    copies of data the receiver already had in order; a copy of bytes
    held beyond a hole still counts as useful, so copies are undercounted).
    """
    ordered = sorted(packets, key=lambda p: p.ts)
    isn: dict[tuple[str, int, str, int], int] = {}
    maps: dict[tuple[str, int, str, int], list[tuple[int, int, int]]] = {}
    for pkt in ordered:
        if pkt.syn:
            isn.setdefault(pkt.flow, pkt.seq)
        elif pkt.dss is not None and pkt.dss.length:
            maps.setdefault(pkt.flow, []).append((pkt.dss.ssn, pkt.dss.dsn, pkt.dss.length))
    for flow in maps:
        maps[flow] = sorted(set(maps[flow]))
    first_flow = next(iter(isn), None)  # the MP_CAPABLE subflow: joins come after it
    opening_dsn: int | None = None  # where the first subflow's first data byte was placed
    placed: list[tuple[float, int, int, TcpPacket]] = []  # (ts, dsn, length, packet)
    for pkt in ordered:
        if pkt.syn or pkt.payload_len == 0 or pkt.flow not in isn or pkt.flow not in maps:
            continue
        rel = (pkt.seq - isn[pkt.flow]) % SEQ_MOD
        flow_maps = maps[pkt.flow]
        i = bisect.bisect_right(flow_maps, (rel + 1,)) - 1  # the last mapping starting <= rel
        if i < 0 or rel - flow_maps[i][0] >= flow_maps[i][2]:
            continue
        ssn, dsn, _length = flow_maps[i]
        placed.append((pkt.ts, (dsn + rel - ssn) % SEQ_MOD, pkt.payload_len, pkt))
        if pkt.flow == first_flow and rel == 1:
            opening_dsn = placed[-1][1]
    if not placed:
        return Delivery([], [], from_start=False)
    # The lowest data sequence seen: modulo 2^32, the one whose distance to
    # every other is below 2^31 (the first packet's, unless it was reordered).
    first = placed[0][1]
    base = min(placed, key=lambda x: (x[1] - first + SEQ_MOD // 2) % SEQ_MOD)[1]
    point = 0
    pending: list[tuple[int, int]] = []  # heap of received (start, end) beyond the point
    events: list[tuple[float, int]] = []
    for ts, dsn, length, pkt in placed:
        start = (dsn - base) % SEQ_MOD
        end = start + length
        if end <= point:
            continue
        if useful is not None:
            useful.append(pkt)
        heapq.heappush(pending, (start, end))
        before = point
        while pending and pending[0][0] <= point:
            point = max(point, heapq.heappop(pending)[1])
        if point > before:
            events.append((ts, point - before))
    curve = cumulative(events)
    return Delivery(curve.times, curve.total, from_start=opening_dsn == base)


def sustained_from(curve: Delivery, start: float, horizon: float, rate: float, slack: float,
                   hold: float = 0.0) -> float | None:
    """Earliest r in [start, horizon] from which every interval up to the
    horizon delivers >= rate x its length - slack (module docstring).

    Returned relative to ``start``; ``None`` if that r is later than
    ``horizon - hold``. Exact on the step curve, O(packets): with
    f(t) = D(t) - rate t the condition is f(t1) - min f over [t1, horizon]
    <= slack, scanned backwards over the segments between packets.
    """
    if not horizon > start or rate <= 0:
        raise ValueError("sustained_from: need horizon > start and rate > 0")
    lo = bisect.bisect_right(curve.times, start)
    hi = bisect.bisect_right(curve.times, horizon)
    knots = [start, *curve.times[lo:hi]]
    values = [curve.at(start), *curve.total[lo:hi]]
    ends = [*knots[1:], horizon]
    running_min = values[-1] - rate * horizon
    r = start
    for j in range(len(knots) - 1, -1, -1):
        seg_min = min(running_min, values[j] - rate * ends[j])
        # Violation at t in [knots[j], ends[j]) is values[j] - rate t - seg_min,
        # falling in t: the segment passes from t* on.
        t_star = (values[j] - seg_min - slack) / rate
        if t_star > knots[j]:
            r = min(t_star, ends[j])
            break
        running_min = seg_min
    if r > horizon - hold:
        return None
    return r - start


def first_sustained(curve: Delivery, start: float, end: float, rate: float, slack: float,
                    length: float) -> float | None:
    """Earliest r >= start from which ``curve`` meets :func:`sustained_from`'s
    condition (rate, slack) over [r, r + length], with r + length <= end.

    Relative to ``start``; None if there is none. r is ``start`` or a
    packet time (the condition can only start to hold right at a packet).
    """
    candidates = [start, *(t for t in curve.times if start < t <= end - length)]
    for r in candidates:
        if r + length > end:
            break
        if sustained_from(curve, r, r + length, rate, slack) == 0.0:
            return r - start
    return None


def longest_gap(curve: Delivery, lo: float, hi: float) -> float:
    """Longest time without progress of ``curve`` overlapping [lo, hi].

    Gaps run between consecutive progress times; one still open at the
    curve's end counts up to ``hi``.
    """
    stamps = curve.times
    i = bisect.bisect_right(stamps, lo)
    prev = stamps[i - 1] if i else lo  # the last progress at or before lo
    best = 0.0
    for t in stamps[i:]:
        best = max(best, t - prev)
        if t >= hi:
            return best
        prev = t
    return max(best, hi - prev)


def first_at_or_after(times: Sequence[float], t: float) -> float | None:
    """The first time stamp >= ``t`` in sorted ``times``, as seconds after ``t``."""
    i = bisect.bisect_left(times, t)
    return times[i] - t if i < len(times) else None
