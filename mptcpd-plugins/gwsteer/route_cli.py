"""``gwsteer-route``: install or remove gateway steering routes.

Examples::

    gwsteer-route check                      # validate config and host only
    gwsteer-route install                    # all gateways of the config
    gwsteer-route install --gateway gw2
    gwsteer-route uninstall                  # every braid route and rule
    gwsteer-route follow                     # install, then follow interfaces (DHCP, RA, hotplug)
    gwsteer-route decap --sid fc00:2::d4 --nexthop 10.9.2.2   # on the gateway
    gwsteer-route transit --sid fc00:1::e                     # on a transit node
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading

from pyroute2 import IPRoute

from gwsteer import version

from . import route
from .config import Config, ConfigError, load_config


def _notify_ready() -> None:
    """Tell systemd that the routes of every gateway with an address are in
    (``Type=notify``): its unit is ordered before mptcpd, whose first subflows
    need them. A gateway named by an interface with no address yet is routed
    when the address comes. Nothing outside systemd."""
    path = os.environ.get("NOTIFY_SOCKET", "")
    if not path:
        return
    if path.startswith("@"):  # an abstract socket
        path = "\0" + path[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(path)
            s.sendall(b"READY=1")
    except OSError as e:
        # The routes are in either way; systemd's start time-out says the rest.
        print(f"gwsteer-route: could not tell systemd it is ready: {e}", file=sys.stderr)


def _follow(cfg: Config) -> int:
    """``follow``: until SIGTERM or SIGINT; one line per change, flushed (journald)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return route.follow(cfg, lambda line: print(line, flush=True), stop, _notify_ready)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input)."""
    p = argparse.ArgumentParser(prog="gwsteer-route", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    p.add_argument("--config", help="gateway config (default $BRAID_GWSTEER_CONFIG "
                   "or /etc/braid/gateways.conf)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("check", "install", "uninstall"):
        s = sub.add_parser(name)
        s.add_argument("--gateway", action="append", help="only this gateway (repeatable)")
    sub.add_parser("follow", help="install, then keep gateways named by interface current "
                   "(runs until SIGTERM, then removes its entries)")
    sub.choices["uninstall"].add_argument(
        "--all", action="store_true", help="remove every braid-marked entry, no config needed")
    d = sub.add_parser("decap", help="gateway node: End.DX4/End.DX6 for a SID")
    d.add_argument("--sid", required=True)
    d.add_argument("--nexthop", required=True)
    d.add_argument("--dev")
    t = sub.add_parser("transit", help="transit node: End for a SID")
    t.add_argument("--sid", required=True)
    t.add_argument("--dev")
    args = p.parse_args(argv)

    try:
        if args.cmd == "decap":
            print(route.install_decap(args.sid, args.nexthop, args.dev))
        elif args.cmd == "transit":
            print(route.install_transit(args.sid, args.dev))
        elif args.cmd == "uninstall" and args.all:
            print(f"removed {route.uninstall()} entries")
        else:
            cfg = load_config(args.config)
            if args.cmd == "follow":
                return _follow(cfg)
            if args.cmd == "check":
                gws = [cfg.gateway(g) for g in args.gateway] if args.gateway else cfg.gateways
                ours = [gw for gw in gws if gw.route != "external"]
                with IPRoute() as ipr:
                    where = route.validate_host(ipr, cfg, ours)
                for gw in gws:
                    plan = where.get(gw.id)
                    if plan is None:
                        print(route.describe_external(gw))
                    elif isinstance(plan, route.Plan):
                        print(route.describe(cfg, plan))
                    else:
                        print(route.describe_waiting(gw, plan))
            elif args.cmd == "install":
                for line in route.install(cfg, args.gateway):
                    print(line)
            else:
                print(f"removed {route.uninstall(cfg, args.gateway)} entries")
    except ConfigError as e:
        print(f"gwsteer-route: error: {e}", file=sys.stderr)
        return 2
    except route.RouteError as e:
        print(f"gwsteer-route: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
