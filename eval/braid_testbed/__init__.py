"""braid's emulated network testbed: namespaces, shaped veth links, captures.

See eval/README.md. The standard topology is :class:`StandardTestbed`.
"""

from pathlib import Path

from .link import LinkSpec
from .netns import Namespace, leftover_namespaces
from .standard import ADDRESSES, StandardTestbed, ip, scheduler_testbed
from .topology import Topology, kernel_has_netem

#: The testbed's standalone tools (bulk.py, pages.py, messages.py,
#: websites.py), run as scripts inside namespaces, sit next to this file.
TOOLS_DIR = Path(__file__).resolve().parent

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
