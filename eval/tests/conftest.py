"""Shared fixtures: a unique tag per test and a leak check after each one.

The leak check sees only what this process's testbeds make, so that other
suites may run beside this one (make test runs the ansible stage and the
component suites beside the host tests): its topologies get namespace
names of their own (``braid-<pid>-...``), and in the root namespace a
topology only ever adds its transient links.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from braid_testbed import leftover_namespaces
from braid_testbed.topology import NS_PREFIX, TRANSIENT_LINK_PREFIX, Topology

Topology.ns_prefix = f"{NS_PREFIX}{os.getpid()}-"
# Another process's transient link lives for one move into its namespace.
TRANSIENT_LINK_GRACE_S = 2.0


def transient_links() -> set[str]:
    """The topologies' transient links now in the root namespace."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    names = {line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()}
    return {n for n in names if n.startswith(TRANSIENT_LINK_PREFIX)}


def links_left(before: set[str]) -> set[str]:
    """Transient links added since ``before`` that outlast the grace."""
    deadline = time.monotonic() + TRANSIENT_LINK_GRACE_S
    while (added := transient_links() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    return added


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> str:
    """Short unique topology tag for this test."""
    return f"t{os.getpid() % 10000}{abs(hash(request.node.name)) % 1000}"


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Every test must leave no namespaces or veths behind, pass or fail."""
    if os.geteuid() != 0:
        yield
        return
    # Module-scoped testbeds outlive a test: only what the test itself
    # added must be gone when it ends.
    links_before = transient_links()
    namespaces_before = set(leftover_namespaces(Topology.ns_prefix))
    yield
    assert set(leftover_namespaces(Topology.ns_prefix)) - namespaces_before == set(), \
        "test leaked network namespaces"
    assert links_left(links_before) == set(), "test leaked interfaces in the root namespace"
