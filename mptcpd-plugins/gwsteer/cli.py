"""``gwsteer-cli``: show gateways, their health and the subflows using them.

Reads the plugin's status file and asks the kernel (``ss``) which TCP
subflows leave from each gateway's source address.

Examples::

    gwsteer-cli                 # table
    gwsteer-cli --json          # status file plus subflows, machine-readable
    gwsteer-cli show gw2        # one gateway
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from gwsteer import version

from .config import ConfigError, load_config
from .ss import SUBFLOW_FLAGS_RE, split_endpoint

# ss prints "token:<join token>(id:N)/<connection token>(id:M)".
_TOKEN_RE = re.compile(r"token:\w+\(id:\d+\)/(\w+)")


@dataclass(frozen=True)
class Subflow:
    """One established TCP subflow of an MPTCP connection."""

    local: str
    remote: str
    token: str
    #: Whether the kernel carries our backup flag on it (what the peer's scheduler sees).
    backup: bool = False


def list_subflows() -> list[Subflow]:
    """Established MPTCP subflows on this host (``ss -tni``)."""
    out = subprocess.run(["ss", "-tniH", "state", "established"],
                         capture_output=True, text=True, check=False).stdout
    subflows: list[Subflow] = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        cols = line.split()
        if len(cols) < 4 or line.startswith((" ", "\t")):
            continue
        info = lines[i + 1] if i + 1 < len(lines) else ""
        if "tcp-ulp-mptcp" not in info:
            continue
        m = _TOKEN_RE.search(info)
        f = SUBFLOW_FLAGS_RE.search(info)
        subflows.append(Subflow(cols[2], cols[3], m.group(1) if m else "?",
                                backup=bool(f and "b" in f.group(1))))
    return subflows


def load_status(path: str) -> dict[str, Any]:
    """Read the plugin's status file."""
    try:
        with open(path) as f:
            data: dict[str, Any] = json.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the status file ({e.strerror}); "
                          "is mptcpd running with --path-manager=gwsteer?") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from None
    return data


def gather(status: dict[str, Any], only: str | None = None) -> list[dict[str, Any]]:
    """Gateways from the status file, each with the subflows using it."""
    subflows = list_subflows()
    rows = []
    for gw in status.get("gateways", []):
        if only and gw["id"] != only:
            continue
        using = [s for s in subflows if gw["source"] and split_endpoint(s.local)[0] == gw["source"]]
        rows.append(dict(gw, subflow_list=[s.__dict__ for s in using]))
    if only and not rows:
        known = ", ".join(g["id"] for g in status.get("gateways", [])) or "none"
        raise ConfigError(f"unknown gateway '{only}' (known: {known})")
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(status: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """Human-readable table."""
    out = [f"gateways (status updated {status.get('updated', '?')})",
           (f"{'ID':<10} {'SOURCE':<16} {'IFACE':<8} {'STATE':<5} {'BACKUP':<6} {'EWMA ms':>8} "
            f"{'RTT ms':>7} {'SUBFLOWS':>8}  LAST CHANGE")]
    for g in rows:
        # A gateway that follows an interface: its current address ("-": none now).
        source = g["source"] or "-"
        iface = g.get("interface") or "-"
        out.append(f"{g['id']:<10} {source:<16} {iface:<8} {'up' if g['up'] else 'DOWN':<5} "
                   f"{'yes' if g['backup'] else 'no':<6} {_ms(g['ewma_ms']):>8} "
                   f"{_ms(g['rtt_ms']):>7} {g['subflows']:>8}  {g['last_change']}")
        for s in g["subflow_list"]:
            flag = " backup" if s["backup"] else ""
            out.append(f"{'':<10}   subflow {s['local']} -> {s['remote']} token {s['token']}{flag}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Entry point; 2 on bad input."""
    p = argparse.ArgumentParser(prog="gwsteer-cli", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    p.add_argument("--config", help="gateway config (for the status file path)")
    p.add_argument("--status", help="status file (default: from the config)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    sub = p.add_subparsers(dest="cmd")
    show = sub.add_parser("show", help="one gateway")
    show.add_argument("gateway")
    args = p.parse_args(argv)
    try:
        path = args.status or load_config(args.config).get_str("status_file")
        status = load_status(path)
        rows = gather(status, getattr(args, "gateway", None))
    except ConfigError as e:
        print(f"gwsteer-cli: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"updated": status.get("updated"), "gateways": rows}, indent=2))
    else:
        print(render(status, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
