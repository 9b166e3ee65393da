"""Recording upstream's simult_flows.sh runs: the lines kernel/selftests
prints, passes and failures, a name that runs into its number, and the
RESULTS.md section made from them."""

from __future__ import annotations

import json
from pathlib import Path

from braid_eval.analysis.selftest_record import main, parse
from braid_eval.analysis.summary import simult_flows_section

LOG = """selftests: simult_flows.sh under net.mptcp.scheduler=bernoulli in 6.12.117-braid
01 balanced bwidth                                             7714 max 7906       [ OK ]
03 balanced bwidth with unbalanced delay                       transfer slower than expected! runtime 7928 ms, \
expected 7906 mstransfer slower than expected! runtime 8555 ms, expected 7906 ms max 7906       [FAIL]
05 unbalanced bwidth                                           transfer slower than expected! runtime 12602 ms, \
expected 11921 ms max 11921      [IGNO] (flaky)
10 unbalanced bwidth with opposed, unbalanced delay - reverse direction11485 max 11921      [ OK ]
ok 1 - simult_flows: balanced bwidth # time=11099ms
"""


def test_parse_passes_failures_and_overlong_names() -> None:
    rows = parse(LOG)
    assert [r["n"] for r in rows] == [1, 3, 5, 10]
    assert rows[0] == {"n": 1, "test": "balanced bwidth", "ms": 7714, "max_ms": 7906, "ok": True}
    assert rows[1]["test"] == "balanced bwidth with unbalanced delay"
    assert rows[1]["ms"] == 8555 and not rows[1]["ok"]  # the slower side
    assert rows[2]["ms"] == 12602 and not rows[2]["ok"]  # a flaky test's failure is a failure
    assert rows[3]["test"].endswith("reverse direction") and rows[3]["ms"] == 11485


def test_record_and_section(tmp_path: Path) -> None:
    log = tmp_path / "bernoulli.log"
    log.write_text(LOG)
    out = tmp_path / "simult-flows.json"
    assert main(["--out", str(out), f"bernoulli={log}"]) == 0
    data = json.loads(out.read_text())
    assert data["params"]["kernel"] == "6.12.117-braid"  # the guest's, from the log
    page = "\n".join(simult_flows_section(data))
    assert "| 03 balanced bwidth with unbalanced delay | 7906 | 8555 **FAIL** |" in page
    assert "Passed: bernoulli 2/4." in page


def test_kernel_read_from_a_run_with_extra_sysctls(tmp_path: Path) -> None:
    log = tmp_path / "bernoulli.log"
    log.write_text(LOG.replace("scheduler=bernoulli in", "scheduler=bernoulli net.mptcp.bernoulli_batch=16 in"))
    out = tmp_path / "simult-flows.json"
    assert main(["--out", str(out), f"bernoulli={log}"]) == 0
    assert json.loads(out.read_text())["params"]["kernel"] == "6.12.117-braid"
