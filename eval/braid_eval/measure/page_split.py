"""Page loads through braid-proxy on the standard testbed, and what each
WAN's observer saw of every one of them.

A page load is ``pages.py``'s objects fetched in parallel through the
braid-proxy SOCKS client; each WAN is captured as its network's operator
sees it, and the capture is cut per page by the loader's wall-clock window.
The share of a page that WAN 1 carried, per direction, is what HyWF
randomises: one split per page load, drawn anew for the next.

Usage::

    with PageServer(tb), BraidProxyPair(tb, workdir) as pair:
        pages = traced_pages(tb, pair.socks, count=40)
    print([p.share(1, "down") for p in pages])
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import subprocess
from types import TracebackType

import numpy as np
import numpy.typing as npt

from braid_eval.analysis.dss import WIRE_MSS
from braid_eval.measure.proxy_pair import SERVER_PORT
from braid_testbed import TOOLS_DIR, StandardTestbed, ip, pages
from braid_testbed.netns import stop_process
from braid_testbed.pcap import MptcpConnection, TcpPacket, TimeIndex, mptcp_connections

PAGES_TOOL = TOOLS_DIR / "pages.py"
PAGE_PORT = 8080
# sched_hywf.c's largest hywf_ncons
HYWF_NCONS_MAX = 10000
# model_shares() computes this many packet slots at a time at most
MODEL_CHUNK_SLOTS = 1 << 20


class PageServer:
    """pages.py serving on the testbed's server (the Internet side)."""

    def __init__(self, tb: StandardTestbed) -> None:
        self.tb = tb
        self.address = f"{ip('server', 'inet')}:{PAGE_PORT}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PageServer:
        self.proc = self.tb.server.popen(["python3", str(PAGES_TOOL), "serve", "--listen", self.address],
                                         stdout=subprocess.DEVNULL)
        self.tb.server.wait_listening(PAGE_PORT, ip("server", "inet"), timeout=60, proc=self.proc)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None:
            stop_process(self.proc)


@dataclasses.dataclass(frozen=True)
class FirstFlight:
    """When a relay connection's first byte in one direction left (the
    client's hello and request upstream, the server's answer downstream),
    against when its second subflow joined: a first flight that leaves
    before the join crosses one network whole."""

    sent_at: float
    joined_at: float | None
    # For a flight that left before its join: the connection's first
    # packets on both WANs, printed when a test finds more than it allows.
    timeline: str = ""

    @property
    def before_join(self) -> bool:
        return self.joined_at is None or self.sent_at < self.joined_at


@dataclasses.dataclass
class PageTrace:
    """One page load: the loader's result and the relay's payload bytes per
    (WAN, direction), "up" towards the braid server, "down" from it."""

    result: dict[str, object]
    payload: dict[tuple[int, str], int]
    first_answers: list[FirstFlight] = dataclasses.field(default_factory=list)
    first_requests: list[FirstFlight] = dataclasses.field(default_factory=list)
    # packets the WAN captures holding this page lost (kernel drops, both
    # WANs, over the whole series): each may hide a join from first_*
    capture_drops: int = 0
    # per direction, per relay connection of the page: the payload of its
    # data packets on both WANs, in the order they passed (wire_packets)
    wire: dict[str, list[list[int]]] = dataclasses.field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return float(self.result["seconds"])  # type: ignore[arg-type]

    def share(self, wan: int, direction: str) -> float:
        total = sum(v for (w, d), v in self.payload.items() if d == direction)
        return self.payload[(wan, direction)] / total if total else float("nan")


def relay_payload(packets: TimeIndex, start: float, end: float, direction: str) -> int:
    """Payload of braid's relay connections in [start, end], one direction."""
    window = packets.between(start, end)
    if direction == "up":
        return sum(p.payload_len for p in window if p.dport == SERVER_PORT)
    return sum(p.payload_len for p in window if p.sport == SERVER_PORT)


def relay_connections(captured: dict[int, list[TcpPacket]], since: float = 0.0) -> list[MptcpConnection]:
    """braid's relay connections in the captures (to the braid server).

    Connections that started before ``since``, when the last capture began,
    are left out: their join may predate a capture that would have shown
    it. (Captures start one after the other, a spare may open in between,
    and its join then looked missing: its data on the other WAN belonged
    to no connection, and its first flight seemed to leave unjoined.)"""
    return [conn for conn in mptcp_connections(captured).values()
            if conn.first[1][3] == SERVER_PORT and min((p.ts for _, p in conn.packets), default=since) >= since]


def data_packets(conn: MptcpConnection, direction: str) -> list[TcpPacket]:
    """``conn``'s packets with payload in ``direction`` ("down" from the
    server, "up" to it), on both WANs, in the order they passed."""
    return sorted((p for _, p in conn.packets
                   if p.payload_len and (p.sport if direction == "down" else p.dport) == SERVER_PORT),
                  key=lambda p: p.ts)


