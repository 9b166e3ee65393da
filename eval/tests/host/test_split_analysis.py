"""Reconstructing runs from DSS mappings, on synthetic packets."""

from __future__ import annotations

import pytest

from braid_eval.analysis.dss import Segment, data_segments, resent_bytes
from braid_eval.analysis.split_analysis import pooled_burst_mean, run_lengths
from braid_testbed.pcap import DssMapping, TcpPacket, _parse_dss

MSS = 1000
ISN = 4_294_967_000  # wraps: relative sequence numbers must handle it


def pkt(seq: int, length: int, dss: DssMapping | None = None, syn: bool = False) -> TcpPacket:
    return TcpPacket(ts=0.0, src="10.1.0.2", dst="10.9.0.2", sport=40000, dport=5201,
                     flags=0x02 if syn else 0x10, seq=seq % (1 << 32), payload_len=length,
                     mptcp_subtype=2, dss=dss)


def test_dss_option_with_64bit_dsn_and_data_ack() -> None:
    # kind 30, len 28, subtype 2, flags: A|a|M|m, ack64, dsn64, ssn, len, csum
    opt = bytes([30, 28, 0x20, 0x0F]) + (7).to_bytes(8, "big") + (123456789012).to_bytes(8, "big")
    opt += (1).to_bytes(4, "big") + (1400).to_bytes(2, "big") + b"\x00\x00"
    assert _parse_dss(opt) == DssMapping(123456789012, 1, 1400)


def test_segments_get_dsns_from_mappings_across_sequence_wrap() -> None:
    packets = [pkt(ISN, 0, syn=True)]
    # A mapping of 3 segments at DSN 5000, subflow-relative seq 1; only the
    # first segment carries it.
    packets.append(pkt(ISN + 1, MSS, DssMapping(5000, 1, 3 * MSS)))
    packets.append(pkt(ISN + 1 + MSS, MSS))
    packets.append(pkt(ISN + 1 + 2 * MSS, MSS))
    # Next mapping jumps ahead: another WAN carried DSN 8000..9999.
    packets.append(pkt(ISN + 1 + 3 * MSS, MSS, DssMapping(10000, 1 + 3 * MSS, MSS)))
    segs = data_segments(packets, port=5201, upload=True)
    assert [s.dsn for s in segs] == [5000, 6000, 7000, 10000]


def test_runs_skip_retransmissions_and_edges() -> None:
    segs = [Segment(d, MSS) for d in (0, 1000, 5000, 6000, 7000, 6000, 12000, 20000, 21000)]
    # runs: [0,1000] [5000..7000] [12000] [20000,21000]; first and last dropped
    assert run_lengths(segs) == [3, 1]


def test_pooled_estimate_undoes_merged_bursts() -> None:
    # with share 0.5, runs of mean 40 mean bursts of mean 20
    assert pooled_burst_mean([([30, 50], 0.5), ([40], 0.5)]) == pytest.approx(20)


def sf(ts: float, sport: int, seq: int, length: int, dss: DssMapping | None = None,
       syn: bool = False) -> TcpPacket:
    """A packet of the subflow from client port ``sport``, its ISN at ISN + sport."""
    return TcpPacket(ts=ts, src="10.1.0.2", dst="10.9.0.2", sport=sport, dport=5201,
                     flags=0x02 if syn else 0x10, seq=(ISN + sport + seq) % (1 << 32),
                     payload_len=length, mptcp_subtype=2, dss=dss)


def test_resent_bytes_tell_reinjection_from_tcp_retransmission() -> None:
    a, b = 1, 2  # subflow client ports, tags = WANs
    packets = [(sf(0, a, 0, 0, syn=True), "wan1"), (sf(0, b, 0, 0, syn=True), "wan2"),
               # wan1 carries DSN 0..2999, wan2 3000..4999
               (sf(1, a, 1, 3 * MSS, DssMapping(0, 1, 3 * MSS)), "wan1"),
               (sf(1, b, 1, 2 * MSS, DssMapping(3 * MSS, 1, 2 * MSS)), "wan2"),
               # wan1 retransmits its own second segment at the TCP level: not a re-send
               (sf(2, a, 1 + MSS, MSS), "wan1"),
               # wan2 goes away; wan1 sends again wan2's 3000..4999 and its own 2000..2999
               (sf(3, a, 1 + 3 * MSS, MSS, DssMapping(2 * MSS, 1 + 3 * MSS, MSS)), "wan1"),
               (sf(3, a, 1 + 4 * MSS, 2 * MSS, DssMapping(3 * MSS, 1 + 4 * MSS, 2 * MSS)), "wan1"),
               # then new data, half of it overlapping what wan2 sent
               (sf(4, a, 1 + 6 * MSS, MSS, DssMapping(5 * MSS, 1 + 6 * MSS, MSS)), "wan1")]
    assert resent_bytes(packets, 5201, upload=True) == {("wan1", "wan1"): MSS, ("wan1", "wan2"): 2 * MSS}
    # counted from a time on, in whatever order the captures come
    assert resent_bytes(reversed(packets), 5201, upload=True, since=3.5) == {}
    assert resent_bytes(packets, 5201, upload=False) == {}


def test_resent_bytes_count_partial_overlaps() -> None:
    a, b = 1, 2
    packets = [(sf(0, a, 0, 0, syn=True), 1), (sf(0, b, 0, 0, syn=True), 2),
               (sf(1, a, 1, MSS, DssMapping(0, 1, MSS)), 1),
               (sf(1, b, 1, MSS, DssMapping(2 * MSS, 1, MSS)), 2),
               # 500..2499: half of wan1's, the gap between, half of wan2's
               (sf(2, b, 1 + MSS, 2 * MSS, DssMapping(MSS // 2, 1 + MSS, 2 * MSS)), 2)]
    assert resent_bytes(packets, 5201, upload=True) == {(2, 1): MSS // 2, (2, 2): MSS // 2}
