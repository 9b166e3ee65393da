"""braid: the state of a braid box (status) and a Prometheus exporter (exporter).

braid status
    The kernel (release; braid's when its schedulers are registered), the
    MPTCP scheduler and its parameters, each gateway's state from gwsteer's
    status file, braid-proxy's state (with --proxy-metrics) and the live
    MPTCP connections with their subflows and bytes per interface and local
    address. --json for machines. Run it in the namespace braid runs in.

braid exporter
    Serves the same in the Prometheus text format on /metrics (loopback,
    127.0.0.1:9477 by default), and the status page on / (the gateways,
    per-WAN throughput graphs, braid-proxy with --proxy-metrics, recent
    gateway state changes, recent page loads and each WAN's share of
    them); --once prints one scrape and exits. A
    non-loopback --listen needs --password-file (HTTP basic auth on
    every path) or --allow-public (metrics only, no page).

Examples::

    braid status
    braid status --json --proxy-metrics http://127.0.0.1:9180/metrics
    braid status --exporter http://127.0.0.1:9477 --exporter-password-file /etc/braid/exporter.password
    braid exporter --listen 127.0.0.1:9477
    braid exporter --page-interval 0.2    # page loads as fine as hywf_idle_ms (500 ms)
    braid exporter --once
    braid exporter --proxy-metrics http://127.0.0.1:9180/metrics
    braid exporter --listen 192.0.2.10:9477 --password-file /etc/braid/exporter.password

Exit status: 0, or 2 with one line on stderr when an input cannot be read
(status: gwsteer's status file, --no-gateways to go without it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from . import version
from .exporter import DEFAULT_URL, ListenError, read_pages, read_password, run
from .exposition import exposition
from .gateways import DEFAULT_STATUS_FILE
from .proxy import fetch
from .report import as_json, as_text
from .snapshot import take

DEFAULT_LISTEN = "127.0.0.1:9477"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="braid", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{status,exporter}")
    st = sub.add_parser("status", help="kernel, scheduler, gateways, proxy and connections, once",
                        description="Show the kernel, the MPTCP scheduler, gwsteer's gateways, braid-proxy "
                                    "and the live MPTCP connections of this network namespace.")
    st.add_argument("--status", default=DEFAULT_STATUS_FILE, metavar="FILE",
                    help=f"gwsteer's status file (gwsteer's status_file, default {DEFAULT_STATUS_FILE})")
    st.add_argument("--no-gateways", action="store_true",
                    help="do not read the status file (a box without gwsteer)")
    st.add_argument("--proxy-metrics", metavar="URL",
                    help="braid-proxy's metrics endpoint, e.g. http://127.0.0.1:9180/metrics "
                         "(client; the server's default port is 9181); unreachable is shown, not an error")
    st.add_argument("--exporter", default=DEFAULT_URL, metavar="URL",
                    help=f"a running braid exporter, for the recent page loads (default {DEFAULT_URL}); "
                         "none running is shown, not an error")
    st.add_argument("--exporter-password-file", metavar="FILE",
                    help="the exporter's --password-file, if it has one")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    ex = sub.add_parser("exporter", help="serve gateway health and kernel counters to Prometheus",
                        description="Serve gwsteer's gateway health, the MPTCP scheduler settings, the kernel's "
                                    "MPTcpExt counters and live subflow bytes on /metrics.")
    ex.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                    help=f"address to serve on (default {DEFAULT_LISTEN}; loopback unless --allow-public)")
    ex.add_argument("--allow-public", action="store_true",
                    help="allow a non-loopback --listen without a password (metrics only: no status page)")
    ex.add_argument("--password-file", metavar="FILE",
                    help="ask for HTTP basic auth (any user, this file's first line as the password) on every "
                         "path; allows a non-loopback --listen")
    ex.add_argument("--proxy-metrics", metavar="URL",
                    help="braid-proxy's metrics endpoint for the status page's relay state")
    ex.add_argument("--page-interval", type=float, default=1.0, metavar="SECONDS",
                    help="the status page's sampling interval (default 1)")
    ex.add_argument("--no-page", action="store_true", help="serve /metrics only (no status page, no sampling)")
    ex.add_argument("--page-idle-ms", type=int, metavar="MS",
                    help="quiet time that ends a page load (default: net.mptcp.hywf_idle_ms, else 500)")
    ex.add_argument("--page-scope", type=int, choices=(0, 1, 2), metavar="{0,1,2}",
                    help="what shares a split: 0 connection, 1 peer address, 2 namespace "
                         "(default: net.mptcp.hywf_scope, else 1)")
    ex.add_argument("--status", default=DEFAULT_STATUS_FILE, metavar="FILE",
                    help=f"gwsteer's status file (default {DEFAULT_STATUS_FILE}); missing: "
                         "braid_gateway_status_loaded 0")
    ex.add_argument("--once", action="store_true", help="print one scrape to stdout and exit")
    return p


def _status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    snap = take(None if args.no_gateways else args.status)
    if snap.status_error:
        print(f"braid status: error: {snap.status_error}", file=err)
        return 2
    proxy = fetch(args.proxy_metrics) if args.proxy_metrics else None
    try:
        password = read_password(args.exporter_password_file) if args.exporter_password_file else None
    except (OSError, ValueError) as e:
        print(f"braid status: error: {e}", file=err)
        return 2
    pages, pages_error = read_pages(args.exporter, password)
    if args.json:
        print(json.dumps(as_json(snap, proxy, pages, pages_error), indent=2), file=out)
    else:
        out.write(as_text(snap, proxy, pages, pages_error))
    return 0


def _exporter(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.once:
        out.write(exposition(take(args.status)))
        return 0
    if not args.page_interval > 0:
        print("braid exporter: error: --page-interval must be more than 0 seconds", file=err)
        return 2
    if args.page_idle_ms is not None and args.page_idle_ms < 1:
        print("braid exporter: error: --page-idle-ms must be at least 1", file=err)
        return 2
    try:
        run(args.listen, args.status, args.allow_public, out, page=not args.no_page,
            proxy_url=args.proxy_metrics, interval_s=args.page_interval, password_file=args.password_file,
            idle_ms=args.page_idle_ms, scope=args.page_scope)
    except (ListenError, OSError, ValueError) as e:
        print(f"braid exporter: error: {e}", file=err)
        return 2
    return 0


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point (``out``/``err``: where to print; the tests run it inside namespaces)."""
    args = parser().parse_args(argv)
    out, err = out or sys.stdout, err or sys.stderr
    return _status(args, out, err) if args.command == "status" else _exporter(args, out, err)


if __name__ == "__main__":
    sys.exit(main())
