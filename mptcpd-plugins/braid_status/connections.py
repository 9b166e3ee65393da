"""Live MPTCP connections and their subflows, from ``ss``.

Why ``ss`` and not pyroute2's inet_diag: one ``ss -HtinM`` lists the
MPTCP sockets and every TCP subflow with its ``tcp_info`` and the MPTCP
subflow attributes already decoded by iproute2, which follows the
kernel's diag format release by release; pyroute2 (0.9) hands the MPTCP
subflow attributes back as an undecoded hex blob and its ``tcp_info``
layout is fixed at one kernel's. gwsteer-cli and the tests read the same
``ss`` fields. A subflow belongs to the connection whose ``token`` is
the subflow's local token (``token:<remote>(id)/<local>(id)``).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field

from gwsteer.ss import SUBFLOW_FLAGS_RE, split_endpoint

_SS_TIMEOUT_S = 10
_TOKEN_RE = re.compile(r"\btoken:(?:[0-9a-f]+\(id:\d+\)/)?([0-9a-f]+)")
_NUM_RE = re.compile(r"\b(bytes_sent|bytes_acked|bytes_received|bytes_retrans|subflows):(\d+)")
_RTT_RE = re.compile(r"\brtt:([\d.]+)/")


class CommandError(Exception):
    """A tool this module runs is missing or failed (one-line message)."""


@dataclass(frozen=True)
class Subflow:
    """One TCP subflow of an MPTCP connection."""

    local: str
    remote: str
    state: str
    token: str
    #: ss's MPTCP subflow flags (gwsteer.ss.SUBFLOW_FLAGS_RE).
    flags: str
    bytes_sent: int
    bytes_acked: int
    bytes_received: int
    rtt_ms: float | None
    #: Filled in by connections(): the interface holding the local address.
    interface: str = ""

    @property
    def local_addr(self) -> str:
        return split_endpoint(self.local)[0]

    @property
    def backup(self) -> bool:
        return "b" in self.flags


@dataclass(frozen=True)
class Connection:
    """One MPTCP socket (connection) and the subflows carrying it."""

    local: str
    remote: str
    state: str
    token: str
    subflows: tuple[Subflow, ...] = field(default_factory=tuple)

    @property
    def bytes_sent(self) -> int:
        return sum(s.bytes_sent for s in self.subflows)

    @property
    def bytes_received(self) -> int:
        return sum(s.bytes_received for s in self.subflows)


def _token(hex_text: str) -> str:
    """One spelling of a token whatever ss's padding (``0000abcd`` = ``abcd``)."""
    return f"{int(hex_text, 16):08x}"


def _records(text: str) -> list[tuple[list[str], str]]:
    """ss's output as (header columns, info text): an info line starts with white space."""
    records: list[tuple[list[str], str]] = []
    for line in text.splitlines():
        if line[:1].isspace() and records:
            records[-1] = (records[-1][0], records[-1][1] + " " + line.strip())
        elif line.strip():
            records.append((line.split(), ""))
    return records


def parse_ss(text: str) -> list[Connection]:
    """``ss -HtinM`` output -> MPTCP connections with their subflows.

    Columns: netid, state, recv-q, send-q, local, peer. TCP sockets
    without ``tcp-ulp-mptcp`` are plain TCP and left out; a subflow whose
    connection is not listed (already closing) is left out too.
    """
    sockets: list[tuple[str, str, str, str, str]] = []  # netid, state, local, remote, info
    for cols, info in _records(text):
        if len(cols) >= 6 and cols[0] in ("tcp", "mptcp"):
            sockets.append((cols[0], cols[1], cols[4], cols[5], info))
    subflows: dict[str, list[Subflow]] = {}
    for netid, state, local, remote, info in sockets:
        if netid != "tcp" or "tcp-ulp-mptcp" not in info:
            continue
        ulp = info[info.index("tcp-ulp-mptcp"):]
        token = _TOKEN_RE.search(ulp)
        flags = SUBFLOW_FLAGS_RE.search(ulp)
        nums = {k: int(v) for k, v in _NUM_RE.findall(info[:info.index("tcp-ulp-mptcp")])}
        rtt = _RTT_RE.search(info)
        sf = Subflow(local, remote, state, _token(token.group(1)) if token else "?",
                     flags.group(1) if flags else "", nums.get("bytes_sent", 0), nums.get("bytes_acked", 0),
                     nums.get("bytes_received", 0), float(rtt.group(1)) if rtt else None)
        subflows.setdefault(sf.token, []).append(sf)
    conns = []
    for netid, state, local, remote, info in sockets:
        token = _TOKEN_RE.search(info)
        if netid != "mptcp" or state == "LISTEN" or token is None:
            continue
        tok = _token(token.group(1))
        conns.append(Connection(local, remote, state, tok, tuple(subflows.get(tok, ()))))
    return conns


def _run(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_SS_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise CommandError(f"{cmd[0]} not found (iproute2)") from None
    except subprocess.TimeoutExpired:
        raise CommandError(f"{' '.join(cmd)}: no answer in {_SS_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise CommandError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def address_interfaces() -> dict[str, str]:
    """Local address -> interface name (``ip -j addr``)."""
    out: dict[str, str] = {}
    for link in json.loads(_run(["ip", "-j", "addr", "show"]) or "[]"):
        for addr in link.get("addr_info", []):
            if "local" in addr:
                out[str(addr["local"])] = str(link.get("ifname", ""))
    return out


def connections() -> list[Connection]:
    """This namespace's MPTCP connections, each subflow with its interface."""
    conns = parse_ss(_run(["ss", "-HtinM"]))
    ifaces = address_interfaces()
    return [Connection(c.local, c.remote, c.state, c.token,
                       tuple(Subflow(**{**s.__dict__, "interface": ifaces.get(s.local_addr, "")})
                             for s in c.subflows))
            for c in conns]


@dataclass
class Traffic:
    """Subflows and bytes of the live subflows of one local address (or interface)."""

    subflows: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0


def traffic_by(conns: list[Connection], key: str) -> dict[str, Traffic]:
    """Live subflow traffic summed per ``key``: ``"addr"`` (local address) or ``"interface"``."""
    out: dict[str, Traffic] = {}
    for c in conns:
        for s in c.subflows:
            t = out.setdefault(s.local_addr if key == "addr" else s.interface or "?", Traffic())
            t.subflows += 1
            t.bytes_sent += s.bytes_sent
            t.bytes_received += s.bytes_received
    return out
