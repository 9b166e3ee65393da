"""Minimal pcap reader for TCP over Ethernet (IPv4 and IPv6).

Only what braid's measurements need: per packet the time, addresses, ports,
TCP flags and the TCP payload length taken from the IP header (so captures
with a small snaplen still count every byte on the wire).

Usage::

    for pkt in read_tcp_packets(Path("wan1.pcap")):
        print(pkt.ts, pkt.src, pkt.payload_len)
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import ipaddress
import itertools
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

LINKTYPE_ETHERNET = 1
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
IPPROTO_TCP = 6
TCPOPT_MPTCP = 30


MPTCP_SUB_CAPABLE, MPTCP_SUB_JOIN, MPTCP_SUB_DSS = 0, 1, 2
DSS_DATA_ACK, DSS_ACK64, DSS_MAPPING, DSS_DSN64 = 0x01, 0x02, 0x04, 0x08


class DssMapping(NamedTuple):
    """A DSS option's mapping: ``length`` data bytes starting at data
    sequence ``dsn`` sit at relative subflow sequence ``ssn``."""

    dsn: int
    ssn: int
    length: int


class TcpPacket(NamedTuple):
    """One TCP packet. A named tuple, not a dataclass: a capture holds
    hundreds of thousands, and under braid's emulated VM building them was
    a large part of a test's time."""

    ts: float
    src: str
    dst: str
    sport: int
    dport: int
    flags: int
    seq: int
    payload_len: int
    mptcp_subtype: int | None  # first MPTCP option's subtype, if any
    dss: DssMapping | None = None
    # The connection token this packet names: the sender's, from the key of
    # an MP_CAPABLE SYN/ACK; the receiver's, from an MP_JOIN SYN. It ties a
    # join subflow to its connection's first subflow.
    token: int | None = None

    @property
    def syn(self) -> bool:
        return bool(self.flags & 0x02)

    @property
    def flow(self) -> tuple[str, int, str, int]:
        return (self.src, self.sport, self.dst, self.dport)


def _dss_layout(flags: int) -> struct.Struct:
    """A DSS option with a mapping, as one struct: the option's header and
    its data ACK (of the width ``flags`` give) skipped, then the data
    sequence number, the subflow sequence number and the data length."""
    ack = (8 if flags & DSS_ACK64 else 4) if flags & DSS_DATA_ACK else 0
    return struct.Struct(f"!{4 + ack}x{'Q' if flags & DSS_DSN64 else 'I'}IH")


# By the low four bits of the DSS flags (those that set the layout).
_DSS_LAYOUTS = {flags: _dss_layout(flags) for flags in range(16) if flags & DSS_MAPPING}


def _parse_dss(opt: bytes) -> DssMapping | None:
    """The mapping in a DSS option (RFC 8684, 3.3), if it carries one."""
    layout = _DSS_LAYOUTS.get(opt[3] & 0x0F)
    if layout is None or len(opt) < layout.size:
        return None
    return DssMapping._make(layout.unpack_from(opt))


def _token(sub: int, opt: bytes, flags: int) -> int | None:
    """RFC 8684: a token is the top 32 bits of SHA-256 of the key."""
    syn, ack = flags & 0x02, flags & 0x10
    if sub == MPTCP_SUB_CAPABLE and syn and ack and len(opt) >= 12:
        return int.from_bytes(hashlib.sha256(opt[4:12]).digest()[:4], "big")
    if sub == MPTCP_SUB_JOIN and syn and not ack and len(opt) >= 8:
        return int.from_bytes(opt[4:8], "big")
    return None


def _mptcp_options(options: bytes, flags: int = 0) -> tuple[int | None, DssMapping | None, int | None]:
    """First MPTCP option's subtype, the DSS mapping and the token, if any."""
    subtype: int | None = None
    dss = None
    token = None
    i = 0
    while i < len(options):
        kind = options[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(options):
            break
        length = options[i + 1]
        if length < 2:
            break
        if kind == TCPOPT_MPTCP and i + 3 < len(options):
            sub = options[i + 2] >> 4
            if subtype is None:
                subtype = sub
            if sub == MPTCP_SUB_DSS:
                dss = _parse_dss(options[i : i + length])
            elif token is None:
                token = _token(sub, options[i : i + length], flags)
        i += length
    return subtype, dss, token


def read_tcp_packets(path: Path) -> Iterator[TcpPacket]:
    """Yield every TCP packet in a pcap file; other frames are skipped."""
    data = path.read_bytes()
    if len(data) < 24:
        return
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype} is not Ethernet")
    off = 24
    rec = struct.Struct(endian + "IIII")
    scale = 1e9 if nano else 1e6
    while off + 16 <= len(data):
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += 16
        frame = data[off : off + incl]
        off += incl
        ts = sec + frac / scale
        pkt = _parse_ipv4_frame(ts, frame) if len(frame) >= 54 else None
        if pkt is None:
            pkt = _parse_frame(ts, frame)
        if pkt is not None:
            yield pkt


