"""Throwaway Debian root filesystems for the converge test, built once and cached.

debootstrap is slow (minutes), extracting a tarball is not (seconds), so the
first run builds a minimal Debian 12 with the packages braid's roles install
and keeps it as a tarball under ``$BRAID_CACHE/ansible`` (default
``~/.cache/braid``), keyed by suite, mirror and package list. Later runs, and
every test of a run, unpack that tarball into a fresh directory::

    tarball = cached_rootfs_tarball()
    with unpacked_rootfs(tarball, Path("/tmp/x")) as root:
        ...  # run playbooks against root with the chroot connection

The packages are preinstalled so the converge needs no network: the roles'
``apt`` tasks find them present (they still run and would install on a real
box). ``BRAID_DEBIAN_MIRROR`` overrides the mirror (default: the one apt uses
on braid's machines).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backstop import backstop

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# What the roles install (kept in step with the roles' package lists by
# test_roles_packages_are_in_the_rootfs) plus python3 for Ansible's modules.
PACKAGES = (
    "python3",
    "python3-apt",
    "systemd",
    "mptcpd",
    "nftables",
    "iproute2",
    "procps",
    # braid's Python tools in a venv (braid_python)
    "python3-venv",
    # Tor mode (braid_tor) and braid-openvpn (braid_openvpn)
    "tor",
    "openvpn",
    "easy-rsa",
    "iptables",
    "mptcpize",
)
# debootstrap of this list takes 2-4 minutes here; a stuck mirror must not hang CI.
DEBOOTSTRAP_TIMEOUT_S = backstop(900)


def cache_dir() -> Path:
    """Where the tarball lives (same root as the kernel cache)."""
    return Path(os.environ.get("BRAID_CACHE", Path.home() / ".cache" / "braid")) / "ansible"


def mirror() -> str:
    return os.environ.get("BRAID_DEBIAN_MIRROR", DEFAULT_MIRROR)


def rootfs_key() -> str:
    """Cache key: anything that changes the rootfs's contents."""
    text = "\n".join([SUITE, mirror(), "minbase", *sorted(PACKAGES)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_rootfs_tarball() -> Path:
    """Return the cached rootfs tarball, building it with debootstrap if missing.

    Concurrent callers wait on a lock file instead of bootstrapping twice.
    """
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    tarball = directory / f"debian-{SUITE}-{rootfs_key()}.tar.zst"
    with open(directory / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tarball.exists():
            return tarball
        build = directory / f"build-{os.getpid()}"
        shutil.rmtree(build, ignore_errors=True)
        start = time.monotonic()
        try:
            subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(PACKAGES)}",
                    SUITE,
                    str(build),
                    mirror(),
                ],
                check=True,
                timeout=DEBOOTSTRAP_TIMEOUT_S,
                stdout=subprocess.DEVNULL,
            )
            # apt's package lists are not needed (the converge installs
            # nothing new) and are a third of the tarball.
            for lists in (build / "var/lib/apt/lists", build / "var/cache/apt/archives"):
                for entry in lists.glob("*"):
                    if entry.is_file():
                        entry.unlink()
            partial = tarball.with_suffix(".partial")
            subprocess.run(
                ["tar", "--zstd", "--numeric-owner", "-C", str(build), "-cf", str(partial), "."],
                check=True,
            )
            partial.rename(tarball)
        finally:
            shutil.rmtree(build, ignore_errors=True)
        print(f"debian rootfs built in {time.monotonic() - start:.0f} s: {tarball}")
        return tarball


@contextmanager
def unpacked_rootfs(tarball: Path, where: Path) -> Iterator[Path]:
    """Unpack ``tarball`` into ``where`` (created, must not exist) and remove it afterwards."""
    where.mkdir(parents=True)
    try:
        subprocess.run(
            ["tar", "--zstd", "--numeric-owner", "-C", str(where), "-xf", str(tarball)],
            check=True,
        )
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    # scripts/test builds the tarball in the background while the stages
    # before ansible's run; the converge test then waits on the lock.
    cached_rootfs_tarball()
