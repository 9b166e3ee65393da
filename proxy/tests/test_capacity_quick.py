"""Smoke run of the relay-capacity benchmark (proxy/bench/capacity.py
--quick): every stage runs and writes its figures. No figure is judged;
the benchmark measures, and a loaded test machine changes every rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from braid_testbed.wait import IN_VM

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    # Under TCG a hundred handshakes a second are beyond the emulated CPU.
    pytest.mark.skipif(IN_VM, reason="a load test: host kernel only"),
]


def test_quick_run_measures_every_stage(tmp_path: Path) -> None:
    out = tmp_path / "capacity.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "eval")}
    run = subprocess.run([sys.executable, str(REPO / "proxy/bench/capacity.py"), "--quick", "--json", str(out)],
                         capture_output=True, text=True, timeout=180, env=env, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "[hold 1/1]" in run.stdout and "[rate 1/3]" in run.stdout  # progress
    data = json.loads(out.read_text())
    params, res = data["params"], data["results"]
    assert params["mode"] == "quick" and params["clients"] == 10 and params["machine_cores"] >= 1
    assert "taskset -c 0" in params["pinning"] and params["kernel"] and params["braid"]
    (hold,) = res["hold"]
    assert hold["opened"] >= 0.9 * hold["n"] and hold["relay_rss_held_kib"] > 0
    assert res["rate"] and all(s["ok"] > 0 and s["relay_cpu_us_per_conn"] > 0 for s in res["rate"])
    assert [k["keys"] for k in res["keys"]] == [1, 100]
    assert res["headline"]["max_conns_per_s"] > 0
