"""placed_share: the share of the data placed on some subflows from another
subflow's first data sequence number on (the measure of the VM tests'
fixed-split and subflow-replacement checks), on hand-made segments."""

from __future__ import annotations

import math
from collections.abc import Callable

from braid_eval.analysis.dss import Segment
from braid_eval.measure.transfer import Via, placed_share

MSS = 1448


def segs(*spec: tuple[int, int, Via]) -> list[tuple[Segment, Via]]:
    return [(Segment(dsn, length), via) for dsn, length, via in spec]


WAN1, WAN2, WAN2_NEW = (1, 40000), (2, 40001), (2, 40002)
ORDERED = segs(
    (0, 4 * MSS, WAN1),          # before wan2 joined: not counted
    (4 * MSS, MSS, WAN2),        # wan2's first DSN opens the count
    (5 * MSS, 3 * MSS, WAN1),    # a GSO super-packet: three wire packets
    (8 * MSS, 100, WAN2),        # a short segment: one packet
)


def on_wan(w: int) -> Callable[[Via], bool]:
    return lambda via: via[0] == w


def test_counts_from_the_opening_subflow_in_bytes_and_in_packets() -> None:
    share, total = placed_share(ORDERED, on_wan(2), on_wan(1))
    assert total == 4 * MSS + 100
    assert math.isclose(share, 3 * MSS / total)
    share, total = placed_share(ORDERED, on_wan(2), on_wan(1), mss=MSS)
    assert (share, total) == (3 / 5, 5)


def test_a_subflow_counted_from_its_own_first_dsn() -> None:
    """As share_from_first_dsn: one subflow opens the count and is counted."""
    ordered = ORDERED + segs((8 * MSS + 100, 2 * MSS, WAN2_NEW))
    share, total = placed_share(ordered, lambda v: v == WAN2_NEW, lambda v: v == WAN2_NEW)
    assert (share, total) == (1.0, 2 * MSS)


def test_no_opening_segment_is_nan_and_nothing() -> None:
    share, total = placed_share(ORDERED, lambda v: v == WAN2_NEW, on_wan(1))
    assert math.isnan(share) and total == 0
