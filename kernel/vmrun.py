"""Boot braid's kernel under virtme-ng and run one command inside it.

The guest sees the host's root filesystem (read-only, with virtme-ng's
overlays) plus the braid checkout and an output directory read-write, so a
test writes its captures and reports where the host can read them. KVM hangs on
our machines, so the VM always runs under TCG (``--disable-kvm``).

Before the command runs, the guest checks that /proc/version carries the
marker of the kernel we meant to boot; if virtme-ng fell back to another
kernel the run fails loudly with exit status ``WRONG_KERNEL_STATUS``.

Usage::

    from vmrun import run_in_vm
    status = run_in_vm(["python3", "-m", "pytest", "eval/tests"], timeout_s=900)
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import IO, TextIO

from kbuild import KernelImage, cache_dir, ensure_kernel, exclusive

REPO_DIR = Path(__file__).resolve().parent.parent
# braid's Python modules, for a guest command started without a PYTHONPATH
# (`kernel/vm run -- python3 -m braid_eval.bench.sched` from a fresh shell).
GUEST_PYTHONPATH = ":".join(str(REPO_DIR / d) for d in ("eval", "kernel", "defenses"))
# Where braid's Python modules live (pyproject.toml's pytest pythonpath):
# in the guest, braid's editable install points here (see guest_pth_prelude).
PACKAGE_ROOTS = ("eval", "kernel", "defenses", "proxy/tor", "proxy/openvpn", "mptcpd-plugins")
WRONG_KERNEL_STATUS = 97
TIMEOUT_STATUS = 124
DEFAULT_MEMORY = "2G"
# The guest's root, the host's own, as virtme-ng mounts it (9p; its flags
# in virtme-ng 1.42, pinned in requirements.txt) plus cache=loose. The
# kernel takes the last rootflags= on its command line. Without a cache
# every file read crosses to qemu's 9p server, which under TCG costs
# milliseconds: Python started in 3-5 s and imported scipy.stats in 50 s;
# cached, 0.3 s and about 20 s. The root is read-only to the guest and the
# host does not change it during a run; the read-write directories (the
# checkout, outputs) keep virtme-ng's uncached mounts, so what the guest
# writes reaches the host.
# The guest's CPU model. virtme-ng asks qemu for "max", which under TCG
# offers AVX2 and fast string moves (ERMS, FSRM): glibc's string functions,
# numpy's kernels and the guest kernel's copies then take those paths, and
# TCG runs each such instruction through a helper. Nehalem (x86-64-v2:
# SSE4.2 and POPCNT, no AVX, no ERMS) keeps them on paths TCG translates
# well: numpy sorted 2-4x faster, a loopback socket moved data 2.7x faster,
# pure-Python floating point ran 2x faster, measured in this VM.
GUEST_CPU = "Nehalem"
# Ports per virtio-serial device. virtme-ng gives each of its seven streams
# (stdin, stdout, ret, ...) a virtio-serial-pci device of its own, and
# qemu's default of 31 ports makes each device 64 queues with an eventfd
# apiece: qemu's main loop polled some 400 descriptors at each of the
# thousands of wake-ups a second that the guest's timers cause, and took a
# third of a host core doing it, beside the two vCPU threads on a 2-core
# host (with two ports, a seventh). Two ports, the console's reserved
# port 0 and virtme-ng's one, are all a device carries.
SERIAL_PORTS = 2
ROOT_9P_FLAGS = "rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=loose"


def guest_pth_prelude(site_packages: Path, scratch: Path = Path("/tmp")) -> str:
    """Shell that, in the guest, leaves Python only braid's own .pth file.

    Every Python process runs site-packages' .pth files at start-up, and
    under TCG that dominated a bare start: 3.3 s for ``python3 -c pass``
    against 0.9 s without them, measured in this VM, where the suites
    start a Python for every server, client and tool they run.
    setuptools' editable finder (braid's ``pip install -e``) alone took
    1.1 s; a host's own additions (a CA bundle hook, distutils' shim) are
    of no use in a guest with no network. So each .pth is covered with a
    bind mount, in the guest only: braid's editable one by a plain list
    of this checkout's source roots, the others by an empty file.
    ``scratch`` is a directory of the guest's own (its /tmp). A file that
    cannot be covered is left as it is: Python is only slower.
    """
    roots = " ".join(shlex.quote(str(REPO_DIR / d)) for d in PACKAGE_ROOTS)
    empty, listed = (shlex.quote(str(scratch / name)) for name in ("braid-empty.pth", "braid-roots.pth"))
    return (
        f": > {empty}; printf '%s\\n' {roots} > {listed}; "
        f"for pth in {shlex.quote(str(site_packages))}/*.pth; do "
        '[ -f "$pth" ] || continue; '
        f'case "${{pth##*/}}" in __editable__.braid-*) src={listed} ;; *) src={empty} ;; esac; '
        'mount --bind "$src" "$pth" || echo "vm: $pth is run at every Python start" >&2; done; '
    )


class VmError(RuntimeError):
    """The VM could not be started or did not finish in time."""


def guest_script(command: list[str], image: KernelImage, cwd: Path, started: Path | None = None) -> str:
    """Shell run inside the guest: create ``started`` (if given: the host
    then knows the guest ran), verify the kernel, then exec the command."""
    marker = image.marker
    env = {"PYTHONPATH": GUEST_PYTHONPATH} | {
        k: v for k, v in os.environ.items()
        if k.startswith("BRAID_")
        or k in ("PATH", "PYTHONPATH", "HOME", "GOPATH", "GOCACHE", "MPLCONFIGDIR")
    }
    env_exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
    mark_started = f": > {shlex.quote(str(started))}; " if started else ""
    return (
        f"{mark_started}if ! grep -q {shlex.quote(marker)} /proc/version; then "
        f"echo 'vm: booted kernel is not braid {marker}:' \"$(cat /proc/version)\" >&2; "
        f"exit {WRONG_KERNEL_STATUS}; fi; "
        f"{guest_pth_prelude(Path(sysconfig.get_paths()['purelib']))}"
        f"{env_exports}export BRAID_IN_VM=1; "
        f"cd {shlex.quote(str(cwd))} && exec {shlex.join(command)}"
    )


def _copy(src: IO[bytes], dst: TextIO) -> None:
    """Forward one of the VM's output streams as it arrives."""
    out = dst.buffer
    for chunk in iter(lambda: src.read1(65536), b""):  # type: ignore[attr-defined]
        out.write(chunk)
        out.flush()


