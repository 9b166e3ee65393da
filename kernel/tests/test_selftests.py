"""kernel/selftests: upstream's MPTCP selftests built from braid's tree,
with the scheduler set in every namespace a test creates. The run itself
needs braid's kernel (the VM); here the build and the namespace hook."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import kbuild

KERNEL = Path(__file__).resolve().parents[1]


def test_build_and_scheduler_in_every_namespace(tmp_path: Path) -> None:
    if not (kbuild.current_source_tree() / "tools/testing/selftests/net/mptcp").is_dir():
        pytest.skip("kernel source not unpacked yet (kernel/build unpacks it)")
    r = subprocess.run([str(KERNEL / "selftests"), "--build-only"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    stage = Path(r.stdout.strip().split("programs ready in ")[1])
    for prog in ("mptcp_connect", "pm_nl_ctl", "mptcp_sockopt", "mptcp_inq"):
        assert (stage / prog).is_file(), prog
    # The test scripts' own namespace set-up, with the commands recorded
    # instead of run: each namespace gets the scheduler.
    log = tmp_path / "ip.log"
    script = f"""
        . ./mptcp_lib.sh
        setup_ns() {{ local n; for n in "$@"; do eval "$n=braid-test-$n"; done; }}
        ip() {{ echo "ip $*" >> {log}; }}
        mptcp_lib_ns_init ns1 ns2 ns3
    """
    r = subprocess.run(["bash", "-c", script], cwd=stage, env={"BRAID_SCHED": "bernoulli", "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = log.read_text().splitlines()
    for ns in ("ns1", "ns2", "ns3"):
        assert f"ip netns exec braid-test-{ns} sysctl -q net.mptcp.scheduler=bernoulli" in lines, lines
