"""Shared fixtures: a unique tag per test and a leak check after each one."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from braid_testbed import leftover_namespaces
from braid_testbed.topology import NS_PREFIX


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    return {line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()}


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
    links_before = root_links()
    namespaces_before = set(leftover_namespaces(NS_PREFIX))
    yield
    assert set(leftover_namespaces(NS_PREFIX)) - namespaces_before == set(), \
        "test leaked network namespaces"
    assert root_links() - links_before == set(), "test leaked interfaces in the root namespace"
