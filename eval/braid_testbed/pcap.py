"""Minimal pcap reader for TCP over Ethernet (IPv4 and IPv6).

Only what braid's measurements need: per packet the time, addresses, ports,
TCP flags and the TCP payload length taken from the IP header (so captures
with a small snaplen still count every byte on the wire).

Usage::

    for pkt in read_tcp_packets(Path("wan1.pcap")):
        print(pkt.ts, pkt.src, pkt.payload_len)
"""

from __future__ import annotations

import dataclasses
import ipaddress
import struct
from collections.abc import Iterator
from pathlib import Path

LINKTYPE_ETHERNET = 1
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
IPPROTO_TCP = 6
TCPOPT_MPTCP = 30


MPTCP_SUB_DSS = 2
DSS_DATA_ACK, DSS_ACK64, DSS_MAPPING, DSS_DSN64 = 0x01, 0x02, 0x04, 0x08


@dataclasses.dataclass(frozen=True)
class DssMapping:
    """A DSS option's mapping: ``length`` data bytes starting at data
    sequence ``dsn`` sit at relative subflow sequence ``ssn``."""

    dsn: int
    ssn: int
    length: int


@dataclasses.dataclass(frozen=True)
class TcpPacket:
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

    @property
    def syn(self) -> bool:
        return bool(self.flags & 0x02)

    @property
    def flow(self) -> tuple[str, int, str, int]:
        return (self.src, self.sport, self.dst, self.dport)


def _parse_dss(opt: bytes) -> DssMapping | None:
    """The mapping in a DSS option (RFC 8684, 3.3), if it carries one."""
    flags = opt[3]
    if not flags & DSS_MAPPING:
        return None
    off = 4
    if flags & DSS_DATA_ACK:
        off += 8 if flags & DSS_ACK64 else 4
    dsn_len = 8 if flags & DSS_DSN64 else 4
    if len(opt) < off + dsn_len + 6:
        return None
    dsn = int.from_bytes(opt[off : off + dsn_len], "big")
    ssn, length = struct.unpack_from("!IH", opt, off + dsn_len)
    return DssMapping(dsn, ssn, length)


def _mptcp_options(options: bytes) -> tuple[int | None, DssMapping | None]:
    """First MPTCP option's subtype and the DSS mapping, if any."""
    subtype: int | None = None
    dss = None
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
        i += length
    return subtype, dss


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
    while off + 16 <= len(data):
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += 16
        frame = data[off : off + incl]
        off += incl
        ts = sec + frac / (1e9 if nano else 1e6)
        pkt = _parse_frame(ts, frame)
        if pkt is not None:
            yield pkt


def _parse_frame(ts: float, frame: bytes) -> TcpPacket | None:
    if len(frame) < 14:
        return None
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    ip = frame[14:]
    if ethertype == ETH_P_IP and len(ip) >= 20:
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        if ip[9] != IPPROTO_TCP:
            return None
        src = str(ipaddress.IPv4Address(ip[12:16]))
        dst = str(ipaddress.IPv4Address(ip[16:20]))
        tcp, l4_len = ip[ihl:], total - ihl
    elif ethertype == ETH_P_IPV6 and len(ip) >= 40:
        if ip[6] != IPPROTO_TCP:  # extension headers are not used by braid
            return None
        src = str(ipaddress.IPv6Address(ip[8:24]))
        dst = str(ipaddress.IPv6Address(ip[24:40]))
        tcp, l4_len = ip[40:], struct.unpack_from("!H", ip, 4)[0]
    else:
        return None
    if len(tcp) < 20:
        return None
    sport, dport, seq = struct.unpack_from("!HHI", tcp, 0)
    doff = (tcp[12] >> 4) * 4
    flags = tcp[13]
    subtype, dss = _mptcp_options(tcp[20:doff])
    return TcpPacket(
        ts=ts,
        src=src,
        dst=dst,
        sport=sport,
        dport=dport,
        flags=flags,
        seq=seq,
        payload_len=max(0, l4_len - doff),
        mptcp_subtype=subtype,
        dss=dss,
    )
