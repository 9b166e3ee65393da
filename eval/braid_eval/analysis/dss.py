"""A split MPTCP connection's data in data-sequence order, from captures.

MPTCP's DSS option maps every subflow segment to its place in the
connection's data stream (its data sequence number, DSN). These helpers
place captured segments by DSN; they need neither numpy nor the defence
simulators, so base modules (``transfer``) can use them. What one WAN's
observer can reconstruct from them is ``split_analysis``'s subject.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import TypeVar

from braid_testbed.pcap import DssMapping, TcpPacket

SEQ_MOD = 1 << 32
# Payload per full data packet on the testbed's WANs: 1500-byte MTU, TCP
# timestamps and the DSS option with a 64-bit DATA_ACK (a sender that has
# received no data uses a 32-bit one and carries 4 bytes more).
WIRE_MSS = 1420
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Segment:
    dsn: int
    length: int


def data_segments(packets: Iterable[TcpPacket], port: int, upload: bool) -> list[Segment]:
    """Data segments towards (upload) or from the server ``port``, with DSNs.

    A segment's DSN comes from the latest DSS mapping of its subflow that
    covers it; the subflow's initial sequence number comes from its SYN.
    Segments that cannot be placed (capture started mid-flow) are skipped.
    """
    isn: dict[tuple[str, int, str, int], int] = {}
    mapping: dict[tuple[str, int, str, int], DssMapping] = {}
    out: list[Segment] = []
    for p in packets:
        towards = p.dport == port if upload else p.sport == port
        if not towards:
            continue
        if p.syn:
            isn[p.flow] = p.seq
            continue
        if not p.payload_len:
            continue
        if p.dss is not None:
            mapping[p.flow] = p.dss
        m, base = mapping.get(p.flow), isn.get(p.flow)
        if m is None or base is None:
            continue
        rel = (p.seq - base) % SEQ_MOD
        offset = (rel - m.ssn) % SEQ_MOD
        if offset >= m.length:
            continue
        out.append(Segment(m.dsn + offset, p.payload_len))
    return out


def first_sends(ordered: Iterable[tuple[Segment, T]]) -> Iterator[tuple[Segment, T]]:
    """Segments already in data-sequence order (each with a tag, e.g. its
    WAN) without the retransmissions: segments starting below data already
    seen."""
    end = None
    for seg, tag in ordered:
        if end is not None and seg.dsn < end:
            continue
        yield seg, tag
        end = seg.dsn + seg.length
