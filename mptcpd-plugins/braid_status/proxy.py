"""braid-proxy's state from its ``/metrics`` endpoint (Prometheus text).

Only what ``braid status`` shows is read: the build info (role,
version), connections open and accepted, uptime and whether the proxy
has loaded gwsteer's status file. The parser reads unlabelled samples
and the labels of ``build_info``, which is all of that.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass

_TIMEOUT_S = 3
_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_PREFIX = "braid_proxy_"


@dataclass(frozen=True)
class ProxyState:
    """What ``braid status`` says about braid-proxy."""

    url: str
    reachable: bool
    error: str = ""
    role: str = ""
    version: str = ""
    conns_active: float | None = None
    conns_total: float | None = None
    uptime_seconds: float | None = None
    gateway_status_loaded: float | None = None


def parse_metrics(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Unlabelled ``braid_proxy_*`` samples by name (prefix removed), and build_info's labels."""
    values: dict[str, float] = {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        m = _SAMPLE_RE.match(line)
        if m is None or not m.group(1).startswith(_PREFIX):
            continue
        name = m.group(1)[len(_PREFIX):]
        if name == "build_info" and m.group(2):
            info = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL_RE.findall(m.group(2))}
        elif not m.group(2):
            try:
                values[name] = float(m.group(3))
            except ValueError:
                continue
    return values, info


def fetch(url: str) -> ProxyState:
    """Scrape ``url``; an unreachable proxy is a state (reachable False, why), not an error."""
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
            text = resp.read(4 << 20).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        return ProxyState(url, reachable=False, error=str(reason))
    values, info = parse_metrics(text)
    if not info and not values:
        return ProxyState(url, reachable=False, error="no braid_proxy_ metrics at that URL")
    return ProxyState(url, reachable=True, role=info.get("role", ""), version=info.get("version", ""),
                      conns_active=values.get("conns_active"), conns_total=values.get("conns_total"),
                      uptime_seconds=values.get("uptime_seconds"),
                      gateway_status_loaded=values.get("gateway_status_loaded"))
