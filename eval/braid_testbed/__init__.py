"""braid's emulated network testbed: namespaces, shaped veth links, captures.

See eval/README.md. The standard topology is :class:`StandardTestbed`.

The names below are imported on first use (PEP 562), so that the
standalone tools next to this file (``websites``, ``pages``, ...) import
without the testbed's own dependencies (pyroute2): braid_wf's synthetic
corpus uses ``websites`` on machines that have only numpy.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .link import LinkSpec
    from .netns import Namespace, leftover_namespaces
    from .standard import ADDRESSES, StandardTestbed, ip, scheduler_testbed
    from .topology import Topology, kernel_has_netem

#: The testbed's standalone tools (bulk.py, pages.py, messages.py,
#: websites.py), run as scripts inside namespaces, sit next to this file.
TOOLS_DIR = Path(__file__).resolve().parent

_LAZY = {
    "LinkSpec": "link",
    "Namespace": "netns",
    "leftover_namespaces": "netns",
    "ADDRESSES": "standard",
    "StandardTestbed": "standard",
    "ip": "standard",
    "scheduler_testbed": "standard",
    "Topology": "topology",
    "kernel_has_netem": "topology",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ADDRESSES",
    "TOOLS_DIR",
    "LinkSpec",
    "Namespace",
    "StandardTestbed",
    "Topology",
    "ip",
    "kernel_has_netem",
    "leftover_namespaces",
    "scheduler_testbed",
]
