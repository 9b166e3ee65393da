"""Boot a converged root filesystem with its own systemd, inside a test's network namespace.

The converge test's targets are plain directories; ``systemd-nspawn --boot``
runs the target's own systemd as PID 1 of a container, so every unit the
playbooks enabled starts as it would on a user's box (ordering, sandboxing,
``RuntimeDirectory=``, ``LoadCredential=``, capabilities), while the
container shares a network namespace the test built (its addresses, routes
and links to the other nodes)::

    with booted_system(root, topo.ns_name("box"), log) as box:
        box.wait_until_up()
        print(box.run("systemctl", "is-active", "mptcp.service").stdout)

No machined registration and no scope unit: the host needs no systemd of its
own (braid's machines run none).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backstop import SCALE, backstop

# A minimal Debian boots in ~10 s here; a loaded 2-core CI machine takes longer.
BOOT_TIMEOUT_S = backstop(120)
SHUTDOWN_TIMEOUT_S = backstop(30)


class BootedSystem:
    """A running container: commands run in all of its namespaces (nsenter)."""

    def __init__(self, root: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.root = root
        self.proc = proc
        self.log = log
        self.init_pid = 0

    def _find_init(self) -> int:
        """The container's PID 1 as the host sees it: nspawn's descendant that is PID 1 in its namespace."""
        children: dict[int, list[int]] = {}
        nspids: dict[int, list[str]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
            except OSError:
                continue
            children.setdefault(int(fields["PPid"]), []).append(int(entry))
            nspids[int(entry)] = fields.get("NSpid", "").split()
        todo = list(children.get(self.proc.pid, []))
        while todo:
            pid = todo.pop()
            if len(nspids.get(pid, [])) > 1 and nspids[pid][-1] == "1":
                return pid
            todo += children.get(pid, [])
        return 0

    def run(self, *cmd: str, check: bool = False, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` inside the container, as its root (``input`` on its stdin)."""
        if not self.init_pid:
            raise RuntimeError("the container has not started")
        return subprocess.run(["nsenter", "--target", str(self.init_pid), "--all", *cmd], input=input,
                              capture_output=True, text=True, timeout=backstop(timeout), check=check)

    def wait_until_up(self) -> str:
        """Wait for boot to finish; return systemd's verdict (``running`` or ``degraded``)."""
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while not self.init_pid:
            if self.proc.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no container init after {BOOT_TIMEOUT_S} s:\n{self.tail()}")
            time.sleep(0.2)
            self.init_pid = self._find_init()
        state = ""
        while time.monotonic() < deadline:
            # systemctl reaches PID 1 through its private socket, which
            # appears a moment after PID 1 starts: retry until it answers.
            # run() stretches its limit by the scale the deadline has already.
            state = self.run("systemctl", "is-system-running", "--wait",
                             timeout=max(1.0, (deadline - time.monotonic()) / SCALE)).stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.5)
        raise TimeoutError(f"boot did not finish in {BOOT_TIMEOUT_S} s (state {state!r}):\n{self.tail()}")

    def failed_units(self) -> list[str]:
        out = self.run("systemctl", "list-units", "--failed", "--plain", "--no-legend").stdout
        return [line.split()[0] for line in out.splitlines() if line.strip()]

    def is_active(self, unit: str) -> bool:
        return self.run("systemctl", "is-active", unit).stdout.strip() == "active"

    def journal(self, unit: str, lines: int = 40) -> str:
        return self.run("journalctl", "--no-pager", "-o", "cat", "-n", str(lines), "-u", unit).stdout

    def journal_has(self, unit: str, *texts: str) -> bool:
        """Whether the unit's recent journal holds every one of ``texts``."""
        journal = self.journal(unit)
        return all(text in journal for text in texts)

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def shut_down(self) -> None:
        """Power off the container (nspawn turns SIGTERM into a clean halt of its init)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# The hierarchies a container gets a cgroup of its own in: systemd's (the
# named v1 hierarchy and cgroup2), where the container's systemd tracks its
# units, and pids, where it sets TasksMax. Under --keep-unit every container
# would share the test's cgroup, and two containers' systemd would create,
# limit and kill the same /system.slice/<unit> cgroups: with three booted at
# once, one's mptcpd failed to start (EAGAIN) while another ran the same unit.
_OWN_CGROUP_CONTROLLERS = ("name=systemd", "", "pids")


def _cgroup_mounts() -> dict[str, Path]:
    """Mount point per controller ("" for cgroup2, "name=systemd" for systemd's named hierarchy)."""
    mounts: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fstype, _source, options = after.split()[:3]
        point = Path(before.split()[4])
        if fstype == "cgroup2":
            mounts[""] = point
        elif fstype == "cgroup":
            for option in options.split(","):
                mounts.setdefault(option, point)
    return mounts


def _own_cgroups(name: str) -> list[Path]:
    """Create a child of this process's cgroup, per hierarchy above, for one container."""
    mounts = _cgroup_mounts()
    made = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hierarchy, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            if controller in _OWN_CGROUP_CONTROLLERS and controller in mounts:
                group = mounts[controller] / path.lstrip("/") / f"braid-{name}-{os.getpid()}"
                group.mkdir(exist_ok=True)
                made.append(group)
    return made


def _remove_cgroups(groups: list[Path]) -> None:
    """Remove the containers' cgroups, children first (those still holding a process stay)."""
    for group in groups:
        for directory, _subdirs, _files in os.walk(group, topdown=False):
            try:
                os.rmdir(directory)
            except OSError:
                pass


# Containers on one kernel without user namespaces share one UID space, and
# DynamicUser derives the UID from the unit's name: every container's mptcpd
# would run as the same UID, and the stock unit's LimitNPROC=1 lets only one
# of them start (execve fails with EAGAIN). As on separate machines, each
# container's mptcpd gets a UID of its own: a static user of that UID, which
# DynamicUser= takes instead of allocating one; LimitNPROC=1 still holds.
_MPTCPD_USER = "braid-test-mptcpd"
_MPTCPD_DROPIN = Path("etc/systemd/system/mptcp.service.d/zz-booted-test-user.conf")
_MPTCPD_UIDS = itertools.count(64900)


def _own_mptcpd_user(root: Path) -> Path | None:
    """Give the container's mptcpd a UID no other container uses; the drop-in to remove after."""
    if not (root / "usr/lib/systemd/system/mptcp.service").exists():
        return None
    uid = next(_MPTCPD_UIDS)
    subprocess.run(["chroot", str(root), "sh", "-c",
                    f"userdel {_MPTCPD_USER} 2>/dev/null; useradd --system --no-create-home --uid {uid} "
                    f"--shell /usr/sbin/nologin {_MPTCPD_USER}"], check=True, timeout=backstop(60), capture_output=True)
    dropin = root / _MPTCPD_DROPIN
    # A fresh system (test_manual_deploy) has no drop-in directory yet.
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(f"[Service]\nUser={_MPTCPD_USER}\n")
    return dropin


@contextmanager
def booted_system(root: Path, netns: str, log: Path) -> Iterator[BootedSystem]:
    """Boot ``root`` inside the named network namespace (``ip netns`` name); power off on exit."""
    binds = ["--bind=/dev/net/tun"] if Path("/dev/net/tun").exists() else []
    # The container owns its network namespace as a box owns its network:
    # nftables, routes, sysctls and MPTCP endpoints are its to change.
    caps = ["--capability=CAP_NET_ADMIN,CAP_NET_RAW"]
    cmd = ["systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit",
           "--console=read-only", f"--directory={root}", f"--machine={root.name}",
           f"--network-namespace-path=/run/netns/{netns}", *caps, *binds]
    # /proc/sys/net writable as on a box (braid-openvpn turns forwarding on);
    # the rest of /proc/sys stays read-only, so nothing reaches the host.
    env = {**os.environ, "SYSTEMD_NSPAWN_API_VFS_WRITABLE": "network"}
    groups = _own_cgroups(root.name)
    dropin = _own_mptcpd_user(root)

    def enter_own_cgroups() -> None:
        for group in groups:
            (group / "cgroup.procs").write_text("0")

    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    preexec_fn=enter_own_cgroups)
        system = BootedSystem(root, proc, log)
        try:
            yield system
        finally:
            system.shut_down()
    finally:
        _remove_cgroups(groups)
        if dropin:
            dropin.unlink()
