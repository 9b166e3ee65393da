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

import dataclasses
import json
import math
import random
import subprocess
from types import TracebackType

from braid_eval.analysis.dss import WIRE_MSS
from braid_eval.measure.proxy_pair import SERVER_PORT
from braid_testbed import TOOLS_DIR, StandardTestbed, ip, pages
from braid_testbed.netns import stop_process
from braid_testbed.pcap import MptcpConnection, TcpPacket, TimeIndex, mptcp_connections

PAGES_TOOL = TOOLS_DIR / "pages.py"
# hywf_policy.h's HYWF_PIECE_DIV: a page's burst is taken in pieces of ncons / 4
PIECE_DIV = 4
PAGE_PORT = 8080


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


def first_flights(captured: dict[int, list[TcpPacket]], direction: str = "down",
                  since: float = 0.0) -> list[FirstFlight]:
    """For every relay connection: its first payload byte in ``direction``
    ("down" from the server, "up" to it), on whichever subflow, and when its
    first join completed.

    Connections that started before ``since``, when the last capture began,
    are left out: their join may predate a capture that would have shown
    it. (Captures start one after the other, a spare may open in between,
    and its join then looked missing: its data on the other WAN belonged
    to no connection, and its first flight seemed to leave unjoined.)"""
    out = []
    for conn in mptcp_connections(captured).values():
        if conn.first[1][3] != SERVER_PORT:
            continue
        if min((p.ts for _, p in conn.packets), default=since) < since:
            continue
        times = [p.ts for _, p in conn.packets
                 if p.payload_len and (p.sport if direction == "down" else p.dport) == SERVER_PORT]
        if times:
            flight = FirstFlight(min(times), conn.joined_at)
            if flight.before_join:
                flight = dataclasses.replace(flight, timeline=connection_timeline(conn))
            out.append(flight)
    return out


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
    answers, requests = first_flights(captured, "down", since), first_flights(captured, "up", since)
    indexed = {w: TimeIndex(pk) for w, pk in captured.items()}
    traces = []
    for r in results:
        start, end = float(r["start"]), float(r["end"])
        traces.append(PageTrace(r, {(w, d): relay_payload(pk, start, end, d)
                                    for w, pk in indexed.items() for d in ("up", "down")},
                                [f for f in answers if start <= f.sent_at <= end],
                                [f for f in requests if start <= f.sent_at <= end], drops))
    cap1.cleanup()
    cap2.cleanup()
    return traces


def model_shares(pages: list[PageTrace], per_page: bool, ncons: int, draws: int,
                 seed: int = 1, direction: str = "down") -> list[float]:
    """HyWF's prediction for the wan1 share of these pages' bytes in
    ``direction``: "down", the objects' responses, or "up", their requests.

    Per page load (``per_page``) or per connection, a split p ~ U[0, 1] and
    bursts of Geometric(1 / ncons) packets, each on wan1 with probability
    p; each object's response (request) is cut into WIRE_MSS packets. Per
    page the bursts are the page's: its connections take each burst in
    pieces of ncons / PIECE_DIV packets (hywf_take_burst() in
    sched_hywf.c's policy), and a piece that an object leaves unused is
    lost to the burst. Per connection each object's bursts are its own.
    Burst noise makes a page's share differ from its p (a page of a few
    hundred packets has a dozen bursts; upstream, where each request is a
    packet or three, a page's requests are a burst or two), so measured
    shares are compared with this, the model's own distribution, rather
    than with U[0, 1] itself.
    """
    if direction not in ("down", "up"):
        raise ValueError(f"direction {direction!r}: down or up")
    rng = random.Random(seed)
    column = 0 if direction == "down" else 1
    piece_max = max(1, ncons // PIECE_DIV)

    def burst_length() -> int:  # Geometric on {1, 2, ...} with mean ncons, by inversion
        return 1 if ncons <= 1 else 1 + int(math.log(1 - rng.random()) / math.log(1 - 1 / ncons))

    out = []
    for _ in range(draws):
        objects: list[list[int]] = rng.choice(pages).result["objects"]  # type: ignore[assignment]
        page_p = rng.random()
        wan1 = total = burst_left = 0
        on_wan1 = False
        for obj in objects:
            p = page_p if per_page else rng.random()
            left = obj[column]
            if not per_page:
                burst_left = 0
            while left > 0:
                if not burst_left:
                    burst_left, on_wan1 = burst_length(), rng.random() < p
                piece = min(piece_max, burst_left) if per_page else burst_left
                burst_left -= piece
                sent = min(piece * WIRE_MSS, left)
                wan1 += sent if on_wan1 else 0
                total += sent
                left -= sent
        out.append(wan1 / total)
    return out
