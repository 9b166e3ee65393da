"""braid's operator view: ``braid status`` and ``braid exporter``.

Both read the same sources, each through one module:

* ``gateways``: gwsteer's status file (``/run/braid/gateways.json``);
* ``kernel``: the running kernel, its MPTCP scheduler sysctls and the
  ``MPTcpExt`` counters braid's schedulers add;
* ``connections``: live MPTCP connections and their subflows (``ss``);
* ``proxy``: braid-proxy's ``/metrics`` endpoint (optional).

``report`` turns them into what ``braid status`` prints, ``exposition``
into the Prometheus text format that ``exporter`` serves; ``page`` keeps
the status page's history, ``pages`` the recent page loads rebuilt from
the sampled connections (hywf's per-page split as each network saw it);
``cli`` is the ``braid`` command.
"""

import contextlib
import importlib.metadata

__all__ = ["version"]


def version() -> str:
    """braid's version from its package metadata (--version, build info)."""
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version("braid")
    return "unknown"
