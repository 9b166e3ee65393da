"""Waiting on the testbed: one polling helper, and how much longer time
limits are in braid's VM."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Inside braid's kernel under virtme-ng (``kernel/vm`` sets BRAID_IN_VM=1).
IN_VM = os.environ.get("BRAID_IN_VM") == "1"

#: braid's VM emulates its CPU (TCG): process starts, key generation and
#: handshakes take several times as long as on the host. Time limits are
#: stretched by this factor; what a test expects of the network is not.
TIME_SCALE = 6.0 if IN_VM else 1.0


def scaled(seconds: float) -> float:
    """A time limit in host seconds, stretched for braid's VM."""
    return seconds * TIME_SCALE


def wait_for(what: str, check: Callable[[], T], timeout: float, interval: float = 0.05,
             diagnosis: Callable[[], str] | None = None) -> T:
    """Poll ``check()`` until it returns something true, and return that.

    ``timeout`` is in host seconds (stretched by ``TIME_SCALE`` in braid's
    VM); past it raise TimeoutError naming ``what``, with ``diagnosis()``
    (what to look at) appended.
    """
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f"\n{diagnosis()}" if diagnosis else ""
            raise TimeoutError(f"{what}: not after {limit:g} s{more}")
        time.sleep(interval)
