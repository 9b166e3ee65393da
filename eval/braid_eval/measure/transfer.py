"""One checksummed MPTCP transfer over the standard testbed, measured on the wire.

Usage::

    with StandardTestbed("t") as tb:
        tb.enable_kernel_pm()
        with BulkServer(tb) as server:
            result = measured_transfer(tb, server, nbytes=8 << 20, mode="upload")
        print(result.wan_share(1), result.goodput_mbit)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from braid_eval.analysis.dss import WIRE_MSS, Segment, data_segments, first_sends
from braid_testbed import TOOLS_DIR, StandardTestbed, bulk, ip
from braid_testbed.capture import WanCapture
from braid_testbed.netns import stop_process
from braid_testbed.pcap import TcpPacket, TimeIndex
from braid_testbed.topology import interface_counters

BULK_TOOL = TOOLS_DIR / "bulk.py"


BULK_PORT = 5201


def bulk_client(tb: StandardTestbed, args: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """bulk.py's client (``args`` as on its command line) in the client's
    namespace, without a new process (:meth:`Namespace.run_main`)."""
    return tb.client.run_main(bulk.main, args, timeout_s)


# bulk.py servers left running after their with-block, by (namespace, port):
# the next BulkServer on that port with the same settings asks the process
# for a fresh listener (which takes the scheduler in force) instead of
# starting one, a Python start being seconds of the emulated CPU in braid's
# VM; one with other settings stops it first. The testbed's teardown stops
# them with everything else in its namespaces.
_kept_servers: dict[tuple[str, int], tuple[tuple[bool, tuple[str, ...]], subprocess.Popen[bytes]]] = {}


class BulkServer:
    """bulk.py (or another tool with the same ``serve --port`` interface,
    such as messages.py) serving on the proxy for the lifetime of a
    with-block: connections made inside it are accepted by a listening
    socket created at its start, under the scheduler in force then."""

    def __init__(self, tb: StandardTestbed, port: int = BULK_PORT, mptcp: bool = True,
                 tool: Path = BULK_TOOL, args: Sequence[str] = ()) -> None:
        self.tb = tb
        self.port = port
        self.mptcp = mptcp
        self.tool = tool
        self.args = tuple(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self._kept = tool == BULK_TOOL

    def __enter__(self) -> BulkServer:
        key, settings = (self.tb.proxy.name, self.port), (self.mptcp, self.args)
        kept_settings, kept = _kept_servers.pop(key, (None, None))
        if kept is not None and kept.poll() is None and self._kept and kept_settings == settings:
            assert kept.stdin is not None
            kept.stdin.write(b"relisten\n")
            kept.stdin.flush()
            self.proc = kept
        else:
            if kept is not None and kept.poll() is None:
                stop_process(kept)  # it holds the port
            cmd = ["python3", str(self.tool)] + ([] if self.mptcp else ["--tcp"])
            cmd += ["serve", "--port", str(self.port), *self.args]
            if self._kept:
                cmd.append("--relisten-on-input")
            self.proc = self.tb.proxy.popen(cmd, stdout=subprocess.PIPE,
                                            stdin=subprocess.PIPE if self._kept else None)
        if self._kept:
            _kept_servers[key] = (settings, self.proc)
        assert self.proc.stdout is not None
        if not self.proc.stdout.readline().startswith(b"listening"):
            raise RuntimeError(f"{self.tool.name} server did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None and not self._kept:
            stop_process(self.proc)


@dataclasses.dataclass
class TransferResult:
    """What one transfer achieved, and what each WAN carried on the wire."""

    mode: str
    nbytes: int
    seconds: float
    goodput_mbit: float
    digest_ok: bool
    capacity_mbit: float
    wan_payload: dict[int, int]  # WAN -> data bytes in the transfer direction
    wan_packets: dict[int, list[TcpPacket]]
    ended_at: float = math.nan  # wall clock when the sender finished

    @property
    def capacity_ratio(self) -> float:
        return self.goodput_mbit / self.capacity_mbit

    def wan_share(self, wan: int) -> float:
        total = sum(self.wan_payload.values())
        return self.wan_payload[wan] / total if total else 0.0


def measured_transfer(
    tb: StandardTestbed,
    server: BulkServer,
    nbytes: int,
    mode: str = "upload",
    seed: int = 1,
    timeout_s: float = 300,
) -> TransferResult:
    """Run one transfer client -> proxy while capturing both WANs."""
    args = ([] if server.mptcp else ["--tcp"])
    args += ["send", "--host", ip("proxy", "core"), "--port", str(server.port),
             "--bytes", str(nbytes), "--mode", mode, "--seed", str(seed)]
    with tb.capture_wan(1) as cap1, tb.capture_wan(2) as cap2:
        proc = bulk_client(tb, args, timeout_s)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise RuntimeError(f"transfer failed ({proc.returncode}): {proc.stderr.strip()}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    caps: dict[int, WanCapture] = {1: cap1, 2: cap2}
    payload = {}
    for wan, cap in caps.items():
        counts = cap.bytes_for_port(server.port)
        payload[wan] = counts.to_port if mode == "upload" else counts.from_port
    result = TransferResult(
        mode=mode,
        nbytes=out["bytes"],
        seconds=out["seconds"],
        goodput_mbit=out["goodput_mbit"],
        digest_ok=out["digest_ok"],
        capacity_mbit=tb.wan_capacity_mbit("up" if mode == "upload" else "down"),
        wan_payload=payload,
        wan_packets={wan: cap.packets for wan, cap in caps.items()},
        ended_at=float(out.get("end", math.nan)),
    )
    for cap in caps.values():
        cap.cleanup()
    return result


def ping_rtt_ms(tb: StandardTestbed, wan: int, count: int = 5) -> float:
    """Median RTT from the client to the proxy over one WAN (idle link)."""
    out = tb.client.run(
        ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2",
         "-I", ip("client", f"wan{wan}"), ip("proxy", "core")],
        check=False,
    ).stdout
    for line in out.splitlines():
        if "min/avg/max" in line:
            return float(line.split("=")[1].split("/")[1])
    return float("nan")


@dataclasses.dataclass
class ConnectionTrace:
    """One connection of a series: the client's result, its packets per
    WAN, and how many packets the series' captures missed (tcpdump's
    "dropped by kernel", both WANs: a share measured from a capture that
    missed packets is not the one on the wire)."""

    result: dict[str, object]
    packets: dict[int, list[TcpPacket]]
    capture_drops: int = 0

    def payload(self, wan: int, port: int, upload: bool) -> int:
        return sum(p.payload_len for p in self.packets[wan]
                   if (p.dport == port if upload else p.sport == port))

    def share(self, wan: int, port: int, upload: bool) -> float:
        total = sum(self.payload(w, port, upload) for w in self.packets)
        return self.payload(wan, port, upload) / total if total else float("nan")


def share_once_joined(packets: Mapping[int, list[TcpPacket]], wan: int, port: int,
                      upload: bool) -> float:
    """``wan``'s share of a connection's data sent once the second WAN's
    subflow exists (from its first packet, the MP_JOIN SYN): before that a
    connection has one path and no scheduler splits anything. The client
    cannot hold its first flight for the join (no subflow may join before
    the server has acknowledged data), so an upload's first ~100 KB cross
    wan1 alone."""
    joined = min(p.ts for p in packets[2])
    data = {w: sum(p.payload_len for p in pk if p.ts >= joined
                   and (p.dport == port if upload else p.sport == port))
            for w, pk in packets.items()}
    total = sum(data.values())
    return data[wan] / total if total else float("nan")


def traced_series(
    tb: StandardTestbed,
    server: BulkServer,
    count: int,
    nbytes: int,
    mode: str = "upload",
    extra: list[str] | None = None,
    timeout_s: float = 900,
) -> list[ConnectionTrace]:
    """Run ``count`` connections one after another while capturing both WANs;
    split the captures per connection by the client's wall-clock windows."""
    args = ["send", "--host", ip("proxy", "core"), "--port", str(server.port), "--bytes", str(nbytes),
            "--mode", mode, "--count", str(count), *(extra or [])]
    with tb.capture_wan(1) as cap1, tb.capture_wan(2) as cap2:
        proc = bulk_client(tb, args, timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"series failed ({proc.returncode}): {proc.stderr.strip()[-500:]}; "
                           f"results: {proc.stdout.strip()[-1500:]}")
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    captured = {1: TimeIndex(cap1.packets), 2: TimeIndex(cap2.packets)}
    drops = sum(c.dropped or 0 for c in (cap1, cap2))
    traces = []
    for r in results:
        start, end = float(r["start"]), float(r["end"])
        traces.append(ConnectionTrace(r, {w: pkts.between(start, end) for w, pkts in captured.items()},
                                      drops))
    cap1.cleanup()
    cap2.cleanup()
    return traces


