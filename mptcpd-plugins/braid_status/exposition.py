"""One scrape in the Prometheus text exposition format.

Naming follows braid-proxy's ``/metrics`` (proxy/internal/metrics): every
family has HELP and TYPE lines and the prefix ``braid_``; counters end in
``_total``; times are in seconds; what gwsteer's status file or the
kernel names (a gateway, a counter, a scheduler parameter) is a label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import version
from .connections import Connection, traffic_by
from .gateways import GatewayStatus, rfc3339_seconds
from .kernel import KernelInfo
from .pages import ShareHistogram
from .snapshot import Snapshot

NAMESPACE = "braid"


@dataclass
class Family:
    """One metric family: name (without the namespace), type, help, samples."""

    name: str
    type: str
    help: str
    #: (labels, value, suffix): a histogram's samples end in _bucket, _sum, _count.
    samples: list[tuple[dict[str, str], float, str]] = field(default_factory=list)

    def add(self, value: float, **labels: str) -> None:
        self.samples.append((labels, value, ""))

    def add_suffixed(self, suffix: str, value: float, labels: dict[str, str]) -> None:
        self.samples.append((labels, value, suffix))


def escape_label(value: str) -> str:
    """A label value as the exposition format wants it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def render(families: list[Family]) -> str:
    """Text of the families, sorted by name, each with HELP and TYPE."""
    out: list[str] = []
    for f in sorted(families, key=lambda f: f.name):
        full = f"{NAMESPACE}_{f.name}"
        out.append(f"# HELP {full} {escape_help(f.help)}")
        out.append(f"# TYPE {full} {f.type}")
        for labels, value, suffix in f.samples:
            text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
            name = full + suffix
            out.append(f"{name}{{{text}}} {format_value(value)}" if text else f"{name} {format_value(value)}")
    return "\n".join(out) + "\n"


def _flag(b: bool) -> float:
    return 1.0 if b else 0.0


def kernel_families(k: KernelInfo, counters: dict[str, int]) -> list[Family]:
    info = Family("kernel_info", "gauge", "The running kernel: release, and whether it is braid's "
                  "(all of braid's schedulers registered): always 1.")
    info.add(1, release=k.release, braid="true" if k.braid else "false")
    fams = [info]
    enabled = Family("mptcp_enabled", "gauge", "net.mptcp.enabled: 1 if new sockets may use MPTCP, "
                     "0 if not or the kernel has no MPTCP.")
    enabled.add(_flag(bool(k.enabled)))
    fams.append(enabled)
    if k.scheduler:
        current = Family("mptcp_scheduler_info", "gauge",
                         "net.mptcp.scheduler, the packet scheduler new connections take: always 1.")
        current.add(1, scheduler=k.scheduler)
        fams.append(current)
    if k.available:
        avail = Family("mptcp_scheduler_available", "gauge",
                       "Packet schedulers registered in the kernel (net.mptcp.available_schedulers): always 1.")
        for s in k.available:
            avail.add(1, scheduler=s)
        fams.append(avail)
    if k.params:
        params = Family("mptcp_scheduler_param", "gauge", "A packet scheduler's per-namespace parameter "
                        "(the sysctl net.mptcp.<scheduler>_<param>).")
        for name, value in k.params.items():
            sched = next(s for s in k.available if name.startswith(f"{s}_"))
            params.add(value, scheduler=sched, param=name[len(sched) + 1:])
        fams.append(params)
    if counters:
        ext = Family("mptcp_ext_total", "counter", "The kernel's MPTcpExt counters (/proc/net/netstat, "
                     "nstat's MPTcpExt<counter>), braid's schedulers' Sched* among them.")
        for name, value in counters.items():
            ext.add(value, counter=name)
        fams.append(ext)
    return fams


