"""Reconstructing runs from DSS mappings, on synthetic packets."""

from __future__ import annotations

import pytest

from braid_eval.analysis.dss import Segment, data_segments
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
