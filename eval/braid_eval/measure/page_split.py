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
# hywf_policy.h's HYWF_PIECE_DIV: a page's burst is taken in pieces of ncons / 4
PIECE_DIV = 4
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
    if not 1 <= ncons <= HYWF_NCONS_MAX:
        raise ValueError(f"ncons {ncons}: hywf_ncons takes 1 to {HYWF_NCONS_MAX}")
    # Computed per packet slot, every draw at once: under braid's emulated
    # VM a loop per burst took tens of seconds a call. A burst of
    # Geometric(1 / ncons) packets is a run of slots, each after the first
    # starting a new burst with probability 1 / ncons.
    rng = np.random.default_rng(seed)
    column = 0 if direction == "down" else 1
    piece = max(1, ncons // PIECE_DIV) if per_page else None
    new_burst_p = 1.0 / ncons if ncons > 1 else 1.0
    sizes = [[int(obj[column]) for obj in page.result["objects"]] for page in pages]  # type: ignore[attr-defined]
    counts = np.array([len(s) for s in sizes])
    flat = np.array([b for s in sizes for b in s], dtype=np.int64)
    chosen = rng.integers(len(pages), size=draws)
    # the chosen pages' objects, in order, and the draw each belongs to
    nobj = counts[chosen]
    first = np.repeat(np.cumsum(counts)[chosen] - nobj, nobj)
    rank = np.arange(nobj.sum()) - np.repeat(np.cumsum(nobj) - nobj, nobj)
    obj_bytes = flat[first + rank]
    obj_draw = np.repeat(np.arange(draws), nobj)
    slots = (obj_bytes + WIRE_MSS - 1) // WIRE_MSS
    last = obj_bytes - (slots - 1) * WIRE_MSS  # the last packet's bytes
    totals = np.bincount(obj_draw, weights=obj_bytes, minlength=draws)
    # Draws in chunks of at most MODEL_CHUNK_SLOTS slots (and at least one
    # draw): a stream keeps room for the piece each object may lose.
    room = np.bincount(obj_draw, weights=slots + (piece or 1) - 1, minlength=draws).astype(np.int64)
    room_end = np.cumsum(room)
    wan1 = np.zeros(draws)
    d0 = 0
    while d0 < draws:
        before = int(room_end[d0 - 1]) if d0 else 0
        d1 = max(d0 + 1, int(np.searchsorted(room_end, before + MODEL_CHUNK_SLOTS, side="right")))
        o0, o1 = np.searchsorted(obj_draw, [d0, d1])
        part = (slots[o0:o1], last[o0:o1], obj_draw[o0:o1] - d0)
        wan1[d0:d1] = (_per_connection_wan1(rng, *part, d1 - d0, new_burst_p) if piece is None
                       else _per_page_wan1(rng, *part, rank[o0:o1], room[d0:d1], new_burst_p, piece))
        d0 = d1
    return [float(w / t) for w, t in zip(wan1, totals, strict=True)]


def _flags(rng: np.random.Generator, new_burst: npt.NDArray[np.bool_],
           p_of_slot: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Per slot: whether its burst went on wan1 (each burst with the p of
    its first slot)."""
    burst = np.cumsum(new_burst) - 1
    starts = np.flatnonzero(new_burst)
    on_wan1: npt.NDArray[np.bool_] = (rng.random(len(starts)) < p_of_slot[starts])[burst]
    return on_wan1


def _per_connection_wan1(rng: np.random.Generator, slots: npt.NDArray[np.int64],
                         last: npt.NDArray[np.int64], obj_draw: npt.NDArray[np.int64], draws: int,
                         new_burst_p: float) -> npt.NDArray[np.float64]:
    """Each object its own split and bursts, the first starting with it."""
    obj_of_slot = np.repeat(np.arange(len(slots)), slots)
    first_slot = np.cumsum(slots) - slots
    new_burst = rng.random(len(obj_of_slot)) < new_burst_p
    new_burst[first_slot[slots > 0]] = True
    flags = _flags(rng, new_burst, rng.random(len(slots))[obj_of_slot])
    nbytes = np.full(len(obj_of_slot), WIRE_MSS, dtype=np.int64)
    nbytes[(first_slot + slots - 1)[slots > 0]] = last[slots > 0]
    return np.bincount(obj_draw[obj_of_slot], weights=nbytes * flags, minlength=draws).astype(np.float64)


def _per_page_wan1(rng: np.random.Generator, slots: npt.NDArray[np.int64], last: npt.NDArray[np.int64],
                   obj_draw: npt.NDArray[np.int64], rank: npt.NDArray[np.int64], room: npt.NDArray[np.int64],
                   new_burst_p: float, piece: int) -> npt.NDArray[np.float64]:
    """One split and one run of bursts per page, which its objects take in
    order, a piece of ``piece`` slots at a time; the rest of an object's
    last piece is lost, and the next object starts at the next piece."""
    # Each draw's stream (``room``): its objects and the most they can lose.
    draws = len(room)
    base = np.cumsum(room) - room
    length = int(room.sum()) + 1  # and a last slot that ends every stream
    draw_of_slot = np.repeat(np.arange(draws), room)
    new_burst = rng.random(length) < new_burst_p
    new_burst[base] = True
    new_burst[-1] = True
    p_draw = np.append(rng.random(draws), 0.0)
    flags = _flags(rng, new_burst, p_draw[np.append(draw_of_slot, draws)])
    index = np.arange(length)
    burst_start = np.maximum.accumulate(np.where(new_burst, index, 0))
    at_piece = (index - burst_start) % piece == 0
    # next_piece[i]: the first piece boundary at or after slot i
    next_piece = np.minimum.accumulate(np.where(at_piece, index, length)[::-1])[::-1]
    on1 = np.concatenate([[0], np.cumsum(flags)])
    wan1 = np.zeros(draws)
    pos = base.copy()
    for k in range(int(rank.max()) + 1 if len(rank) else 0):
        which = rank == k
        d = obj_draw[which]
        n, tail = slots[which], last[which]
        start, end = pos[d], pos[d] + n
        used = n > 0
        wan1[d] += np.where(used, WIRE_MSS * (on1[end] - on1[start])
                            - (WIRE_MSS - tail) * flags[np.maximum(end - 1, 0)], 0)
        pos[d] = next_piece[end]
    return wan1