def gateway_families(st: GatewayStatus | None, conns: list[Connection]) -> list[Family]:
    loaded = Family("gateway_status_loaded", "gauge",
                    "1 if gwsteer's status file was read, 0 if it is missing or invalid.")
    loaded.add(_flag(st is not None))
    if st is None:
        return [loaded]
    fams = [loaded]
    updated = rfc3339_seconds(st.updated)
    if updated is not None:
        f = Family("gateway_status_updated_timestamp_seconds", "gauge",
                   "When gwsteer last wrote its status file (at least every status_interval_ms while it runs).")
        f.add(updated)
        fams.append(f)
    per = {name: Family(f"gateway_{name}", typ, text) for name, typ, text in (
        ("info", "gauge", "A gateway of gwsteer's, the local source address its subflows leave from and the "
                          "interface it follows (\"\" for a fixed address): always 1."),
        ("up", "gauge", "1 if gwsteer has the gateway up (its probes answered), 0 if down."),
        ("backup", "gauge", "1 if gwsteer wants the backup flag on the gateway's subflows "
                            "(configured backup, or not the best with prefer_best)."),
        ("best", "gauge", "1 for the gateway gwsteer prefers (up, not backup, highest AvMet score)."),
        ("probe_rtt_seconds", "gauge", "The gateway's last answered probe round-trip time."),
        ("probe_rtt_ewma_seconds", "gauge", "The gateway's smoothed probe round-trip time (EWMA)."),
        ("avmet_score", "gauge", "The gateway's AvMet score in [0, 1]: EWMA of answering a probe round first."),
        ("probe_loss_ratio", "gauge", "Fraction of the gateway's last probes (up to 64) that got no answer."),
        ("last_change_timestamp_seconds", "gauge", "When the gateway last went up or down."),
        ("subflows", "gauge", "Live subflows through the gateway over all connections gwsteer manages."),
        ("subflow_sent_bytes", "gauge", "Bytes sent on the live subflows leaving from the gateway's source "
                                        "address (tcp_info; closed subflows drop out)."),
        ("subflow_received_bytes", "gauge", "Bytes received on the live subflows of the gateway's source address."),
    )}
    traffic = traffic_by(conns, "addr")
    for g in st.gateways:
        per["info"].add(1, gateway=g.id, source=g.source, interface=g.interface)
        per["up"].add(_flag(g.up), gateway=g.id)
        per["backup"].add(_flag(g.backup), gateway=g.id)
        per["best"].add(_flag(g.best), gateway=g.id)
        if g.rtt_ms is not None:
            per["probe_rtt_seconds"].add(g.rtt_ms / 1000, gateway=g.id)
        if g.ewma_ms is not None:
            per["probe_rtt_ewma_seconds"].add(g.ewma_ms / 1000, gateway=g.id)
        per["avmet_score"].add(g.avmet, gateway=g.id)
        if g.probe_loss is not None:
            per["probe_loss_ratio"].add(g.probe_loss, gateway=g.id)
        changed = rfc3339_seconds(g.last_change)
        if changed is not None:
            per["last_change_timestamp_seconds"].add(changed, gateway=g.id)
        per["subflows"].add(g.subflows, gateway=g.id)
        t = traffic.get(g.source)
        per["subflow_sent_bytes"].add(t.bytes_sent if t else 0, gateway=g.id)
        per["subflow_received_bytes"].add(t.bytes_received if t else 0, gateway=g.id)
    return fams + [f for f in per.values() if f.samples]


def connection_families(conns: list[Connection], ok: bool) -> list[Family]:
    listed = Family("connections_listed", "gauge", "1 if the MPTCP connections were listed (ss), 0 if not.")
    listed.add(_flag(ok))
    count = Family("mptcp_connections", "gauge", "MPTCP connections open in this network namespace.")
    count.add(len(conns))
    fams = [listed, count]
    by_addr = traffic_by(conns, "addr")
    for name, attr, text in (("subflows", "subflows", "Live MPTCP subflows from the local address."),
                             ("subflow_sent_bytes", "bytes_sent",
                              "Bytes sent on the live MPTCP subflows from the local address."),
                             ("subflow_received_bytes", "bytes_received",
                              "Bytes received on the live MPTCP subflows of the local address.")):
        f = Family(name, "gauge", text)
        for addr, t in sorted(by_addr.items()):
            f.add(getattr(t, attr), addr=addr)
        if f.samples:
            fams.append(f)
    return fams


def page_families(hist: ShareHistogram, pages_total: int) -> list[Family]:
    """The page loads the exporter's sampler closed (pages): how many, and each WAN's share of them."""
    loads = Family("page_loads_total", "counter", "Page loads seen to finish (bytes to one peer, then "
                   "hywf_idle_ms without any) since the exporter started; the status page's sampling.")
    loads.add(pages_total)
    share = Family("page_wan_share", "histogram", "A finished page load's share of its bytes (sent and "
                   "received) on the WAN (interface), one observation per WAN its connections had a subflow on.")
    for wan in sorted(hist.counts):
        for bound, count in zip(hist.buckets, hist.counts[wan], strict=True):
            share.add_suffixed("_bucket", count, {"wan": wan, "le": format_value(bound)})
        share.add_suffixed("_bucket", hist.observed[wan], {"wan": wan, "le": "+Inf"})
        share.add_suffixed("_sum", hist.sums[wan], {"wan": wan})
        share.add_suffixed("_count", hist.observed[wan], {"wan": wan})
    return [loads, share]


def exposition(snap: Snapshot, pages: tuple[ShareHistogram, int] | None = None) -> str:
    """The whole scrape; ``pages``: the page tracker's histogram and page count, where one runs."""
    build = Family("build_info", "gauge", "The braid release this exporter belongs to: always 1.")
    build.add(1, version=version())
    return render([build, *kernel_families(snap.kernel, snap.counters),
                   *gateway_families(snap.gateways, snap.connections),
                   *connection_families(snap.connections, not snap.connections_error),
                   *(page_families(*pages) if pages else [])])
