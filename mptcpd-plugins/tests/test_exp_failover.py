"""E3's quick mode (eval/braid_eval/experiments/failover.py) on the host kernel:
one 3 s outage of gw1 under gwsteer and under the in-kernel path manager,
measured from server-side captures. Checks what gwsteer's design promises:

* detection within fail_after x probe_interval + probe_timeout (600 ms
  with the test settings; 400 ms allowed for a loaded shared host);
* the connection carries on through gw2: no delivery gap longer than
  detection plus a few retransmission time-outs, and in-order delivery
  from the detection bound to the restore at least half of gw2's
  capacity. (Not t90 itself: the in-kernel MPTCP stack re-sends the data
  lost with gw1 by retransmission timer, so in-order delivery can stall
  for 100-400 ms well after gwsteer removed the subflow; whether 90 %
  is sustained within a given outage is what the experiment reports.
  The metric's own code is tested on synthetic timelines in
  eval/tests/host/test_failover_metrics.py);
* gw1 up again after recover_after answers, and the *same* connection
  sending new data through gw1 again, sustaining >= 25 % of a path for
  a second;
* every transfer byte-exact, and the in-order bytes rebuilt from the
  captures equal to what the server read (so the metric saw every byte).

The in-kernel PM's numbers are printed beside gwsteer's, not asserted:
which manager is faster is the experiment's finding, not an invariant.
Both runs must use both gateways before the cut, except an in-kernel PM
run whose join the server dropped for an unknown token (counted, so the
exception cannot hide a misconfigured baseline).
"""

from __future__ import annotations

import time

from braid_eval.experiments import failover as e3
from braid_testbed.mptcpd_lab import Lab

OUTAGE = 3.0
AFTER = 4.0
DETECT_BOUND = e3.DETECT_BOUND_S + 0.4
# recover_after answers, one per probe interval (hold_ms has passed in a 3 s outage).
UP_BOUND = e3.RECOVER_AFTER * e3.PROBE_INTERVAL_MS / 1000 + 1.0


def test_quick_failover_gwsteer_and_kernel_pm(lab: Lab) -> None:
    del lab  # the experiment opens its own labs; the fixture checks for root and leaks
    t0 = time.monotonic()
    capacity = e3.calibrate(20, seconds=3.0)
    assert 0.6 * 20e6 / 8 < capacity < 1.05 * 20e6 / 8, f"gw2 alone: {capacity * 8 / 1e6:.1f} Mbit/s"
    runs = {r.mode: r for r in e3.sweep((OUTAGE,), 1, 20, AFTER, capacity)}
    g, k = runs["gwsteer"], runs["kernel"]
    print(f"gwsteer {g}\nkernel  {k}\n({time.monotonic() - t0:.0f} s)")
    for r in (g, k):
        assert r.byte_exact, f"{r.mode}: transfer not byte-exact"
        assert r.capture_matches, f"{r.mode}: captures miss bytes the server read"
        both = r.pre_cut_mbit > 1.3 * capacity * 8 / 1e6
        if r.mode == "kernel" and not both and r.joins_no_token > 0:
            # Upstream, not braid: the in-kernel PM sends its join right after
            # the MP_CAPABLE ACK; on a loaded host the join can reach the
            # server first, is dropped, and its SYN is re-sent 1 s later.
            print(f"kernel: join raced its MP_CAPABLE ACK ({r.joins_no_token} dropped), pre-cut not checked")
            continue
        assert both, f"{r.mode}: both gateways in use before the cut: {r.pre_cut_by_gw}, " \
            f"{r.joins_no_token} joins dropped for no token"
    assert g.detect_s is not None and g.detect_s <= DETECT_BOUND, f"detection {g.detect_s}"
    assert g.gap_s <= DETECT_BOUND + 1.0, f"gwsteer: delivery stalled {g.gap_s:.2f} s"
    assert g.outage_rate >= 0.5 * capacity, f"gwsteer: {g.outage_rate * 8 / 1e6:.1f} Mbit/s via gw2"
    assert g.gw_up_s is not None and g.gw_up_s <= UP_BOUND, f"gw1 up again after {g.gw_up_s}"
    assert g.first_gw1_s is not None and g.first_gw1_s <= UP_BOUND + 1.0, \
        f"gw1's first new data {g.first_gw1_s} s after the restore"
    assert g.reuse_s is not None, \
        f"gw1 never carried >= 25 % again before the transfer ended (first new data {g.first_gw1_s} s)"
