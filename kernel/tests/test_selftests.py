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
    env = {"BRAID_SCHED": "bernoulli", "BRAID_SYSCTLS": "net.mptcp.bernoulli_batch=16", "PATH": "/usr/bin:/bin"}
    r = subprocess.run(["bash", "-c", script], cwd=stage, env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = log.read_text().splitlines()
    for ns in ("ns1", "ns2", "ns3"):
        assert f"ip netns exec braid-test-{ns} sysctl -q net.mptcp.scheduler=bernoulli" in lines, lines
        assert f"ip netns exec braid-test-{ns} sysctl -q net.mptcp.bernoulli_batch=16" in lines, lines


@pytest.mark.parametrize("args", [["--sysctl", "bernoulli_batch=16", "simult_flows.sh"],
                                  ["--sysctl"], ["--bogus", "simult_flows.sh"], ["dir/simult_flows.sh"]])
def test_bad_arguments_are_refused_before_anything_runs(args: list[str]) -> None:
    r = subprocess.run([str(KERNEL / "selftests"), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "selftests:" in r.stderr or "Usage" in r.stdout + r.stderr or "kernel/selftests" in r.stdout