@dataclasses.dataclass(frozen=True)
class RelayFlow:
    """A relay connection's data one way: its packets with payload, on
    both WANs, in the order they passed (``data_packets``)."""

    conn: MptcpConnection
    packets: list[TcpPacket]

    @property
    def sent_at(self) -> float:
        """When its first byte that way left."""
        return self.packets[0].ts


def relay_flows(conns: list[MptcpConnection], direction: str) -> list[RelayFlow]:
    """The flows of ``conns`` that carried data in ``direction``, by when
    each began. Sorted once per series, and a page takes its own with
    ``flows_between``: sorting every connection again for every page made
    the page-split tests' series markedly slower under braid's emulated VM."""
    flows = [RelayFlow(conn, packets) for conn in conns if (packets := data_packets(conn, direction))]
    return sorted(flows, key=lambda f: f.sent_at)


def flows_between(flows: list[RelayFlow], start: float, end: float) -> list[RelayFlow]:
    """The flows of ``flows`` (from ``relay_flows``) that began in [start, end]."""
    begins = [f.sent_at for f in flows]
    return flows[bisect.bisect_left(begins, start):bisect.bisect_right(begins, end)]


def first_flights(flows: list[RelayFlow]) -> list[FirstFlight]:
    """For every flow: when its connection's first byte that way left, on
    whichever subflow, and when its first join completed."""
    out = []
    for flow in flows:
        flight = FirstFlight(flow.sent_at, flow.conn.joined_at)
        if flight.before_join:
            flight = dataclasses.replace(flight, timeline=connection_timeline(flow.conn))
        out.append(flight)
    return out


def wire_packets(flows: list[RelayFlow]) -> list[list[int]]:
    """Per flow: its packets' payload sizes, in order. The wire's packets,
    not the objects' bytes cut into full ones: braid-proxy's hello and its
    reply are packets of their own beside an object's request and
    response, and a page's bursts are counted in packets."""
    return [[p.payload_len for p in flow.packets] for flow in flows]


def connection_timeline(conn: MptcpConnection, limit: int = 16) -> str:
    """``conn``'s first ``limit`` packets on every WAN after its SYNs, one
    line each: time from the first, WAN, direction, flags, payload."""
    rows = []
    for wan, p in sorted(conn.packets, key=lambda wp: wp[1].ts)[:limit]:
        way = "up" if p.dport == SERVER_PORT else "down"
        flags = "".join(c for bit, c in ((0x02, "S"), (0x10, "A"), (0x01, "F"), (0x04, "R")) if p.flags & bit)
        rows.append((p.ts, f"wan{wan} {way:4} {flags:4} len {p.payload_len} mptcp {p.mptcp_subtype}"))
    t0 = rows[0][0] if rows else 0.0
    return "\n".join(f"  {1000 * (ts - t0):9.2f} ms {row}" for ts, row in rows)


