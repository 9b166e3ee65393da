"""VM tests run only inside braid's kernel (kernel/vm sets BRAID_IN_VM)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("BRAID_IN_VM") == "1":
        return
    skip = pytest.mark.skip(reason="needs braid's kernel: run via `kernel/vm run -- pytest ...`")
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)
