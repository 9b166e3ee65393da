"""Read and validate the gwsteer gateway configuration.

The file is the one the C plugin reads (ELL ``l_settings``), parsed here
with :mod:`configparser`; the validation rules are the same, and the
defaults are read from ``gwsteer_defaults.h`` so there is one source of
truth for every default.

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

import configparser
import ipaddress
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_CONFIG_PATH = "/etc/braid/gateways.conf"
CONFIG_ENV = "BRAID_GWSTEER_CONFIG"
GATEWAY_PREFIX = "gateway "
GLOBAL_SECTION = "gwsteer"
GATEWAY_KEYS = ("source", "hops", "backup", "probe")
MAX_GATEWAYS = 32
MAX_ID_LEN = 31
_ID_RE = re.compile(rf"^[A-Za-z0-9_.-]{{1,{MAX_ID_LEN}}}$")
_DEFAULT_RE = re.compile(
    r'^GWSTEER_DEFAULT\((\w+),\s*(\w+),\s*"([^"]*)",\s*"([^"]*)"\)'
)
_BOOLS = {"1": True, "yes": True, "true": True, "on": True,
          "0": False, "no": False, "false": False, "off": False}


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
    """Parse the GWSTEER_DEFAULT(...) table of the C header.

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


@dataclass(frozen=True)
class Gateway:
    """A validated ``[gateway <id>]`` section."""

    id: str
    index: int
    source: IPAddress
    hops: tuple[IPAddress, ...]
    backup: bool
    probe: IPAddress

    @property
    def steering(self) -> str:
        """``onlink`` (policy route via one next hop) or ``srv6``."""
        if len(self.hops) == 1 and self.hops[0].version == self.source.version:
            return "onlink"
        return "srv6"


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


def _addr(path: str, where: str, key: str, text: str) -> IPAddress:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise ConfigError(f"{path}: [{where}] {key}: '{text.strip()}' is not an IP address") from None


def _addr_list(path: str, where: str, key: str, text: str) -> list[IPAddress]:
    if not text.strip():
        return []
    return [_addr(path, where, key, part) for part in text.split(",")]


def _global_value(path: str, key: DefaultKey, text: str) -> object:
    where = GLOBAL_SECTION
    text = text.strip()
    if key.type == "uint":
        if not text.isdigit() or int(text) > 0x7FFFFFFF:
            raise ConfigError(f"{path}: [{where}] {key.name}: '{text}' is not a valid non-negative integer")
        return int(text)
    if key.type == "double":
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"{path}: [{where}] {key.name}: '{text}' is not a valid number") from None
        if math.isnan(value):
            raise ConfigError(f"{path}: [{where}] {key.name}: '{text}' is not a valid number")
        return value
    if key.type == "bool":
        if text.lower() not in _BOOLS:
            raise ConfigError(f"{path}: [{where}] {key.name}: '{text}' is not a valid boolean")
        return _BOOLS[text.lower()]
    if key.type == "role":
        if text not in ("client", "proxy"):
            raise ConfigError(f"{path}: [{where}] role: '{text}' is not client or proxy")
        return text
    if key.type == "addr":
        return _addr(path, where, key.name, text) if text else None
    if key.type == "addrlist":
        return _addr_list(path, where, key.name, text)
    if key.name == "status_file" and not text.startswith("/"):
        raise ConfigError(f"{path}: [{where}] status_file: '{text}' is not an absolute path")
    return text


def _check_ranges(path: str, s: dict[str, object]) -> None:
    for name in ("status_interval_ms", "probe_interval_ms", "probe_timeout_ms",
                 "fail_after", "recover_after", "max_subflows", "subflow_timeout_ms"):
        if s[name] == 0:
            raise ConfigError(f"{path}: [{GLOBAL_SECTION}] {name}: must be greater than 0")
    alpha = s["ewma_alpha"]
    assert isinstance(alpha, float)
    if not 0 <= alpha < 1:
        raise ConfigError(f"{path}: [{GLOBAL_SECTION}] ewma_alpha: must be in [0, 1)")
    margin = s["switch_margin"]
    assert isinstance(margin, float)
    if not 0 <= margin <= 1:
        raise ConfigError(f"{path}: [{GLOBAL_SECTION}] switch_margin: must be in [0, 1]")
    max_sf = s["max_subflows"]
    assert isinstance(max_sf, int)
    if max_sf > MAX_GATEWAYS:
        raise ConfigError(f"{path}: [{GLOBAL_SECTION}] max_subflows: must be at most {MAX_GATEWAYS}")


