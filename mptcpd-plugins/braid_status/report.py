"""What ``braid status`` prints: a dict for ``--json``, text for people."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from .connections import traffic_by
from .gateways import rfc3339_seconds
from .kernel import BRAID_SCHEDULERS
from .proxy import ProxyState
from .snapshot import Snapshot


def as_json(snap: Snapshot, proxy: ProxyState | None, pages: dict[str, Any] | None = None,
            pages_error: str = "") -> dict[str, Any]:
    """The report as plain JSON types (``--json``); ``pages``: a braid exporter's ``/api/pages``."""
    k = snap.kernel
    conns = [dict(asdict(c), bytes_sent=c.bytes_sent, bytes_received=c.bytes_received)
             for c in snap.connections]
    return {
        "kernel": {"release": k.release, "braid": k.braid, "mptcp": k.mptcp, "enabled": k.enabled,
                   "scheduler": k.scheduler, "available_schedulers": list(k.available),
                   "scheduler_params": k.params},
        "gateways": None if snap.gateways is None else {
            "path": snap.gateways.path, "updated": snap.gateways.updated,
            "gateways": [asdict(g) for g in snap.gateways.gateways]},
        "proxy": None if proxy is None else asdict(proxy),
        "connections": conns,
        "traffic": {key: {name: asdict(t) for name, t in sorted(traffic_by(snap.connections, key).items())}
                    for key in ("addr", "interface")},
        "mptcp_counters": {n: v for n, v in snap.counters.items() if n.startswith("Sched")},
        "pages": pages,
        "pages_error": pages_error,
        "errors": [e for e in (snap.connections_error,) if e],
    }


