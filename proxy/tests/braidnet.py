"""Network-namespace testbed for braid-proxy's end-to-end tests and benchmark.

Four namespaces, named ``bpx-<pid>-<role>`` so parallel runs never collide,
and always removed on exit (even when a test fails)::

    client box "c"                      proxy "s"                 destination "d"
    10.1.1.2 c-w1 ==== WAN1 ==== s-w1 10.1.1.1
    10.1.2.2 c-w2 ==== WAN2 ==== s-w2 10.1.2.1   lo 10.0.0.1
                                            s-d 10.9.0.1 ===== d-s 10.9.0.2

The client reaches the proxy's public address 10.0.0.1 over either WAN; a
source-address rule sends traffic from 10.1.2.2 over WAN2, so binding the
first subflow to a gateway's source address picks the WAN. The kernel path
manager in "c" adds a subflow from the other WAN's address. "s" forwards, so
the client can also reach "d" directly (the "direct MPTCP" baseline).

Example::

    with Testbed() as tb:
        tb.run("c", "ping", "-c1", "10.0.0.1")
        p = tb.spawn("d", ["python3", "-m", "http.server", "8080"])
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

CLIENT_W1, CLIENT_W2 = "10.1.1.2", "10.1.2.2"
SERVER_PUBLIC = "10.0.0.1"
DEST = "10.9.0.2"
DEST_NAME = "web.braid.test"


class Testbed:
    """Creates the namespaces on enter and removes everything on exit."""

    __test__ = False  # not a pytest test class

    def __init__(self, prefix: str | None = None):
        self.prefix = prefix or f"bpx-{os.getpid()}-"
        self.procs: list[subprocess.Popen] = []

    def ns(self, role: str) -> str:
        return self.prefix + role

    # -- plumbing -----------------------------------------------------------
    def sh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(args, check=check, capture_output=True, text=True)

    def run(self, role: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a command inside namespace `role` and wait for it."""
        r = subprocess.run(
            ["ip", "netns", "exec", self.ns(role), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} in {role} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def spawn(self, role: str, args: list[str], log: Path | None = None, env: dict | None = None) -> subprocess.Popen:
        """Start a background process in `role`; it is stopped on exit."""
        out = open(log, "w") if log else subprocess.DEVNULL
        p = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(role), *args],
            stdout=out,
            stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        """Signal one process we started and wait for it."""
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def wait_port(self, role: str, host: str, port: int, timeout: float = 10) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.run(role, "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}", check=False)
            if r.returncode == 0:
                return
            time.sleep(0.05)
        raise TimeoutError(f"{host}:{port} not listening in {role}")

    # -- topology -----------------------------------------------------------
    def __enter__(self) -> Testbed:
        try:
            self._build()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self) -> None:
        c, s, d = self.ns("c"), self.ns("s"), self.ns("d")
        for n in (c, s, d):
            self.sh("ip", "netns", "add", n)
            self.run(n[len(self.prefix) :], "ip", "link", "set", "lo", "up")
            self.run(n[len(self.prefix) :], "sysctl", "-qw", "net.mptcp.enabled=1")
        # /etc/netns/<ns>/hosts is bind-mounted over /etc/hosts by ip netns exec.
        etc = Path("/etc/netns") / s
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(f"127.0.0.1 localhost\n{DEST} {DEST_NAME}\n")
        (etc / "resolv.conf").write_text("# no DNS servers in the testbed\n")

        def veth(a_ns, a_if, a_ip, b_ns, b_if, b_ip):
            self.sh("ip", "link", "add", a_if, "netns", a_ns, "type", "veth", "peer", "name", b_if, "netns", b_ns)
            for n, i, ip in ((a_ns, a_if, a_ip), (b_ns, b_if, b_ip)):
                self.sh("ip", "-n", n, "addr", "add", ip, "dev", i)
                self.sh("ip", "-n", n, "link", "set", i, "up")

        veth(c, "c-w1", CLIENT_W1 + "/24", s, "s-w1", "10.1.1.1/24")
        veth(c, "c-w2", CLIENT_W2 + "/24", s, "s-w2", "10.1.2.1/24")
        veth(s, "s-d", "10.9.0.1/24", d, "d-s", DEST + "/24")
        self.sh("ip", "-n", s, "addr", "add", SERVER_PUBLIC + "/32", "dev", "lo")
        self.run("s", "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # Server-side TCP Fast Open, as the proxy host is provisioned (the
        # client side, bit 1, is the kernel default).
        self.run("s", "sysctl", "-qw", "net.ipv4.tcp_fastopen=3")
        # Client: WAN1 by default, WAN2 for traffic sourced from 10.1.2.2.
        for dst in (SERVER_PUBLIC + "/32", "10.9.0.0/24"):
            self.sh("ip", "-n", c, "route", "add", dst, "via", "10.1.1.1", "dev", "c-w1")
            self.sh("ip", "-n", c, "route", "add", dst, "via", "10.1.2.1", "dev", "c-w2", "table", "102")
        self.sh("ip", "-n", c, "rule", "add", "from", CLIENT_W2, "table", "102")
        self.sh("ip", "-n", d, "route", "add", "default", "via", "10.9.0.1")
        # MPTCP: the client's kernel path manager opens a subflow per WAN.
        for role in ("c", "s", "d"):
            self.run(role, "ip", "mptcp", "limits", "set", "subflow", "4", "add_addr_accepted", "4")
        self.run("c", "ip", "mptcp", "endpoint", "add", CLIENT_W1, "dev", "c-w1", "subflow")
        self.run("c", "ip", "mptcp", "endpoint", "add", CLIENT_W2, "dev", "c-w2", "subflow")

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for role in ("c", "s", "d"):
            subprocess.run(["ip", "netns", "del", self.ns(role)], capture_output=True, check=False)
        shutil.rmtree(Path("/etc/netns") / self.ns("s"), ignore_errors=True)

    # -- observations -------------------------------------------------------
    def tx_bytes(self, role: str, dev: str) -> int:
        """Bytes sent by `dev` in namespace `role` (sysfs of that netns)."""
        r = self.run(role, "cat", f"/sys/class/net/{dev}/statistics/tx_bytes")
        return int(r.stdout)


def write_secret(path: Path, text: str) -> Path:
    """Write a file only its owner may read (braid-proxy refuses others)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def build_binaries(out: Path) -> tuple[Path, Path]:
    """go build braid-proxy and braid-loadgen into `out`."""
    here = Path(__file__).resolve().parent.parent
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(out) + "/", "./cmd/braid-proxy", "./cmd/braid-loadgen"], cwd=here, check=True
    )
    return out / "braid-proxy", out / "braid-loadgen"
