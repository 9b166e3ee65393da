"""Backstop timeouts of the Ansible and packaging tests.

Every limit in these tests bounds a hang, not a speed: on an idle 2-core
machine ansible-lint takes about 20 s and a converge about a minute.
On a machine busy with other work the stage gets far less (at idle priority
beside braid's VM, ansible-lint took 271 s): ``BRAID_TIMEOUT_SCALE`` (a whole
number, default 1) stretches every limit so that a starved run is not taken
for a hung one. ansible/test.sh and packaging/test.sh scale their own limits
by the same number (backstop.sh).
"""

from __future__ import annotations

import os


def _scale() -> int:
    raw = os.environ.get("BRAID_TIMEOUT_SCALE", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"BRAID_TIMEOUT_SCALE={raw!r}: want a whole number of 1 or more")
    return int(raw)


SCALE = _scale()


def backstop(seconds: float) -> float:
    """``seconds``, the limit on an idle machine, stretched by ``BRAID_TIMEOUT_SCALE``."""
    return seconds * SCALE
