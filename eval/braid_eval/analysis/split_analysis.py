"""What an observer of one WAN can reconstruct of a split MPTCP connection.

MPTCP's DSS option maps every subflow segment to its place in the
connection's data stream (its data sequence number, DSN). In one WAN's
capture, segments whose DSNs follow each other without a gap were sent as
one run on that WAN; a gap means other WANs carried the data in between.

Under HyWF each packet ends its burst with probability 1/ncons and the next
burst picks this WAN with probability p, so runs seen on the WAN are
geometric with mean ncons / (1 - p): consecutive bursts on the same WAN
merge. :func:`pooled_burst_mean` undoes that with the WAN's share f ~ p.

Usage::

    segs = data_segments(packets, port=5201, upload=True)  # braid_eval.analysis.dss
    runs = run_lengths(segs)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from braid_eval.analysis.dss import Segment, first_sends
from braid_testbed.pcap import TcpPacket
from braid_wf.defences import hywf_sim


def in_window(packets: Iterable[TcpPacket], start: float, end: float) -> list[TcpPacket]:
    return [p for p in packets if start <= p.ts <= end]


def run_lengths(segments: list[Segment]) -> list[int]:
    """Lengths, in segments, of runs of DSN-contiguous data on one WAN.

    Retransmissions (segments at or below data already seen) are dropped.
    The first and last runs are left out: the first is sent before the
    other subflows join, the last is cut short by the end of the transfer.
    """
    runs: list[int] = []
    end = None
    for seg, _ in first_sends((seg, None) for seg in sorted(segments, key=lambda s: s.dsn)):
        if seg.dsn == end:
            runs[-1] += 1
        else:
            runs.append(1)
        end = seg.dsn + seg.length
    return runs[1:-1]


def mask_runs(on1: npt.NDArray[np.bool_]) -> list[int]:
    """Lengths of the runs of True in a split (True: network 1), in order:
    what run_lengths() gives for network 1, first and last runs included."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], on1.astype(np.int8), [0]))))
    return [int(n) for n in edges[1::2] - edges[::2]]


def path_sequence(segments: Mapping[int, list[Segment]], wan: int = 1) -> npt.NDArray[np.bool_]:
    """The split as all networks' observers together see it: for each data
    segment in data-sequence order, True if ``wan`` carried it.
    Retransmissions are left out, as in run_lengths()."""
    ordered = sorted(((seg, w) for w, segs in segments.items() for seg in segs),
                     key=lambda sw: (sw[0].dsn, sw[0].length, sw[1]))
    return np.array([w == wan for _, w in first_sends(ordered)], dtype=bool)


def window_deviations(on1: npt.NDArray[np.bool_], window: int) -> list[float]:
    """Network 1's share in consecutive windows of ``window`` packets minus
    its share of the whole connection; the first window (the first flight,
    sent before or while the second subflow joins) and a partial last one
    are left out."""
    whole = float(on1.mean()) if len(on1) else 0.0
    return [float(on1[i : i + window].mean()) - whole
            for i in range(window, len(on1) - window + 1, window)]


def pooled_burst_mean(connections: list[tuple[list[int], float]]) -> float:
    """Estimate HyWF's mean burst length from (runs on one WAN, that WAN's
    share of the bytes) of several connections: sum (1 - f) * packets / runs.
    """
    weighted = sum((1 - share) * sum(runs) for runs, share in connections)
    count = sum(len(runs) for runs, _ in connections)
    return weighted / count if count else float("nan")


def model_pooled_burst_mean(connections: list[tuple[int, float]], ncons: int,
                            rng: np.random.Generator, rounds: int = 100) -> float:
    """What :func:`pooled_burst_mean` gives, on average, for HyWF senders
    with exactly mean burst ``ncons``, given each connection's (data
    packets, share): its reference value. It is below ``ncons`` (about
    -6 % for 30 connections of 1,450 packets) because a run must lie inside
    its connection to be counted, which leaves long runs out more often than
    short ones."""
    estimates = []
    for _ in range(rounds):
        per_conn = []
        for packets, share in connections:
            on1 = hywf_sim.bursty_choice(packets, share, ncons, rng)
            per_conn.append((mask_runs(on1)[1:-1], float(on1.mean()) if packets else 0.0))
        estimates.append(pooled_burst_mean(per_conn))
    return float(np.nanmean(estimates))
