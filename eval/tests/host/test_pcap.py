"""The pcap reader counts TCP payload from IP lengths, even when truncated."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from braid_testbed.pcap import read_tcp_packets


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
