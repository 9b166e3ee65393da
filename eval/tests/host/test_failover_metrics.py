"""E3's per-packet metrics (failover_metrics.py) on synthetic timelines:
the recovery definition against a brute-force check, stalls inside any
window caught, in-order delivery rebuilt from DSS mappings with holes,
re-injections, an MP_CAPABLE first packet and subflow sequence wrap."""

from __future__ import annotations

import random

import pytest

from braid_eval.experiments.failover_metrics import (
    Delivery,
    cumulative,
    first_at_or_after,
    first_sustained,
    in_order_delivery,
    longest_gap,
    sustained_from,
)
from braid_testbed.pcap import DssMapping, TcpPacket

C = 2_500_000.0  # bytes/s, ~20 Mbit/s
PKT = 1448
SLACK = 16 * PKT


def steady(t0: float, t1: float, rate: float = C, pkt: int = PKT) -> list[tuple[float, int]]:
    """One packet of ``pkt`` bytes every pkt/rate seconds in [t0, t1)."""
    step = pkt / rate
    n = int((t1 - t0) / step)
    return [(t0 + i * step, pkt) for i in range(n)]


def violation(curve: Delivery, r: float, horizon: float, rate: float) -> float:
    """Brute force: the worst f(t1) - f(t2) over r <= t1 < t2 <= horizon,
    f = D - rate t, at every point where it can be extreme (just after a
    jump for t1, just before one for t2)."""
    knots = [t for t in curve.times if r < t <= horizon]
    starts = [r, *knots]
    worst = 0.0
    for t1 in starts:
        f1 = curve.at(t1) - rate * t1
        ends = [t for t in knots if t > t1] + [horizon]
        for t2 in ends:
            before = curve.at(t2) if t2 == horizon else curve.at(t2 - 1e-12)
            worst = max(worst, f1 - (before - rate * t2))
    return worst


def test_steady_delivery_recovers_at_once() -> None:
    curve = cumulative(steady(0.0, 2.0))
    assert sustained_from(curve, 0.0, 2.0, 0.9 * C, SLACK) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("stall_at", [0.3, 1.0, 1.6])
def test_a_stall_inside_any_window_is_caught(stall_at: float) -> None:
    """A 50 ms stall anywhere, at full rate around it: a 500 ms average
    would still show ~90 %, the definition must start after the stall."""
    stall = 0.05
    curve = cumulative(steady(0.0, stall_at) + steady(stall_at + stall, 2.0))
    r = sustained_from(curve, 0.0, 2.0, 0.9 * C, SLACK)
    assert r is not None
    # Inside the stall, [t1, stall end] delivers nothing: only its last SLACK / R may be in.
    assert r == pytest.approx(stall_at + stall - SLACK / (0.9 * C), abs=2e-3)
    assert violation(curve, r, 2.0, 0.9 * C) <= SLACK + 1
    assert violation(curve, r - 0.005, 2.0, 0.9 * C) > SLACK


def test_a_stall_shorter_than_the_slack_passes() -> None:
    short = 0.5 * SLACK / C
    curve = cumulative(steady(0.0, 1.0) + steady(1.0 + short, 2.0))
    assert sustained_from(curve, 0.0, 2.0, 0.9 * C, SLACK) == pytest.approx(0.0, abs=1e-9)


def test_too_slow_never_recovers() -> None:
    curve = cumulative(steady(0.0, 3.0, rate=0.8 * C))
    assert sustained_from(curve, 0.0, 3.0, 0.9 * C, SLACK, hold=0.2) is None
    # Without a hold the last slack / (deficit rate) seconds pass trivially.
    r = sustained_from(curve, 0.0, 3.0, 0.9 * C, SLACK)
    assert r is not None and r > 2.8


def test_slow_then_full_rate_recovers_when_the_deficit_stops() -> None:
    curve = cumulative(steady(0.0, 1.0, rate=0.5 * C) + steady(1.0, 3.0))
    r = sustained_from(curve, 0.0, 3.0, 0.9 * C, SLACK, hold=0.2)
    assert r is not None and 0.9 < r <= 1.0 + 1e-6


def test_matches_brute_force_on_random_curves() -> None:
    rng = random.Random(7)
    for _ in range(20):
        events, t = [], 0.0
        while t < 1.0:
            t += rng.expovariate(1 / 0.004) if rng.random() > 0.03 else rng.uniform(0.02, 0.15)
            events.append((t, rng.choice((PKT, 2 * PKT, 5 * PKT))))
        curve = cumulative(events)
        rate = rng.uniform(0.3, 1.0) * C
        r = sustained_from(curve, 0.0, 1.0, rate, SLACK)
        assert r is not None
        assert violation(curve, r, 1.0, rate) <= SLACK + 1e-6
        if r > 1e-6:
            assert violation(curve, max(0.0, r - 1e-4), 1.0, rate) > SLACK - 1e-6


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="horizon"):
        sustained_from(cumulative([(0.0, 1)]), 1.0, 1.0, C, SLACK)


def test_longest_gap_and_first_packet() -> None:
    curve = cumulative([(0.0, 1), (0.5, 1), (0.6, 1), (1.4, 1), (1.5, 1)])
    assert longest_gap(curve, 0.55, 1.45) == pytest.approx(0.8)
    assert longest_gap(curve, 1.45, 3.0) == pytest.approx(1.5)  # still open at the end
    assert first_at_or_after(curve.times, 0.55) == pytest.approx(0.05)
    assert first_at_or_after(curve.times, 2.0) is None