def human_bytes(n: float) -> str:
    """``1234567`` -> ``1.2 MB`` (decimal units, as interface counters are read).

    >>> human_bytes(999), human_bytes(1_234_567)
    ('999 B', '1.2 MB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.0f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _kernel_lines(snap: Snapshot) -> list[str]:
    k = snap.kernel
    if not k.mptcp:
        return [f"kernel     {k.release}: no MPTCP in this kernel (or namespace)"]
    which = ("braid's kernel" if k.braid else
             "not braid's kernel (not registered: "
             f"{', '.join(s for s in BRAID_SCHEDULERS if s not in k.available)})")
    lines = [f"kernel     {k.release}, {which}; MPTCP {'enabled' if k.enabled else 'DISABLED'}",
             f"scheduler  {k.scheduler or '-'} (available: {' '.join(k.available) or '-'})"]
    params = [f"{n}={v}" for n, v in k.params.items() if n.startswith(f"{k.scheduler}_")]
    if params:
        lines.append(f"           {' '.join(params)}")
    sched = {n: v for n, v in snap.counters.items() if n.startswith("Sched") and v}
    if sched:
        lines.append("counters   " + " ".join(f"{n}={v}" for n, v in sched.items()))
    return lines


def _gateway_lines(snap: Snapshot) -> list[str]:
    st = snap.gateways
    if st is None:
        return []
    updated = rfc3339_seconds(st.updated)
    age = f", {time.time() - updated:.1f} s ago" if updated is not None else ""
    lines = [f"gateways   {st.path} (updated {st.updated}{age})",
             f"  {'ID':<10} {'SOURCE':<16} {'STATE':<5} {'BACKUP':<6} {'BEST':<4} {'RTT ms':>7} {'EWMA ms':>8} "
             f"{'LOSS':>5} {'AVMET':>6} {'SUBFLOWS':>8}  LAST CHANGE"]
    for g in st.gateways:
        # A gateway that follows an interface shows it, and "-" while the
        # interface has no address.
        source = f"{g.source or '-'}%{g.interface}" if g.interface else g.source
        lines.append(f"  {g.id:<10} {source:<16} {'up' if g.up else 'DOWN':<5} {'yes' if g.backup else 'no':<6} "
                     f"{'*' if g.best else '':<4} {_ms(g.rtt_ms):>7} {_ms(g.ewma_ms):>8} {_pct(g.probe_loss):>5} "
                     f"{g.avmet:>6.3f} "
                     f"{g.subflows:>8}  {g.last_change}")
    if not st.gateways:
        lines.append("  (no gateways: a proxy-role gwsteer)")
    return lines


def _proxy_lines(proxy: ProxyState | None) -> list[str]:
    if proxy is None:
        return []
    if not proxy.reachable:
        return [f"proxy      {proxy.url}: UNREACHABLE ({proxy.error})"]
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"
    loaded = {None: "", 1.0: ", gateway status loaded", 0.0: ", gateway status NOT loaded"}
    return [f"proxy      {proxy.url}: braid-proxy {proxy.role or '?'} {proxy.version or '?'}, "
            f"{num(proxy.conns_active)} connections open, {num(proxy.conns_total)} accepted, "
            f"up {num(proxy.uptime_seconds)} s{loaded.get(proxy.gateway_status_loaded, '')}"]


def _connection_lines(snap: Snapshot) -> list[str]:
    if snap.connections_error:
        return [f"connections: cannot list ({snap.connections_error})"]
    gw_of = {g.source: g.id for g in snap.gateways.gateways} if snap.gateways else {}
    lines = [f"connections {len(snap.connections)} MPTCP"]
    for c in snap.connections:
        lines.append(f"  {c.local} -> {c.remote} {c.state} token {c.token}: {_count(len(c.subflows), 'subflow')}, "
                     f"sent {human_bytes(c.bytes_sent)}, received {human_bytes(c.bytes_received)}")
        for s in c.subflows:
            via = gw_of.get(s.local_addr, "")
            state = "" if s.state == "ESTAB" else f" {s.state}"
            rtt = "-" if s.rtt_ms is None else f"{s.rtt_ms:.2f}"
            lines.append(f"    {s.local} -> {s.remote} {s.interface or '?'}{' via ' + via if via else ''}"
                         f"{' backup' if s.backup else ''}{state}: sent {human_bytes(s.bytes_sent)}, "
                         f"received {human_bytes(s.bytes_received)}, rtt {rtt} ms")
    for key, title in (("interface", "interface"), ("addr", "address")):
        for name, t in sorted(traffic_by(snap.connections, key).items()):
            lines.append(f"  {title} {name}: {_count(t.subflows, 'subflow')}, sent {human_bytes(t.bytes_sent)}, "
                         f"received {human_bytes(t.bytes_received)}")
    return lines


#: Page loads ``braid status`` prints (--json has all the exporter keeps).
TEXT_PAGES = 10


def _share(wan: dict[str, Any] | None) -> str:
    if wan is None:
        return "-"
    share = wan.get("share")
    return f"{human_bytes(wan['bytes'])} {'-' if share is None else f'{100 * share:.0f}%'}"


def page_lines(scheduler: str, pages: dict[str, Any] | None, error: str) -> list[str]:
    """Recent page loads and what each network saw of them.

    Shown when the scheduler is hywf (whose per-page split they show) or
    when an exporter has pages to show under another scheduler (with a
    note); without an exporter under hywf, one line on how to get them.

    >>> page_lines("default", None, "no braid exporter at http://127.0.0.1:9477 (refused)")
    []
    >>> page_lines("hywf", None, "no braid exporter at http://127.0.0.1:9477 (refused)")[0][:38]
    'pages      no page history: no braid e'
    """
    hywf = scheduler == "hywf"
    if pages is None:
        return [f"pages      no page history: {error}; `braid exporter` samples the connections and keeps "
                "the recent page loads"] if hywf else []
    if not pages["pages"] and not hywf:
        return []
    note = "" if hywf else f"; scheduler {scheduler or '-'}, not hywf: no per-page split is drawn"
    lines = [f"pages      recent page loads, what each network saw (a page: bytes to one "
             f"{pages.get('scope_name', 'peer')} until {pages.get('idle_ms')} ms without any; "
             f"sampled every {pages.get('interval_s')} s by braid exporter{note})"]
    shown = pages["pages"][:TEXT_PAGES]
    if not shown:
        return [*lines, "  (none seen yet)"]
    wans = sorted({w for p in shown for w in p["wans"]})
    lines.append((f"  {'START (UTC)':<19} {'PEER':<24} {'SECONDS':>7} {'BYTES':>9}  "
                  + "  ".join(f"{w:<15}" for w in wans)).rstrip())
    for p in shown:
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(p["start"]))
        dur = f"{p['duration_s']:.1f}" + ("+" if p["open"] else "")
        lines.append((f"  {start:<19} {p['peer']:<24} {dur:>7} {human_bytes(p['bytes']):>9}  "
                      + "  ".join(f"{_share(p['wans'].get(w)):<15}" for w in wans)).rstrip())
    if len(pages["pages"]) > len(shown):
        lines.append(f"  ... {len(pages['pages']) - len(shown)} older (--json)")
    return lines


def as_text(snap: Snapshot, proxy: ProxyState | None, pages: dict[str, Any] | None = None,
            pages_error: str = "") -> str:
    """The report for people."""
    return "\n".join(_kernel_lines(snap) + _gateway_lines(snap) + _proxy_lines(proxy)
                     + _connection_lines(snap) + page_lines(snap.kernel.scheduler, pages, pages_error)) + "\n"
