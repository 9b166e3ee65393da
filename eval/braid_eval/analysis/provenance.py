"""Where an experiment's numbers came from: kernel, braid checkout, date.

Every experiment's JSON carries these next to its parameters, so a result
file read later says which kernel and which braid produced it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def installed_version() -> str:
    """braid's version from its package metadata (--version)."""
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version("braid")
    return "unknown (no package metadata)"


def braid_version() -> str:
    """The checkout's commit (``-dirty`` with local changes), or ``unknown``.
    In braid's VM the host's answer (BRAID_COMMIT, set by kernel/vm): there
    git read the checkout over 9p under TCG and every experiment said
    ``unknown``."""
    if os.environ.get("BRAID_COMMIT"):
        return os.environ["BRAID_COMMIT"]
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev or "unknown"


def provenance() -> dict[str, str]:
    """Kernel release, braid commit and UTC date, for a result's parameters."""
    return {"kernel": platform.release(), "braid": braid_version(),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}
