"""E3, failover: gwsteer against the in-kernel path manager, same detection
settings, outage length swept, metrics from per-packet time stamps.

Topology (braid_testbed/gateway_topologies.py ``onlink``): a client with two
gateways to one server, each client uplink tbf-shaped to ``--mbit``. An
unpaced MPTCP upload (bulk.py, checksummed) starts with its initial
subflow through gw1; at T_CUT gw1 stops forwarding (an nftables drop on
gw1, invisible to the client's links), and after the outage it forwards
again. Only the client's path manager differs between the two modes:

  gwsteer   mptcpd + gwsteer: ``fail_after`` 3 lost ICMP probes (one per
            100 ms, 300 ms timeout) -> gw1's subflows removed; 3 answers
            and ``hold_ms`` 500 -> a gw1 subflow again
  kernel    the in-kernel PM, a subflow endpoint per gateway; its
            scheduler marks a subflow stale after 3 retransmission
            time-outs (``net.mptcp.stale_loss_cnt`` = 3, the same count)

tcpdump on the server's two links records every client packet. From the
captures (failover_metrics.py):

* t90: time from the cut until the connection's *in-order* delivery
  (data sequence numbers from the DSS mappings; a hole left by gw1 stalls
  it however busy gw2's link is) sustains 90 % of the surviving capacity:
  the earliest r after which every interval [t1, t2] up to the restore
  delivers >= 0.9 x C x (t2 - t1) - 16 packets, held for at least 0.2 s
  before the restore. C is gw2's capacity, measured once by a transfer
  through gw2 alone. "-": not within the outage.
* first gw1: restore -> the first data packet through gw1 (its capture)
  that brought the receiver data it did not hold yet (a removed subflow's
  late retransmission of data already re-injected does not count).
* gw1 >= 25 %: restore -> the earliest r from which gw1's link carries
  >= 0.25 x C x (t2 - t1) - 16 packets in every interval of [r, r + 1 s]
  (same definition, gw1's new-data bytes on the wire, for one second).
* gap: the longest time without in-order progress overlapping the outage.
* detect / gw1 up (gwsteer only): cut -> its status file shows gw1 down
  (after the restore if the outage was shorter than detection: gwsteer
  then removes and re-adds gw1's subflow anyway), restore -> up again
  after that (polled every 20 ms); the in-kernel PM has no gateway state.
* byte-exact: the server's SHA-256 matches the sender's, and the in-order
  bytes rebuilt from the captures equal what the server read (and the
  upload's header before it, when a mapping placed that too).

It runs on the host kernel (MPTCP, tbf, nftables; no netem, none of
braid's schedulers needed): gwsteer's logic does not depend on braid's
kernel. In braid's kernel (``kernel/vm run``) the client's scheduler also
decides what a removed subflow leaves to re-send: ``--client-sysctl
net.mptcp.scheduler=delaybal`` (any braid scheduler but ``redundant``)
re-sends only what that subflow carried, ``default`` everything above the
connection's acknowledgement. Run as root, with mptcpd-plugins built
(``make -C mptcpd-plugins``).

    python3 -m braid_eval.experiments.failover                     # quick: one 2 s outage, 1 run
    python3 -m braid_eval.experiments.failover --full --out out/e3 # outages 0.5-10 s, 5 runs
    python3 -m braid_eval.experiments.failover --replot --out out/e3
    kernel/vm run --timeout 1800 -- python3 -m braid_eval.experiments.failover \
        --outages 1 2 5 --runs 3 --client-sysctl net.mptcp.scheduler=delaybal \
        --out results/e3-braid-delaybal                            # braid's kernel
    python3 -m braid_eval.experiments.failover --outages 1 2 5 --runs 3 \
        --modes gwsteer gwsteer+stall_ms=100+stall_remove=true kernel   # a gwsteer variant beside both

A gwsteer variant (``gwsteer+key=value...``, extra [gwsteer] settings) gets
its own column and median; the headline target stays plain gwsteer against
the in-kernel PM. ``--client-sysctl KEY=VALUE`` sets a sysctl in the
client's namespace for every mode and the calibration.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from braid_eval.analysis.provenance import provenance
from braid_eval.experiments.failover_metrics import (
    cumulative,
    first_at_or_after,
    first_sustained,
    in_order_delivery,
    longest_gap,
    sustained_from,
)
from braid_eval.measure.transfer import read_mib
from braid_eval.progress import Progress
from braid_testbed.bulk import HEADER
from braid_testbed.gateway_topologies import PORT, Topo, onlink, onlink_gateways
from braid_testbed.mptcpd_lab import Lab, start_mptcpd, stop_process
from braid_testbed.pcap import TcpPacket, read_tcp_packets
from braid_testbed.wait import wait_for

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "mptcpd-plugins"

MODES = ("gwsteer", "kernel")
#: A gwsteer variant is "gwsteer+key=value[+key=value...]": extra [gwsteer]
#: settings (e.g. "gwsteer+stall_ms=0"), reported in its own column.
VARIANT_SEP = "+"
T_CUT = 3.0
#: Detection, the same count for both managers (see the docstring). The probe
#: interval, time-out and hold_ms are gateway_topologies.py's settings.
FAIL_AFTER = 3
RECOVER_AFTER = 3
PROBE_INTERVAL_MS = 100
PROBE_TIMEOUT_MS = 300
HOLD_MS = 500
RECOVER_SHARE = 0.9
REUSE_SHARE = 0.25
GWSTEER_ONLY = ("detect_s", "gw_up_s")
#: gwsteer's promise: the last of fail_after lost probes times out by then.
DETECT_BOUND_S = (FAIL_AFTER * PROBE_INTERVAL_MS + PROBE_TIMEOUT_MS) / 1000
MSS = 1448
SLACK_PACKETS = 16
#: What sent data again, per run (nstat, absent counters left out: the host
#: kernel has no braid counters): the client's MPTCP-level retransmissions
#: (__mptcp_retrans: a whole fragment), its re-injections of only what a
#: closing subflow carried (braid's schedulers) and their segments, its stale
#: subflows; the server's MPTCP-level duplicates received.
CLIENT_RESEND_MIB = ("MPTcpExtMPTCPRetrans", "MPTcpExtReinjectCarried", "MPTcpExtReinjectCarriedSegs",
                     "MPTcpExtSubflowStale")
SERVER_RESEND_MIB = ("MPTcpExtDuplicateData",)
HOLD_S = 0.2
#: gw1 counts as re-used once it sustains REUSE_SHARE this long.
REUSE_FOR_S = 1.0
QUICK_OUTAGES = (2.0,)
FULL_OUTAGES = (0.5, 1.0, 2.0, 5.0, 10.0)
METRICS = (("detect_s", "cut -> gwsteer declares gw1 down (status file)"),
           ("t90_s", "cut -> 90 % of surviving capacity (in order)"),
           ("gw_up_s", "restore -> gwsteer declares gw1 up"),
           ("first_gw1_s", "restore -> first new data through gw1"),
           ("reuse_s", "restore -> gw1 carries >= 25 % again"),
           ("gap_s", "longest delivery gap around the cut"))
#: Per-run byte counts reported in MB: the copies, and what bounds them.
BYTE_METRICS = (("dup_bytes", "copies via gw2, MB"),
                ("gw1_in_flight", "in flight on gw1 at the cut (client), MB"))


@dataclasses.dataclass
class Run:
    mode: str
    outage_s: float
    run: int
    t90_s: float | None
    first_gw1_s: float | None
    reuse_s: float | None
    gap_s: float
    byte_exact: bool
    capture_matches: bool
    bytes: int
    pre_cut_mbit: float
    #: In-order bytes/s from the cut + gwsteer's detection bound to the restore.
    outage_rate: float = 0.0
    #: Data bytes through gw2 during the outage that the receiver already held in
    #: order (re-sent copies; a lower bound, see in_order_delivery). -1: not measured.
    dup_bytes: int = -1
    #: gwsteer only: cut -> its status file shows gw1 down; restore -> up again.
    detect_s: float | None = None
    gw_up_s: float | None = None
    #: Fresh data per gateway in the 2 s before the cut, Mbit/s: which gateway
    #: was idle if pre_cut_mbit is short of both.
    pre_cut_by_gw: dict[str, float] = dataclasses.field(default_factory=dict)
    #: MP_JOIN SYNs the server dropped for an unknown token (nstat
    #: MPJoinNoTokenFound): a join that overtook its connection's MP_CAPABLE
    #: ACK waits for the SYN's 1 s retransmission. -1: not measured.
    joins_no_token: int = -1
    #: CLIENT_RESEND_MIB and SERVER_RESEND_MIB at the end of the run.
    resend_mib: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Bytes gw1's subflows had sent and not had acknowledged just before
    #: the cut (the client's ss): the most a hand-over that sends only what
    #: the dead subflow carried can send again. -1: not measured.
    gw1_in_flight: int = -1

    def __post_init__(self) -> None:
        if self.detect_s is None:  # never declared down: "up again" means nothing
            self.gw_up_s = None


def _every_gateway_up(status: Path) -> bool:
    try:
        return all(g["up"] for g in json.loads(status.read_text())["gateways"])
    except (OSError, ValueError, KeyError):
        return False  # not written yet, or caught mid-write


def gwsteer_settings(mode: str) -> str:
    """The extra [gwsteer] lines of a gwsteer mode or variant ("" for plain gwsteer)."""
    name, *extras = mode.split(VARIANT_SEP)
    if name != "gwsteer" or any(e.count("=") != 1 or not e.split("=")[0] for e in extras):
        raise ValueError(f"mode: {mode!r} is not gwsteer, gwsteer+key=value..., kernel or none")
    return "".join(f"{k} = {v}\n" for k, v in (e.split("=") for e in extras))


def setup(lab: Lab, tmp: Path, mbit: int, mode: str,
          sysctls: tuple[tuple[str, str], ...] = ()) -> Topo:
    """The two-gateway topology with ``mode``'s path manager on the client
    (``none``: no second subflow, for the calibration); ``sysctls`` are set
    in the client's namespace whatever the mode."""
    topo = onlink(lab, tmp, shape_mbit=mbit)
    extra = "" if mode in ("kernel", "none") else gwsteer_settings(mode)
    topo.write_config(onlink_gateways(topo),
                      extra=f"fail_after = {FAIL_AFTER}\nrecover_after = {RECOVER_AFTER}\n{extra}")
    topo.route("install")
    topo.srv.sysctl("net.mptcp.pm_type", "0")
    topo.srv.run(["ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"])
    for key, value in sysctls:
        topo.cli.sysctl(key, value)
    if mode.startswith("gwsteer"):
        start_mptcpd(topo.cli, topo.config, tmp / "client.log")
        status = tmp / "gateways.json"
        wait_for(f"gwsteer to report every gateway up ({status})", lambda: _every_gateway_up(status), 5.0)
    elif mode == "kernel":
        topo.cli.sysctl("net.mptcp.pm_type", "0")
        topo.cli.sysctl("net.mptcp.stale_loss_cnt", FAIL_AFTER)
        topo.cli.run(["ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "0"])
        for k, dev in ((1, "e1"), (2, "e2")):
            topo.cli.run(["ip", "mptcp", "endpoint", "add", f"10.1.{k}.2", "dev", dev, "subflow"])
    elif mode != "none":
        raise ValueError(f"mode: {mode!r} is not gwsteer, gwsteer+key=value..., kernel or none")
    return topo


class Captures:
    """tcpdump of the client's packets on the server's gateway links."""

    def __init__(self, topo: Topo, tmp: Path, links: tuple[str, ...] = ("g1", "g2")) -> None:
        self.paths = {dev: tmp / f"{dev}.pcap" for dev in links}
        self.logs = {dev: tmp / f"{dev}.tcpdump.log" for dev in links}
        self.procs: list[subprocess.Popen[bytes]] = []
        for dev, path in self.paths.items():
            with self.logs[dev].open("w") as log:
                self.procs.append(topo.srv.popen(
                    ["tcpdump", "-i", dev, "-n", "-s", "200", "-B", "8192", "--immediate-mode", "-U",
                     "-w", str(path),
                     f"tcp and dst port {PORT}"], stdout=subprocess.DEVNULL, stderr=log))
        wait_for("tcpdump to start", lambda: all(p.exists() and p.stat().st_size >= 24
                                                 for p in self.paths.values()), 10.0,
                 diagnosis=lambda: ", ".join(log.read_text().strip() for log in self.logs.values()))
        time.sleep(0.2)  # margin: the header is written just before the capture loop starts

    def stop(self) -> dict[str, list[TcpPacket]]:
        """Stop tcpdump; every captured packet per link. Refuses a lossy capture."""
        time.sleep(0.5)  # let tcpdump read what the kernel still holds for it
        for proc in self.procs:
            stop_process(proc, wait=5)
        for dev, log in self.logs.items():
            for line in log.read_text().splitlines():
                if "dropped by kernel" in line and not line.startswith("0 "):
                    raise RuntimeError(f"tcpdump on {dev} lost packets: {line}")
        return {dev: list(read_tcp_packets(path)) for dev, path in self.paths.items()}


def calibrate(mbit: int, seconds: float = 4.0, sysctls: tuple[tuple[str, str], ...] = ()) -> float:
    """The surviving capacity C in bytes/s: in-order delivery of one MPTCP
    transfer through gw2 alone (one subflow), from its capture, skipping
    the first second (slow start) and the last half."""
    with TemporaryDirectory() as d, Lab() as lab:
        tmp = Path(d)
        tmp.chmod(0o755)
        topo = setup(lab, tmp, mbit, "none", sysctls)
        caps = Captures(topo, tmp, ("g2",))
        server = topo.server(timeout=seconds + 30)
        client = topo.client(10**11, source="10.1.2.2", seconds=seconds)
        client.communicate(timeout=seconds + 60)
        server.wait(timeout=30)
        curve = in_order_delivery(caps.stop()["g2"])
        if not curve.times:
            raise RuntimeError("calibration: nothing captured on gw2's link")
        t0, t1 = curve.times[0] + 1.0, curve.times[-1] - 0.5
        return (curve.at(t1) - curve.at(t0)) / (t1 - t0)


@dataclasses.dataclass
class Cycle:
    """What one cut/restore cycle left: every captured packet per server
    link, wall-clock cut and restore, gwsteer's gw1 down/up times (empty
    for the in-kernel PM) and the transfer's end-to-end result."""

    packets: dict[str, list[TcpPacket]]
    cut: float
    restored: float
    seen: dict[str, float]
    byte_exact: bool
    received: int
    joins_no_token: int = -1
    resend_mib: dict[str, int] = dataclasses.field(default_factory=dict)
    gw1_in_flight: int = -1


def _mib(nstat: subprocess.CompletedProcess[str], names: tuple[str, ...]) -> dict[str, int]:
    """``names``' values in ``nstat -az`` output; a counter this kernel lacks is left out."""
    got = {}
    for name in names:
        try:
            got[name] = read_mib(nstat, name)
        except KeyError:
            pass
    return got


def capture_cycle(mode: str, mbit: int, outage: float, after: float,
                  sysctls: tuple[tuple[str, str], ...] = ()) -> Cycle:
    """One upload under ``mode`` with gw1 cut at T_CUT for ``outage`` s."""
    with TemporaryDirectory() as d, Lab() as lab:
        tmp = Path(d)
        tmp.chmod(0o755)
        topo = setup(lab, tmp, mbit, mode, sysctls)
        caps = Captures(topo, tmp)
        total = T_CUT + outage + after
        server = topo.server(timeout=total + 60)
        client = topo.client(10**11, seconds=total)
        # T_CUT counts from the first data, not from the client's start: an
        # interpreter takes seconds to start in braid's emulated VM, and a
        # cut before the connection exists measures nothing.
        wait_for("the upload's first bytes at the server", lambda: topo.received_bytes() > 0, 30,
                 interval=0.02, diagnosis=lambda: f"client exit status: {client.poll()}")
        time.sleep(T_CUT)
        gw1_in_flight = topo.in_flight("gw1")
        topo.cut("gw1")
        cut = time.time()
        status = tmp / "gateways.json" if mode.startswith("gwsteer") else None
        seen: dict[str, float] = {}
        _watch_gw1(status, cut + outage, seen)
        topo.restore("gw1")
        restored = time.time()
        _watch_gw1(status, restored + min(after - 1.0, 5.0), seen)
        out, err = client.communicate(timeout=total + 120)
        server.wait(timeout=60)
        packets = caps.stop()
        server_mib = topo.srv.run(["nstat", "-az"])
        joins_no_token = read_mib(server_mib, "MPTcpExtMPJoinNoTokenFound")
        resend_mib = {**_mib(topo.cli.run(["nstat", "-az"]), CLIENT_RESEND_MIB),
                      **_mib(server_mib, SERVER_RESEND_MIB)}
        sent = json.loads(out) if out.strip() else {"digest_ok": False, "bytes": 0}
        if not any(p.payload_len for pkts in packets.values() for p in pkts):
            counts = {dev: len(pkts) for dev, pkts in packets.items()}
            raise RuntimeError(f"e3: {mode}: no data on the server's links (packets captured: {counts}); "
                               f"client: {(err or out).strip()[-300:] or 'no output'}")
        received = topo.received_bytes()
    if not sent.get("digest_ok"):
        print(f"e3: {mode} transfer not byte-exact: {err.strip()[-300:]}", file=sys.stderr)
    return Cycle(packets, cut, restored, seen,
                 byte_exact=bool(sent.get("digest_ok")) and received == sent["bytes"],
                 received=received, joins_no_token=joins_no_token, resend_mib=resend_mib,
                 gw1_in_flight=gw1_in_flight)


def run_once(mode: str, mbit: int, capacity: float, outage: float, after: float,
             index: int = 0, sysctls: tuple[tuple[str, str], ...] = ()) -> Run:
    """One cut/restore cycle under ``mode``; its metrics (module docstring)."""
    return measure_cycle(mode, outage, index,
                         capture_cycle(mode, mbit, outage, after, sysctls), capacity)


def measure_cycle(mode: str, outage: float, index: int, c: Cycle, capacity: float) -> Run:
    """The metrics of a captured cycle, gwsteer's detection times included."""
    run = measure(mode, outage, index, c.packets, c.cut, c.restored, capacity,
                  byte_exact=c.byte_exact, received=c.received)
    # A short outage can end before gwsteer declares gw1 down: detect_s is
    # then longer than the outage, and gw1 comes back after that.
    run.detect_s = c.seen["down"] - c.cut if "down" in c.seen else None
    run.gw_up_s = c.seen["up"] - c.restored if "up" in c.seen else None
    run.joins_no_token = c.joins_no_token
    run.resend_mib = c.resend_mib
    run.gw1_in_flight = c.gw1_in_flight
    return run


def _watch_gw1(status: Path | None, until: float, seen: dict[str, float]) -> None:
    """Until wall time ``until``, poll gwsteer's status file every 20 ms and
    note in ``seen`` when gw1 is first shown down ("down") and, after
    that, up again ("up"). Only sleeps if there is no status file."""
    while (now := time.time()) < until:
        if status is not None and "up" not in seen:
            try:
                gws = {g["id"]: g for g in json.loads(status.read_text())["gateways"]}
                key = "up" if "down" in seen else "down"
                if gws["gw1"]["up"] == (key == "up"):
                    seen[key] = now
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(min(0.02, max(0.0, until - time.time())))


def measure(mode: str, outage: float, index: int, packets: dict[str, list[TcpPacket]],
            cut: float, restored: float, capacity: float, byte_exact: bool, received: int) -> Run:
    """The metrics of one run from its captures (wall-clock cut and restore)."""
    slack = SLACK_PACKETS * MSS
    useful: list[TcpPacket] = []
    delivery = in_order_delivery([p for pkts in packets.values() for p in pkts], useful)
    if not delivery.times:
        every = [p for pkts in packets.values() for p in pkts]
        raise RuntimeError(f"{mode}: no data placed in the data sequence ({sum(bool(p.payload_len) for p in every)} "
                           f"data packets, {sum(p.syn for p in every)} SYNs captured)")
    # gw1's packets that brought the receiver data it did not hold yet: a
    # removed subflow's late retransmission of re-injected data is no re-use.
    gw1_packets = {id(p) for p in packets["g1"]}
    fresh = {id(p) for p in useful}
    dup = sum(p.payload_len for p in packets["g2"] if cut <= p.ts < restored and id(p) not in fresh)
    gw1 = cumulative((p.ts, p.payload_len) for p in useful if id(p) in gw1_packets)
    end = delivery.times[-1] - 0.5  # the sender has stopped after this
    t90 = sustained_from(delivery, cut, restored, RECOVER_SHARE * capacity, slack, HOLD_S)
    reuse = first_sustained(gw1, restored, end, REUSE_SHARE * capacity, slack, REUSE_FOR_S)
    before = delivery.at(cut) - delivery.at(cut - 2.0)
    by_gw = {dev: sum(p.payload_len for p in pkts if cut - 2.0 < p.ts <= cut and id(p) in fresh) * 8 / 2.0 / 1e6
             for dev, pkts in packets.items()}
    settled = cut + DETECT_BOUND_S
    outage_rate = ((delivery.at(restored) - delivery.at(settled)) / (restored - settled)
                   if restored > settled else 0.0)
    return Run(mode=mode, outage_s=outage, run=index, t90_s=t90,
               first_gw1_s=first_at_or_after(gw1.times, restored), reuse_s=reuse,
               gap_s=longest_gap(delivery, cut, restored), byte_exact=byte_exact,
               capture_matches=delivery.total[-1] == received + (HEADER.size if delivery.from_start else 0),
               bytes=received,
               pre_cut_mbit=before * 8 / 2.0 / 1e6, outage_rate=outage_rate, dup_bytes=dup,
               pre_cut_by_gw=by_gw)


def sweep(outages: tuple[float, ...], runs: int, mbit: int, after: float,
          capacity: float, modes: tuple[str, ...] = MODES,
          sysctls: tuple[tuple[str, str], ...] = ()) -> list[Run]:
    """Every outage x run x mode, interleaving the modes so load drifts hit all."""
    results: list[Run] = []
    progress = Progress("e3", len(outages) * runs * len(modes))
    for outage in outages:
        for i in range(runs):
            for mode in modes:
                t0 = time.monotonic()
                r = run_once(mode, mbit, capacity, outage, after, i, sysctls)
                results.append(r)
                per_gw = ", ".join(f"{gw} {v:.1f}" for gw, v in r.pre_cut_by_gw.items())
                refused = f", {r.joins_no_token} join SYN(s) dropped for no token" if r.joins_no_token > 0 else ""
                resent = "".join(f", {name.removeprefix('MPTcpExt')} {v}" for name, v in r.resend_mib.items() if v)
                progress.step(f"outage {outage:g} s run {i + 1} {mode} "
                              f"detect {_s(r.detect_s)}, t90 {_s(r.t90_s)}, gw1 up {_s(r.gw_up_s)}, "
                              f"first gw1 {_s(r.first_gw1_s)}, gw1>=25% {_s(r.reuse_s)}, "
                              f"gap {r.gap_s:.2f} s, copies via gw2 {r.dup_bytes / 1e6:.2f} MB "
                              f"(gw1 in flight at the cut {r.gw1_in_flight / 1e6:.2f} MB), "
                              f"pre-cut {r.pre_cut_mbit:.1f} Mbit/s ({per_gw}){refused}{resent}"
                              f"{'' if r.byte_exact and r.capture_matches else ' NOT BYTE-EXACT'}, "
                              f"{time.monotonic() - t0:.0f} s")
    return results


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def cell(values: list[float | None]) -> str:
    """Median (min-max) of the runs that reached the mark; how many did not."""
    got = sorted(v for v in values if v is not None)
    missing = len(values) - len(got)
    if not got:
        return "-"
    text = f"{statistics.median(got):.2f}"
    if len(got) > 1:
        text += f" ({got[0]:.2f}-{got[-1]:.2f})"
    return text + (f", {missing} of {len(values)} -" if missing else "")


def modes_of(runs: list[Run]) -> list[str]:
    """The modes in ``runs``: gwsteer and the in-kernel PM first, then variants."""
    seen = list(dict.fromkeys(r.mode for r in runs))
    return [m for m in MODES if m in seen] + [m for m in seen if m not in MODES]


def _label(mode: str) -> str:
    return "in-kernel PM" if mode == "kernel" else mode


def headline(runs: list[Run]) -> dict[str, object]:
    """The evaluation's target on the full sweep: median t90 over every outage of
    at least 1 s, per mode; met if gwsteer's is <= 1 s and below the kernel's."""
    med: dict[str, float | None] = {}
    reached: dict[str, str] = {}
    for mode in modes_of(runs):
        vals = [r.t90_s for r in runs if r.mode == mode and r.outage_s >= 1.0]
        got = [v for v in vals if v is not None]
        # A run that never reached 90 % within the outage counts as the whole outage.
        filled = [v if v is not None else r.outage_s
                  for v, r in zip(vals, [r for r in runs if r.mode == mode and r.outage_s >= 1.0],
                                  strict=True)]
        med[mode] = statistics.median(filled) if filled else None
        reached[mode] = f"{len(got)} of {len(vals)}"
    g, k = med.get("gwsteer"), med.get("kernel")
    met = g is not None and g <= 1.0 and (k is None or g < k)
    return {"median_t90_s": med, "reached": reached, "target_met": met,
            "byte_exact": all(r.byte_exact and r.capture_matches for r in runs)}


def kernel_phrase(params: dict[str, object]) -> str:
    """Which kernel ran the sweep, and what that decides: on the host the
    re-injection is upstream's; in braid's kernel the client's scheduler
    picks it (a braid scheduler re-sends only what the removed subflow
    carried)."""
    sysctls = params.get("client_sysctls")
    sched = sysctls.get("net.mptcp.scheduler", "default") if isinstance(sysctls, dict) else "default"
    if "braid" not in str(params.get("kernel", "")):
        return (f"Host kernel {params['kernel']} (MPTCP, tbf, nftables; upstream's re-injection; "
                "gwsteer does not depend on braid's kernel)")
    reinject = ("upstream's re-injection" if sched in ("default", "redundant")
                else "only what the removed subflow carried is sent again")
    return (f"braid's kernel {params['kernel']} in its emulated VM (TCG), client scheduler "
            f"`{sched}` ({reinject})")


def report(runs: list[Run], params: dict[str, object]) -> str:
    outages = sorted({r.outage_s for r in runs})
    head = headline(runs)
    med, reached = head["median_t90_s"], head["reached"]
    assert isinstance(med, dict) and isinstance(reached, dict)
    modes = modes_of(runs)
    lines = ["# E3: failover, gwsteer vs the in-kernel path manager", "",
             f"{kernel_phrase(params)}, braid {params['braid']}, {params['mode']} mode, {params['runs']} "
             f"run(s) per cell, {params['date']}. Two gateways, client uplinks tbf {params['mbit']} "
             f"Mbit/s; surviving capacity C = {params['capacity_mbit']:.1f} Mbit/s (gw2 alone, "
             f"measured); gw1 cut at {T_CUT:g} s by an nftables drop on gw1. Detection: "
             f"{FAIL_AFTER} losses for both (gwsteer: probes every {PROBE_INTERVAL_MS} ms, "
             f"{PROBE_TIMEOUT_MS} ms time-out, recover_after {RECOVER_AFTER}, hold_ms {HOLD_MS}; "
             f"kernel: net.mptcp.stale_loss_cnt {FAIL_AFTER}).", "",
             "Median (min-max) seconds over the runs; \"-\": not reached (t90: within the outage).",
             "", "| outage | metric | " + " | ".join(_label(m) for m in modes) + " |",
             "|---|---|" + "---|" * len(modes)]
    for outage in outages:
        for key, label in (*METRICS, *BYTE_METRICS):
            cells = ["n/a" if not m.startswith("gwsteer") and key in GWSTEER_ONLY else
                     cell([megabytes(getattr(r, key)) if key in dict(BYTE_METRICS) else getattr(r, key)
                           for r in runs if r.mode == m and r.outage_s == outage])
                     for m in modes]
            lines.append(f"| {outage:g} s | {label} | " + " | ".join(cells) + " |")
    pre = {m: statistics.median([r.pre_cut_mbit for r in runs if r.mode == m] or [0.0]) for m in modes}
    lines += ["", "In-order delivery in the 2 s before the cut (both gateways), median: "
              + ", ".join(f"{_label(m)} {pre[m]:.1f}" for m in modes) + " Mbit/s."]
    lines += copies_line({m: [(r.dup_bytes, r.gw1_in_flight) for r in runs if r.mode == m] for m in modes})
    if params.get("client_sysctls"):
        lines += ["", f"Client namespace sysctls (every mode): {params['client_sysctls']}."]
    variants = [m for m in modes if m not in MODES]
    if variants:
        lines += ["", "Median t90 over outages >= 1 s of the gwsteer variants (same definition): "
                  + ", ".join(f"{m} {_s(med.get(m))} ({reached.get(m)} reached)" for m in variants) + "."]
    g, k = med.get("gwsteer"), med.get("kernel")
    lines += ["", "Definitions (per packet, server-side captures): t90 = earliest r after the cut "
              "from which the in-order delivered bytes D satisfy D(t2) - D(t1) >= 0.9 C (t2 - t1) - "
              f"{SLACK_PACKETS} x {MSS} B for every r <= t1 < t2 <= restore, held >= {HOLD_S:g} s; "
              "gw1 >= 25 %: the same on gw1's new-data wire bytes with 0.25 C over [r, r + 1 s]; gap: "
              "longest time without in-order progress overlapping the outage.", "",
              f"Target: gwsteer's median t90 <= 1 s and below the in-kernel PM's, over "
              f"outages >= 1 s (a run not reaching 90 % counts as the whole outage): gwsteer "
              f"{_s(g)}, in-kernel PM {_s(k)} (90 % reached within the outage in "
              f"{reached.get('gwsteer', '-')} and {reached.get('kernel', '-')} runs) -> "
              f"**{'met' if head['target_met'] else 'not met'}**. All transfers byte-exact and "
              f"matching the captures: {head['byte_exact']}.", "",
              "## Published counterpart (kept apart)", "",
              "Neither Binder nor MultiNAT reports a failover or recovery time "
              "(Binder, LCDNet 2013; MultiNAT, MIT 2005). Binder has no gateway liveness and never "
              "re-creates a subflow: an outage removes the gateway from existing tunnels for good "
              "(A4, A9.7), so its 'reuse after restore' is never. MultiNAT picks a link per "
              "connection at set-up; an established connection dies with its link (B2, B10.1)."]
    return "\n".join(lines) + "\n"


def megabytes(n: int) -> float | None:
    """Bytes as MB; None for -1 (not measured)."""
    return n / 1e6 if n >= 0 else None


def copies_line(copies: dict[str, list[tuple[int, int]]]) -> list[str]:
    """Per mode, in how many runs the copies (the first of each pair) stayed
    within what gw1's subflows had in flight at the cut (the second); pairs
    with either not measured (-1) are left out."""
    judged = {m: [(d, f) for d, f in pairs if d >= 0 and f >= 0] for m, pairs in copies.items()}
    if not any(judged.values()):
        return []
    return ["", "Copies via gw2 within what gw1 had in flight at the cut: "
            + ", ".join(f"{_label(m)} {sum(d <= f for d, f in got)} of {len(got)} runs"
                        for m, got in judged.items() if got) + "."]


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    outages = sorted({r.outage_s for r in runs})
    for (key, label), ax in zip((METRICS[1], METRICS[3]), axes, strict=True):
        for mode, marker in zip(modes_of(runs), "osd^v<>", strict=False):
            xs, ys, lo, hi = [], [], [], []
            for o in outages:
                got = [v for r in runs if r.mode == mode and r.outage_s == o
                       if (v := getattr(r, key)) is not None]
                if got:
                    m = statistics.median(got)
                    xs.append(o)
                    ys.append(m)
                    lo.append(m - min(got))
                    hi.append(max(got) - m)
            ax.errorbar(xs, ys, yerr=[lo, hi], marker=marker, capsize=3, label=_label(mode))
        ax.set_xscale("log")
        ax.set_xlabel("outage (s)")
        ax.set_ylabel("seconds (median, min-max)")
        ax.set_title(label, fontsize=10)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: Path, runs: list[Run], params: dict[str, object]) -> str:
    """e3.json (every run and parameter), e3.md, e3.png; returns the report."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "e3.json").write_text(json.dumps(
        {"params": params, "headline": headline(runs),
         "runs": [dataclasses.asdict(r) for r in runs]}, indent=1) + "\n")
    text = report(runs, params)
    (out / "e3.md").write_text(text)
    plot(runs, out / "e3.png")
    return text


def missing_prerequisite() -> str | None:
    """Why a cycle cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    # The plugin and the validator gwsteer-route runs on every gateways
    # file: a missing one must stop the run here, not after the calibration.
    for built in ("gwsteer.so", "gwsteer-check"):
        if not (PLUGINS / built).exists():
            return f"{PLUGINS / built} missing: run make -C mptcpd-plugins"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Runs on the host kernel as root; needs mptcpd-plugins built.")
    p.add_argument("--full", action="store_true",
                   help="outages 0.5, 1, 2, 5, 10 s, 5 runs each (quick: one 2 s outage, 1 run)")
    p.add_argument("--outages", type=float, nargs="+", help="outage lengths in seconds (default: by mode)")
    p.add_argument("--runs", type=int, help="runs per outage and path manager (quick 1, full 5)")
    p.add_argument("--mbit", type=int, default=20, help="tbf rate of each gateway path (default 20)")
    p.add_argument("--after", type=float, help="seconds of transfer after the restore (quick 4, full 8)")
    p.add_argument("--modes", nargs="+", default=list(MODES),
                   help="path managers, interleaved per run: gwsteer, kernel, and gwsteer variants "
                        "gwsteer+key=value[+key=value] with extra [gwsteer] settings "
                        "(default: gwsteer kernel)")
    p.add_argument("--client-sysctl", action="append", default=[], metavar="KEY=VALUE",
                   help="a sysctl set in the client's namespace for every mode and the calibration")
    p.add_argument("--out", type=Path, default=Path("out/e3"))
    p.add_argument("--replot", action="store_true",
                   help="only redo the report and plot from OUT/e3.json (no root needed)")
    args = p.parse_args()
    if args.replot:
        saved = json.loads((args.out / "e3.json").read_text())
        text = write(args.out, [Run(**r) for r in saved["runs"]], saved["params"])
        print(text)
        return 0
    outages = tuple(args.outages or (FULL_OUTAGES if args.full else QUICK_OUTAGES))
    runs = args.runs or (5 if args.full else 1)
    after = args.after or (8.0 if args.full else 4.0)
    if any(o <= 0 for o in outages):
        p.error("--outages: each must be > 0 seconds")
    modes = tuple(dict.fromkeys(args.modes))
    try:
        for m in modes:
            if m != "kernel":
                gwsteer_settings(m)
    except ValueError as err:
        p.error(f"--modes: {err}")
    if any(kv.count("=") != 1 for kv in args.client_sysctl):
        p.error("--client-sysctl: KEY=VALUE")
    sysctls = tuple((k, v) for k, v in (kv.split("=") for kv in args.client_sysctl))
    if runs < 1 or args.mbit < 1 or after < 1:
        p.error("--runs and --mbit must be >= 1, --after >= 1 s")
    if missing := missing_prerequisite():
        print(f"e3: {missing}", file=sys.stderr)
        return 2
    capacity = calibrate(args.mbit, sysctls=sysctls)
    print(f"e3: surviving capacity (gw2 alone) {capacity * 8 / 1e6:.1f} Mbit/s", flush=True)
    params: dict[str, object] = {
        "mode": "full" if args.full else "quick", "outages": outages, "runs": runs,
        "modes": modes, "client_sysctls": dict(sysctls),
        "mbit": args.mbit, "after_s": after, "t_cut_s": T_CUT, "capacity_mbit": capacity * 8 / 1e6,
        "fail_after": FAIL_AFTER, "recover_after": RECOVER_AFTER,
        "probe_interval_ms": PROBE_INTERVAL_MS, "probe_timeout_ms": PROBE_TIMEOUT_MS,
        "hold_ms": HOLD_MS, "stale_loss_cnt": FAIL_AFTER, "recover_share": RECOVER_SHARE,
        "reuse_share": REUSE_SHARE, "reuse_for_s": REUSE_FOR_S, "slack_bytes": SLACK_PACKETS * MSS, "hold_s": HOLD_S,
        **provenance()}
    results = sweep(outages, runs, args.mbit, after, capacity, modes, sysctls)
    text = write(args.out, results, params)
    print("\n" + text)
    return 0 if all(r.byte_exact and r.capture_matches for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
