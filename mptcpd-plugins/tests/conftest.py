"""pytest fixtures: a fresh namespace lab per test, always torn down."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid_testbed.mptcpd_lab import NS_PREFIX, Lab
from braid_testbed.netns import leftover_namespaces


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
