"""A private Tor network in network namespaces, for tests.

Real tor (Debian's package) with ``TestingTorNetwork``: one directory
authority (keys from ``tor-gencert``), relays, an exit, a web server, all in
the testbed's destination namespace "d"; the braid bridge (tor + braid-pt
server) in the proxy namespace "s"; the client's tor (through the braid
controller, braid-pt client) in "c". The client reaches the bridge's
transport over MPTCP across both WANs (braidnet's topology)::

    c: tor client + braid-pt ══ WAN1/WAN2 (MPTCP) ══ s: braid-pt server -> bridge tor
                                                     s ── d: authority, relays, exit, web

Votes every few seconds, so a client bootstraps in well under a minute. All
processes and namespaces go away when the with-block ends.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from .braidnet import CLIENT_W1, CLIENT_W2, DEST, SERVER_PUBLIC, LinkSpec, Testbed
from .wait import scaled

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

__all__ = [
    "CLIENT_W1",
    "CLIENT_W2",
    "PT_PORT",
    "SERVER_PUBLIC",
    "WEB_IP",
    "WEB_NAME",
    "WEB_PORT",
    "ClientRun",
    "LinkSpec",
    "PrivateTorNetwork",
]

RELAY_IP = DEST  # authority, relays and exit share d's address (TestingTorNetwork allows it)
WEB_IP = "10.9.0.3"
WEB_NAME = "web.braid.test"
WEB_PORT = 8080
AUTH_DIRPORT, AUTH_ORPORT = 7000, 7001
PT_PORT = 4433
BRIDGE_ORPORT = "127.0.0.1:9001"
# Seconds the bridge's tor may take to start its transport. Under TCG (braid's
# VM emulates its CPU) tor's start-up and key generation take several times
# as long as on the host, and longer still on a loaded CI machine.
BRIDGE_START_S = scaled(60)

# Prepared DataDirectories with their keys (make_keys: "auth", "relay0",
# ...) that a network copies instead of making its own keys: braid's VM
# suites make them on the host before the boot, since the keys take tens
# of seconds on the guest's emulated CPU (tor-gencert's RSA identity key
# alone ~20 s) and two seconds on the host. Each network still runs its
# own tors; only the key generation moves.
KEYS_DIR_ENV = "BRAID_TOR_KEYS_DIR"
# A network's relays and exits unless a test asks for others.
RELAYS, EXITS = 2, 1
AUTHORITY_LISTED = "listed-fingerprint"

# Short voting so a consensus exists seconds after start.
AUTH_TIMING = [
    "V3AuthVotingInterval 10",
    "V3AuthVoteDelay 2",
    "V3AuthDistDelay 2",
    "TestingV3AuthInitialVotingInterval 10",
    "TestingV3AuthInitialVoteDelay 2",
    "TestingV3AuthInitialDistDelay 2",
    "TestingV3AuthVotingStartOffset 0",
]


def make_relay_dir(d: Path) -> str:
    """A relay's DataDirectory ``d`` (new) with its keys; returns what tor
    lists as its fingerprint ("Unnamed" and the fingerprint)."""
    (d / "keys").mkdir(parents=True)
    d.chmod(0o700)
    return subprocess.run(
        ["tor", "--quiet", "--ignore-missing-torrc", "--list-fingerprint", "--orport", "1",
         "--datadirectory", str(d)],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout


def make_authority_dir(d: Path) -> None:
    """The directory authority's DataDirectory ``d`` (new), with its keys:
    its relay identity, whose fingerprint goes into AUTHORITY_LISTED, and
    the v3 identity, signing key and certificate (``tor-gencert``)."""
    listed = make_relay_dir(d)
    (d / AUTHORITY_LISTED).write_text(listed)
    keys = d / "keys"
    subprocess.run(
        ["tor-gencert", "--create-identity-key", "-m", "12", "-a", f"{RELAY_IP}:{AUTH_DIRPORT}",
         "-i", str(keys / "authority_identity_key"), "-s", str(keys / "authority_signing_key"),
         "-c", str(keys / "authority_certificate"), "--passphrase-fd", "0"],
        input=b"\n", check=True, capture_output=True, timeout=60,
    )


def make_keys(root: Path, relays: int) -> None:
    """``root`` (new) with the DataDirectories a network of ``relays``
    relays and exits copies (KEYS_DIR_ENV): "auth" and "relay0" onwards."""
    root.mkdir(parents=True)
    make_authority_dir(root / "auth")
    for i in range(relays):
        make_relay_dir(root / f"relay{i}")


def build_pt(out: Path) -> Path:
    """braid-pt, built into ``out`` (or prebuilt in BRAID_PROXY_BIN)."""
    prebuilt = os.environ.get("BRAID_PROXY_BIN")
    if prebuilt and os.access(Path(prebuilt) / "braid-pt", os.X_OK):
        return Path(prebuilt) / "braid-pt"
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(out) + "/", "./cmd/braid-pt"], cwd=REPO / "proxy", check=True)
    return out / "braid-pt"


def progress(started: float, what: str) -> None:
    """One line on stderr per step of bringing the network up: under TCG
    each takes from seconds to minutes, and a slow one must show which."""
    print(f"privnet: {what} after {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


class PrivateTorNetwork:
    """The testbed plus a private Tor network and the braid bridge."""

    __test__ = False

    def __init__(
        self, relays: int = RELAYS, exits: int = EXITS, bridge_extra: list[str] | None = None,
        wan1: LinkSpec | None = None, wan2: LinkSpec | None = None,
    ) -> None:
        self.bridge_extra = bridge_extra or []
        self.tmp = Path(tempfile.mkdtemp(prefix="braid-tor-"))
        self.tmp.chmod(0o755)
        self.tb = Testbed(wan1=wan1, wan2=wan2)
        self.relays, self.exits = relays, exits
        self.dir_authority = ""
        self.bridge_line = ""
        self.pt = self.tmp / "bin" / "braid-pt"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- lifecycle ----------------------------------------------------------
    def __enter__(self) -> Self:
        try:
            self.pt = build_pt(self.tmp / "bin")
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.tb.__enter__()
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        try:
            self.tb.__exit__(None, None, None)
        finally:
            shutil.rmtree(Path("/etc/netns") / self.tb.ns("d"), ignore_errors=True)
            if os.environ.get("BRAID_KEEP_TOR_LOGS") != "1":
                shutil.rmtree(self.tmp, ignore_errors=True)

    def _start(self) -> None:
        tb = self.tb
        started = time.monotonic()
        tb.run("d", "ip", "addr", "add", f"{WEB_IP}/24", "dev", "d-s")
        # The exit resolves the web server's name through a DNS server of its
        # own (tor's resolver ignores /etc/hosts).
        etc = Path("/etc/netns") / tb.ns("d")
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        tb.spawn("d", [sys.executable, str(HERE / "mini_dns.py"), "127.0.0.1", f"{WEB_NAME}={WEB_IP}"])
        self._authority_keys()
        progress(started, "authority keys made")
        self._tor("d", "auth", self._auth_torrc())
        for i in range(self.relays + self.exits):
            exit_ = i >= self.relays
            self._copy_prepared(f"relay{i}")
            self._tor("d", f"relay{i}", self._relay_torrc(i, exit_))
        progress(started, "authority and relays started")
        self._wait_consensus(timeout=90)
        progress(started, "consensus lists every relay, at the authority and the exits")
        self._bridge()
        progress(started, "bridge's transport listening")

    def _wait_consensus(self, timeout: float) -> None:
        """Until the authority's consensus lists every relay and an exit, and
        every exit has loaded a consensus that lists every relay. A client
        that bootstraps from an earlier one has no exit to use; an exit
        still on an earlier one refuses streams whose circuit reaches it
        from a relay it does not know yet (tor's RefuseUnknownExits), and
        the client's first fetches fail with SOCKS reply 1 until the exit's
        next consensus fetch."""
        want = 1 + self.relays + self.exits
        exits = [f"relay{i}" for i in range(self.relays, self.relays + self.exits)]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self._consensus("auth", "cached-microdesc-consensus")
            routers = [line for line in text.splitlines() if line.startswith("r ")]
            flagged = [line for line in text.splitlines() if line.startswith("s ") and " Exit" in line]
            if len(routers) >= want and flagged and all(
                self._consensus(name, "cached-consensus").count("\nr ") >= want for name in exits
            ):
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"no consensus with {want} relays and an exit at the authority and every exit after {timeout:.0f} s\n"
            + self.tor_log("auth") + "".join(self.tor_log(name) for name in exits)
        )

    def _consensus(self, name: str, flavor: str) -> str:
        """The consensus ``name`` has loaded ("" before its first)."""
        path = self.tmp / name / flavor
        return path.read_text() if path.exists() else ""

    # -- directory authority -----------------------------------------------
    def _authority_keys(self) -> None:
        d = self.tmp / "auth"
        if not self._copy_prepared("auth"):
            make_authority_dir(d)
        v3ident = ""
        for line in (d / "keys" / "authority_certificate").read_text().splitlines():
            if line.startswith("fingerprint "):
                v3ident = line.split()[1]
        fpr = "".join((d / AUTHORITY_LISTED).read_text().split()[1:])
        self.dir_authority = (
            f"DirAuthority auth orport={AUTH_ORPORT} no-v2 v3ident={v3ident} {RELAY_IP}:{AUTH_DIRPORT} {fpr}"
        )

    def _copy_prepared(self, name: str) -> bool:
        """Copies ``name``'s DataDirectory from KEYS_DIR_ENV's, if it has one."""
        prepared = os.environ.get(KEYS_DIR_ENV)
        source = Path(prepared) / name if prepared else None
        if source is None or not (source / "keys").is_dir():
            return False
        shutil.copytree(source, self.tmp / name)
        return True

    def _base(self, name: str) -> list[str]:
        return [
            "TestingTorNetwork 1",
            f"DataDirectory {self.tmp / name}",
            f"Nickname {name}",
            "SocksPort 0",
            "Log notice stdout",
            # Stream and circuit failures are logged at info only: kept in
            # a file, for the failure messages of the tests (info_log).
            f"Log info file {self.tmp / name / 'info.log'}",
            "ContactInfo test@braid.test",
            "AssumeReachable 1",
            self.dir_authority,
        ]

    def _auth_torrc(self) -> list[str]:
        return [
            *self._base("auth"),
            f"Address {RELAY_IP}",
            f"ORPort {RELAY_IP}:{AUTH_ORPORT}",
            f"DirPort {RELAY_IP}:{AUTH_DIRPORT}",
            "AuthoritativeDirectory 1",
            "V3AuthoritativeDirectory 1",
            "ExitPolicy reject *:*",
            *AUTH_TIMING,
            # Every relay gets the flags a small network could not earn.
            f"TestingDirAuthVoteExit {RELAY_IP}",
            "TestingDirAuthVoteGuard *",
            "TestingDirAuthVoteHSDir *",
            "TestingMinExitFlagThreshold 0",
            "TestingMinFastFlagThreshold 0",
        ]

    def _relay_torrc(self, i: int, exit_: bool) -> list[str]:
        port = AUTH_ORPORT + 10 * (i + 1)
        return [
            *self._base(f"relay{i}"),
            f"Address {RELAY_IP}",
            f"ORPort {RELAY_IP}:{port}",
            f"DirPort {RELAY_IP}:{port + 1}",
            f"ExitRelay {1 if exit_ else 0}",
            f"ExitPolicy accept *:{WEB_PORT}" if exit_ else "ExitPolicy reject *:*",
            *(["ExitPolicy reject *:*"] if exit_ else []),
        ]

    def _tor(self, role: str, name: str, torrc: list[str]) -> subprocess.Popen[bytes]:
        d = self.tmp / name
        d.mkdir(mode=0o700, exist_ok=True)
        d.chmod(0o700)
        (d / "torrc").write_text("\n".join(torrc) + "\n")
        proc = self.tb.spawn(role, ["tor", "-f", str(d / "torrc")], log=d / "log")
        self.procs[name] = proc
        # A bad torrc makes tor exit at once: fail here, with its log.
        deadline = time.monotonic() + 30
        while "Bootstrapped 0%" not in ((d / "log").read_text() if (d / "log").exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tor {name} did not start:\n{self.tor_log(name)}")
            time.sleep(0.05)
        return proc

    def start_tor(self, role: str, name: str, extra: list[str]) -> subprocess.Popen[bytes]:
        """A plain tor client of the private network in namespace ``role``."""
        base = [line for line in self._base(name) if not line.startswith(("SocksPort", "AssumeReachable"))]
        return self._tor(role, name, [*base, *extra])

    def wait_log(self, name: str, text: str, timeout: float) -> None:
        log = self.tmp / name / "log"
        deadline = time.monotonic() + timeout
        while text not in (log.read_text() if log.exists() else ""):
            if time.monotonic() > deadline:
                raise TimeoutError(f"tor {name}: no {text!r} after {timeout:.0f} s\n{self.tor_log(name)}")
            time.sleep(0.2)

    # -- the braid bridge ---------------------------------------------------
    def _bridge(self) -> None:
        self.bridge_line = self.start_bridge(extra=self.bridge_extra)

    def start_bridge(self, name: str = "bridge", pt_port: int = PT_PORT, orport: str = BRIDGE_ORPORT,
                     nickname: str = "braidbridge", extra: list[str] | None = None) -> str:
        """A braid bridge (controller ``bridge`` role: tor and its braid-pt
        server) in "s", its transport on SERVER_PUBLIC:``pt_port``; returns
        its bridge line. The network starts one ("bridge"); a test adds
        more with their own name, ports and nickname."""
        d = self.tmp / name
        log = self.tmp / f"{name}.out"
        proc = self.tb.spawn(
            "s",
            [sys.executable, "-m", "braid_tor", "bridge", "--pt", str(self.pt), "--data-dir", str(d),
             "--pt-listen", f"{SERVER_PUBLIC}:{pt_port}", "--orport", orport, "--nickname", nickname,
             "--testing-network", "--dir-authority", self.dir_authority,
             "--bootstrap-timeout", str(BRIDGE_START_S),
             "--torrc-extra", f"Log info file {d / 'info.log'}",
             *[arg for line in extra or [] for arg in ("--torrc-extra", line)]],
            log=log,
            env={"PYTHONPATH": str(REPO / "proxy" / "tor")},
        )
        self.procs[name] = proc
        # braid_tor waits for tor (--bootstrap-timeout), then up to 30 s for
        # the transport's line: wait for both, and python's start.
        deadline = time.monotonic() + BRIDGE_START_S + 45
        while time.monotonic() < deadline:
            for line in log.read_text().splitlines():
                if line.startswith("bridge line: "):
                    return line.removeprefix("bridge line: ")
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        waited = BRIDGE_START_S + 45
        raise RuntimeError(f"bridge {name} did not start in {waited} s:\n{log.read_text()}\n{self.tor_log(name)}")

    def kill_bridge(self, name: str) -> None:
        """SIGKILL a bridge's tor and its braid-pt server, as when its host
        fails: the transport's port closes and stays closed."""
        torrc = str(self.tmp / name / "torrc").encode()
        victims = []
        for pid in self.tb["s"].pids():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and Path(argv[0].decode(errors="replace")).name == "tor" and torrc in argv:
                victims.append(pid)
        if len(victims) != 1:
            raise RuntimeError(f"expected one tor for bridge {name}, found {victims}")
        children = []
        for pid in self.tb["s"].pids():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == victims[0]:
                    children.append(pid)
        for pid in (*victims, *children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def pt_server_pids(self) -> list[int]:
        """The braid-pt server processes (children of the bridge's tor)."""
        pids = []
        for pid in self.tb["s"].pids():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0] == str(self.pt).encode():
                pids.append(pid)
        return pids

    def restart_pt_server(self, timeout: float = 30) -> None:
        """Kill the braid-pt server and wait until the bridge's tor has
        started a new one (same state directory: same key, same address).
        Also how a new net.mptcp.scheduler reaches the bridge side: an
        accepted MPTCP connection keeps its listener's scheduler."""
        before = self.pt_server_pids()
        if len(before) != 1:
            raise RuntimeError(f"expected one braid-pt server, found {before}")
        os.kill(before[0], signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            now = self.pt_server_pids()
            if now and now != before:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("tor did not restart the braid-pt server")
            time.sleep(0.2)
        self.tb.wait_port("s", SERVER_PUBLIC, PT_PORT)

    # -- the client ---------------------------------------------------------
    @contextlib.contextmanager
    def client(self, socks_port: int = 9050, control_port: int = 9051, bridge_lines: list[str] | None = None,
               name: str = "client") -> Iterator[ClientRun]:
        """The controller's client role in "c", through ``bridge_lines``
        (default: the network's one bridge)."""
        d = self.tmp / name
        log = self.tmp / f"{name}.out"
        bridges = bridge_lines or [self.bridge_line]
        proc = self.tb.spawn(
            "c",
            [sys.executable, "-m", "braid_tor", "client", "--pt", str(self.pt), "--data-dir", str(d),
             *[arg for line in bridges for arg in ("--bridge", line)],
             "--socks-port", str(socks_port), "--control-port", str(control_port),
             "--testing-network", "--dir-authority", self.dir_authority, "--bootstrap-timeout", "120",
             "--status-interval", "2", "--torrc-extra", f"Log info file {d / 'info.log'}"],
            log=log,
            env={"PYTHONPATH": str(REPO / "proxy" / "tor")},
        )
        run = ClientRun(self, proc, log, socks_port)
        try:
            yield run
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def tor_log(self, name: str) -> str:
        for p in (self.tmp / name / "log", self.tmp / f"{name}.out"):
            if p.exists():
                return f"--- {p}\n" + "\n".join(p.read_text().splitlines()[-40:])
        return ""

    def stream_failures(self, lines: int = 25) -> str:
        """What tor logged at info about streams and circuits that failed,
        on the client, the bridge and the exits: the cause of a failed
        fetch (tor's SOCKS reply says little, its notice log nothing)."""
        words = ("stream", "Stream", "END", "DESTROY", "circuit_mark", "failed", "Failed", "resolve")
        out = []
        for name in ["client", "bridge", *(f"relay{i}" for i in range(self.relays, self.relays + self.exits))]:
            p = self.tmp / name / "info.log"
            if p.exists():
                hits = [line for line in p.read_text(errors="replace").splitlines() if any(w in line for w in words)]
                head = f"--- {name}: {len(hits)} lines about failures, the last {lines}:"
                out.append("\n".join([head, *hits[-lines:]]))
        return "\n".join(out)

    def web_server(self, root: Path) -> subprocess.Popen[bytes]:
        proc = self.tb.spawn(
            "d", [sys.executable, "-m", "http.server", str(WEB_PORT), "--bind", WEB_IP, "--directory", str(root)]
        )
        self.tb.wait_port("d", WEB_IP, WEB_PORT)
        return proc


class ClientRun:
    """The braid controller's client process and what it printed."""

    def __init__(self, net: PrivateTorNetwork, proc: subprocess.Popen[bytes], log: Path, socks_port: int) -> None:
        self.net, self.proc, self.log, self.socks_port = net, proc, log, socks_port

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def wait_bootstrapped(self, timeout: float) -> float:
        """Seconds until the controller reported 100 %."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if "bootstrapped 100%" in self.output():
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(
            f"client did not bootstrap in {timeout:.0f} s:\n{self.output()}\n"
            + self.net.tor_log("bridge") + self.net.tor_log("client")
        )

    def curl(self, url: str, out: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.net.tb.run(
            "c", "curl", "-sS", "--fail", "--max-time", str(int(timeout)),
            "--socks5-hostname", f"127.0.0.1:{self.socks_port}", "-o", str(out), url,
            check=False, timeout=timeout + 10,
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m braid_testbed.privnet",
        description="Make a private Tor network's keys (its authority's and relays' DataDirectories) "
                    f"ahead of the tests that run the network; they use them when ${KEYS_DIR_ENV} names "
                    "the directory.")
    parser.add_argument("keys_dir", type=Path, help="the directory to create (must not exist)")
    parser.add_argument("--relays", type=int, default=RELAYS + EXITS,
                        help=f"relays and exits to make keys for (default {RELAYS + EXITS}, a network's)")
    args = parser.parse_args()
    if args.keys_dir.exists():
        parser.error(f"{args.keys_dir} exists")
    if args.relays < 0:
        parser.error("--relays must be >= 0")
    make_keys(args.keys_dir, args.relays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
