"""braid-openvpn: OpenVPN transports for braid (per-gateway tunnels, full tunnel).

Per-gateway tunnel mode carries each gateway's MPTCP subflows inside its own
encrypted UDP tunnel to the proxy, so a network that strips or blocks MPTCP
options still carries its share. Full-tunnel mode (Binder) carries the LAN's
IP traffic (UDP, DNS, VoIP too) inside one OpenVPN TCP connection that is
MPTCP, NATed at the proxy.

Examples::

    braid-openvpn pki --config /etc/braid/openvpn.json      # CA, certificates, tls-crypt key
    braid-openvpn check --config /etc/braid/openvpn.json --role client
    braid-openvpn run --config /etc/braid/openvpn.json --role proxy     # foreground (systemd)
    braid-openvpn stop --config /etc/braid/openvpn.json --role proxy
    braid-openvpn gwsteer-gateways --config /etc/braid/openvpn.json >> /etc/braid/gateways.conf

Exit status: 0 ok, 2 bad settings or keys (nothing was started), 1 a failure
after start.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import signal
import time
from pathlib import Path
from types import FrameType

from braid_openvpn.config import Config, ConfigError, load
from braid_openvpn.gwsteer_conf import gateway_sections
from braid_openvpn.pki import PkiError, create
from braid_openvpn.runner import StartError, Tunnels

STATUS_POLL_S = 0.2


def _say(msg: str) -> None:
    print(f"braid-openvpn: {msg}", flush=True)


def _pidfile(cfg: Config, role: str) -> Path:
    return cfg.run_dir / f"braid-openvpn-{role}.pid"


def cmd_pki(cfg: Config) -> int:
    try:
        create(cfg.pki_dir, cfg.client_name, cfg.server_name)
    except PkiError as err:
        _say(f"pki: {err}")
        return 1
    _say(f"PKI made in {cfg.pki_dir}: copy ca.crt, issued/{cfg.client_name}.crt, private/{cfg.client_name}.key "
         "and tls-crypt.key to the client box (keys mode 0600)")
    return 0


def cmd_check(tunnels: Tunnels) -> int:
    tunnels.check()
    _say(f"{tunnels.role}: settings and keys ok; would start {', '.join(i.name for i in tunnels.instances)}")
    return 0


def cmd_run(tunnels: Tunnels, up_timeout: float) -> int:
    """Start, report each tunnel's state changes, stop on SIGTERM/SIGINT."""
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tunnels.check()  # refuse before anything starts (exit 2)
    pidfile = _pidfile(tunnels.cfg, tunnels.role)
    tunnels.start()
    try:
        pidfile.write_text(f"{os.getpid()}\n")
        _say(f"{tunnels.role}: started {', '.join(i.name for i in tunnels.instances)}")
        state = {i.name: False for i in tunnels.instances}
        started = time.monotonic()
        while not stopping:
            if dead := tunnels.exited():
                _say(f"openvpn exited unexpectedly: {dead}; logs in {tunnels.cfg.run_dir}")
                return 1
            for name, was_up in state.items():
                up = tunnels.ready(name)
                if up != was_up:
                    _say(f"tunnel {name} {'up' if up else 'down'}")
                    state[name] = up
            if up_timeout and not all(state.values()) and time.monotonic() - started > up_timeout:
                _say(f"warning: not up after {up_timeout:.0f} s: {[n for n, u in state.items() if not u]}")
                up_timeout = 0
            time.sleep(STATUS_POLL_S)
        _say("stopping")
        return 0
    finally:
        tunnels.stop()
        pidfile.unlink(missing_ok=True)


def _is_braid_openvpn(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) braid-openvpn process: ``python3 -m braid_openvpn``
    (the source tree's launcher) or the ``braid-openvpn`` console script (an installed wheel)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state != "Z" and (b"braid_openvpn" in cmdline or b"braid-openvpn" in cmdline)


def cmd_stop(cfg: Config, role: str, timeout: float) -> int:
    pidfile = _pidfile(cfg, role)
    try:
        pid = int(pidfile.read_text())
    except (FileNotFoundError, ValueError):
        _say(f"{role}: not running (no {pidfile})")
        return 0
    if not _is_braid_openvpn(pid):  # a stale pid file; the pid may be someone else's now
        _say(f"{role}: not running (stale {pidfile})")
        pidfile.unlink(missing_ok=True)
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _is_braid_openvpn(pid):
            _say(f"{role}: stopped")
            return 0
        time.sleep(0.1)
    _say(f"{role}: pid {pid} still running after {timeout:.0f} s")
    return 1


def _version() -> str:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version("braid")
    return "unknown (no package metadata)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="braid-openvpn", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, text in (("pki", "make the CA, both certificates and the tls-crypt key in pki_dir"),
                       ("check", "validate settings and this end's keys; start nothing"),
                       ("render", "write this end's OpenVPN configs and hooks into run_dir; start nothing"),
                       ("run", "start this end's tunnels in the foreground; SIGTERM stops them"),
                       ("stop", "stop a running `braid-openvpn run` of this role"),
                       ("gwsteer-gateways", "print gwsteer's [gateway <id>-tun] sections for the client box's "
                        "gateways.conf (per_gateway.path_manager \"gwsteer\")")):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument("--config", type=Path, required=True, help="settings file (JSON; see proxy/README.md)")
        if name not in ("pki", "gwsteer-gateways"):
            s.add_argument("--role", choices=["client", "proxy"], required=True,
                           help="which end this machine is: the client box or the proxy")
        if name in ("check", "render", "run"):
            s.add_argument("--mode", choices=["per-gateway", "full-tunnel"], action="append",
                           help="start only this mode (repeatable; default: every configured mode)")
        if name == "run":
            s.add_argument("--up-timeout", type=float, default=30,
                           help="warn if a tunnel is not up after this many seconds (0: never)")
        if name == "stop":
            s.add_argument("--timeout", type=float, default=10, help="seconds to wait for it to end")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cfg = load(args.config)
        if args.cmd == "pki":
            return cmd_pki(cfg)
        if args.cmd == "gwsteer-gateways":
            print(gateway_sections(cfg), end="")
            return 0
        if args.cmd == "stop":
            return cmd_stop(cfg, args.role, args.timeout)
        tunnels = Tunnels(cfg, args.role, args.mode)
        if args.cmd == "check":
            return cmd_check(tunnels)
        if args.cmd == "render":
            tunnels.check()
            tunnels.write_files()
            _say(f"wrote {', '.join(i.name + '.conf' for i in tunnels.instances)} in {cfg.run_dir}")
            return 0
        return cmd_run(tunnels, args.up_timeout)
    except ConfigError as err:
        _say(f"refused: {err}")
        return 2
    except (StartError, OSError) as err:
        _say(f"failed: {err}")
        return 1