def vng_command(image: KernelImage, script: str, cpus: int, memory: str,
                rwdirs: list[Path]) -> list[str]:
    cmd = [
        "vng",
        "--run",
        str(image.bzimage),
        "--disable-kvm",
        "--cpus",
        str(cpus),
        "--memory",
        memory,
        "--user",
        "root",
        # virtiofsd is not installed: go straight to 9p instead of waiting
        # for it to fail.
        "--force-9p",
        "--append",
        ROOT_9P_FLAGS,
    ]
    for d in rwdirs:
        cmd += ["--rwdir", str(d)]
    # After virtme-ng's own -cpu: qemu takes the last one.
    cmd += [f"--qemu-opts=-cpu {GUEST_CPU} -global virtio-serial-pci.max_ports={SERIAL_PORTS}"]
    cmd += ["--exec", script]
    return cmd


def checkout_commit() -> str:
    """``git describe --always --dirty`` of this checkout, or ``unknown``."""
    try:
        return subprocess.run(["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_in_vm(
    command: list[str],
    *,
    timeout_s: float = 1800,
    cpus: int | None = None,
    memory: str = DEFAULT_MEMORY,
    cwd: Path | None = None,
    rwdirs: list[Path] | None = None,
) -> int:
    """Boot the cached braid kernel, run ``command``, return its exit status.

    Output streams straight to our stdout/stderr. A run longer than
    ``timeout_s`` is killed (with qemu) and returns ``TIMEOUT_STATUS``.
    """
    image = ensure_kernel()
    # The checkout's commit for results made in the guest (read there, git
    # stats every file over 9p under TCG).
    if "BRAID_COMMIT" not in os.environ:
        os.environ["BRAID_COMMIT"] = checkout_commit()
    work = cwd or Path.cwd()
    dirs = [REPO_DIR, *(rwdirs or [])]
    if not any(work == d or d in work.parents for d in dirs):
        dirs.append(work)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    # vng hands --exec to the guest on the kernel command line (2048 bytes
    # on x86): a long command after the exports did not boot, exit 255 and
    # no message. The guest sees the host's file system, so the script goes
    # in a file and the command line carries its path.
    # The guest marks that it started in a directory of its own that it may
    # write: a VM that stops without the mark never ran the command.
    with tempfile.NamedTemporaryFile("w", prefix="vm-exec-", suffix=".sh", dir=cache_dir()) as script, \
            tempfile.TemporaryDirectory(prefix="vm-started-", dir=cache_dir()) as mark_dir:
        started = Path(mark_dir) / "started"
        script.write(guest_script(command, image, work, started))
        script.flush()
        vng = vng_command(image, f"sh {shlex.quote(script.name)}", cpus or min(2, os.cpu_count() or 1),
                          memory, [*dirs, Path(mark_dir)])
        # TCG VMs are CPU-bound: two at once on a small machine make both slow
        # enough for timing-sensitive tests to fail, so VMs take turns.
        with exclusive(cache_dir() / "vm.lock",
                       "another braid VM is running on this machine; waiting for it to finish"):
            return boot_until_started(vng, image, command, timeout_s, started)


def boot_until_started(vng: list[str], image: KernelImage, command: list[str], timeout_s: float,
                       started: Path, tries: int = 2) -> int:
    """Boot, and boot again (up to ``tries`` boots) while the VM stops
    before its guest created ``started``: qemu itself failed (it has
    segfaulted on start on this host, status 255 and no message), and as
    the command never ran, running it now repeats nothing. A boot that
    times out is not repeated."""
    status = _boot(vng, image, command, timeout_s)
    for attempt in range(2, tries + 1):
        if started.exists() or status == TIMEOUT_STATUS:
            break
        print(f"vm: the VM stopped with status {status} before its guest started; "
              f"booting it again (boot {attempt} of {tries})", file=sys.stderr, flush=True)
        status = _boot(vng, image, command, timeout_s)
    return status


def _boot(vng: list[str], image: KernelImage, command: list[str], timeout_s: float) -> int:
    print(f"vm: booting {image.marker} (TCG) to run: {shlex.join(command)}",
          file=sys.stderr, flush=True)
    # qemu opens /proc/self/fd/1 and /proc/self/fd/2 for the guest's output;
    # if those are files (a CI log) it truncates them. Hand it pipes and copy.
    proc = subprocess.Popen(vng, start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    copiers = [threading.Thread(target=_copy, args=(src, dst), daemon=True)
               for src, dst in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))]
    for t in copiers:
        t.start()
    try:
        status = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"vm: timed out after {timeout_s:.0f}s; killed", file=sys.stderr)
        return TIMEOUT_STATUS
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    for t in copiers:
        t.join(timeout=5)
    if status == WRONG_KERNEL_STATUS:
        print(f"vm: error: the VM did not boot braid kernel {image.marker}", file=sys.stderr)
    return status
