"""Start and stop one end's OpenVPN processes and the host state they need.

:class:`Tunnels` validates everything first (settings, keys), then writes the
generated configs and hooks into ``run_dir`` (0700), sets what the mode needs
on the host (MPTCP limits, the proxy's inner address, the full tunnel's
WAN endpoints, NAT, forwarding) and starts one ``openvpn`` per tunnel
(under ``mptcpize`` for the full tunnel). ``stop()`` ends the processes and
removes exactly what ``start()`` added. It is a context manager::

    with Tunnels(load(Path("tunnels.json")), "client") as tunnels:
        tunnels.wait_up(timeout=20)
        ...
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from braid_openvpn.config import Config, ConfigError
from braid_openvpn.pki import check_keys, paths
from braid_openvpn.render import Instance, instances

#: MPTCP endpoint ids of the full tunnel's WAN subflows: FULL_ENDPOINT_BASE + i + 1.
FULL_ENDPOINT_BASE = 150
READY_LINE = "Initialization Sequence Completed"
STOP_GRACE_S = 5.0


class StartError(RuntimeError):
    """A process or a host change could not be made; everything was undone."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise StartError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


class Tunnels:
    """One end (``role`` "client" or "proxy") of the configured tunnels."""

    def __init__(self, cfg: Config, role: str, modes: list[str] | None = None, openvpn: str = "openvpn") -> None:
        if role not in ("client", "proxy"):
            raise ConfigError(f"role: must be client or proxy, got {role!r}")
        self.cfg, self.role = cfg, role
        self.modes = modes or cfg.modes()
        for m in self.modes:
            if m not in cfg.modes():
                raise ConfigError(f"mode {m!r} is not configured in this file (configured: {', '.join(cfg.modes())})")
        self.openvpn = openvpn
        self.keys = paths(cfg, role)
        self.instances: list[Instance] = instances(cfg, role, self.keys, self.modes)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._undo: list[list[str]] = []  # commands that reverse what start() did, in reverse order

    # ---- lifecycle ---------------------------------------------------------
    def check(self) -> None:
        """Everything that can be refused before anything starts."""
        check_keys(self.keys)
        if shutil.which(self.openvpn) is None:
            raise ConfigError(f"openvpn: {self.openvpn!r} not found")
        if any(i.mptcp for i in self.instances) and shutil.which("mptcpize") is None:
            raise ConfigError("full_tunnel: needs mptcpize (apt install mptcpize) to run OpenVPN's TCP over MPTCP")

    def check_host(self) -> None:
        """What this host must have before anything starts: on the client
        box, the path manager ``per_gateway.path_manager`` names (the
        kernel's, whose endpoints the tunnels are, or gwsteer's userspace
        one, whose gateways they are), and each gateway the tunnels leave through has its source
        address (OpenVPN would fail to bind it only once started). Not part of
        check(), which also runs where the tunnels will not (a controller,
        a chroot)."""
        if self.role != "client":
            return
        pg = self.cfg.per_gateway if "per-gateway" in self.modes else None
        pm_file = Path("/proc/sys/net/mptcp/pm_type")
        userspace = pm_file.exists() and pm_file.read_text().strip() == "1"
        if pg and pg.path_manager == "kernel" and userspace:
            raise ConfigError("per_gateway: net.mptcp.pm_type is 1 (a userspace path manager, such as mptcpd "
                              "with gwsteer), which ignores the tunnels' MPTCP endpoints: no subflow would use "
                              "the tunnels. Set per_gateway.path_manager to \"gwsteer\" and give gwsteer the "
                              "tunnels' gateways (braid-openvpn gwsteer-gateways), or set net.mptcp.pm_type to 0 "
                              "(README, \"Which path manager\")")
        if pg and pg.path_manager == "gwsteer" and not userspace:
            raise ConfigError("per_gateway.path_manager: gwsteer, but net.mptcp.pm_type is not 1: the kernel's "
                              "path manager runs here and no subflow would use the tunnels. Run mptcpd with "
                              "gwsteer (pm_type 1) or set per_gateway.path_manager to \"kernel\"")
        used = {t.gateway for t in self.cfg.per_gateway.tunnels} \
            if "per-gateway" in self.modes and self.cfg.per_gateway else set()
        if "full-tunnel" in self.modes and self.cfg.full_tunnel:
            used |= set(self.cfg.gateways.values())
        for gw in sorted(used, key=lambda g: g.id):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                try:
                    probe.bind((str(gw.source), 0))
                except OSError as err:
                    raise ConfigError(f"gateways.{gw.id}.source: {gw.source} is not an address of this host "
                                      f"({err.strerror})") from None

    def start(self) -> Self:
        self.check()
        self.check_host()
        try:
            self.write_files()
            self._host_setup()
            for inst in self.instances:
                self._spawn(inst)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End every process (SIGTERM, then SIGKILL), then undo the host changes."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        while self._undo:
            subprocess.run(self._undo.pop(), capture_output=True, timeout=30, check=False)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ---- observation -------------------------------------------------------
    def log_path(self, name: str) -> Path:
        return self.cfg.run_dir / f"{name}.log"

    def ready(self, name: str) -> bool:
        """Whether the tunnel finished its handshake (since its last restart)."""
        try:
            text = self.log_path(name).read_text(errors="replace")
        except FileNotFoundError:
            return False
        last_ready = text.rfind(READY_LINE)
        return last_ready >= 0 and text.rfind("Restart pause", last_ready) < 0

    def exited(self) -> dict[str, int]:
        """Processes that ended by themselves: name -> exit status."""
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def wait_up(self, timeout: float) -> None:
        """Wait until every tunnel has completed its handshake."""
        deadline = time.monotonic() + timeout
        while True:
            if dead := self.exited():
                raise StartError(f"openvpn exited: {dead} (logs in {self.cfg.run_dir})")
            pending = [i.name for i in self.instances if not self.ready(i.name)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"tunnels not up after {timeout:.0f} s: {', '.join(pending)}")
            time.sleep(0.1)

    # ---- internals ---------------------------------------------------------
    def write_files(self) -> None:
        run = self.cfg.run_dir
        run.mkdir(parents=True, exist_ok=True)
        run.chmod(0o700)  # configs name key files; hooks run as root
        for inst in self.instances:
            _write(run / f"{inst.name}.conf", inst.config, 0o600)
            for fname, text in inst.hooks.items():
                _write(run / fname, text, 0o700)

    def _do(self, cmd: list[str], undo: list[str] | None) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            raise StartError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
        if undo:
            self._undo.append(undo)

    def _host_setup(self) -> None:
        cfg = self.cfg
        paths_needed = 0
        if "per-gateway" in self.modes and cfg.per_gateway:
            paths_needed = len(cfg.per_gateway.tunnels)
            if self.role == "proxy":
                inner = f"{cfg.per_gateway.inner_address}/32"
                if str(cfg.per_gateway.inner_address) not in _ip("-4", "addr", "show", "dev", "lo").stdout:
                    self._do(["ip", "addr", "add", inner, "dev", "lo"], ["ip", "addr", "del", inner, "dev", "lo"])
        if "full-tunnel" in self.modes and cfg.full_tunnel:
            f = cfg.full_tunnel
            paths_needed = max(paths_needed, len(cfg.gateways))
            # The client box routes its LAN, the proxy routes the tunnel out.
            _sysctl("net.ipv4.ip_forward", "1")
            if self.role == "client":
                for i, gw in enumerate(cfg.gateways.values()):
                    eid = str(FULL_ENDPOINT_BASE + i + 1)
                    _ip("mptcp", "endpoint", "delete", "id", eid, check=False)
                    self._do(["ip", "mptcp", "endpoint", "add", str(gw.source), "id", eid, "subflow"],
                             ["ip", "mptcp", "endpoint", "delete", "id", eid])
            else:
                out = ["-o", f.nat_out] if f.nat_out else ["!", "-o", f.dev]
                # No `-m comment`: braid's kernel has no xt_comment. stop()
                # deletes exactly the rules added here, by their full spec.
                for net in (*f.lan, f.subnet):
                    rule = ["POSTROUTING", "-s", str(net), *out, "-j", "MASQUERADE"]
                    self._do(["iptables", "-t", "nat", "-A", *rule], ["iptables", "-t", "nat", "-D", *rule])
        self._raise_mptcp_limits(paths_needed)

    def _raise_mptcp_limits(self, subflows: int) -> None:
        """At least ``subflows`` subflows per connection (never lowers a limit)."""
        m = re.search(r"add_addr_accepted (\d+) subflows (\d+)", _ip("mptcp", "limits", "show").stdout)
        acc, sub = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        if sub < subflows:
            self._do(["ip", "mptcp", "limits", "set", "subflow", str(subflows), "add_addr_accepted", str(acc)],
                     ["ip", "mptcp", "limits", "set", "subflow", str(sub), "add_addr_accepted", str(acc)])

    def _spawn(self, inst: Instance) -> None:
        cmd = [self.openvpn, "--config", str(self.cfg.run_dir / f"{inst.name}.conf")]
        if inst.mptcp:
            cmd = ["mptcpize", "run", *cmd]
        log: IO[bytes] = open(self.log_path(inst.name), "wb")
        try:
            self.procs[inst.name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                     stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()


def _write(path: Path, text: str, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def _sysctl(key: str, value: str) -> None:
    Path("/proc/sys", *key.split(".")).write_text(value)