def _gateway(path: str, section: configparser.SectionProxy, index: int,
             probe_target: IPAddress | None) -> Gateway:
    name = section.name
    gw_id = name[len(GATEWAY_PREFIX):]
    if not _ID_RE.match(gw_id):
        raise ConfigError(f"{path}: [{name}]: gateway id '{gw_id}' must be 1-{MAX_ID_LEN} "
                          "characters of A-Z a-z 0-9 - _ .")
    for key in section:
        if key not in GATEWAY_KEYS:
            raise ConfigError(f"{path}: [{name}] {key}: unknown key")
    source_text = section.get("source", "").strip()
    if not source_text:
        raise ConfigError(f"{path}: [{name}] source: missing")
    source = _addr(path, name, "source", source_text)
    hops_text = section.get("hops", "").strip()
    if not hops_text:
        raise ConfigError(f"{path}: [{name}] hops: missing (a next hop, or an SRv6 "
                          "segment list ending at the gateway)")
    hops = tuple(_addr(path, name, "hops", h) for h in hops_text.split(","))
    if not (len(hops) == 1 and hops[0].version == source.version):
        for hop in hops:
            if hop.version != 6:
                raise ConfigError(f"{path}: [{name}] hops: '{hop}' is not an IPv6 SRv6 segment "
                                  "(a multi-hop or cross-family list is an SRv6 segment list)")
    backup_text = section.get("backup", "false").strip().lower()
    if backup_text not in _BOOLS:
        raise ConfigError(f"{path}: [{name}] backup: '{backup_text}' is not a boolean")
    probe_text = section.get("probe", "").strip()
    probe: IPAddress | None = _addr(path, name, "probe", probe_text) if probe_text else None
    if probe is None:
        if probe_target is not None and probe_target.version == source.version:
            probe = probe_target
        elif len(hops) == 1 and hops[0].version == source.version:
            probe = hops[0]
    if probe is None or probe.version != source.version:
        raise ConfigError(f"{path}: [{name}] probe: missing or not of the family of source "
                          f"(set probe= or [{GLOBAL_SECTION}] probe_target=)")
    return Gateway(gw_id, index, source, hops, _BOOLS[backup_text], probe)


def load_config_text(text: str, path: str = "<string>") -> Config:
    """Validate configuration text; raise :class:`ConfigError` on bad input."""
    parser = configparser.ConfigParser(
        interpolation=None, strict=True, default_section="\x00none\x00",
        delimiters=("=",), comment_prefixes=("#",), inline_comment_prefixes=None,
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text, source=path)
    except configparser.DuplicateSectionError as e:
        raise ConfigError(f"{path}: [{e.section}]: duplicate gateway id") from None
    except configparser.DuplicateOptionError as e:
        raise ConfigError(f"{path}: [{e.section}] {e.option}: set twice") from None
    except configparser.Error as e:
        raise ConfigError(f"{path}: cannot parse: {e.message}") from None

    defaults = read_defaults()
    cfg = Config(path=path)
    given = parser[GLOBAL_SECTION] if parser.has_section(GLOBAL_SECTION) else None
    if given is not None:
        for key in given:
            if key not in defaults:
                raise ConfigError(f"{path}: [{GLOBAL_SECTION}] {key}: unknown key")
    for name, spec in defaults.items():
        raw = given.get(name, spec.default) if given is not None else spec.default
        cfg.settings[name] = _global_value(path, spec, raw or "")
    _check_ranges(path, cfg.settings)

    probe_target = cfg.settings["probe_target"]
    assert probe_target is None or isinstance(probe_target, (ipaddress.IPv4Address, ipaddress.IPv6Address))
    for section_name in parser.sections():
        if section_name == GLOBAL_SECTION:
            continue
        if not section_name.startswith(GATEWAY_PREFIX):
            raise ConfigError(f"{path}: [{section_name}]: unknown section "
                              f"(expected [{GLOBAL_SECTION}] or [gateway <id>])")
        gw = _gateway(path, parser[section_name], len(cfg.gateways), probe_target)
        for other in cfg.gateways:
            if other.source == gw.source:
                raise ConfigError(f"{path}: [{section_name}] source: {gw.source} is already "
                                  f"the source of gateway {other.id}")
        cfg.gateways.append(gw)
    if len(cfg.gateways) > MAX_GATEWAYS:
        raise ConfigError(f"{path}: at most {MAX_GATEWAYS} gateways are supported")
    if cfg.settings["role"] == "client" and not cfg.gateways:
        raise ConfigError(f"{path}: role client needs at least one [gateway <id>] section")
    return cfg


def load_config(path: str | None = None) -> Config:
    """Load the configuration file (``$BRAID_GWSTEER_CONFIG`` or the default)."""
    path = path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the configuration file: {e.strerror}") from None
    return load_config_text(text, path)


def defaults_table() -> str:
    """Markdown table of the [gwsteer] keys (README.md embeds it verbatim)."""
    rows = ["| key | type | default | why |", "|---|---|---|---|"]
    for key in read_defaults().values():
        rows.append(f"| `{key.name}` | {key.type} | `{key.default}` | {key.doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(defaults_table())