def request_response(tb: StandardTestbed, server: BulkServer, requests: int,
                     timeout: float = 900) -> dict[str, Any]:
    """``requests`` exchanges of 1 KiB each way, one after another, on one
    connection from the client to ``server``: bulk.py's result (latency_ms
    percentiles, digest_ok, start/end)."""
    proc = bulk_client(tb, ["send", "--host", ip("proxy", "core"), "--port", str(server.port),
                            "--bytes", "1K", "--mode", "rr", "--requests", str(requests)], timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"request/response failed ({proc.returncode}): {proc.stderr.strip()}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def read_mibs(ns_run: subprocess.CompletedProcess[str], prefix: str) -> dict[str, int]:
    """The counters from `nstat -az` output whose names start with
    ``prefix``, e.g. MPTcpExtSched (every scheduler counter)."""
    return {fields[0]: int(fields[1]) for fields in map(str.split, ns_run.stdout.splitlines())
            if fields and fields[0].startswith(prefix)}


def read_mib(ns_run: subprocess.CompletedProcess[str], name: str) -> int:
    """A counter from `nstat -az` output, e.g. MPTcpExtSchedBurstMoved."""
    return read_mibs(ns_run, name)[name]


def sched_bursts_moved(tb: StandardTestbed, node: str) -> int:
    """Bursts the scheduler on ``node`` moved off the subflow its policy
    chose: blocked too long, stale or gone (MPTcpExtSchedBurstMoved)."""
    return read_mib(tb[node].run(["nstat", "-az"]), "MPTcpExtSchedBurstMoved")


def transfer_with_breakage(tb: StandardTestbed, server: BulkServer, nbytes: int, mode: str,
                           after_bytes: int, breakage: Callable[[], object],
                           wan: int = 1, timeout_s: float = 240) -> tuple[TransferResult, float]:
    """A measured transfer during which ``breakage`` (a WAN cut, a
    blackhole) happens once WAN ``wan`` has carried ``after_bytes`` in the
    transfer's direction; returns the result and when the breakage began.
    Fails if that WAN never carries that much, or if the transfer ended
    before the breakage was in place (under emulation the breakage's own
    commands can take a second): either way it would prove nothing."""
    result: list[TransferResult] = []
    index = 0 if mode == "upload" else 1
    dev = f"wan{wan}"
    # The link's counters run since the testbed came up (it may be shared).
    start = interface_counters(tb.client, dev)[index]
    worker = threading.Thread(target=lambda: result.append(
        measured_transfer(tb, server, nbytes, mode=mode, timeout_s=timeout_s)))
    worker.start()
    deadline = time.monotonic() + 120
    carried = 0
    while carried < after_bytes:
        if not worker.is_alive() or time.monotonic() > deadline:
            worker.join(timeout=300)
            raise AssertionError(f"{dev} carried only {carried} B of the {mode}, not the "
                                 f"{after_bytes} B after which the breakage was due")
        time.sleep(0.1)
        carried = interface_counters(tb.client, dev)[index] - start
    broken_at = time.time()
    breakage()
    in_place_at = time.time()
    worker.join(timeout=timeout_s + 60)
    if worker.is_alive() or not result:
        raise AssertionError(f"{mode} did not finish after the breakage")
    if not result[0].ended_at > in_place_at:
        raise AssertionError(f"the {mode} ended {in_place_at - result[0].ended_at:.2f} s before "
                             f"the breakage was in place: a larger transfer is needed")
    return result[0], broken_at


def data_packets_after(packets: list[TcpPacket], port: int, upload: bool, after: float) -> list[TcpPacket]:
    """A transfer's data packets (to ``port`` if ``upload``, else from it) seen after ``after``."""
    return [p for p in packets if p.payload_len and p.ts >= after
            and (p.dport == port if upload else p.sport == port)]


def longest_data_gap(packets: list[TcpPacket], port: int, upload: bool, after: float) -> float:
    """Longest pause between a transfer's data packets seen after ``after``."""
    times = sorted(p.ts for p in data_packets_after(packets, port, upload, after))
    return max((b - a for a, b in itertools.pairwise(times)), default=float("inf"))


def data_rate_mbit(packets: list[TcpPacket], port: int, upload: bool, after: float) -> float:
    """What a transfer's data packets seen after ``after`` carried, per
    second from ``after`` to the last of them (retransmissions included),
    in Mbit/s; 0 without any."""
    data = data_packets_after(packets, port, upload, after)
    if not data:
        return 0.0
    span = max(p.ts for p in data) - after
    return sum(p.payload_len for p in data) * 8 / span / 1e6 if span > 0 else 0.0


@dataclasses.dataclass
class SubflowReplaced:
    """What a transfer whose wan2 subflow was replaced mid-way did."""

    result: TransferResult
    moved: int  # the sender's MPTcpExtSchedBurstMoved over the transfer
    before: list[int]  # client ports of wan2 subflows with data before the leave
    after: list[int]  # those whose first data came after the endpoint was back
    carried: dict[int, int]  # client port -> data bytes on wan2
    # of the data sent after the new subflow's first data in the connection's
    # data sequence (first transmissions), the share it carried, and those
    # bytes: what the scheduler placed once the new subflow was usable, apart
    # from what wan1's send buffer took while wan2 was away (nan, 0 without
    # one new subflow)
    new_share: float
    placed_after_join: int

    def summary(self) -> str:
        return (f"digest_ok={self.result.digest_ok} wan bytes={self.result.wan_payload} moved={self.moved} "
                f"wan2 subflows (port: bytes) {self.carried}, before the leave {self.before}, joined after "
                f"it {self.after}; of the {self.placed_after_join} B of data sequence from the new one's "
                f"first on, it carried {self.new_share:.3f}")


Via = tuple[int, int]  # (WAN, client port) of the subflow that carried a segment


def sequenced_first_sends(wan_packets: Mapping[int, list[TcpPacket]],
                          upload: bool) -> list[tuple[Segment, Via]]:
    """The bulk transfer's data in data-sequence order, first transmissions
    only, each with the (WAN, client port) of the subflow that carried it.
    The scheduler hands data out in sequence order, so this is the order of
    its decisions, whenever the packets left their send buffers."""
    tagged = []
    for wan, packets in wan_packets.items():
        flows: dict[int, list[TcpPacket]] = {}
        for pkt in packets:
            flows.setdefault(pkt.sport if upload else pkt.dport, []).append(pkt)
        for port, pkts in flows.items():
            tagged += [(seg, (wan, port)) for seg in data_segments(pkts, BULK_PORT, upload)]
    return list(first_sends(sorted(tagged, key=lambda st: (st[0].dsn, st[0].length, st[1]))))


def placed_share(ordered: list[tuple[Segment, Via]], opens: Callable[[Via], bool],
                 counts: Callable[[Via], bool], mss: int | None = None) -> tuple[float, int]:
    """Of the data in sequence order from the first segment whose subflow
    satisfies ``opens`` on, the share carried by subflows satisfying
    ``counts``, and the total; in bytes, or with ``mss`` in full-size wire
    packets (a capture can hold GSO super-packets). (nan, 0) when no
    segment opens."""
    start = min((seg.dsn for seg, via in ordered if opens(via)), default=None)
    if start is None:
        return math.nan, 0
    since = [(-(-seg.length // mss) if mss else seg.length, counts(via))
             for seg, via in ordered if seg.dsn >= start]
    total = sum(n for n, _ in since)
    return sum(n for n, mine in since if mine) / total, total


def share_from_first_dsn(wan_packets: Mapping[int, list[TcpPacket]], client_port: int,
                         upload: bool) -> tuple[float, int]:
    """Of the bulk transfer's data from the subflow ``client_port``'s first
    data sequence number on (on every WAN), the share that subflow carried,
    and the bytes: what the scheduler placed once that subflow was usable."""
    def mine(via: Via) -> bool:
        return via[1] == client_port

    return placed_share(sequenced_first_sends(wan_packets, upload), mine, mine)


def share_placed_once_joined(wan_packets: Mapping[int, list[TcpPacket]], wan: int,
                             upload: bool, packets: bool = False) -> float:
    """``wan``'s share of the data the scheduler placed with both WANs'
    subflows there: from the first data sequence number wan2 carried on, in
    sequence order; in bytes, or with ``packets`` in full-size wire packets.
    share_once_joined() counts by wire time instead, so what wan1's send
    buffer took before the join and sent after it counts for wan1 there."""
    ordered = sequenced_first_sends(wan_packets, upload)
    mss = None
    if packets and ordered:
        # A full packet carries WIRE_MSS, or 4 bytes more from a sender that
        # has received no data (a 32-bit DATA_ACK in its DSS option: an
        # upload's client sends 1424-byte segments); the commonest length
        # says which.
        mss = max(WIRE_MSS, Counter(seg.length for seg, _ in ordered).most_common(1)[0][0])
    return placed_share(ordered, lambda via: via[0] == 2, lambda via: via[0] == wan, mss)[0]


def replace_wan2_subflow(tb: StandardTestbed, mode: str, nbytes: int = 8 << 20,
                         after_bytes: int = 2 << 20) -> SubflowReplaced:
    """A transfer during which, once wan2 has carried ``after_bytes``, the
    client's wan2 endpoint is removed (its subflow closes) and added straight
    back (a new subflow from the same address: new port, new subflow id).
    The endpoint is restored whatever happens."""
    sender = "client" if mode == "upload" else "proxy"
    readded: list[float] = []

    def leave_and_rejoin() -> None:
        tb.client.run(["ip", "mptcp", "endpoint", "flush"])
        readded.append(time.time())
        tb.add_wan2_endpoint()

    try:
        with BulkServer(tb) as server:
            start = sched_bursts_moved(tb, sender)
            r, left_at = transfer_with_breakage(tb, server, nbytes, mode, after_bytes, leave_and_rejoin, wan=2)
            moved = sched_bursts_moved(tb, sender) - start
    finally:
        tb.client.run(["ip", "mptcp", "endpoint", "flush"])
        tb.add_wan2_endpoint()
    upload = mode == "upload"

    def data(wan: int) -> list[tuple[float, int, int]]:
        """(time, client port, payload) of the transfer's data packets on wan."""
        return [(pkt.ts, pkt.sport if upload else pkt.dport, pkt.payload_len) for pkt in r.wan_packets[wan]
                if pkt.payload_len and (pkt.dport if upload else pkt.sport) == BULK_PORT]

    first: dict[int, float] = {}
    carried: dict[int, int] = {}
    for ts, port, n in data(2):
        first.setdefault(port, ts)
        carried[port] = carried.get(port, 0) + n
    before = [p for p, ts in first.items() if ts < left_at]
    after = [p for p, ts in first.items() if ts > readded[0]]
    share, placed = math.nan, 0
    if len(after) == 1:
        share, placed = share_from_first_dsn(r.wan_packets, after[0], upload)
    return SubflowReplaced(r, moved, before, after, carried, share, placed)
