"""The status page's data: a short history of samples, kept by a thread.

``braid exporter`` serves the page (``page/index.html``, uPlot for the
graphs) and ``/api/status``, this module's JSON: each gateway's state
from gwsteer's status file, the per-gateway (per-WAN) subflow
throughput over the last minutes, braid-proxy's state and the gateway
state changes seen, and the recent page loads (``pages``: each one's
bytes and share per WAN). A sample reads the same sources as a scrape; the
rates are byte differences between samples of the live subflows leaving
from each gateway's source address (a subflow that closes drops its
bytes: a negative difference counts as 0).
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from .connections import traffic_by
from .gateways import rfc3339_seconds
from .pages import PageTracker, ShareHistogram, page_rules
from .proxy import ProxyState, fetch
from .snapshot import Snapshot, take

#: Samples kept: 5 minutes at the default 1 s interval.
KEEP = 300
#: Gateway state changes kept.
KEEP_EVENTS = 50


@dataclass(frozen=True)
class Event:
    """A gateway going up or down, as the page lists it."""

    time: float
    gateway: str
    up: bool
    #: "change": seen between two samples; "last": gwsteer's last_change when the page started.
    kind: str


class History:
    """Samples of the sources; ``sample`` takes one, ``start`` takes one every ``interval_s``."""

    def __init__(self, status_file: str | None, proxy_url: str | None = None, interval_s: float = 1.0,
                 keep: int = KEEP, snapshot: Callable[[str | None], Snapshot] = take,
                 proxy: Callable[[str], ProxyState] = fetch, idle_ms: int | None = None,
                 scope: int | None = None) -> None:
        self.status_file, self.proxy_url, self.interval_s = status_file, proxy_url, interval_s
        #: The page loads: idle time and scope from the arguments, else hywf's sysctls at each sample.
        self._idle_ms, self._scope = idle_ms, scope
        self.pages = PageTracker()
        self._take, self._fetch = snapshot, proxy
        self._lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=keep)
        #: Per gateway: deques of sent and received bytes/s, aligned with _times (None before it was seen).
        self._rates: dict[str, tuple[deque[float | None], deque[float | None]]] = {}
        self._events: deque[Event] = deque(maxlen=KEEP_EVENTS)
        self._prev: dict[str, tuple[float, int, int, bool]] = {}
        self._current: dict[str, Any] = {}

    def sample(self, now: float | None = None) -> None:
        """Read the sources once and append to the history."""
        now = time.time() if now is None else now
        snap = self._take(self.status_file)
        proxy = self._fetch(self.proxy_url) if self.proxy_url else None
        traffic = traffic_by(snap.connections, "addr")
        gateways = []
        with self._lock:
            self._times.append(now)
            seen = set()
            for g in snap.gateways.gateways if snap.gateways else ():
                t = traffic.get(g.source)
                sent, received = (t.bytes_sent, t.bytes_received) if t else (0, 0)
                prev = self._prev.get(g.id)
                rates: tuple[float | None, float | None] = (None, None)
                if prev is None:
                    changed = rfc3339_seconds(g.last_change)
                    if changed is not None:
                        self._events.append(Event(changed, g.id, g.up, "last"))
                else:
                    dt = max(now - prev[0], 1e-3)
                    rates = (max(sent - prev[1], 0) / dt, max(received - prev[2], 0) / dt)
                    if prev[3] != g.up:
                        self._events.append(Event(rfc3339_seconds(g.last_change) or now, g.id, g.up, "change"))
                self._prev[g.id] = (now, sent, received, g.up)
                series = self._rates.setdefault(g.id, (deque(maxlen=self._times.maxlen),
                                                       deque(maxlen=self._times.maxlen)))
                for column, value in zip(series, rates, strict=True):
                    column.extend([None] * (len(self._times) - 1 - len(column)))
                    column.append(value)
                seen.add(g.id)
                gateways.append(dict(asdict(g), sent_bytes=sent, received_bytes=received,
                                     sent_bps=rates[0], received_bps=rates[1]))
            for gid, series in self._rates.items():
                if gid not in seen:  # gone from the status file: a gap
                    for column in series:
                        column.extend([None] * (len(self._times) - len(column)))
            if not snap.connections_error:
                self.pages.set_rules(*page_rules(snap.kernel, self._idle_ms, self._scope))
                self.pages.update(now, snap.connections)
            k = snap.kernel
            self._current = {
                "updated": now, "interval_s": self.interval_s,
                "status_file": self.status_file, "status_error": snap.status_error,
                "status_updated": snap.gateways.updated if snap.gateways else None,
                "kernel": {"release": k.release, "braid": k.braid, "scheduler": k.scheduler},
                "gateways": gateways,
                "proxy": None if proxy is None else asdict(proxy),
                "connections": len(snap.connections), "connections_error": snap.connections_error,
            }

    def as_json(self) -> dict[str, Any]:
        """What ``/api/status`` answers."""
        with self._lock:
            return dict(self._current, history={
                "t": list(self._times),
                "gateways": {gid: {"sent_bps": list(s), "received_bps": list(r)}
                             for gid, (s, r) in self._rates.items()},
            }, events=[asdict(e) for e in sorted(self._events, key=lambda e: -e.time)],
                pages=self._pages_json())

    def _pages_json(self) -> dict[str, Any]:
        return dict(self.pages.as_json(), interval_s=self.interval_s,
                    updated=self._current.get("updated"),
                    scheduler=self._current.get("kernel", {}).get("scheduler", ""))

    def pages_json(self) -> dict[str, Any]:
        """What ``/api/pages`` answers (and ``braid status`` reads): the recent page loads."""
        with self._lock:
            return self._pages_json()

    def page_stats(self) -> tuple[ShareHistogram, int]:
        """A copy of the share histogram and the pages closed, for a scrape."""
        with self._lock:
            return copy.deepcopy(self.pages.histogram), self.pages.pages_total

    def start(self) -> Callable[[], None]:
        """Sample now and then every ``interval_s`` from a thread; returns the function that stops it."""
        stop = threading.Event()
        self.sample()

        def loop() -> None:
            while not stop.wait(self.interval_s):
                try:
                    self.sample()
                except Exception:  # a failed sample is a gap, not the end of the page
                    continue

        thread = threading.Thread(target=loop, name="braid status page", daemon=True)
        thread.start()

        def halt() -> None:
            stop.set()
            thread.join()
        return halt
