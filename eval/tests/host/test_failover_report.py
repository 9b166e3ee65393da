"""E3's bound on copies: what a gateway's subflows held in flight at the cut
(parsed from ss) and the report's line comparing the copies with it."""

from __future__ import annotations

import socket
import subprocess

from braid_eval.experiments.failover import Run, copies_line, report
from braid_testbed.gateway_topologies import unacked_bytes

SS_RETRANS = ("\t cubic wscale:7,7 rto:232 rtt:30.1/2.4 mss:1448 cwnd:40 bytes_sent:3000000 "
              "bytes_retrans:28960 bytes_acked:2913001 segs_out:2100 unacked:40")


def test_unacked_bytes_is_sent_once_less_acknowledged() -> None:
    # 3000000 sent of which 28960 again; 2913001 acknowledged counts the SYN
    assert unacked_bytes(SS_RETRANS) == 3000000 - 28960 - 2913000
    assert unacked_bytes("\t cubic bytes_sent:1000 bytes_acked:1001") == 0
    assert unacked_bytes("\t cubic bytes_sent:5000") == 5000  # nothing acknowledged yet
    assert unacked_bytes("\t cubic rto:200 cwnd:10") == 0  # no byte counts: nothing sent


def test_unacked_bytes_reads_this_kernels_ss() -> None:
    """A loopback connection whose 64 KB were all acknowledged: ss prints
    the counts unacked_bytes reads, and they come to nothing in flight."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as c, srv.accept()[0] as a:
            c.sendall(b"x" * 65536)
            got = 0
            while got < 65536:
                got += len(a.recv(65536))
            out = subprocess.run(["ss", "-tinH", "state", "established", "dport", "=", f":{port}"],
                                 capture_output=True, text=True, check=True).stdout
    assert "bytes_sent:65536" in out and "bytes_acked:65537" in out, out
    assert unacked_bytes(out) == 0


def run(mode: str, dup: int, in_flight: int) -> Run:
    return Run(mode=mode, outage_s=1.0, run=0, t90_s=0.5, first_gw1_s=0.5, reuse_s=None, gap_s=0.4,
               byte_exact=True, capture_matches=True, bytes=10**7, pre_cut_mbit=37.0,
               dup_bytes=dup, detect_s=0.5, gw_up_s=0.5, gw1_in_flight=in_flight)


def test_copies_are_judged_against_what_gw1_held() -> None:
    runs = [run("gwsteer", 0, 90_000), run("gwsteer", 150_000, 120_000), run("kernel", 60_000, 60_000),
            run("kernel", 10_000, -1)]  # not measured: left out
    assert copies_line({m: [(r.dup_bytes, r.gw1_in_flight) for r in runs if r.mode == m]
                        for m in ("gwsteer", "kernel")}) == [
        "", "Copies via gw2 within what gw1 had in flight at the cut: gwsteer 1 of 2 runs, "
            "in-kernel PM 1 of 1 runs."]
    text = report(runs, {"kernel": "6.18", "braid": "abc1234", "mode": "quick", "runs": 2, "date": "2026-12-02",
                         "mbit": 20, "capacity_mbit": 18.8})
    assert "| 1 s | in flight on gw1 at the cut (client), MB | 0.10 (0.09-0.12) | 0.06, 1 of 2 - |" in text
    assert copies_line({"gwsteer": [(0, -1)]}) == []  # older data: no line
    assert "Copies via gw2 within" in text
