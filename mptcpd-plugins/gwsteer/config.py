"""The gwsteer gateway configuration, as the C loader validated it.

There is one validator: the mptcpd plugin's loader (``gateway_config.c``),
run as the ``gwsteer-check`` command.  This module does not parse the
file; it runs ``gwsteer-check --json`` and reads the settings and
gateways from its output, so the routing helper, the CLI and the plugin
accept exactly the same files and refuse the others with the same
message.  The defaults table for the README still comes from
``gwsteer_defaults.h``.

Example::

    >>> cfg = load_config_text('''
    ... [gwsteer]
    ... probe_target = 10.99.0.1
    ... [gateway gw1]
    ... source = 10.1.1.2
    ... hops = 10.1.1.1
    ... ''')
    >>> cfg.gateways[0].id, cfg.gateways[0].steering
    ('gw1', 'onlink')
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_CONFIG_PATH = "/etc/braid/gateways.conf"
CONFIG_ENV = "BRAID_GWSTEER_CONFIG"
CHECK_ENV = "BRAID_GWSTEER_CHECK"
MAX_GATEWAYS = 32
_DEFAULT_RE = re.compile(
    r'^GWSTEER_DEFAULT\((\w+),\s*(\w+),\s*"([^"]*)",\s*"([^"]*)"\)'
)
#: gwsteer-check answers at once; a hang is a bug, not a reason to wait.
_CHECK_TIMEOUT_S = 10


class ConfigError(ValueError):
    """Bad configuration; the message names the file, section and field."""


@dataclass(frozen=True)
class DefaultKey:
    """One ``[gwsteer]`` key as declared in gwsteer_defaults.h."""

    name: str
    type: str
    default: str
    doc: str


def defaults_header() -> Path:
    """Locate gwsteer_defaults.h (source tree, install dir or env)."""
    env = os.environ.get("BRAID_GWSTEER_DEFAULTS")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parent
    candidates += [here.parent / "gwsteer_defaults.h",
                   here.parent.parent / "gwsteer_defaults.h"]
    for c in candidates:
        if c.is_file():
            return c
    raise ConfigError("cannot find gwsteer_defaults.h (set BRAID_GWSTEER_DEFAULTS)")


def read_defaults(header: Path | None = None) -> dict[str, DefaultKey]:
    """Parse the GWSTEER_DEFAULT(...) table of the C header (for the README).

    >>> read_defaults()["probe_interval_ms"].default
    '200'
    """
    text = (header or defaults_header()).read_text()
    keys: dict[str, DefaultKey] = {}
    for line in text.splitlines():
        m = _DEFAULT_RE.match(line.strip())
        if m:
            keys[m.group(1)] = DefaultKey(*m.groups())
    if not keys:
        raise ConfigError("gwsteer_defaults.h lists no defaults")
    return keys


def check_command() -> str:
    """Path of ``gwsteer-check``: $BRAID_GWSTEER_CHECK, the source tree, the install, PATH."""
    env = os.environ.get(CHECK_ENV)
    if env:
        return env
    here = Path(__file__).resolve().parent
    for c in (here.parent / "gwsteer-check", here.parent.parent.parent / "bin" / "gwsteer-check"):
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("gwsteer-check")
    if found is None:
        raise ConfigError("cannot find gwsteer-check, the configuration validator "
                          f"(build it with make, install it, or set {CHECK_ENV})")
    return found


@dataclass(frozen=True)
class Gateway:
    """A validated ``[gateway <id>]`` section."""

    id: str
    index: int
    #: The fixed source address; ``None``: the current address of ``interface``.
    source: IPAddress | None
    #: Empty for a gateway named by ``interface``: the next hop is the
    #: interface's default route (DHCP, RA).
    hops: tuple[IPAddress, ...]
    backup: bool
    probe: IPAddress
    #: Prefixes of the peers this gateway reaches (none: every peer).
    peers: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    #: ``gwsteer`` (gwsteer-route installs its route) or ``external``
    #: (another tool routes its source, e.g. braid-openvpn's tunnel hook).
    route: str = "gwsteer"
    #: The interface whose address (and default route) the gateway follows.
    interface: str | None = None
    #: 4 or 6.
    version: int = 4

    @property
    def steering(self) -> str:
        """``onlink`` (policy route via one next hop, given or the
        interface's default route) or ``srv6``."""
        if not self.hops or (len(self.hops) == 1 and self.hops[0].version == self.version):
            return "onlink"
        return "srv6"

    @property
    def dynamic(self) -> bool:
        """Whether its source or next hop comes from the interface's current state."""
        return self.interface is not None and (self.source is None or not self.hops)


@dataclass
class Config:
    """The whole validated configuration."""

    path: str
    settings: dict[str, object] = field(default_factory=dict)
    gateways: list[Gateway] = field(default_factory=list)

    def gateway(self, gw_id: str) -> Gateway:
        """Return gateway ``gw_id`` or raise a clear error."""
        for g in self.gateways:
            if g.id == gw_id:
                return g
        known = ", ".join(g.id for g in self.gateways) or "none"
        raise ConfigError(f"{self.path}: unknown gateway '{gw_id}' (known: {known})")

    def get_int(self, key: str) -> int:
        """Typed accessor for integer settings."""
        value = self.settings[key]
        assert isinstance(value, int)
        return value

    def get_str(self, key: str) -> str:
        """Typed accessor for string settings."""
        value = self.settings[key]
        assert isinstance(value, str)
        return value


def _from_check(data: dict[str, Any]) -> Config:
    """Build a :class:`Config` from gwsteer-check's JSON."""
    cfg = Config(path=str(data["path"]), settings=dict(data["settings"]))
    for g in data["gateways"]:
        cfg.gateways.append(Gateway(
            id=g["id"], index=g["index"],
            source=ipaddress.ip_address(g["source"]) if g["source"] is not None else None,
            hops=tuple(ipaddress.ip_address(h) for h in g["hops"]), backup=g["backup"],
            probe=ipaddress.ip_address(g["probe"]),
            peers=tuple(ipaddress.ip_network(p) for p in g["peers"]), route=g["route"],
            interface=g["interface"], version=6 if g["family"] == "ipv6" else 4))
    return cfg


def load_config(path: str | None = None) -> Config:
    """Validate the configuration file with gwsteer-check and read it.

    ``path`` defaults to ``$BRAID_GWSTEER_CONFIG``, else the default path.
    Raises :class:`ConfigError` with gwsteer-check's message.
    """
    path = path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{path}: cannot read the configuration file")
    try:
        p = subprocess.run([check_command(), "--json", path], capture_output=True, text=True,
                           timeout=_CHECK_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"{path}: cannot run gwsteer-check: {e}") from None
    if p.returncode != 0:
        message = p.stderr.strip() or f"gwsteer-check exited {p.returncode}"
        raise ConfigError(message.splitlines()[0])
    try:
        return _from_check(json.loads(p.stdout))
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: unexpected gwsteer-check output: {e}") from None


def load_config_text(text: str, path: str = "<string>") -> Config:
    """Validate configuration text (written to a temporary file) with gwsteer-check.

    Messages name ``path`` in place of the temporary file.
    """
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / "gateways.conf"
        tmp.write_text(text)
        try:
            cfg = load_config(str(tmp))
        except ConfigError as e:
            raise ConfigError(str(e).replace(str(tmp), path)) from None
    cfg.path = path
    return cfg


def defaults_table() -> str:
    """Markdown table of the [gwsteer] keys (README.md embeds it verbatim)."""
    rows = ["| key | type | default | why |", "|---|---|---|---|"]
    for key in read_defaults().values():
        rows.append(f"| `{key.name}` | {key.type} | `{key.default}` | {key.doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(defaults_table())
