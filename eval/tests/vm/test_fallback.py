"""A network whose gateway strips MPTCP's option, under every scheduler.

Many middleboxes drop TCP options they do not know. Behind one, a
connection's SYN reaches the proxy without MP_CAPABLE and the connection
falls back to plain TCP on that network: one subflow, no data sequence
numbers, nothing for the scheduler to choose. Each scheduler must carry
such a connection byte-exact both ways, and leave it alone: its burst
bookkeeping does not run on a fallen-back connection, so the scheduler's
counters (MPTcpExtSched*, which say what the scheduler did against its
policy) do not move. Before, hywf went on cutting a fallen-back upload
into one-segment bursts and counted a "burst kept open" at the end of
almost every data fragment (138 in a 4 MB upload)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from braid_eval.measure.transfer import BulkServer, measured_transfer, read_mib, read_mibs
from braid_testbed import StandardTestbed

SCHEDULERS = ("default", "hywf", "bernoulli", "delaybal", "redundant")
NBYTES = 2 << 20
# iptables on wan1's gateway: strip TCP option kind 30 (MPTCP) from
# everything it forwards, both ways.
STRIP_MPTCP = ["FORWARD", "-p", "tcp", "-j", "TCPOPTSTRIP", "--strip-options", "30"]


def strip_rule(action: str) -> list[str]:
    """The stripping rule appended (``-A``) or deleted (``-D``)."""
    return ["iptables", "-t", "mangle", action, *STRIP_MPTCP]


def sched_counters(bed: StandardTestbed, node: str) -> dict[str, int]:
    """``node``'s scheduler counters (MPTcpExtSched*)."""
    return read_mibs(bed[node].run(["nstat", "-az"]), "MPTcpExtSched")


def fallbacks(bed: StandardTestbed) -> int:
    """Connections of the client that fell back to TCP at the SYN/ACK."""
    return read_mib(bed.client.run(["nstat", "-az"]), "MPTcpExtMPCapableFallbackSYNACK")


def moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name, 0)}


@pytest.fixture
def stripping_wan1(equal_wans: StandardTestbed) -> Iterator[StandardTestbed]:
    """The shared two-WAN testbed with wan1's gateway stripping MPTCP's
    option while the test runs; the rule goes afterwards, pass or fail."""
    equal_wans.enable_kernel_pm()
    equal_wans["gw1"].run(strip_rule("-A"))
    try:
        yield equal_wans
    finally:
        equal_wans["gw1"].run(strip_rule("-D"))


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_fallen_back_connection_is_left_to_tcp(stripping_wan1: StandardTestbed, scheduler: str) -> None:
    """An upload and a download, each its own connection through wan1."""
    bed = stripping_wan1
    bed.set_scheduler(scheduler)
    sched_before = {end: sched_counters(bed, end) for end in ("client", "proxy")}
    fallbacks_before = fallbacks(bed)
    # a new listener: an accepted connection takes its listener's scheduler
    with BulkServer(bed) as server:
        results = [measured_transfer(bed, server, NBYTES, mode=mode, timeout_s=60)
                   for mode in ("upload", "download")]
    sched = {end: moved(before, sched_counters(bed, end)) for end, before in sched_before.items()}
    fell_back = fallbacks(bed) - fallbacks_before
    for r in results:
        print(f"\n{scheduler} {r.mode} through a gateway stripping MPTCP's option: digest_ok={r.digest_ok}, "
              f"{r.goodput_mbit:.1f} Mbit/s, wan payload {r.wan_payload}")
    print(f"client connections fallen back: {fell_back}, scheduler counters moved {sched}")
    assert fell_back == len(results), "a connection did not fall back to TCP"
    assert all(r.digest_ok for r in results)
    assert all(r.wan_payload[2] == 0 for r in results), "a fallen-back connection sent on a second network"
    assert sched == {"client": {}, "proxy": {}}, "the scheduler ran on a fallen-back connection"