def traced_pages(tb: StandardTestbed, socks: str, count: int, extra: list[str] | None = None,
                 timeout_s: float = 1200) -> list[PageTrace]:
    """Load ``count`` pages through ``socks`` while capturing both WANs."""
    args = ["load", "--server", f"{ip('server', 'inet')}:{PAGE_PORT}", "--socks", socks,
            "--pages", str(count), *(extra or [])]
    with tb.capture_wan(1) as cap1, tb.capture_wan(2) as cap2:
        proc = tb.client.run_main(pages.main, args, timeout_s)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(results) != count:
        raise RuntimeError(f"page loads failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    captured = {1: cap1.packets, 2: cap2.packets}
    drops = sum(c.dropped or 0 for c in (cap1, cap2))
    since = max(c.started_at or 0.0 for c in (cap1, cap2))
    conns = relay_connections(captured, since)
    flows = {d: relay_flows(conns, d) for d in ("up", "down")}
    indexed = {w: TimeIndex(pk) for w, pk in captured.items()}
    traces = []
    for r in results:
        start, end = float(r["start"]), float(r["end"])
        page = {d: flows_between(f, start, end) for d, f in flows.items()}
        traces.append(PageTrace(r, {(w, d): relay_payload(pk, start, end, d)
                                    for w, pk in indexed.items() for d in ("up", "down")},
                                first_flights(page["down"]), first_flights(page["up"]), drops,
                                {d: wire_packets(f) for d, f in page.items()}))
    cap1.cleanup()
    cap2.cleanup()
    return traces


def model_shares(pages: list[PageTrace], per_page: bool, ncons: int, draws: int,
                 seed: int = 1, direction: str = "down") -> list[float]:
    """HyWF's prediction for the wan1 share of these pages' bytes in
    ``direction``: "down", the objects' responses, or "up", their requests.

    Per page load (``per_page``) or per connection, a split p ~ U[0, 1] and
    bursts of Geometric(1 / ncons) packets, each on wan1 with probability
    p. The packets are each connection's on the wire where the page was
    captured (``PageTrace.wire``), otherwise its object's bytes cut into
    WIRE_MSS packets. Per page the bursts are the page's: its connections
    take each burst in pieces and give back what they leave of a piece
    (hywf_take_burst() and hywf_give_back() in sched_hywf.c's policy), so
    the page's packets, connection after connection, run on in its bursts.
    Per connection each connection's bursts are its own.
    Burst noise makes a page's share differ from its p (a page of a few
    hundred packets has a dozen bursts; upstream, where each request is a
    packet or three, a page's requests are a burst or two), so measured
    shares are compared with this, the model's own distribution, rather
    than with U[0, 1] itself.
    """
    if direction not in ("down", "up"):
        raise ValueError(f"direction {direction!r}: down or up")
    if not 1 <= ncons <= HYWF_NCONS_MAX:
        raise ValueError(f"ncons {ncons}: hywf_ncons takes 1 to {HYWF_NCONS_MAX}")
    # Computed per packet slot, every draw at once: under braid's emulated
    # VM a loop per burst took tens of seconds a call. A burst of
    # Geometric(1 / ncons) packets is a run of slots, each after the first
    # starting a new burst with probability 1 / ncons.
    rng = np.random.default_rng(seed)
    new_burst_p = 1.0 / ncons if ncons > 1 else 1.0
    sizes, conn_of, conn_counts = zip(*(_page_packets(page, direction) for page in pages), strict=True)
    nconns = np.array(conn_counts)
    slots = np.array([len(p) for p in sizes])
    chosen = rng.integers(len(pages), size=draws)
    # Draws in chunks of at most MODEL_CHUNK_SLOTS slots (and at least one draw).
    slots_end = np.cumsum(slots[chosen])
    wan1, totals = np.zeros(draws), np.zeros(draws)
    d0 = 0
    while d0 < draws:
        before = int(slots_end[d0 - 1]) if d0 else 0
        d1 = max(d0 + 1, int(np.searchsorted(slots_end, before + MODEL_CHUNK_SLOTS, side="right")))
        part = chosen[d0:d1]
        size = np.concatenate([sizes[i] for i in part])
        conn_base = np.cumsum(nconns[part]) - nconns[part]
        conn = np.concatenate([conn_of[i] + base for i, base in zip(part, conn_base, strict=True)])
        draw = np.repeat(np.arange(d1 - d0), slots[part])
        wan1[d0:d1] = _wan1_bytes(rng, size, conn, draw, d1 - d0, new_burst_p, per_page)
        totals[d0:d1] = np.bincount(draw, weights=size, minlength=d1 - d0)
        d0 = d1
    return [float(w / t) for w, t in zip(wan1, totals, strict=True)]


def _page_packets(page: PageTrace,
                  direction: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """A page's packets in ``direction`` (payload bytes), the index of the
    connection each belongs to, and how many connections: the wire's
    where captured, otherwise each object's bytes cut into WIRE_MSS
    packets."""
    conns = page.wire.get(direction) or [
        [WIRE_MSS] * (nbytes // WIRE_MSS) + ([nbytes % WIRE_MSS] if nbytes % WIRE_MSS else [])
        for nbytes in (int(obj[0 if direction == "down" else 1])
                       for obj in page.result["objects"])]  # type: ignore[attr-defined]
    size = np.array([b for c in conns for b in c], dtype=np.int64)
    conn = np.repeat(np.arange(len(conns)), [len(c) for c in conns]).astype(np.int64)
    return size, conn, len(conns)


def _flags(rng: np.random.Generator, new_burst: npt.NDArray[np.bool_],
           p_of_slot: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Per slot: whether its burst went on wan1 (each burst with the p of
    its first slot)."""
    burst = np.cumsum(new_burst) - 1
    starts = np.flatnonzero(new_burst)
    on_wan1: npt.NDArray[np.bool_] = (rng.random(len(starts)) < p_of_slot[starts])[burst]
    return on_wan1


def _wan1_bytes(rng: np.random.Generator, size: npt.NDArray[np.int64], conn: npt.NDArray[np.int64],
                draw: npt.NDArray[np.int64], draws: int, new_burst_p: float,
                per_page: bool) -> npt.NDArray[np.float64]:
    """Each draw's bytes on wan1, from its packets (``size``, the
    connection and the draw of each). Per page one split and one run of
    bursts, which the page's connections continue one after the other; per
    connection each connection its own split and bursts, the first
    starting with it."""
    new_burst = rng.random(len(size)) < new_burst_p
    if per_page:
        new_burst[np.flatnonzero(np.diff(draw, prepend=-1))] = True
        p_of_slot = rng.random(draws)[draw]
    else:
        new_burst[np.flatnonzero(np.diff(conn, prepend=-1))] = True
        p_of_slot = rng.random(int(conn[-1]) + 1 if len(conn) else 0)[conn]
    flags = _flags(rng, new_burst, p_of_slot)
    return np.bincount(draw, weights=size * flags, minlength=draws).astype(np.float64)
