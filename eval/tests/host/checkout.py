"""The checkout as git sees it, for the host tests that read or copy every file."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


@functools.cache
def checkout_files() -> tuple[str, ...]:
    """Paths, relative to the root, of the present files git tracks or would
    track: the working tree's, so an uncommitted change counts, and nothing
    git ignores (build outputs, out/)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, check=True, timeout=60).stdout
    return tuple(name for name in names.decode().split("\0") if name and (REPO / name).is_file())
