"""Polling for a condition with a bound, for tests and experiments on the testbed."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(what: str, check: Callable[[], object], timeout: float, interval: float = 0.1,
             diagnosis: Callable[[], str] | None = None) -> None:
    """Poll ``check()`` until true; after ``timeout`` s raise TimeoutError
    naming ``what``, with ``diagnosis()`` (what to look at) appended."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            more = f"\n{diagnosis()}" if diagnosis else ""
            raise TimeoutError(f"{what}: not after {timeout:.0f} s{more}")
        time.sleep(interval)
