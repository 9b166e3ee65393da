"""braid-proxy's testbed: the proxy topology on braid's namespace library.

The namespaces, veth links, routes, sysctls, netem shaping and the clean-up
of every process started inside come from ``eval/braid_testbed``
(:class:`~braid_testbed.topology.Topology`); this module only declares the
proxy's topology and adds what is specific to braid-proxy (a hosts file for
the server's resolver, MPTCP endpoints, port polling, key files, building the
Go binaries). Namespaces are named ``braid-px<pid>-<role>`` so parallel runs
never collide; they are removed on exit, even when a test fails::

    client box "c"                      proxy "s"                 destination "d"
    10.1.1.2 c-w1 ==== WAN1 ==== s-w1 10.1.1.1
    10.1.2.2 c-w2 ==== WAN2 ==== s-w2 10.1.2.1   lo 10.0.0.1
                                            s-d 10.9.0.1 ===== d-s 10.9.0.2

The client reaches the proxy's public address 10.0.0.1 over either WAN; a
source-address rule sends traffic from 10.1.2.2 over WAN2, so binding the
first subflow to a gateway's source address picks the WAN. The kernel path
manager in "c" adds a subflow from the other WAN's address. "s" forwards, so
the client can also reach "d" directly (the "direct MPTCP" baseline).

``wan1``/``wan2`` shape each WAN (both directions) with netem; that needs a
kernel with netem (braid's VM kernel, not the host's).

Example::

    with Testbed(wan1=LinkSpec(delay_ms=5)) as tb:
        tb.run("c", "ping", "-c1", "10.0.0.1")
        p = tb.spawn("d", ["python3", "-m", "http.server", "8080"])
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from .link import LinkSpec
from .netns import Namespace
from .topology import Topology, interface_counters
from .wait import scaled

REPO = Path(__file__).resolve().parents[2]

CLIENT_W1, CLIENT_W2 = "10.1.1.2", "10.1.2.2"
SERVER_PUBLIC = "10.0.0.1"
DEST = "10.9.0.2"
DEST_NAME = "web.braid.test"
UNITS = REPO / "proxy" / "contrib"

__all__ = [
    "CLIENT_W1",
    "CLIENT_W2",
    "DEST",
    "DEST_NAME",
    "SERVER_PUBLIC",
    "UNITS",
    "LinkSpec",
    "Testbed",
    "build_binaries",
    "gateway_file",
    "unit_environment",
    "write_secret",
]


class Testbed:
    """The proxy topology: created on enter, removed (with its processes) on exit."""

    __test__ = False  # not a pytest test class

    def __init__(self, wan1: LinkSpec | None = None, wan2: LinkSpec | None = None) -> None:
        topo = Topology(f"px{os.getpid()}")
        topo.node("c", forward=False)
        topo.node("s")
        topo.node("d", forward=False)
        topo.link("c", "c-w1", CLIENT_W1 + "/24", "s", "s-w1", "10.1.1.1/24", wan1)
        topo.link("c", "c-w2", CLIENT_W2 + "/24", "s", "s-w2", "10.1.2.1/24", wan2)
        topo.link("s", "s-d", "10.9.0.1/24", "d", "d-s", DEST + "/24")
        # Client: WAN1 by default, WAN2 for traffic sourced from 10.1.2.2.
        for dst in (SERVER_PUBLIC + "/32", "10.9.0.0/24"):
            topo.route("c", dst, "10.1.1.1")
            topo.route("c", dst, "10.1.2.1", table=102)
        topo.rule("c", CLIENT_W2, 102)
        topo.route("d", "default", "10.9.0.1")
        # (net.mptcp.enabled is on in every new namespace.)
        # Server-side TCP Fast Open, as the proxy host is provisioned (the
        # client side, bit 1, is the kernel default).
        topo.sysctl("s", "net.ipv4.tcp_fastopen", 3)
        self.topo = topo

    def __getitem__(self, role: str) -> Namespace:
        return self.topo[role]

    def ns(self, role: str) -> str:
        """Name of the namespace of ``role`` (for ``ip netns exec``)."""
        return self.topo.ns_name(role)

    # -- lifecycle ----------------------------------------------------------
    def __enter__(self) -> Self:
        self.topo.up()
        try:
            self._configure()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _configure(self) -> None:
        # One batch per namespace: each command is a process start, slow in a TCG VM.
        limits = "ip mptcp limits set subflow 4 add_addr_accepted 4"
        self.run("s", "sh", "-ec", f"ip addr add {SERVER_PUBLIC}/32 dev lo; {limits}")
        self.run("d", "sh", "-ec", limits)
        # MPTCP: the client's kernel path manager opens a subflow per WAN.
        self.run(
            "c",
            "sh",
            "-ec",
            f"{limits}; ip mptcp endpoint add {CLIENT_W1} dev c-w1 subflow; "
            f"ip mptcp endpoint add {CLIENT_W2} dev c-w2 subflow",
        )
        # /etc/netns/<ns>/hosts is bind-mounted over /etc/hosts by ip netns exec:
        # the server resolves the test name without a DNS server.
        etc = Path("/etc/netns") / self.ns("s")
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(f"127.0.0.1 localhost\n{DEST} {DEST_NAME}\n")
        (etc / "resolv.conf").write_text("# no DNS servers in the testbed\n")

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        try:
            self.topo.down()
        finally:
            shutil.rmtree(Path("/etc/netns") / self.ns("s"), ignore_errors=True)

    # -- processes ----------------------------------------------------------
    def run(self, role: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a command inside namespace ``role`` and wait for it."""
        return self.topo[role].run(list(args), check=check, timeout=timeout)

    def spawn(
        self, role: str, args: list[str], log: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a background process in ``role``; it is killed when the testbed closes."""
        out: IO[str] | int = open(log, "w") if log else subprocess.DEVNULL
        try:
            return self.topo[role].popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )
        finally:
            if not isinstance(out, int):
                out.close()  # the child has its own copy

    def wait_port(self, role: str, host: str, port: int, timeout: float | None = None) -> None:
        """Wait until something listens on host:port inside ``role``.

        The default limit is 15 s, stretched in braid's VM: under TCG,
        starting python3 -m http.server alone can take over 10 s.
        """
        if timeout is None:
            timeout = scaled(15)
        self.topo[role].wait_listening(port, host, timeout)

    # -- observations -------------------------------------------------------
    def tx_bytes(self, role: str, dev: str) -> int:
        """Bytes sent by ``dev`` in namespace ``role`` (the kernel's link stats)."""
        return interface_counters(self.topo[role], dev)[0]


def write_secret(path: Path, text: str) -> Path:
    """Write a file only its owner may read (braid-proxy refuses others)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def unit_environment(unit: str = "braid-proxy-client.service") -> dict[str, str]:
    """The environment a systemd unit of contrib/ gives braid-proxy
    (Environment= lines), so a benchmark measures braid as deployed."""
    env = {}
    for line in (UNITS / unit).read_text().splitlines():
        if line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").partition("=")
            env[key] = value
    return env


def gateway_file(path: Path) -> None:
    """Status file that rates gw1 (WAN1) best, as the path manager would."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    gws = [
        {"id": gw, "source": src, "up": True, "backup": False, "ewma_ms": ms, "rtt_ms": ms, "last_change": now}
        for gw, src, ms in (("gw1", CLIENT_W1, 1.0), ("gw2", CLIENT_W2, 2.0))
    ]
    path.write_text(json.dumps({"version": 1, "updated": now, "gateways": gws}))


def build_binaries(out: Path) -> tuple[Path, Path]:
    """braid-proxy and braid-loadgen: built into ``out``, or prebuilt.

    ``BRAID_PROXY_BIN`` names a directory that already holds both binaries
    (the VM stage builds them on the host: the guest's CPU is emulated and
    slow, and its Go cache may not be writable).
    """
    prebuilt = os.environ.get("BRAID_PROXY_BIN")
    if prebuilt:
        bins = Path(prebuilt) / "braid-proxy", Path(prebuilt) / "braid-loadgen"
        for b in bins:
            if not os.access(b, os.X_OK):
                raise FileNotFoundError(f"BRAID_PROXY_BIN={prebuilt}: {b.name} missing or not executable")
        return bins
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(out) + "/", "./cmd/braid-proxy", "./cmd/braid-loadgen"],
        cwd=REPO / "proxy",
        check=True,
    )
    return out / "braid-proxy", out / "braid-loadgen"
