"""What gwsteer-cli and ``braid status`` read from ``ss``'s MPTCP subflow lines."""

from __future__ import annotations

import re

#: ``tcp-ulp-mptcp flags:<letters>``: b = our backup flag, B = the peer's, j = join, M/m = initial.
SUBFLOW_FLAGS_RE = re.compile(r"tcp-ulp-mptcp flags:(\w*)")


def split_endpoint(text: str) -> tuple[str, str]:
    """``10.1.1.2:4000`` or ``[fc00::2]:4000`` (maybe ``%dev``) -> (address, port).

    >>> split_endpoint("[fe80::1%e1]:5201")
    ('fe80::1', '5201')
    >>> split_endpoint("10.1.1.2:4000")
    ('10.1.1.2', '4000')
    """
    addr, _, port = text.rpartition(":")
    return addr.strip("[]").split("%", 1)[0], port