_U16 = struct.Struct("!H")
_PORTS_SEQ = struct.Struct("!HHI")
# An Ethernet frame's IPv4 header without options and the TCP header up to
# its flags, from the EtherType on: EtherType, version and IHL, total
# length, protocol, source and destination, ports, sequence number, data
# offset and flags, in one call.
_IPV4_TCP = struct.Struct("!HBxH5xB2x8sHHI4xBB")
# Linux's options on an established subflow: NOP, NOP, timestamps, then
# (on MPTCP) the MPTCP option.
_NOP_NOP_TIMESTAMPS = b"\x01\x01\x08\x0a"
# Addresses seen so far, packed -> text: a capture has a handful, and
# converting each packet's anew dominated the parse.
_addresses: dict[bytes, str] = {}
_address_pairs: dict[bytes, tuple[str, str]] = {}


def _address(packed: bytes) -> str:
    text = _addresses.get(packed)
    if text is None:
        text = _addresses[packed] = str(ipaddress.ip_address(packed))
    return text


def _parse_ipv4_frame(ts: float, frame: bytes) -> TcpPacket | None:
    """The common case, parsed in few steps: TCP in IPv4 without IP options,
    and TCP options that are none, timestamps, or timestamps and one MPTCP
    option. None for any other frame: :func:`_parse_frame` reads it.

    Under braid's emulated VM every Python step costs tens of times what it
    does on the host, and a test reads a few hundred thousand packets."""
    ethertype, ver_ihl, total, proto, addresses, sport, dport, seq, doff_byte, flags = \
        _IPV4_TCP.unpack_from(frame, 12)
    if ethertype != ETH_P_IP or ver_ihl != 0x45 or proto != IPPROTO_TCP:
        return None
    doff = (doff_byte >> 4) * 4
    subtype = dss = token = None
    if doff > 20:
        options = frame[54 : 34 + doff]
        if options[:4] != _NOP_NOP_TIMESTAMPS:
            return None
        if len(options) > 12:
            if len(options) < 16:
                return None
            length = options[13]
            rest = options[12 + length :]
            if options[12] != TCPOPT_MPTCP or length < 4 or 12 + length > len(options) \
                    or rest != b"\x01" * len(rest):
                return None
            subtype = options[14] >> 4
            if subtype == MPTCP_SUB_DSS:
                dss = _parse_dss(options[12 : 12 + length])
            else:
                token = _token(subtype, options[12 : 12 + length], flags)
    pair = _address_pairs.get(addresses)
    if pair is None:
        pair = _address_pairs[addresses] = (_address(addresses[:4]), _address(addresses[4:]))
    return TcpPacket(ts, pair[0], pair[1], sport, dport, flags, seq, max(0, total - 20 - doff),
                     subtype, dss, token)


def _parse_frame(ts: float, frame: bytes) -> TcpPacket | None:
    if len(frame) < 14:
        return None
    ethertype = _U16.unpack_from(frame, 12)[0]
    if ethertype == ETH_P_IP and len(frame) >= 34:
        if frame[23] != IPPROTO_TCP:
            return None
        ihl = (frame[14] & 0x0F) * 4
        src, dst = _address(frame[26:30]), _address(frame[30:34])
        tcp_at, l4_len = 14 + ihl, _U16.unpack_from(frame, 16)[0] - ihl
    elif ethertype == ETH_P_IPV6 and len(frame) >= 54:
        if frame[20] != IPPROTO_TCP:  # extension headers are not used by braid
            return None
        src, dst = _address(frame[22:38]), _address(frame[38:54])
        tcp_at, l4_len = 54, _U16.unpack_from(frame, 18)[0]
    else:
        return None
    if len(frame) < tcp_at + 20:
        return None
    sport, dport, seq = _PORTS_SEQ.unpack_from(frame, tcp_at)
    doff = (frame[tcp_at + 12] >> 4) * 4
    flags = frame[tcp_at + 13]
    subtype, dss, token = (_mptcp_options(frame[tcp_at + 20 : tcp_at + doff], flags)
                           if doff > 20 else (None, None, None))
    return TcpPacket(ts, src, dst, sport, dport, flags, seq, max(0, l4_len - doff), subtype, dss, token)


