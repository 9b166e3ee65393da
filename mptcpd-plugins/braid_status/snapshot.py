"""Read every source once: the kernel, gwsteer's status file, the connections."""

from __future__ import annotations

from dataclasses import dataclass, field

from .connections import CommandError, Connection, connections
from .gateways import GatewayStatus, StatusFileError, load
from .kernel import KernelInfo, mptcp_counters, read_kernel


@dataclass(frozen=True)
class Snapshot:
    """What one ``braid status`` or one scrape reports, read at one moment."""

    kernel: KernelInfo
    #: MPTcpExt counters by name.
    counters: dict[str, int]
    #: None when the status file could not be read (status_error says why) or was not asked for.
    gateways: GatewayStatus | None
    connections: list[Connection] = field(default_factory=list)
    status_error: str = ""
    connections_error: str = ""


def take(status_file: str | None) -> Snapshot:
    """Read everything; a source that fails is recorded, not raised (the exporter keeps serving)."""
    gateways, status_error = None, ""
    if status_file:
        try:
            gateways = load(status_file)
        except StatusFileError as e:
            status_error = str(e)
    try:
        conns, conns_error = connections(), ""
    except CommandError as e:
        conns, conns_error = [], str(e)
    return Snapshot(read_kernel(), mptcp_counters(), gateways, conns, status_error, conns_error)
