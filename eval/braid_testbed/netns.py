"""Network namespaces that always clean up after themselves.

A :class:`Namespace` owns a named netns and every process started in it. Its
``close()`` kills those processes (and any stray one still inside the
namespace) before deleting the namespace, so a failing test leaves nothing
behind.

Usage::

    with Namespace("braid-t1-client") as ns:
        ns.run(["ip", "addr"])
        server = ns.popen(["python3", "-m", "http.server"])
"""

from __future__ import annotations

import ctypes
import errno
import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TextIO, TypeVar

from pyroute2 import NetNS, netns
from pyroute2 import config as pyroute2_config

# pyroute2 creates a namespace in a forked child and gives it 2 s to answer;
# under TCG a fork of a large interpreter took longer (the proxy VM stage
# failed on it, 2026-11-24). The bound only matters for a stuck child.
pyroute2_config.default_communicate_timeout = max(pyroute2_config.default_communicate_timeout, 30)


T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class CommandError(RuntimeError):
    """A command run in a namespace failed."""


def inside(name: str, work: Callable[[], T], timeout: float | None = None) -> T:
    """``work()`` run in network namespace ``name``, in this process.

    Under braid's emulated VM every process started costs a quarter of a
    second and ``ip netns exec`` about a second; a testbed's set-up was a
    minute of them. A thread that joins the namespace (setns affects only
    the calling thread) sees its /proc/sys/net and opens its sockets
    there, and takes the namespace with it when it ends. A process it
    starts is born in the namespace (:meth:`Namespace.run` starts commands
    that way). After ``timeout`` seconds this raises TimeoutError and
    leaves ``work`` to end on its own (a thread cannot be killed).
    """
    result: list[T] = []
    failure: list[BaseException] = []

    def enter_and_work() -> None:
        try:
            fd = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {name}: {os.strerror(err)}")
            finally:
                os.close(fd)
            result.append(work())
        except BaseException as e:  # handed to the caller's thread
            failure.append(e)

    thread = threading.Thread(target=enter_and_work, name=f"netns {name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"work inside {name} still running after {timeout} s")
    if failure:
        raise failure[0]
    return result[0]


class Namespace:
    """A named network namespace and the processes running in it."""

    def __init__(self, name: str, spawn_inside: bool = False) -> None:
        self.name = name
        self.spawn_inside = spawn_inside
        self._procs: list[subprocess.Popen[bytes]] = []
        purge_namespace(name)
        netns.create(name)
        self.ipr = NetNS(name)
        self.ipr.link("set", index=self.ipr.link_lookup(ifname="lo")[0], state="up")

    def __enter__(self) -> Namespace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _spawn(self, start: Callable[[list[str]], T], cmd: Sequence[str]) -> T:
        """``start(argv)`` for a command that runs in the namespace.

        With ``spawn_inside`` a process is started by a thread inside the
        namespace and is born there, without `ip netns exec` (which costs
        0.27 s against 0.11 s of the emulated CPU in braid's VM, per
        command): eval's testbeds, whose tools read neither /etc/netns nor
        the namespace's /sys, which `ip netns exec` mounts. Otherwise, and
        wherever a test gave the namespace its own /etc files, through
        `ip netns exec`.
        """
        if not self.spawn_inside or os.path.isdir(f"/etc/netns/{self.name}"):
            return start(["ip", "netns", "exec", self.name, *cmd])
        return inside(self.name, lambda: start(list(cmd)))

    def run(
        self, cmd: Sequence[str], *, check: bool = True, timeout: float = 60, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` in the namespace and wait; raise CommandError on failure."""
        proc = self._spawn(lambda argv: subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            input=input.decode() if input is not None else None,
        ), cmd)
        if check and proc.returncode != 0:
            raise CommandError(
                f"[{self.name}] {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc

    def popen(self, cmd: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in the namespace; it is killed when the namespace closes."""
        proc: subprocess.Popen[bytes] = self._spawn(
            lambda argv: subprocess.Popen(argv, start_new_session=True, **kwargs),  # type: ignore[call-overload]
            cmd)
        self._procs.append(proc)
        return proc

    def run_main(self, main: Callable[[list[str], TextIO, TextIO], int], args: Sequence[str],
                 timeout: float) -> subprocess.CompletedProcess[str]:
        """A Python tool's ``main(args, out, err)`` (bulk.py, pages.py) run
        as :meth:`run` would run its command line, but from a thread of this
        process inside the namespace: under braid's emulated VM a new Python
        process costs seconds before it does anything. The result reads like
        the command's: exit status, what it printed, its errors."""
        out, err = io.StringIO(), io.StringIO()
        code = inside(self.name, lambda: main(list(args), out, err), timeout=timeout)
        return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())

    def wait_listening(
        self, port: int, host: str | None = None, timeout: float = 15,
        proc: subprocess.Popen[bytes] | None = None,
    ) -> None:
        """Return once a TCP socket listens on ``port`` (on ``host`` if given).

        Starting a server and connecting at once races its start-up, which
        takes seconds under braid's emulated VM; poll the kernel's socket
        table instead of sleeping. ``proc``, the server, failing ends the wait.
        """
        accepted = {host, f"[{host}]", "0.0.0.0", "*", "[::]"} if host else None
        deadline = time.monotonic() + timeout
        while True:
            if proc is not None and proc.poll() is not None:
                raise CommandError(f"[{self.name}] server exited with {proc.returncode} before listening on {port}")
            # Columns: state, recv-q, send-q, local address:port, peer.
            listeners = self.run(["ss", "-ltnH", f"sport = :{port}"]).stdout.splitlines()
            if any(accepted is None or line.split()[3].rsplit(":", 1)[0] in accepted for line in listeners):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"[{self.name}] nothing listening on {host or '*'}:{port} after {timeout:.0f} s")
            time.sleep(0.05)

    def sysctl(self, key: str, value: str | int) -> None:
        """Set one sysctl in the namespace (``sysctl -w``'s key syntax);
        a value the kernel refuses raises CommandError with its reason."""
        self.sysctls([(key, value)])

    def sysctls(self, settings: Sequence[tuple[str, str | int]]) -> None:
        """Set several sysctls, in order, from one thread inside the
        namespace; the first the kernel refuses raises CommandError."""
        failed: list[str] = []

        def write() -> None:
            for key, value in settings:
                try:
                    with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
                        f.write(f"{value}\n")
                except OSError as e:
                    failed.append(f"sysctl {key}={value}: {e.strerror}")
                    return

        inside(self.name, write)
        if failed:
            raise CommandError(f"[{self.name}] {failed[0]}")

    def batch(self, commands: Sequence[Sequence[str]]) -> None:
        """Several ``ip`` commands (without the leading ``ip``) in one
        process: ``ip -batch``, which stops at the first that fails."""
        if commands:
            script = "\n".join(" ".join(cmd) for cmd in commands) + "\n"
            self.run(["ip", "-batch", "-"], input=script.encode())

    def pids(self) -> list[int]:
        return _pids_inside(self.name)

    def stop_processes(self, grace_s: float = 2.0) -> None:
        """Terminate our processes, then kill whatever is left in the namespace."""
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()
        _kill_all_inside(self.name, grace_s)

    def close(self) -> None:
        """Stop every process inside, then delete the namespace."""
        self.stop_processes()
        self.ipr.close()
        if self.name in netns.listnetns():
            netns.remove(self.name)


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, wait: float = 5.0) -> int | None:
    """Stop one process started with :meth:`Namespace.popen` before its
    namespace closes: ``sig`` to its whole session, SIGKILL if it is still
    there after ``wait`` seconds. Returns its exit status."""
    for signum in (sig, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, signum)
            proc.wait(timeout=wait)
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
    return proc.poll()


def purge_namespace(name: str, grace_s: float = 2.0) -> None:
    """Delete a leftover namespace (e.g. from a crashed run) and kill what runs in it.

    Removing only the name would leave its processes running in an anonymous
    namespace, still holding sockets and addresses.
    """
    if name in netns.listnetns():
        _kill_all_inside(name, grace_s)
        netns.remove(name)


def _pids_inside(name: str) -> list[int]:
    """Processes whose network namespace is ``name`` (what ``ip netns
    pids`` prints, without starting it)."""
    try:
        target = os.stat(f"/run/netns/{name}")
    except FileNotFoundError:
        return []
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ns = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError as e:  # gone meanwhile, or a kernel thread
            if e.errno in (errno.ENOENT, errno.ESRCH, errno.EACCES):
                continue
            raise
        if (ns.st_dev, ns.st_ino) == (target.st_dev, target.st_ino):
            pids.append(int(entry.name))
    return pids


def _kill_all_inside(name: str, grace_s: float) -> None:
    strays = _pids_inside(name)
    for pid in strays:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # SIGKILL is asynchronous: wait until the strays are really gone so
    # that "closed" means no process of ours is left.
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for pid in strays) and time.monotonic() < deadline:
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Running or stopped, i.e. neither gone nor a zombie awaiting its parent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def leftover_namespaces(prefix: str) -> list[str]:
    """Namespaces whose name starts with ``prefix`` (for leak checks)."""
    return sorted(n for n in netns.listnetns() if n.startswith(prefix))
