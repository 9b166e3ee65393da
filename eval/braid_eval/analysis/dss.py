"""A split MPTCP connection's data in data-sequence order, from captures.

MPTCP's DSS option maps every subflow segment to its place in the
connection's data stream (its data sequence number, DSN). These helpers
place captured segments by DSN; they need neither numpy nor the defence
simulators, so base modules (``transfer``) can use them. What one WAN's
observer can reconstruct from them is ``split_analysis``'s subject.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

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


def _placed(tagged: Iterable[tuple[TcpPacket, T]], port: int,
            upload: bool) -> Iterator[tuple[TcpPacket, T, int, int]]:
    """Data segments towards (upload) or from the server ``port``, each with
    its tag, its subflow sequence number relative to the subflow's initial
    one (from its SYN) and its DSN (from the latest DSS mapping of its
    subflow that covers it). Segments that cannot be placed (capture
    started mid-flow) are skipped."""
    isn: dict[tuple[str, int, str, int], int] = {}
    mapping: dict[tuple[str, int, str, int], DssMapping] = {}
    for p, tag in tagged:
        if (p.dport if upload else p.sport) != port:
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
        if offset < m.length:
            yield p, tag, rel, m.dsn + offset


def data_segments(packets: Iterable[TcpPacket], port: int, upload: bool) -> list[Segment]:
    """Data segments towards (upload) or from the server ``port``, with DSNs
    (see ``_placed``)."""
    return [Segment(dsn, p.payload_len) for p, _, _, dsn in _placed(((p, None) for p in packets), port, upload)]


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


class _Carried(Generic[T]):
    """Data sequence intervals and the tag of the segment that carried each first."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.spans: list[list[int]] = []  # [start, end) per interval
        self.tags: list[T] = []

    def carry(self, start: int, end: int, tag: T) -> dict[T, int]:
        """Record [start, end) as carried by ``tag`` where nothing carried it yet;
        return the bytes of it that others (or ``tag``) carried before, by their tag."""
        before: dict[T, int] = {}
        gaps = []
        pos = start
        i = max(bisect.bisect_right(self.starts, start) - 1, 0)
        while i < len(self.spans) and self.spans[i][0] < end:
            s, e = self.spans[i]
            if e > pos:
                if s > pos:
                    gaps.append((pos, min(s, end)))
                covered = min(e, end) - max(s, pos)
                if covered > 0:
                    before[self.tags[i]] = before.get(self.tags[i], 0) + covered
                pos = max(pos, e)
            i += 1
        if pos < end:
            gaps.append((pos, end))
        for s, e in gaps:
            self._insert(s, e, tag)
        return before

    def _insert(self, start: int, end: int, tag: T) -> None:
        if self.spans and self.spans[-1][1] == start and self.tags[-1] == tag:
            self.spans[-1][1] = end  # the common case: the stream grows at its end
            return
        i = bisect.bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.spans.insert(i, [start, end])
        self.tags.insert(i, tag)


def resent_bytes(tagged: Iterable[tuple[TcpPacket, T]], port: int, upload: bool,
                 since: float = 0.0) -> dict[tuple[T, T], int]:
    """Data a connection sent again at the MPTCP level: segments new on their
    subflow (not a TCP retransmission, which repeats subflow sequence
    numbers) whose data sequence numbers an earlier segment carried, on any
    subflow. Returns {(tag that sent them again, tag that carried them
    first): bytes}, counting what was sent again from ``since`` on.

    ``tagged``: the packets of the captures with a tag each (e.g. the WAN
    they were captured on); towards (upload) or from the server ``port``.
    """
    carried: _Carried[T] = _Carried()
    sent_end: dict[tuple[str, int, str, int], int] = {}
    out: dict[tuple[T, T], int] = {}
    for p, tag, rel, dsn in _placed(sorted(tagged, key=lambda pt: pt[0].ts), port, upload):
        if rel + p.payload_len <= sent_end.get(p.flow, 0):
            continue  # a TCP retransmission on its subflow
        sent_end[p.flow] = rel + p.payload_len
        for first, n in carried.carry(dsn, dsn + p.payload_len, tag).items():
            if p.ts >= since:
                key = (tag, first)
                out[key] = out.get(key, 0) + n
    return out
