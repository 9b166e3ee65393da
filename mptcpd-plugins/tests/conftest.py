"""pytest fixtures: a fresh namespace lab per test, always torn down."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid_testbed.mptcpd_lab import NS_PREFIX, Lab
from braid_testbed.netns import Namespace, leftover_namespaces


@pytest.fixture
def lab() -> Iterator[Lab]:
    """A namespace lab that is cleaned up even if the test fails."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    with Lab() as the_lab:
        yield the_lab
    # Only this run's namespaces: other suites may be running beside us.
    assert leftover_namespaces(f"{NS_PREFIX}{os.getpid()}-") == [], "test leaked namespaces"


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """A per-test directory readable by mptcpd."""
    tmp_path.chmod(0o755)
    return tmp_path


@functools.cache
def kernel_routes_srv6() -> bool:
    """Whether the running kernel takes an SRv6 route (a seg6local End on
    a veth, in a scratch namespace): gwsteer-route's multi-hop steering
    needs CONFIG_IPV6_SEG6_LWTUNNEL, which braid's kernel has and a host
    kernel may not."""
    with Namespace(f"braid-srv6-probe-{os.getpid()}") as ns:
        ns.run(["ip", "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        ns.run(["ip", "link", "set", "p0", "up"])
        return ns.run(["ip", "-6", "route", "add", "fc00:ff::1/128", "encap", "seg6local", "action", "End",
                       "dev", "p0"], check=False).returncode == 0


@pytest.fixture(autouse=True)
def srv6_kernel(request: pytest.FixtureRequest) -> None:
    """A test marked ``srv6`` needs SRv6 routes: on a host kernel without
    them it is skipped, saying so (vm-test.sh runs it in braid's kernel);
    in braid's VM their absence is a failure."""
    if request.node.get_closest_marker("srv6") is None or os.geteuid() != 0:
        return
    if kernel_routes_srv6():
        return
    if os.environ.get("BRAID_IN_VM") == "1":
        pytest.fail("braid's kernel takes no SRv6 route (CONFIG_IPV6_SEG6_LWTUNNEL)")
    pytest.skip("this kernel takes no SRv6 route (CONFIG_IPV6_SEG6_LWTUNNEL); "
                "mptcpd-plugins/vm-test.sh runs the test in braid's kernel")
