"""One socket, disconnected with connect(AF_UNSPEC) and connected again,
under every scheduler: each connection is new to the kernel, and nothing
of the one before may leak into it.

What leaked before the scheduler was started afresh at disconnect: hywf's
join stayed done (the next connection's first flight was not held for its
second subflow), bernoulli kept a load estimate in the old connection's
data sequence space, and redundant's first subflow kept its position in
the old sequence space (it skipped the new connection's data as carried
whenever the new initial sequence number was the lower one). The first
subflow, which the socket keeps, kept no name: its subflow_id became 0,
which the schedulers' burst bookkeeping reads as "no subflow" (a burst
that ended on it went uncounted in MPTcpExtSchedBurstMoved). And each
disconnect counted the burst it ended in MPTcpExtSchedBurstMoved, on both
ends (the peer on the MP_FASTCLOSE), as if a network had failed it."""

from __future__ import annotations

import pytest

from braid_eval.measure.transfer import BulkServer, read_mib, sched_bursts_moved, traced_series
from braid_testbed import StandardTestbed
from braid_testbed.pcap import MPTCP_SUB_JOIN

SCHEDULERS = ("default", "hywf", "bernoulli", "delaybal", "redundant")
ROUNDS = 3
NBYTES = 1 << 20


@pytest.fixture
def bed(equal_wans: StandardTestbed) -> StandardTestbed:
    """Two equal WANs (conftest's, shared with other modules), both
    subflows' endpoints in place."""
    equal_wans.enable_kernel_pm()
    return equal_wans


def join_holds(tb: StandardTestbed) -> int:
    """First flights the client's hywf held for a join."""
    return read_mib(tb.client.run(["nstat", "-az"]), "MPTcpExtSchedJoinWait")


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_each_connection_of_a_reused_socket_starts_clean(bed: StandardTestbed, scheduler: str) -> None:
    """Every connection of the socket arrives byte-exact and joins its wan2
    subflow; under redundant wan1 carries a copy of each one, and under
    hywf each one's first flight is held for its join, as a fresh socket's
    is. (Where hywf sends a connection is its random split's business: one
    drawn near 0 or 1 leaves a WAN without data.)"""
    bed.set_scheduler(scheduler)
    holds = join_holds(bed)
    moved_before = {end: sched_bursts_moved(bed, end) for end in ("client", "proxy")}
    # a new listener: an accepted connection takes its listener's scheduler
    with BulkServer(bed) as server:
        traces = traced_series(bed, server, ROUNDS, NBYTES, "upload",
                               extra=["--reuse-socket", "--gap-ms", "200"])
        port = server.port
    held = join_holds(bed) - holds
    moved = {end: sched_bursts_moved(bed, end) - n for end, n in moved_before.items()}
    carried = [(t.payload(1, port, True), t.payload(2, port, True)) for t in traces]
    joins = [sum(1 for p in t.packets[2] if p.syn and p.dport == port and p.mptcp_subtype == MPTCP_SUB_JOIN)
             for t in traces]
    ids = [t.result["subflow_ids"] for t in traces]
    print(f"\n{scheduler}: bytes per WAN for each connection {carried}; MP_JOIN SYNs on wan2 "
          f"{joins}; first flights held {held}; subflow ids {ids}; bursts moved {moved}")
    assert len(traces) == ROUNDS
    assert all(t.result["digest_ok"] for t in traces)
    assert all(n >= 1 for n in joins)
    # every subflow of every connection has a name of its own, never 0
    assert all(isinstance(i, list) and i and 0 not in i and len(set(i)) == len(i) for i in ids)
    # two equal, loss-free WANs move no burst; a disconnect ends one. One
    # is allowed per end for a burst blocked past the bound on a loaded
    # machine: counting disconnects gave one per connection.
    assert moved["client"] <= 1 and moved["proxy"] <= 1
    if scheduler == "redundant":
        # wan1's subflow is the one the socket keeps across a disconnect:
        # it carries a copy of everything (the first flight too), unless a
        # position left from the previous connection makes it skip data
        assert all(wan1 >= 0.75 * NBYTES for wan1, _ in carried)
    if scheduler == "hywf":
        assert held == ROUNDS