class TimeIndex:
    """A capture's packets cut into time windows by binary search.

    A series of transfers is split per transfer by its wall-clock window;
    filtering the whole capture once per window cost seconds per series
    under braid's emulated VM. A capture's timestamps rise but for a few
    packets (most of the VM tests' captures have some), so the search runs
    on the timestamps sorted, and a window's packets are put
    back in capture order: always what
    ``[p for p in packets if start <= p.ts <= end]`` gives."""

    def __init__(self, packets: list[TcpPacket]) -> None:
        self.packets = packets
        ts = [p.ts for p in packets]
        self._ordered = all(a <= b for a, b in itertools.pairwise(ts))
        # Capture positions by time, and their times, when the capture's own order is not.
        self._by_time = [] if self._ordered else sorted(range(len(ts)), key=ts.__getitem__)
        self._ts = ts if self._ordered else [ts[i] for i in self._by_time]

    def between(self, start: float, end: float) -> list[TcpPacket]:
        """The packets with ``start <= ts <= end``, in capture order."""
        lo, hi = bisect.bisect_left(self._ts, start), bisect.bisect_right(self._ts, end)
        if self._ordered:
            return self.packets[lo:hi]
        return [self.packets[i] for i in sorted(self._by_time[lo:hi])]


@dataclasses.dataclass
class MptcpConnection:
    """One MPTCP connection's subflows in two captures, tied by its token.

    ``first`` is the initial subflow's 4-tuple (client to server) and the
    capture it was seen in; ``joins`` maps each join subflow's 4-tuple to
    the time its third ACK passed (the join's handshake done at that point);
    ``packets`` are its subflows' packets after their SYNs, both ways, with
    the capture each was seen in.
    """

    token: int
    first: tuple[int, tuple[str, int, str, int]]
    joins: dict[tuple[int, tuple[str, int, str, int]], float] = dataclasses.field(default_factory=dict)
    packets: list[tuple[int, TcpPacket]] = dataclasses.field(default_factory=list)

    @property
    def joined_at(self) -> float | None:
        return min(self.joins.values(), default=None)


def mptcp_connections(captures: dict[int, list[TcpPacket]]) -> dict[int, MptcpConnection]:
    """Group the subflows seen in several captures (capture id -> packets)
    into connections, keyed by the server's token (RFC 8684: the token in a
    join's SYN is the SHA-256 of the key in the first subflow's SYN/ACK).

    A 4-tuple belongs to the connection whose handshake was last seen on
    it: join subflows bind their source port at random, so over a few
    hundred connections two joins of different connections share one (a
    capture of 200 page objects had one or two such pairs on average), and
    a lookup by 4-tuple alone gave the later one's packets to the earlier.
    """
    conns: dict[int, MptcpConnection] = {}
    for cap, packets in captures.items():
        for pkt in packets:
            if pkt.token is not None and pkt.mptcp_subtype == MPTCP_SUB_CAPABLE:  # SYN/ACK
                reverse = (pkt.dst, pkt.dport, pkt.src, pkt.sport)
                conns.setdefault(pkt.token, MptcpConnection(pkt.token, (cap, reverse)))
    for cap, packets in captures.items():
        owner: dict[tuple[str, int, str, int], MptcpConnection] = {}
        for pkt in packets:
            reverse = (pkt.dst, pkt.dport, pkt.src, pkt.sport)
            if pkt.syn and not pkt.flags & 0x10:  # a handshake starts: the 4-tuple is free
                owner.pop(pkt.flow, None)
                if pkt.token is not None and (conn := conns.get(pkt.token)) is not None:
                    owner[pkt.flow] = conn  # MP_JOIN SYN, client to server
                continue
            if pkt.token is not None and pkt.mptcp_subtype == MPTCP_SUB_CAPABLE:
                owner[reverse] = conns[pkt.token]
            upstream = pkt.flow in owner
            conn = owner.get(pkt.flow if upstream else reverse)
            if conn is None:
                continue
            conn.packets.append((cap, pkt))
            key = (cap, pkt.flow)
            if upstream and key != conn.first and key not in conn.joins:
                conn.joins[key] = pkt.ts  # the third ACK
    return conns
