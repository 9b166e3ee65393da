"""A network goes away mid-transfer under every scheduler, both ways.

What users meet most: the network behind the client's wan2 stops
forwarding (its gateway drops everything, both ways) and the path manager
deletes wan2's MPTCP endpoint at once (`ip mptcp endpoint delete`, as a
lost DHCP lease, an unplugged modem or gwsteer's detection does). Every
connection then closes its wan2 subflow with data in flight on it that
will never arrive, and the kernel hands it to the survivor. Each scheduler
must carry the transfer to its end byte-exact, without a long stall of
in-order delivery (LONGEST_STALL_S), and without the kernel logging a WARN
(the VM tests' conftest reads the kernel log around every test).

braid's schedulers hand over only what the closing subflow carried and
its peer had not acknowledged; upstream's re-injection (``default``) sends
everything above the connection's snd_una again, the survivor's own data
in flight included. The survivor may send again of its own data at most
what one MPTCP retransmission timeout does (OWN_RESENT_MAX).

A subflow can also die by a reset (a middlebox's, an abort, a TCP
time-out): the kernel purges its queues before MPTCP closes it, what it
carried can no longer be read from them, and braid's schedulers then fall
back to upstream's re-injection rather than leave that data to the
retransmission timer.

Each transfer's in-order delivery and what was sent again are rebuilt
from both WANs' captures (data sequence numbers from DSS mappings), so a
stall shows even while the survivor's link is busy re-sending copies."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping

import pytest

from braid_eval.analysis.dss import resent_bytes
from braid_eval.experiments.failover_metrics import in_order_delivery, longest_gap
from braid_eval.measure.transfer import BULK_PORT, BulkServer, TransferResult, read_mib, transfer_with_breakage
from braid_testbed import StandardTestbed, ip
from braid_testbed.netns import inside
from braid_testbed.sockdiag import abort_tcp

SCHEDULERS = ("default", "hywf", "bernoulli", "delaybal", "redundant")
NBYTES = 12 << 20
# wan2 has carried this much of the transfer when its network goes: past
# its slow start, with a window in flight, and with most of the transfer
# still to go.
GONE_AFTER = 512 << 10
# The goal is a second. Measured in braid's VM: 0.01-0.22 s upstream under
# every scheduler, 0.97-1.0 s downstream (the sender is the proxy, which
# learns of the loss from the client's REMOVE_ADDR), 1.45 s with the host
# loaded; so the bound asserted is 2 s: a transfer that hangs fails it, the
# downstream second is not met.
LONGEST_STALL_S = 2.0
# Schedulers whose re-injection is only what the closing subflow carried
# (MPTCP_SCHED_FLAG_REINJECT_CARRIED). Measured in braid's VM: they sent
# again 0 B of the survivor's own data in every run; upstream's 100-300 KB.
REINJECT_CARRIED = ("hywf", "bernoulli", "delaybal")
# An MPTCP retransmission timeout re-sends the oldest data fragment whole,
# which may hold the survivor's data: two 32 KB fragments' worth.
OWN_RESENT_MAX = 64 << 10
# hywf's split range for the test: wan1's share from U[0, 0.5], so that
# wan2 carries GONE_AFTER early. With the full U[0, 1], one connection in
# 25 leaves wan2 less than GONE_AFTER of the 12 MB (a run in braid's VM
# drew 0.7 %) and its network never goes away during the transfer.
HYWF_PS_PERMILLE = 250
# A stalled transfer is a failure; waiting the default four minutes for
# it proves nothing more (a healthy one takes under 15 s here).
TIMEOUT_S = 60


@pytest.fixture
def bed(equal_wans: StandardTestbed) -> StandardTestbed:
    """Two equal WANs (conftest's, shared with other modules)."""
    return equal_wans


def broken_transfer(bed: StandardTestbed, scheduler: str, nbytes: int, mode: str,
                    breakage: Callable[[], None],
                    sysctls: Mapping[str, int | str] | None = None) -> tuple[TransferResult, float]:
    """A transfer under ``scheduler`` (both ends' sysctls changed by ``sysctls`` meanwhile)
    during which ``breakage`` befalls wan2 once it has carried GONE_AFTER; wan2's blackhole,
    if the breakage made one, is lifted afterwards, pass or fail. Returns the result and
    when the breakage began."""
    values = dict(sysctls or {})
    if scheduler == "hywf":
        values["net.mptcp.hywf_ps_permille"] = HYWF_PS_PERMILLE
    try:
        with bed.changed_sysctls(("client", "proxy"), values), BulkServer(bed) as server:
            return transfer_with_breakage(bed, server, nbytes, mode, GONE_AFTER, breakage,
                                          wan=2, timeout_s=TIMEOUT_S)
    finally:
        bed.blackhole_wan(2, on=False)


@pytest.mark.parametrize("mode", ["upload", "download"])
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_transfer_survives_its_network_going_away(bed: StandardTestbed, scheduler: str, mode: str) -> None:
    bed.enable_kernel_pm()  # the previous test deleted wan2's endpoint
    bed.set_scheduler(scheduler)
    # a new listener: an accepted connection takes its listener's scheduler
    delete_endpoint = bed.wan2_endpoint_deletion()

    def network_goes_away() -> None:
        bed.blackhole_wan(2)
        delete_endpoint()

    r, gone_at = broken_transfer(bed, scheduler, NBYTES, mode, network_goes_away)
    upload = mode == "upload"
    packets = [p for pkts in r.wan_packets.values() for p in pkts
               if (p.dport == BULK_PORT if upload else p.sport == BULK_PORT)]
    delivery = in_order_delivery(packets)
    stall = longest_gap(delivery, gone_at, r.ended_at)
    resent = resent_bytes([(p, wan) for wan, pkts in r.wan_packets.items() for p in pkts],
                          BULK_PORT, upload, since=gone_at)
    print(f"\n{scheduler} {mode}: wan2's endpoint deleted after {GONE_AFTER} B on it; "
          f"digest_ok={r.digest_ok}, {r.goodput_mbit:.1f} Mbit/s, wan payload {r.wan_payload}, "
          f"longest in-order stall from then {stall:.3f} s; sent again by wan1: its own "
          f"{resent.get((1, 1), 0)} B, wan2's {resent.get((1, 2), 0)} B")
    assert r.digest_ok
    assert delivery.total and delivery.total[-1] >= NBYTES, "the captures miss delivered data"
    assert stall <= LONGEST_STALL_S
    if scheduler in REINJECT_CARRIED:
        assert resent.get((1, 1), 0) <= OWN_RESENT_MAX, "the survivor sent its own data again"


# MPTCP-level retransmissions allowed after a subflow's reset: a time-out
# that fires while the hand-over is on its way re-sends one fragment.
RESET_RETRANS_MAX = 4
# Half the transfer of the tests above: the lost data's hole has to be filled
# before it can end either way, and 6 MB leave several seconds after the reset.
RESET_NBYTES = NBYTES // 2


@pytest.mark.parametrize("scheduler", REINJECT_CARRIED)
def test_a_reset_subflow_hands_over_what_it_carried(bed: StandardTestbed, scheduler: str) -> None:
    """A download whose wan2 subflow is reset on the proxy's side right after wan2 lost what
    it had in flight (a middlebox's reset, an abort, a TCP time-out: the kernel purges the
    subflow's queues before MPTCP closes it). What wan2 carried can no longer be read from
    its queues; the proxy must still hand it to wan1 at once, not leave it to the MPTCP
    retransmission timer, one fragment per time-out (measured in braid's VM when it did:
    19-37 such retransmissions and 5-13 Mbit/s, against none and 18-19 Mbit/s)."""
    bed.enable_kernel_pm()
    bed.set_scheduler(scheduler)
    aborted: list[int] = []

    def retransmissions() -> int:
        return read_mib(bed.proxy.run(["nstat", "-az"]), "MPTcpExtMPTCPRetrans")

    retrans_before = retransmissions()

    def network_resets_the_subflow() -> None:
        bed.blackhole_wan(2)
        aborted.append(inside(bed.proxy.name, lambda: abort_tcp(BULK_PORT, ip("client", "wan2"))))

    r, gone_at = broken_transfer(bed, scheduler, RESET_NBYTES, "download", network_resets_the_subflow)
    packets = [p for pkts in r.wan_packets.values() for p in pkts if p.sport == BULK_PORT]
    delivery = in_order_delivery(packets)
    stall = longest_gap(delivery, gone_at, r.ended_at)
    retrans = retransmissions() - retrans_before
    print(f"\n{scheduler}: wan2's subflow reset on the proxy after {GONE_AFTER} B on it "
          f"({aborted} socket(s)); digest_ok={r.digest_ok}, {r.goodput_mbit:.1f} Mbit/s, "
          f"longest in-order stall from then {stall:.3f} s, {retrans} MPTCP retransmissions")
    assert aborted == [1], "the proxy had not exactly one wan2 subflow of the download to reset"
    assert r.digest_ok
    assert delivery.total and delivery.total[-1] >= RESET_NBYTES, "the captures miss delivered data"
    assert stall <= LONGEST_STALL_S
    assert retrans <= RESET_RETRANS_MAX, "the reset subflow's data was left to the retransmission timer"


# The sender marks a silent subflow stale after this many retransmission
# time-outs (net.mptcp.stale_loss_cnt; upstream's default is 4) and hands
# over what it carried; fewer make the test's wait short.
STALE_LOSS_CNT = 2
# A stale subflow's hand-over comes within a few RTOs; this bounds the wait,
# and the transfer is long enough to outlast it (12 MB left on the survivor's
# 20 Mbit/s take about 5 s more).
STALE_WITHIN_S = 5.0
STALE_NBYTES = 2 * NBYTES
# What the survivor may send a second time after the network went besides
# the hand-overs: each MPTCP-level retransmission (MPTcpExtMPTCPRetrans)
# re-sends the oldest data fragment whole, up to 32 KB (a page fragment),
# though the survivor may have carried part of it already, and the
# hand-over may then send the rest of it once more. How many come before
# the stale mark varies from run to run (0-3 in braid's VM); one fragment
# each is allowed, and one more for a hand-over's overlap with the last.
FRAGMENT_MAX = 32 << 10


# A run where wan2 had nothing outstanding when it went silent is never
# marked stale (about one in twelve in braid's VM); such a run is repeated,
# and the case is skipped only if this many all were.
STALE_TRIES = 3


@dataclasses.dataclass
class StaleHandOver:
    """One download whose wan2 went silent and then away, as the survivor's capture shows it."""

    digest_ok: bool
    went_stale: bool
    twice: int  # bytes wan1 sent again that it had sent after the silence began
    own: int  # bytes wan1 sent again of its own from before
    retrans: int  # MPTCP-level retransmissions (MPTcpExtMPTCPRetrans)


def stale_hand_over(bed: StandardTestbed, scheduler: str) -> StaleHandOver:
    """A download under ``scheduler``: wan2 blackholed, then its endpoint deleted once the proxy
    marks its subflow stale (or STALE_WITHIN_S passed)."""
    bed.enable_kernel_pm()
    bed.set_scheduler(scheduler)
    delete_endpoint = bed.wan2_endpoint_deletion()

    def stale_count() -> int:
        return read_mib(bed.proxy.run(["nstat", "-az"]), "MPTcpExtSubflowStale")

    def retransmissions() -> int:
        return read_mib(bed.proxy.run(["nstat", "-az"]), "MPTcpExtMPTCPRetrans")

    before = stale_count()
    retrans_before = retransmissions()
    went_stale: list[bool] = []

    def network_goes_silent_then_away() -> None:
        bed.blackhole_wan(2)
        # Not marked stale in time: the endpoint goes anyway, the transfer must finish.
        deadline = time.monotonic() + STALE_WITHIN_S
        while stale_count() == before and time.monotonic() < deadline:
            time.sleep(0.1)
        went_stale.append(stale_count() > before)
        delete_endpoint()

    r, gone_at = broken_transfer(bed, scheduler, STALE_NBYTES, "download", network_goes_silent_then_away,
                                 {"net.mptcp.stale_loss_cnt": STALE_LOSS_CNT})
    # wan1's segments only, tagged by whether they left after wan2 went silent: data wan1
    # sends again that it had sent after that moment is data handed over twice.
    after = resent_bytes([(p, p.ts >= gone_at) for p in r.wan_packets[1]], BULK_PORT, False, since=gone_at)
    return StaleHandOver(r.digest_ok, went_stale[0], after.get((True, True), 0), after.get((True, False), 0),
                         retransmissions() - retrans_before)


@pytest.mark.parametrize("scheduler", REINJECT_CARRIED)
def test_a_stale_subflow_hands_over_once(bed: StandardTestbed, scheduler: str) -> None:
    """A download: wan2's network goes silent, the proxy marks its subflow stale and hands over what it
    carried; only then is wan2's endpoint deleted (as gwsteer does once its probes fail), and
    the closing subflow hands over its queue again. What it handed over already is not sent
    again: the survivor sends each of wan2's bytes once (E3 measured 0.15-0.62 MB sent twice
    under bernoulli, where the stale hand-over came before gwsteer's removal).

    The mark comes from MPTCP-level retransmission time-outs without progress on the subflow
    (braid's schedulers count an idle survivor's earlier time-outs as over, so the mark comes
    beside it too); a transfer where none comes within STALE_WITHIN_S (wan2 had nothing
    outstanding) still has to finish byte-exact, and is repeated, up to STALE_TRIES in all.

    Downloads only: the proxy learns of the deletion from the client's REMOVE_ADDR, a round
    trip after its subflow went stale (0.5-0.8 MB sent twice before the fix); uploads sent at
    most 33 KB twice, with the fix or without."""
    for attempt in range(1, STALE_TRIES + 1):
        run = stale_hand_over(bed, scheduler)
        print(f"\n{scheduler} download {attempt}: wan2 silent, "
              f"{'stale' if run.went_stale else 'never marked stale'}, then its endpoint deleted; "
              f"digest_ok={run.digest_ok}; wan1 sent again {run.twice} B it had sent after the silence "
              f"began, {run.own} B of its own from before; {run.retrans} MPTCP-level retransmissions")
        assert run.digest_ok
        if run.went_stale:
            assert run.twice <= (run.retrans + 1) * FRAGMENT_MAX, "wan2's data was handed over twice"
            return
    pytest.skip(f"wan2's subflow was not marked stale within {STALE_WITHIN_S:g} s in {STALE_TRIES} transfers")
