"""braid gwsteer: routing helper and CLI for the gwsteer mptcpd plugin.

The C plugin (../gwsteer.c) decides which subflows exist; this package
makes "a subflow from source address k leaves through gateway k" true by
installing policy routes and SRv6 segment lists, and shows what the
plugin is doing.  Both read the same configuration file and the same
defaults (../gwsteer_defaults.h).
"""

import contextlib
import importlib.metadata

__all__ = ["cli", "config", "route", "status", "version"]


def version() -> str:
    """braid's version from its package metadata (--version)."""
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version("braid")
    return "unknown (no package metadata)"
