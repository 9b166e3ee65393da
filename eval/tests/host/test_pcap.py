"""The pcap reader counts TCP payload from IP lengths, even when truncated."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from braid_testbed.pcap import MPTCP_SUB_CAPABLE, MPTCP_SUB_JOIN, TcpPacket, mptcp_connections, read_tcp_packets


def frame_v4(src: bytes, dst: bytes, sport: int, dport: int, payload: int, mptcp: bool) -> bytes:
    opts = bytes([30, 4, 0x20, 0]) if mptcp else b""  # MPTCP option, subtype 2 (DSS)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 7, 0, (5 + len(opts) // 4) << 4, 0x18,
                      65535, 0, 0) + opts
    total = 20 + len(tcp) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0, src, dst)
    eth = b"\x00" * 12 + b"\x08\x00"
    return eth + ip + tcp + b"x" * payload


def write_pcap(path: Path, frames: list[bytes], snaplen: int) -> None:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)
    for i, f in enumerate(frames):
        cut = f[:snaplen]
        out += struct.pack("<IIII", 100 + i, 500, len(cut), len(f)) + cut
    path.write_bytes(out)


def test_payload_counted_from_ip_header_despite_snaplen(tmp_path: Path) -> None:
    a, b = bytes([10, 1, 0, 2]), bytes([10, 9, 0, 2])
    frames = [frame_v4(a, b, 40000, 5201, 1448, True), frame_v4(b, a, 5201, 40000, 0, False)]
    write_pcap(tmp_path / "c.pcap", frames, snaplen=96)
    pkts = list(read_tcp_packets(tmp_path / "c.pcap"))
    assert [p.payload_len for p in pkts] == [1448, 0]
    assert pkts[0].src == "10.1.0.2" and pkts[0].dport == 5201
    assert pkts[0].mptcp_subtype == 2 and pkts[1].mptcp_subtype is None
    assert pkts[1].ts == pytest.approx(101.0005)


def test_not_a_pcap_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"\x00" * 40)
    with pytest.raises(ValueError, match="not a pcap"):
        list(read_tcp_packets(tmp_path / "x"))


def test_a_reused_join_tuple_belongs_to_the_connection_that_last_opened_it() -> None:
    """Join subflows pick source ports at random, so two connections' joins
    may share a 4-tuple within one capture: each join's third ACK and data
    go to the connection whose MP_JOIN SYN came last on it, not the first."""
    syn, ack, synack = 0x02, 0x10, 0x12
    first_a, first_b = ("10.1.0.2", 40000, "10.9.0.2", 443), ("10.1.0.2", 40002, "10.9.0.2", 443)
    join = ("10.2.0.2", 51111, "10.9.0.2", 443)

    def pkt(ts: float, flow: tuple[str, int, str, int], flags: int, payload: int = 0,
            subtype: int | None = None, token: int | None = None, back: bool = False) -> TcpPacket:
        src, sport, dst, dport = flow
        if back:
            src, sport, dst, dport = dst, dport, src, sport
        return TcpPacket(ts, src, dst, sport, dport, flags, 0, payload, subtype, None, token)

    wan1 = [pkt(1.0, first_a, synack, subtype=MPTCP_SUB_CAPABLE, token=0xA, back=True),
            pkt(5.0, first_b, synack, subtype=MPTCP_SUB_CAPABLE, token=0xB, back=True)]
    wan2 = [pkt(2.0, join, syn, subtype=MPTCP_SUB_JOIN, token=0xA), pkt(2.1, join, synack, back=True),
            pkt(2.2, join, ack), pkt(2.3, join, ack, payload=100),
            pkt(6.0, join, syn, subtype=MPTCP_SUB_JOIN, token=0xB), pkt(6.1, join, synack, back=True),
            pkt(6.2, join, ack), pkt(6.4, join, ack, payload=300, back=True)]
    conns = mptcp_connections({1: wan1, 2: wan2})
    assert conns[0xA].joined_at == 2.2 and conns[0xB].joined_at == 6.2
    assert [p.payload_len for cap, p in conns[0xA].packets if cap == 2 and p.payload_len] == [100]
    assert [p.payload_len for cap, p in conns[0xB].packets if cap == 2 and p.payload_len] == [300]


def tcp_v4(options: bytes, flags: int = 0x10, payload: int = 0, ihl_words: int = 5) -> bytes:
    """An Ethernet frame of TCP in IPv4 with these TCP options (padded to
    whole words with NOPs) and, with ``ihl_words`` > 5, IP options."""
    options += b"\x01" * (-len(options) % 4)
    tcp = struct.pack("!HHIIBBHHH", 40000, 5201, 7, 9, (5 + len(options) // 4) << 4, flags,
                      65535, 0, 0) + options
    ip_options = b"\x01" * 4 * (ihl_words - 5)
    total = 4 * ihl_words + len(tcp) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl_words, 0, total, 0, 0, 64, 6, 0,
                     bytes([10, 1, 0, 2]), bytes([10, 9, 0, 2])) + ip_options
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + b"x" * payload


def test_common_frames_read_fast_as_the_general_parser_reads_them(tmp_path: Path) -> None:
    """read_tcp_packets() reads IPv4 frames with Linux's usual options in
    few steps (pcap._parse_ipv4_frame) and everything else with the
    general parser: each frame comes out as the general parser reads it."""
    from braid_testbed import pcap

    ts_opt = b"\x01\x01\x08\x0a" + bytes(8)
    dss_ack = bytes([30, 8, 0x20, 0x01]) + bytes(4)
    # data ACK (4 bytes), mapping with a 64-bit data sequence number; 22
    # bytes, so two NOPs follow it
    dss_map = bytes([30, 22, 0x20, 0x0D]) + (7).to_bytes(4, "big") + (1 << 40).to_bytes(8, "big") \
        + struct.pack("!IH", 1, 1448)
    capable_ack = bytes([30, 20, 0x01, 0x81]) + bytes(range(16))
    join_syn = bytes([30, 12, 0x10, 0x00]) + (0xDEADBEEF).to_bytes(4, "big") + bytes(4)
    syn_options = b"\x02\x04\x05\xb4\x04\x02" + b"\x08\x0a" + bytes(8) + b"\x01\x03\x03\x07"
    frames = {
        "no options": (tcp_v4(b"", payload=100), True),
        "timestamps": (tcp_v4(ts_opt), True),
        "DSS ack": (tcp_v4(ts_opt + dss_ack), True),
        "DSS mapping, NOP-padded": (tcp_v4(ts_opt + dss_map, payload=1448), True),
        "MP_CAPABLE third ACK": (tcp_v4(ts_opt + capable_ack), True),
        "MP_JOIN SYN after timestamps": (tcp_v4(ts_opt + join_syn, flags=0x02), True),
        "SYN options": (tcp_v4(syn_options + join_syn, flags=0x02), False),
        "two MPTCP options": (tcp_v4(ts_opt + dss_ack + bytes([30, 4, 0x50, 0])), False),
        "MPTCP option then other bytes": (tcp_v4(ts_opt + dss_ack + b"\x04\x02"), False),
        "IP options": (tcp_v4(ts_opt + dss_ack, ihl_words=6), False),
        "options cut by the snaplen": (tcp_v4(ts_opt + dss_map, payload=1448)[:70], False),
        "IPv6": (b"\x00" * 12 + b"\x86\xdd" + struct.pack("!IHBB", 6 << 28, 20, 6, 64) + bytes(16)
                 + bytes(15) + b"\x01" + struct.pack("!HHIIBBHHH", 5201, 40000, 3, 4, 0x50, 0x10, 0, 0, 0),
                 False),
    }
    for label, (frame, fast) in frames.items():
        general = pcap._parse_frame(1.5, frame)
        assert general is not None, label
        assert (pcap._parse_ipv4_frame(1.5, frame) is not None) == fast, label
    write_pcap(tmp_path / "c.pcap", [f for f, _ in frames.values()], snaplen=128)
    read = list(read_tcp_packets(tmp_path / "c.pcap"))
    expected = [pcap._parse_frame(100 + i + 0.0005, f[:128]) for i, (f, _) in enumerate(frames.values())]
    assert read == expected
    by_label = dict(zip(frames, read, strict=True))
    assert by_label["DSS mapping, NOP-padded"].dss == pcap.DssMapping(1 << 40, 1, 1448)
    assert by_label["MP_JOIN SYN after timestamps"].token == 0xDEADBEEF
    assert by_label["DSS ack"].mptcp_subtype == pcap.MPTCP_SUB_DSS and by_label["DSS ack"].dss is None
