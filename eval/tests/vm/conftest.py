"""VM tests run only inside braid's kernel (kernel/vm sets BRAID_IN_VM),
and each fails if the kernel reported a defect while it ran."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid_testbed import LinkSpec, StandardTestbed
from braid_testbed.kernel_log import KernelLog

EQUAL_WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("BRAID_IN_VM") == "1":
        return
    skip = pytest.mark.skip(reason="needs braid's kernel: run via `kernel/vm run -- pytest ...`")
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def kernel_stays_clean() -> Iterator[None]:
    """A WARN in the MPTCP core is a defect even if the transfer completed:
    every VM test reads the kernel log it caused (module fixtures' set-up
    counts towards the first test that uses them)."""
    if os.environ.get("BRAID_IN_VM") != "1":
        yield
        return
    with KernelLog() as log:
        yield
    problems = log.problems()
    assert not problems, "the kernel reported a defect:\n" + "\n".join(log.read()[-80:])


@pytest.fixture(scope="session")
def equal_wans() -> Iterator[StandardTestbed]:
    """Two equal WANs (EQUAL_WAN: 20 Mbit/s, 10 ms) and the kernel path
    manager, shared by the modules that need no other shape: a bring-up
    costs some 8 s under TCG. Each test sets the scheduler and path manager
    state it needs."""
    with StandardTestbed(f"eq{os.getpid() % 1000}", wan1=EQUAL_WAN, wan2=EQUAL_WAN) as tb:
        tb.enable_kernel_pm()
        yield tb
