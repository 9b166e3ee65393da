"""braid-tor: run tor with the braid pluggable transport, as a client or as a bridge.

Client: writes a torrc with UseBridges, the braid bridge lines and
ClientTransportPlugin, starts tor, prints its bootstrap progress, then a
status line (circuits, bytes, each bridge's state) every --status-interval
seconds until SIGINT or SIGTERM, and stops tor cleanly.

Bridge: tor as a bridge whose ORPort stays on loopback behind the braid
transport (ServerTransportPlugin); prints the bridge line clients need once
the transport has written its key.

Examples::

    python3 -m braid_tor client --pt /usr/local/bin/braid-pt \\
        --bridge 'braid 203.0.113.7:4433 <FINGERPRINT> pub=<bridge public key>'
    python3 -m braid_tor bridge --pt /usr/local/bin/braid-pt --pt-listen 0.0.0.0:4433
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from braid_tor.torrc import BridgeLine, BridgeSettings, ClientSettings, SettingsError, parse_bridges

BRIDGE_LINE_FILE = "braid_bridgeline.txt"


def _say(msg: str) -> None:
    print(msg, flush=True)


def write_torrc(data_dir: Path, text: str) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    data_dir.chmod(0o700)  # tor refuses a data directory others can read
    path = data_dir / "torrc"
    path.write_text(text)
    return path


def extra_lines(lines: list[str]) -> str:
    for line in lines:
        if "\n" in line or not line.strip():
            raise SettingsError(f"--torrc-extra {line!r}: one non-empty torrc line each")
    return "".join(line + "\n" for line in lines)


class Interrupted(Exception):
    """SIGINT/SIGTERM while tor was still starting (stem then kills it)."""


class Stopper:
    """SIGINT/SIGTERM set a flag; the main loop stops tor and exits 0.
    While ``starting`` (stem waiting for tor's bootstrap) they interrupt
    the wait instead."""

    def __init__(self) -> None:
        self.stop = False
        self.starting = True
        signal.signal(signal.SIGINT, self._handler)
        signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.stop = True
        if self.starting:
            raise Interrupted

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop and time.monotonic() < end:
            time.sleep(0.1)


def find_tor(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SettingsError(f"--tor: {name!r} not found (apt install tor)")
    return path


def launch(tor: str, torrc: Path, timeout: float, percent: int, on_line: Callable[[str], None]) -> Any:
    """Start tor and wait for ``percent`` % bootstrap (stem parses its log)."""
    import stem.process

    return stem.process.launch_tor(
        tor_cmd=tor,
        args=["-f", str(torrc)],
        completion_percent=percent,
        init_msg_handler=on_line,
        timeout=timeout,
        take_ownership=True,  # tor exits if this controller dies
    )


def _bootstrap_line(line: str) -> None:
    if "Bootstrapped" in line or "[warn]" in line or "[err]" in line:
        _say("tor: " + line.split("] ", 1)[-1])


def stop_tor(proc: Any, grace: float = 10) -> int:
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns tor's exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except Exception:
            proc.kill()
            proc.wait()
    code: int = proc.returncode
    return code


def connect_controller(control_port: int) -> Any:
    """One control connection for the whole run. tor was started with this
    process as its owner, and stem hands ownership to this connection: tor
    exits when it closes (so never open a second, short-lived one)."""
    from stem.control import Controller

    c = Controller.from_port(address="127.0.0.1", port=control_port)
    c.authenticate()
    return c


Subflow = tuple[str, str]  # (local "addr:port", peer "addr:port")


def parse_ss(text: str) -> dict[Subflow, tuple[str, int, int]]:
    """Per TCP subflow in ``ss -tinH`` output (a socket line, then its info
    line with ``bytes_sent:…`` ``bytes_received:…``): its local address
    (one per network) and bytes (sent, received)."""
    out: dict[Subflow, tuple[str, int, int]] = {}
    key = None
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not line[0].isspace() and len(fields) >= 4:
            # "… local peer"; a subflow bound to a device shows "addr%dev".
            key = (fields[-2], fields[-1])
            continue
        if key is None:
            continue
        vals = dict(f.split(":", 1) for f in fields if ":" in f and f.split(":", 1)[1].isdigit())
        local = key[0].rsplit(":", 1)[0].strip("[]").split("%", 1)[0]
        out[key] = (local, int(vals.get("bytes_sent", 0)), int(vals.get("bytes_received", 0)))
        key = None
    return out


class NetworkBytes:
    """Bytes per network since the controller started: each subflow's last
    count, kept after it closes. A status line is a sample, and the
    connection that carried a page may be gone by the next one (a
    transport restart, a network that went down); totals of only the open
    subflows would forget what those networks carried. Bytes a subflow
    moved after its last sample are not seen."""

    def __init__(self) -> None:
        self.open: dict[Subflow, tuple[str, int, int]] = {}
        self.closed: dict[str, tuple[int, int]] = {}

    @staticmethod
    def _add(totals: dict[str, tuple[int, int]], local: str, sent: int, recv: int) -> None:
        s, r = totals.get(local, (0, 0))
        totals[local] = (s + sent, r + recv)

    def update(self, sample: dict[Subflow, tuple[str, int, int]] | None) -> dict[str, tuple[int, int]]:
        """The totals after ``sample``; None (``ss`` failed) keeps the last
        ones, rather than retiring subflows that are still open and would
        be counted again at the next sample."""
        if sample is not None:
            for key, (local, sent, recv) in list(self.open.items()):
                now = sample.get(key)
                # Gone, or the same ports reused by a new subflow (counts restart).
                if now is None or now[1] < sent or now[2] < recv:
                    self._add(self.closed, local, sent, recv)
                    del self.open[key]
            self.open.update(sample)
        totals = dict(self.closed)
        for local, sent, recv in self.open.values():
            self._add(totals, local, sent, recv)
        return totals


def per_network(host: str, port: int) -> dict[Subflow, tuple[str, int, int]] | None:
    """The established TCP subflows to the bridge's transport, from the
    kernel (see parse_ss): the MPTCP split; None if ``ss`` failed."""
    r = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( dport = :{port} and dst {host} )"],
        capture_output=True, text=True, timeout=5, check=False,
    )
    return parse_ss(r.stdout) if r.returncode == 0 else None


_GUARD = re.compile(r"^\$?([0-9A-Fa-f]{40})\S*\s+(\S+)")


def _by_fingerprint(text: str) -> dict[str, str]:
    """``$FPR~nick WORD`` (or ``$FPR=nick``, ``$FPR``) lines of a GETINFO
    answer: the first word after each identity, by upper-case fingerprint.
    Lines naming a peer by address only (clients, unknown peers) are
    skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _GUARD.match(line.strip())
        if m:
            out[m.group(1).upper()] = m.group(2)
    return out


def bridge_states(bridges: list[BridgeLine], entry_guards: str, orconn_status: str,
                  guards_in_use: list[str]) -> list[tuple[BridgeLine, str, int]]:
    """Each bridge's state from tor's control port, with the number of built
    circuits whose first hop it is (``guards_in_use``: one fingerprint per
    built circuit). ``up``: tor holds an open OR connection to it (what
    ``GETINFO orconn-status`` says CONNECTED); ``down``: tor's last attempt
    to reach it failed (``GETINFO entry-guards`` says down or unusable),
    and no connection is open; ``idle``: no connection now, the last one
    worked; ``untried``: tor has not connected to it yet."""
    conns = _by_fingerprint(orconn_status)
    guards = _by_fingerprint(entry_guards)
    out = []
    for b in bridges:
        fpr = b.fingerprint.upper()
        circuits = sum(1 for g in guards_in_use if g.upper() == fpr)
        guard = guards.get(fpr, "")
        if conns.get(fpr) == "CONNECTED":
            state = "up"
        elif guard in ("down", "unusable"):
            state = "down"
        elif guard == "up":
            state = "idle"
        else:
            state = "untried"
        out.append((b, state, circuits))
    return out


def format_bridges(states: list[tuple[BridgeLine, str, int]]) -> str:
    """``bridges: 10.0.0.1:4433 up (3 circuits), 10.0.0.2:4433 down``."""
    parts = [f"{b.address} {state}" + (f" ({n} circuit{'s' if n != 1 else ''})" if n else "")
             for b, state, n in states]
    return "bridges: " + ", ".join(parts)


def client_status(c: Any, bridges: list[BridgeLine], tally: NetworkBytes) -> str:
    """One status line from tor's control port (circuits, bytes, each
    bridge's state) and the kernel (bytes per network to the bridges since
    ``tally`` started)."""
    circs = c.get_circuits()
    built = [x for x in circs if x.status == "BUILT"]
    read = int(c.get_info("traffic/read"))
    written = int(c.get_info("traffic/written"))
    phase = c.get_info("status/bootstrap-phase")
    progress = phase.split("PROGRESS=", 1)[-1].split()[0] if "PROGRESS=" in phase else "?"
    paths = "; ".join(",".join(hop[1] or hop[0][:8] for hop in x.path) for x in built[:3])
    states = bridge_states(bridges, c.get_info("entry-guards", ""), c.get_info("orconn-status", ""),
                           [x.path[0][0] for x in built if x.path])
    sample: dict[Subflow, tuple[str, int, int]] | None = {}
    for b in bridges:
        one = per_network(b.host, b.port)
        sample = None if one is None or sample is None else {**sample, **one}
    nets = tally.update(sample) if bridges else {}
    split = " ".join(f"{ip}:sent={s},recv={r}" for ip, (s, r) in sorted(nets.items()))
    return (
        f"status: bootstrap {progress}% circuits built {len(built)} of {len(circs)}"
        f" read {read} B written {written} B {format_bridges(states)}"
        + (f" networks {split}" if split else "") + (f" paths {paths}" if paths else "")
    )


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0 seconds")
    return value


def read_bridge_file(path: Path) -> list[tuple[str, str]]:
    """The bridge lines from a file, one bridge a line (blank lines and
    ``#`` comments skipped), each with its place (``FILE line N``) for
    messages; ``-`` reads standard input. A line with a user's own
    ``key=`` must not be readable by others, and the file keeps it off the
    command line, where other users could read it (systemd passes it with
    LoadCredential); the public line (``pub=`` only) holds no secret."""
    try:
        if str(path) == "-":
            text, mode = sys.stdin.read(), 0
        else:
            text, mode = path.read_text(), path.stat().st_mode
    except OSError as e:
        raise SettingsError(f"--bridge-file: cannot read {path}: {e.strerror}")
    lines = []
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.strip() and not raw.lstrip().startswith("#"):
            line = raw.strip()
            # Others, not the group: systemd may hand a credential
            # (LoadCredential) to the service's group.
            if mode & 0o007 and re.search(r"\bkey=", line):
                raise SettingsError(
                    f"--bridge-file: {path} holds a user's key and others may read it "
                    f"(mode {mode & 0o777:o}): chmod 600 {path}")
            lines.append((f"--bridge-file {path} line {n}", line))
    if not lines:
        raise SettingsError(f"--bridge-file: {path} holds no bridge line")
    return lines


def verify_torrc(tor: str, text: str) -> None:
    """``tor --verify-config`` on ``text`` (in a private temporary file):
    tor's own parser, without starting tor or touching its DataDirectory."""
    with tempfile.TemporaryDirectory(prefix="braid-tor-check-") as tmp:
        torrc = Path(tmp) / "torrc"
        torrc.write_text(text)
        r = subprocess.run([tor, "--verify-config", "-f", str(torrc)], capture_output=True, text=True,
                           timeout=60, check=False)
    if r.returncode != 0:
        why = [x.split("] ", 1)[-1] for x in r.stdout.splitlines() if "[warn]" in x or "[err]" in x]
        raise SettingsError("tor --verify-config refused the torrc: " + " / ".join(why or [r.stdout.strip()]))


def check_only(role: str, tor: str, text: str) -> int:
    verify_torrc(tor, text)
    _say(f"{role}: settings ok, tor --verify-config accepted the torrc; nothing written or started")
    return 0


def run_client(args: argparse.Namespace) -> int:
    if (not args.bridge) == (args.bridge_file is None):
        raise SettingsError(
            "give the bridge lines with --bridge (repeatable) or --bridge-file (one of them)")
    if args.bridge:
        lines = [(f"--bridge {i}" if len(args.bridge) > 1 else "--bridge", line)
                 for i, line in enumerate(args.bridge, 1)]
    else:
        lines = read_bridge_file(args.bridge_file)
    settings = ClientSettings(
        data_dir=args.data_dir.resolve(),
        bridges=parse_bridges(lines),
        pt_binary=args.pt,
        socks_port=args.socks_port,
        control_port=args.control_port,
        dir_authorities=args.dir_authority,
        testing_network=args.testing_network,
    )
    text = settings.torrc() + extra_lines(args.torrc_extra)
    tor = find_tor(args.tor)
    if args.check:
        return check_only("client", tor, text)
    torrc = write_torrc(settings.data_dir, text)
    names = ", ".join(f"{b.address} {b.fingerprint}" for b in settings.bridges)
    _say(f"torrc: {torrc}; bridge{'s' if len(settings.bridges) > 1 else ''} {names}")
    stopper = Stopper()
    t0 = time.monotonic()
    proc = launch(tor, torrc, args.bootstrap_timeout, 100, _bootstrap_line)
    stopper.starting = False
    _say(f"bootstrapped 100% in {time.monotonic() - t0:.1f} s; SOCKS on 127.0.0.1:{settings.socks_port}")
    controller = None
    try:
        controller = connect_controller(settings.control_port)
        tally = NetworkBytes()
        while not stopper.stop:
            if proc.poll() is not None:
                _say(f"tor exited unexpectedly with {proc.returncode}")
                return 1
            try:
                _say(client_status(controller, settings.bridges, tally))
            except Exception as e:  # a status failure must not stop tor
                _say(f"status unavailable: {e}")
            stopper.sleep(args.status_interval)
    finally:
        code = stop_tor(proc)
        if controller is not None:
            controller.close()
        _say(f"tor stopped (exit {code})")
    return 0


def run_bridge(args: argparse.Namespace) -> int:
    settings = BridgeSettings(
        data_dir=args.data_dir.resolve(),
        pt_binary=args.pt,
        pt_listen=args.pt_listen,
        orport=args.orport,
        nickname=args.nickname,
        contact=args.contact,
        publish=args.publish,
        dir_authorities=args.dir_authority,
        testing_network=args.testing_network,
    )
    text = settings.torrc() + extra_lines(args.torrc_extra)
    tor = find_tor(args.tor)
    if args.check:
        return check_only("bridge", tor, text)
    torrc = write_torrc(settings.data_dir, text)
    _say(f"torrc: {torrc}")
    stopper = Stopper()
    # A bridge is ready to serve once tor has started its transport; it
    # need not wait for a full bootstrap.
    proc = launch(tor, torrc, args.bootstrap_timeout, 0, _bootstrap_line)
    stopper.starting = False
    try:
        line = bridge_line(settings.data_dir, timeout=30, alive=lambda: proc.poll() is None)
        _say(f"bridge line: {line}")
        (settings.data_dir / "bridge_line").write_text(line + "\n")
        (settings.data_dir / "bridge_line").chmod(0o600)
        while not stopper.stop and proc.poll() is None:
            stopper.sleep(1)
        if proc.poll() is not None:
            _say(f"tor exited unexpectedly with {proc.returncode}")
            return 1
    finally:
        code = stop_tor(proc)
        _say(f"tor stopped (exit {code})")
    return 0


def bridge_line(data_dir: Path, timeout: float, alive: Callable[[], bool]) -> str:
    """The clients' bridge line: the transport's line with tor's fingerprint."""
    pt_file = data_dir / "pt_state" / BRIDGE_LINE_FILE
    fpr_file = data_dir / "fingerprint"
    deadline = time.monotonic() + timeout
    while not (pt_file.exists() and fpr_file.exists()):
        if not alive():
            raise RuntimeError("tor exited before the braid transport started")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {pt_file} after {timeout:.0f} s: did the braid transport start? (see tor's log)")
        time.sleep(0.1)
    fpr = fpr_file.read_text().split()[1]
    for raw in pt_file.read_text().splitlines():
        if raw.startswith("Bridge "):
            return raw.removeprefix("Bridge ").replace("<FINGERPRINT>", fpr)
    raise RuntimeError(f"{pt_file} holds no Bridge line")


def _version() -> str:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version("braid")
    return "unknown (no package metadata)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="braid-tor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="role", required=True)

    def common(sp: argparse.ArgumentParser, data_dir: str) -> None:
        sp.add_argument("--pt", type=Path, default=Path("/usr/local/bin/braid-pt"),
                        help="the braid-pt binary (default %(default)s)")
        sp.add_argument("--tor", default="tor", help="the tor binary (default: tor from PATH)")
        sp.add_argument("--data-dir", type=Path, default=Path(data_dir),
                        help="tor's DataDirectory (default %(default)s)")
        sp.add_argument("--dir-authority", action="append", default=[], metavar="LINE",
                        help="a 'DirAuthority …' torrc line (private networks; repeat per authority)")
        sp.add_argument("--testing-network", action="store_true",
                        help="TestingTorNetwork 1 (private test networks only; needs --dir-authority)")
        sp.add_argument("--bootstrap-timeout", type=float, default=300, help="seconds (default %(default)s)")
        sp.add_argument("--check", action="store_true",
                        help="check the settings and the torrc (tor --verify-config), then exit: "
                             "nothing is written or started (exit 0 ok, 2 refused)")
        sp.add_argument("--torrc-extra", action="append", default=[], metavar="LINE",
                        help="a torrc line appended verbatim (repeatable; e.g. for tests and benchmarks)")

    c = sub.add_parser("client", help="tor through a braid bridge")
    common(c, "/var/lib/braid-tor/client")
    c.add_argument("--bridge", action="append", default=[], metavar="LINE",
                   help="bridge line: 'braid <addr:port> <fingerprint> pub=<base64> [id=<user> key=<hex>]' "
                        "(repeat for several bridges: tor uses one and moves to another when it fails)")
    c.add_argument("--bridge-file", type=Path,
                   help="read the bridge lines (one a line) from this file instead, - for standard input "
                        "(keeps a user's key= off the command line)")
    c.add_argument("--socks-port", type=int, default=9050, help="tor's SOCKS port on 127.0.0.1 (default %(default)s)")
    c.add_argument("--control-port", type=int, default=9051, help="tor's control port (default %(default)s)")
    c.add_argument("--status-interval", type=positive_seconds, default=10,
                   help="seconds between status lines (default %(default)s)")
    c.set_defaults(func=run_client)

    b = sub.add_parser("bridge", help="tor as a bridge behind the braid transport")
    common(b, "/var/lib/braid-tor/bridge")
    b.add_argument("--pt-listen", default="0.0.0.0:4433",
                   help="where the transport listens (MPTCP; default %(default)s)")
    b.add_argument("--orport", default="127.0.0.1:9001", help="tor's ORPort, kept on loopback (default %(default)s)")
    b.add_argument("--nickname", default="braidbridge", help="default %(default)s")
    b.add_argument("--contact", default="", help="ContactInfo")
    b.add_argument("--publish", action="store_true", help="publish to the bridge authority (default: unlisted)")
    b.set_defaults(func=run_bridge)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        ret: int = args.func(args)
        return ret
    except SettingsError as e:
        print(f"braid-tor: {e}", file=sys.stderr)
        return 2
    except Interrupted:
        print("braid-tor: stopped before tor finished starting", file=sys.stderr)
        return 0
    except (OSError, RuntimeError) as e:  # stem's launch failures are OSError
        print(f"braid-tor: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
