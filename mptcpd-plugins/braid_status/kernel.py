"""The running kernel as braid cares about it: release, MPTCP scheduler,
braid's schedulers and their sysctls, and the ``MPTcpExt`` counters.

Everything is read from ``/proc`` of the calling thread's network
namespace (``/proc/thread-self/net``: a thread that entered another
namespace reads that one's counters, as a process started there does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

#: The schedulers braid's kernel patches add (kernel/patches); all of
#: them registered means braid's kernel.
BRAID_SCHEDULERS = ("hywf", "redundant", "bernoulli", "delaybal")

MPTCP_SYSCTL_DIR = Path("/proc/sys/net/mptcp")


@dataclass(frozen=True)
class KernelInfo:
    """What ``braid status`` and the exporter show about the kernel."""

    release: str
    #: Whether the namespace has MPTCP at all (/proc/sys/net/mptcp exists).
    mptcp: bool
    #: net.mptcp.enabled (None without MPTCP).
    enabled: bool | None
    #: net.mptcp.scheduler ("" where the kernel has no such sysctl).
    scheduler: str
    available: tuple[str, ...]
    #: Per-scheduler parameters: sysctls named <scheduler>_<param>, by full name.
    params: dict[str, int] = field(default_factory=dict)

    @property
    def braid(self) -> bool:
        """braid's kernel: every scheduler of braid's is registered."""
        return all(s in self.available for s in BRAID_SCHEDULERS)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def scheduler_params(directory: Path, available: tuple[str, ...]) -> dict[str, int]:
    """Integer sysctls of ``directory`` whose name starts with a registered
    scheduler's name and ``_`` (``hywf_ps_permille``), by name."""
    params: dict[str, int] = {}
    prefixes = tuple(f"{s}_" for s in available)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return params
    for name in names:
        if not prefixes or not name.startswith(prefixes):
            continue
        value = _read(directory / name)
        if value is not None and value.lstrip("-").isdigit():
            params[name] = int(value)
    return params


def read_kernel(sysctl_dir: Path = MPTCP_SYSCTL_DIR) -> KernelInfo:
    """The kernel's release and its MPTCP scheduler settings."""
    release = os.uname().release
    if not sysctl_dir.is_dir():
        return KernelInfo(release, mptcp=False, enabled=None, scheduler="", available=())
    available = tuple((_read(sysctl_dir / "available_schedulers") or "").split())
    enabled = _read(sysctl_dir / "enabled")
    return KernelInfo(release, mptcp=True, enabled=None if enabled is None else enabled != "0",
                      scheduler=_read(sysctl_dir / "scheduler") or "", available=available,
                      params=scheduler_params(sysctl_dir, available))


def netstat_path() -> Path:
    """This thread's namespace's /proc/net/netstat."""
    own = Path("/proc/thread-self/net/netstat")
    return own if own.exists() else Path("/proc/net/netstat")


def parse_netstat(text: str, group: str = "MPTcpExt") -> dict[str, int]:
    """One group's counters from /proc/net/netstat's name line / value line pairs.

    >>> parse_netstat("MPTcpExt: SchedBurstMoved SchedBacklogRun\\nMPTcpExt: 3 0\\n")
    {'SchedBurstMoved': 3, 'SchedBacklogRun': 0}
    """
    rows = [line.split() for line in text.splitlines() if line.startswith(f"{group}:")]
    if len(rows) < 2:
        return {}
    names, values = rows[0][1:], rows[1][1:]
    return {n: int(v) for n, v in zip(names, values, strict=False) if v.isdigit()}


def mptcp_counters(path: Path | None = None) -> dict[str, int]:
    """The MPTcpExt counters ({} where the kernel has none)."""
    text = _read(path or netstat_path())
    return parse_netstat(text) if text else {}
