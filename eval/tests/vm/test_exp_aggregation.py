"""E1's quick mode (braid_eval.experiments.aggregation) in braid's kernel: one upload over
two lossless 10 Mbit/s gateways of 80 ms RTT. Its invariant: MPTCP with the
`default` scheduler aggregates, well above single-gateway TCP (2x is the
ceiling; Binder's target for braid is 1.8x, reported by the full mode)."""

from __future__ import annotations

import os

from braid_eval.experiments.aggregation import QUICK_SCENARIOS, sweep


def test_quick_aggregation_beats_one_gateway() -> None:
    points = {p.config: p for p in sweep(("tcp-gw1", "default"), QUICK_SCENARIOS, (1,),
                                         tag=f"e1q{os.getpid() % 1000}")}
    assert all(p.digest_ok for p in points.values())
    tcp, mptcp = points["tcp-gw1"], points["default"]
    assert tcp.goodput_mbit <= 10.5, "one gateway cannot carry more than its 10 Mbit/s"
    assert mptcp.vs_tcp >= 1.3, f"MPTCP over both gateways: only {mptcp.vs_tcp:.2f}x TCP"
