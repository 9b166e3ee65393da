"""braid's emulated network testbed: namespaces, shaped veth links, captures.

See eval/README.md. The standard topology is :class:`StandardTestbed`.
"""

from .link import LinkSpec
from .netns import Namespace, leftover_namespaces
from .standard import ADDRESSES, StandardTestbed, ip, scheduler_testbed
from .topology import Topology, kernel_has_netem

__all__ = [
    "ADDRESSES",
    "LinkSpec",
    "Namespace",
    "StandardTestbed",
    "Topology",
    "ip",
    "kernel_has_netem",
    "leftover_namespaces",
    "scheduler_testbed",
]
