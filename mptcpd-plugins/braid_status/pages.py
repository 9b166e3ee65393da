"""Page loads seen from userspace: what each network carried of each one.

Under ``hywf`` a page load's bytes are split at random between the WANs,
one split per page: that split is the privacy the scheduler buys (an
observer on one network sees a different fraction of every page). The
kernel keeps the split in an epoch shared per ``hywf_scope`` (0: per
connection, 1: per peer address, 2: per namespace) and draws a new one
once all of the epoch's connections have been idle for ``hywf_idle_ms``
(kernel/README.md). The kernel does not export its epochs, so this
module rebuilds them from what userspace sees, successive snapshots of
the connections' subflows (``connections``):

* a connection's *group* is what shares a split at the scope in force:
  its token (scope 0), its peer address (scope 1), the namespace
  (scope 2);
* between two snapshots each subflow's ``bytes_sent`` and
  ``bytes_received`` grew; the growth is added, per WAN (the
  subflow's interface), to the group's open page, which the first
  bytes after a quiet spell open;
* a page closes when the snapshots have shown its group move no bytes
  for at least the idle time; the closed pages are kept, newest first,
  up to a bound.

Limits, which the output's documentation repeats:

* Sampling: a quiet spell is measured from the snapshot that last saw
  bytes to the last snapshot that saw none, a lower bound on the real
  gap; so a page is never split where the kernel kept one split, but two
  of the kernel's pages whose gap is shorter than the idle time plus two
  sampling intervals are seen as one. Sample faster than the idle time
  to see pages as the kernel does.
* A connection that closes between two snapshots takes the bytes it
  moved since the last one with it (the kernel no longer lists it), as
  does a subflow that closes. A connection first seen after the first
  snapshot counts all its bytes (it opened since the previous one); the
  connections of the first snapshot are the baseline.
* Idle here is "no bytes sent or received"; the kernel's idle is about
  what its scheduler sends. A page load moves both ways, so the two
  agree on a loading page; a peer that only receives for longer than
  the idle time keeps its page here.

Why rebuild epochs rather than read them: the kernel has no interface
for its split (and braid's kernel is not always the one running); the
subflow byte counters are what each network's observer sees, so the
figures here are the split as observed, whatever drew it.

Everything here is pure: the tracker is fed snapshots and times, and
holds bounded state (pages kept, groups open, WANs).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gwsteer.ss import split_endpoint

from .connections import Connection
from .kernel import KernelInfo

#: The kernel's defaults (kernel/README.md's sysctl table).
DEFAULT_IDLE_MS = 500
DEFAULT_SCOPE = 1
SCOPES = {0: "connection", 1: "peer", 2: "namespace"}
#: Closed pages kept.
KEEP_PAGES = 50
#: Groups with an open page at once (as the kernel's peer table, a peer beyond it is not followed).
MAX_OPEN = 4096
#: WANs (interfaces) a page or the histogram keeps apart; beyond it bytes count under "other".
MAX_WANS = 16
#: Upper bounds of the share histogram's buckets (+Inf implied). 0.05 and 0.95 single out
#: pages that stayed (almost) on one network.
SHARE_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def page_rules(kernel: KernelInfo, idle_ms: int | None = None, scope: int | None = None) -> tuple[int, int]:
    """(idle ms, scope): the arguments if given, else ``hywf_idle_ms`` and ``hywf_scope``
    (read with the scheduler's parameters when hywf is registered), else the kernel's defaults."""
    return (idle_ms if idle_ms is not None else kernel.params.get("hywf_idle_ms", DEFAULT_IDLE_MS),
            scope if scope is not None else kernel.params.get("hywf_scope", DEFAULT_SCOPE))


@dataclass
class WanBytes:
    """Bytes one WAN carried of a page."""

    sent: int = 0
    received: int = 0

    @property
    def total(self) -> int:
        return self.sent + self.received


@dataclass
class Page:
    """One page load of one group: bytes per WAN between a quiet spell and the next."""

    #: The group: peer address (scope 1), "*" (scope 2), peer address and token (scope 0).
    peer: str
    scope: int
    #: The snapshot before the first bytes (they moved after it) and the last that saw bytes.
    start: float
    end: float
    wans: dict[str, WanBytes] = field(default_factory=dict)
    #: Connections (tokens) that moved bytes in the page.
    tokens: set[str] = field(default_factory=set)
    open: bool = True

    @property
    def total(self) -> int:
        return sum(w.total for w in self.wans.values())

    def shares(self) -> dict[str, float | None]:
        """Each WAN's share of the page's bytes (None for a page without bytes)."""
        total = self.total
        return {wan: (w.total / total if total else None) for wan, w in sorted(self.wans.items())}

    def as_json(self) -> dict[str, Any]:
        shares = self.shares()
        return {"peer": self.peer, "scope": self.scope, "start": self.start, "end": self.end,
                "duration_s": round(self.end - self.start, 3), "open": self.open,
                "connections": len(self.tokens), "bytes": self.total,
                "wans": {wan: {"sent": w.sent, "received": w.received, "bytes": w.total, "share": shares[wan]}
                         for wan, w in sorted(self.wans.items())}}


@dataclass
class ShareHistogram:
    """Per WAN, the shares of closed pages (cumulative buckets, as Prometheus counts them)."""

    buckets: tuple[float, ...] = SHARE_BUCKETS
    counts: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)
    observed: dict[str, int] = field(default_factory=dict)

    def observe(self, wan: str, share: float) -> None:
        counts = self.counts.setdefault(wan, [0] * len(self.buckets))
        for i, bound in enumerate(self.buckets):
            if share <= bound:
                counts[i] += 1
        self.sums[wan] = self.sums.get(wan, 0.0) + share
        self.observed[wan] = self.observed.get(wan, 0) + 1


def _key(conn: Connection) -> tuple[str, str, str]:
    """A connection across snapshots: its token and endpoints (a token may be reused)."""
    return conn.token, conn.local, conn.remote


class PageTracker:
    """Feed it snapshots (``update``); it keeps the open and the last closed pages."""

    def __init__(self, idle_ms: int = DEFAULT_IDLE_MS, scope: int = DEFAULT_SCOPE, keep: int = KEEP_PAGES,
                 max_open: int = MAX_OPEN, max_wans: int = MAX_WANS) -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope {scope}: want 0, 1 or 2")
        self.idle_ms, self.scope = idle_ms, scope
        self.max_open, self.max_wans = max_open, max_wans
        self.closed: deque[Page] = deque(maxlen=keep)
        self.open: dict[str, Page] = {}
        #: Pages closed since the start (the histogram's count is per WAN).
        self.pages_total = 0
        #: Groups not followed because max_open pages were open.
        self.untracked = 0
        self.histogram = ShareHistogram()
        self._prev: dict[tuple[str, str, str], dict[tuple[str, str], tuple[int, int]]] | None = None
        self._prev_time: float | None = None
        self._wans: set[str] = set()

    def group(self, conn: Connection) -> str:
        """The peer (group) a connection's bytes count for at this scope."""
        if self.scope == 2:
            return "*"
        peer = split_endpoint(conn.remote)[0]
        return peer if self.scope == 1 else f"{peer} {conn.token}"

    def set_rules(self, idle_ms: int, scope: int) -> None:
        """New idle time or scope (the sysctls can change): a new scope closes the open pages."""
        if scope not in SCOPES:
            raise ValueError(f"scope {scope}: want 0, 1 or 2")
        if scope != self.scope:
            for key in list(self.open):
                self._close(key)
        self.idle_ms, self.scope = idle_ms, scope

    def _wan(self, interface: str, local_addr: str) -> str:
        wan = interface or local_addr or "?"
        if wan not in self._wans and len(self._wans) >= self.max_wans:
            return "other"
        self._wans.add(wan)
        return wan

    def _close(self, key: str) -> None:
        page = self.open.pop(key)
        page.open = False
        self.closed.appendleft(page)
        self.pages_total += 1
        for wan, share in page.shares().items():
            if share is not None:
                self.histogram.observe(wan, share)

    def update(self, now: float, conns: Iterable[Connection]) -> None:
        """One snapshot of the namespace's connections, taken at ``now`` (seconds)."""
        conns = list(conns)
        current: dict[tuple[str, str, str], dict[tuple[str, str], tuple[int, int]]] = {}
        moved: dict[str, tuple[set[str], dict[str, WanBytes]]] = {}
        first = self._prev is None
        for conn in conns:
            subs = {(s.local, s.remote): (s.bytes_sent, s.bytes_received) for s in conn.subflows}
            key = _key(conn)
            current[key] = subs
            if first:
                continue  # the baseline
            before = (self._prev or {}).get(key, {})
            group = self.group(conn)
            for s in conn.subflows:
                was_sent, was_received = before.get((s.local, s.remote), (0, 0))
                # A subflow's counters only grow; a smaller one is a new subflow on the same endpoints.
                sent = s.bytes_sent - was_sent if s.bytes_sent >= was_sent else s.bytes_sent
                received = s.bytes_received - was_received if s.bytes_received >= was_received \
                    else s.bytes_received
                tokens, wans = moved.setdefault(group, (set(), {}))
                if sent or received:
                    tokens.add(conn.token)
                w = wans.setdefault(self._wan(s.interface, s.local_addr), WanBytes())
                w.sent += sent
                w.received += received
        self._prev = current
        since = self._prev_time if self._prev_time is not None else now
        self._prev_time = now
        for group, (tokens, wans) in moved.items():
            if not any(w.total for w in wans.values()):
                continue  # listed, idle: the WANs it could use join the page when it moves
            page = self.open.get(group)
            if page is None:
                if len(self.open) >= self.max_open:
                    self.untracked += 1
                    continue
                page = self.open[group] = Page(group, self.scope, since, now)
            page.end = now
            page.tokens |= tokens
            for wan, w in wans.items():
                p = page.wans.setdefault(wan, WanBytes())
                p.sent += w.sent
                p.received += w.received
        # Listed connections with a subflow on a WAN that carried nothing still show it, at 0 bytes:
        # everything on one network is then a 100 % / 0 % page, not a page of one WAN.
        for conn in conns:
            page = self.open.get(self.group(conn))
            if page is not None:
                for s in conn.subflows:
                    page.wans.setdefault(self._wan(s.interface, s.local_addr), WanBytes())
        for group, page in list(self.open.items()):
            if now - page.end >= self.idle_ms / 1000:
                self._close(group)

    def pages(self) -> list[Page]:
        """Open pages, then closed ones, newest first."""
        return sorted(self.open.values(), key=lambda p: -p.start) + list(self.closed)

    def as_json(self) -> dict[str, Any]:
        return {"idle_ms": self.idle_ms, "scope": self.scope, "scope_name": SCOPES[self.scope],
                "pages_total": self.pages_total, "untracked": self.untracked,
                "pages": [p.as_json() for p in self.pages()]}
