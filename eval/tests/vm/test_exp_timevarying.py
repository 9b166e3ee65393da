"""E1b's quick mode (braid_eval.experiments.timevarying) in braid's kernel: gw1's path steps
through Binder's Table 2 three times faster, then dies silently for 3 s.
Its invariants: single-gateway TCP stops when gw1 dies; MPTCP with
`default` goes on over gw2 and carries more than TCP over the whole run."""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

from braid_eval.experiments.timevarying import QUICK_CONFIGS, sweep


def test_quick_time_varying_run_survives_gw1s_death() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = {r.config: r for r in sweep(QUICK_CONFIGS, 1 / 3, Path(tmp) / "progress.txt",
                                           tag=f"e1bq{os.getpid() % 1000}")}
    tcp, mptcp = runs["tcp-gw1"], runs["default"]
    print(f"\nper step, TCP: {[round(x, 1) for x in tcp.per_step]}"
          f"\nper step, default: {[round(x, 1) for x in mptcp.per_step]}")
    assert tcp.per_step[-1] < 0.5, "TCP through a dead gw1 still delivered"
    assert mptcp.per_step[-1] > 3.0, "MPTCP did not go on over gw2 when gw1 died"
    assert statistics.mean(mptcp.per_second) > 1.3 * statistics.mean(tcp.per_second)
