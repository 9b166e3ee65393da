"""gwsteer's status file: the gateways and their health, as the plugin wrote them.

The plugin (``status_file.c``) rewrites the file atomically at every
state change and at least every ``status_interval_ms``; its format is
documented in mptcpd-plugins/README.md ("Status file").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: gwsteer's default ``status_file`` (gwsteer_defaults.h; a test keeps them equal).
DEFAULT_STATUS_FILE = "/run/braid/gateways.json"


class StatusFileError(Exception):
    """The status file is missing or not what gwsteer writes (one-line message)."""


@dataclass(frozen=True)
class Gateway:
    """One gateway as gwsteer sees it."""

    id: str
    source: str
    up: bool
    backup: bool
    best: bool
    #: Smoothed and last probe RTT in milliseconds; None until a probe was answered.
    ewma_ms: float | None
    rtt_ms: float | None
    #: AvMet preference score in [0, 1]: EWMA of "answered a probe round first".
    avmet: float
    last_change: str
    #: Live subflows through the gateway over all connections of this mptcpd.
    subflows: int
    #: The interface whose address the gateway follows ("" if none); ``source``
    #: is then its current address, "" while it has none.
    interface: str = ""
    #: Lost fraction of the last ``probes`` probes (up to 64); None before the first.
    probe_loss: float | None = None
    probes: int = 0


@dataclass(frozen=True)
class GatewayStatus:
    """The whole file."""

    path: str
    updated: str
    gateways: tuple[Gateway, ...]


def rfc3339_seconds(stamp: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 UTC stamp, None if it does not parse.

    >>> rfc3339_seconds("1970-01-01T00:01:00.500Z")
    60.5
    """
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _gateway(raw: Any) -> Gateway:
    if not isinstance(raw, dict):
        raise TypeError("a gateway is not an object")
    return Gateway(id=str(raw["id"]), source=str(raw["source"]), up=bool(raw["up"]),
                   backup=bool(raw["backup"]), best=bool(raw.get("best", False)),
                   ewma_ms=_optional_float(raw.get("ewma_ms")), rtt_ms=_optional_float(raw.get("rtt_ms")),
                   avmet=float(raw.get("avmet", 0.0)), last_change=str(raw.get("last_change", "")),
                   subflows=int(raw.get("subflows", 0)), interface=str(raw.get("interface", "")),
                   probe_loss=_optional_float(raw.get("probe_loss")), probes=int(raw.get("probes", 0)))


def load(path: str) -> GatewayStatus:
    """Read and check the status file; StatusFileError says what is wrong in one line."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise StatusFileError(f"{path}: no gwsteer status file (is mptcpd running with "
                              "--path-manager=gwsteer? --status names another file)") from None
    except OSError as e:
        raise StatusFileError(f"{path}: cannot read the gwsteer status file: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StatusFileError(f"{path}: not a gwsteer status file (not JSON: {e})") from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("gateways"), list):
        raise StatusFileError(f"{path}: not a gwsteer status file (want version 1 with a gateway list)")
    try:
        gateways = tuple(_gateway(g) for g in data["gateways"])
    except (KeyError, TypeError, ValueError) as e:
        raise StatusFileError(f"{path}: a gateway entry is malformed ({type(e).__name__}: {e})") from None
    return GatewayStatus(path=path, updated=str(data.get("updated", "")), gateways=gateways)
