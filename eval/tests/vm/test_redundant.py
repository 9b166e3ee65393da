"""The redundant scheduler in braid's kernel, both ends set: every byte on
every active WAN, and no stall when one WAN goes dark. Measured from the
WAN captures."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from braid_eval.transfer import (
    BULK_PORT,
    BulkServer,
    longest_data_gap,
    measured_transfer,
    transfer_with_breakage,
)
from braid_testbed import LinkSpec, StandardTestbed, scheduler_testbed

WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)
NBYTES = 4 << 20


@pytest.fixture(scope="module")
def bed() -> Iterator[StandardTestbed]:
    """Both ends `redundant`; one testbed for the module (a bring-up takes
    ~40 s under TCG). The blackhole test lifts its blackhole afterwards."""
    with scheduler_testbed(f"rd{os.getpid() % 1000}", "redundant", WAN, WAN) as tb:
        yield tb


@pytest.mark.parametrize("mode", ["upload", "download"])
def test_every_byte_crosses_each_wan(bed: StandardTestbed, mode: str) -> None:
    """Each WAN carries about the whole transfer: copies, not a split.

    Not every byte: the first flight leaves before the second subflow
    joins, and a subflow still in slow start skips data the peer has
    acknowledged through the other (a copy of it would be useless). At
    4 MB that start-up was a third of the upload (measured 63% on wan2);
    over 3 x 4 MB it is a few percent.
    """
    nbytes = 3 * NBYTES
    with BulkServer(bed) as server:
        r = measured_transfer(bed, server, nbytes, mode=mode)
    print(f"\n{mode}: {nbytes} bytes, wan payload {r.wan_payload}, "
          f"{r.goodput_mbit:.1f} Mbit/s")
    assert r.digest_ok
    for wan in (1, 2):
        assert r.wan_payload[wan] >= 0.9 * nbytes


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