def _pkt(ts: float, sport: int, seq: int, length: int, dss: DssMapping | None = None,
         syn: bool = False) -> TcpPacket:
    return TcpPacket(ts=ts, src=f"10.1.{sport % 10}.2", dst="10.99.0.1", sport=sport, dport=5201,
                     flags=0x02 if syn else 0x10, seq=seq, payload_len=length,
                     mptcp_subtype=2 if dss else None, dss=dss)


def test_in_order_delivery_waits_for_the_hole_and_ignores_copies() -> None:
    dsn0 = (1 << 63) + 12345  # 64-bit data sequence numbers
    isn1, isn2 = 0xFFFFF000, 1000  # subflow 1's sequence wraps 2^32
    pkts = [
        _pkt(0.00, 41, isn1, 0, syn=True),
        # The first data packet carries MP_CAPABLE, no DSS: the next packet's mapping covers it.
        _pkt(0.01, 41, isn1 + 1, 1000),
        _pkt(0.02, 41, isn1 + 1001, 1000, DssMapping(dsn0, 1, 3000)),
        _pkt(0.03, 41, isn1 + 2001, 1000, DssMapping(dsn0, 1, 3000)),
        _pkt(0.04, 52, isn2, 0, syn=True),
        # Subflow 1's next mapping (bytes 3000-3999) is lost with its gateway;
        # subflow 2 carries 4000-5999 meanwhile.
        _pkt(0.05, 52, isn2 + 1, 1000, DssMapping(dsn0 + 4000, 1, 2000)),
        _pkt(0.06, 52, isn2 + 1001, 1000, DssMapping(dsn0 + 4000, 1, 2000)),
        # The re-injection of 3000-3999 on subflow 2 fills the hole.
        _pkt(0.30, 52, isn2 + 2001, 1000, DssMapping(dsn0 + 3000, 2001, 1000)),
        # A late retransmission of 0-999 on subflow 1 is a copy.
        _pkt(0.40, 41, isn1 + 1, 1000, DssMapping(dsn0, 1, 3000)),
    ]
    useful: list[TcpPacket] = []
    curve = in_order_delivery(reversed(pkts), useful)  # any input order
    assert curve.at(0.035) == 3000
    assert curve.at(0.29) == 3000, "the hole stalls delivery however busy subflow 2 is"
    assert curve.at(0.30) == 6000
    assert curve.total[-1] == 6000
    assert longest_gap(curve, 0.04, 0.35) == pytest.approx(0.30 - 0.03)
    assert [p.ts for p in useful] == [0.01, 0.02, 0.03, 0.05, 0.06, 0.30]


@pytest.mark.parametrize("batched", [False, True])
def test_in_order_delivery_says_whether_it_starts_at_the_first_byte(batched: bool) -> None:
    """A sender's 21-byte first write alone in the MP_CAPABLE packet has
    no DSS mapping to place it: the curve starts after it. Batched with
    the data after it, the first mapping covers it: the curve counts it."""
    dsn0, isn = 5000, 100
    head = 21
    if batched:
        pkts = [_pkt(0.0, 41, isn, 0, syn=True), _pkt(0.01, 41, isn + 1, 1021),
                _pkt(0.02, 41, isn + 1022, 1000, DssMapping(dsn0, 1, 2021))]
    else:
        pkts = [_pkt(0.0, 41, isn, 0, syn=True), _pkt(0.01, 41, isn + 1, head),
                _pkt(0.02, 41, isn + 1 + head, 2000, DssMapping(dsn0 + head, 1 + head, 2000))]
    pkts.append(_pkt(0.03, 52, 7, 0, syn=True))  # a join, no data: its start is no connection start
    curve = in_order_delivery(pkts)
    assert curve.from_start is batched
    assert curve.total[-1] == (2021 if batched else 2000)


def test_in_order_delivery_leaves_out_unplaceable_packets() -> None:
    """No SYN captured for a subflow: its bytes cannot be placed, so the
    rebuilt total falls short (the experiment's byte check then fails)."""
    pkts = [_pkt(0.0, 41, 10, 0, syn=True), _pkt(0.1, 41, 11, 500, DssMapping(7, 1, 500)),
            _pkt(0.2, 52, 99, 500, DssMapping(507, 1, 500))]
    assert in_order_delivery(pkts).total[-1] == 500


def test_first_sustained_window() -> None:
    """gw1 back at 0.2 s, at 30 % of C for 1.5 s, then paused 0.3 s: the
    pause after a full second of use does not move the re-use time."""
    events = [(0.05, PKT), *steady(0.2, 1.7, rate=0.3 * C), *steady(2.0, 3.0, rate=0.3 * C)]
    curve = cumulative(events)
    r = first_sustained(curve, 0.0, 3.0, 0.25 * C, SLACK, 1.0)
    assert r is not None and 0.2 - 1e-9 <= r <= 0.21
    # Until the end instead, the pause would count.
    late = sustained_from(curve, 0.0, 3.0, 0.25 * C, SLACK)
    assert late is not None and late > 1.7
    assert first_sustained(curve, 0.0, 3.0, 0.5 * C, SLACK, 1.0) is None
