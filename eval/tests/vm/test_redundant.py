"""The redundant scheduler in braid's kernel, both ends set: every byte on
every active WAN, and no stall when one WAN goes dark. Measured from the
WAN captures."""

from __future__ import annotations

import itertools

import pytest

from braid_eval.measure.transfer import (
    BULK_PORT,
    BulkServer,
    TransferResult,
    longest_data_gap,
    measured_transfer,
    transfer_with_breakage,
)
from braid_testbed import StandardTestbed

NBYTES = 4 << 20


@pytest.fixture
def bed(equal_wans: StandardTestbed) -> StandardTestbed:
    """Two equal WANs (conftest's, shared with other modules), both ends
    `redundant`. The blackhole test lifts its blackhole afterwards."""
    equal_wans.enable_kernel_pm()
    equal_wans.set_scheduler("redundant")
    return equal_wans


def data_times(r: TransferResult, wan: int, port: int) -> list[float]:
    """When a WAN carried the transfer's data packets, in order."""
    upload = r.mode == "upload"
    return sorted(p.ts for p in r.wan_packets[wan] if p.payload_len
                  and (p.dport == port if upload else p.sport == port))


def wan_timeline(r: TransferResult, wan: int, port: int) -> str:
    """When a WAN's subflow opened, and when it carried its first and last
    data, relative to the transfer's first packet: what tells a late join
    from a subflow that stopped."""
    t0 = min((p.ts for pkts in r.wan_packets.values() for p in pkts), default=0.0)
    syns = [round(p.ts - t0, 3) for p in r.wan_packets[wan] if p.syn]
    data = data_times(r, wan, port)
    if not data:
        return f"wan{wan}: SYNs at {syns} s, no data"
    return (f"wan{wan}: SYNs at {syns} s, {len(data)} data packets "
            f"from {data[0] - t0:.3f} to {data[-1] - t0:.3f} s")


@pytest.mark.parametrize("mode", ["upload", "download"])
def test_every_byte_crosses_each_wan(bed: StandardTestbed, mode: str) -> None:
    """Each WAN carries copies of the transfer until its end, not a split.

    Not every byte: the first flight leaves before the second subflow
    joins, and a subflow that falls behind skips data the peer has
    acknowledged through the other (a copy of it would be useless). Over
    3 x 4 MB that is a few percent on an idle host; with a CPU hog beside
    the VM a subflow carried 82-99 % (12 uploads). A split would put half
    on each WAN: the bound sits between the two. A subflow that stops
    carrying data while the other goes on is a stall, whatever its share.
    """
    nbytes = 3 * NBYTES
    with BulkServer(bed) as server:
        r = measured_transfer(bed, server, nbytes, mode=mode)
    timelines = "; ".join(wan_timeline(r, wan, BULK_PORT) for wan in (1, 2))
    print(f"\n{mode}: {nbytes} bytes, wan payload {r.wan_payload}, "
          f"{r.goodput_mbit:.1f} Mbit/s; {timelines}")
    assert r.digest_ok
    data = {wan: data_times(r, wan, BULK_PORT) for wan in (1, 2)}
    end = max(data[1][-1:] + data[2][-1:])
    for wan in (1, 2):
        assert data[wan], f"wan{wan} carried nothing: {timelines}"
        # the pause to the end counts: a subflow that stops is a stall
        gap = max(b - a for a, b in itertools.pairwise(data[wan] + [end]))
        assert gap <= 1.0, f"wan{wan} paused {gap:.3f} s: {timelines}"
        assert r.wan_payload[wan] >= 0.75 * nbytes, timelines


@pytest.mark.parametrize("mode", ["upload", "download"])
def test_no_stall_when_a_wan_goes_dark(bed: StandardTestbed, mode: str) -> None:
    """wan1 drops everything mid-transfer (no link event): wan2 carried
    every byte already, so the transfer goes on without a pause longer than
    a second, and finishes intact."""
    tb = bed
    try:
        with BulkServer(tb) as server:
            r, dark_at = transfer_with_breakage(
                tb, server, 3 * NBYTES, mode, NBYTES,
                lambda: tb.blackhole_wan(1))
    finally:
        tb.blackhole_wan(1, on=False)
    gap = longest_data_gap(r.wan_packets[2], BULK_PORT, mode == "upload", dark_at)
    print(f"\n{mode}, wan1 dark after {NBYTES} bytes: digest_ok={r.digest_ok}, "
          f"longest pause on wan2 after it {gap:.3f} s, wan payload {r.wan_payload}")
    assert r.digest_ok
    assert gap <= 1.0
