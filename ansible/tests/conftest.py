"""Fixtures of the deployment tests: artifacts and the cached Debian rootfs (built once per run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_run import REPO, build_artifacts
from debian_rootfs import cached_rootfs_tarball


def _need_root_and_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("chroot targets need root")
    for tool in ("debootstrap", "zstd", "ansible-playbook", "go", "nft"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: run scripts/install-deps")


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """braid-proxy and gwsteer built by ansible/build-artifacts, once per run.

    test.sh builds them once for its concurrent pytest runs and names the
    directory in $BRAID_ANSIBLE_ARTIFACTS (two builds at once would share
    mptcpd-plugins' build directory).
    """
    _need_root_and_tools()
    prebuilt = os.environ.get("BRAID_ANSIBLE_ARTIFACTS")
    if prebuilt:
        if not (Path(prebuilt) / "braid-proxy").is_file():
            pytest.fail(f"BRAID_ANSIBLE_ARTIFACTS={prebuilt} holds no build-artifacts output")
        return Path(prebuilt)
    return build_artifacts(tmp_path_factory.mktemp("artifacts"))


@pytest.fixture(scope="session")
def rootfs_tarball() -> Path:
    """The cached debootstrap'd Debian 12 (built on first use, minutes; then reused)."""
    _need_root_and_tools()
    return cached_rootfs_tarball()


@pytest.fixture(scope="session")
def kernel_debs() -> list[Path]:
    """braid's kernel as Debian packages (``kernel/build --deb``): cached by make test's
    kernel stage, which runs before this one; built here (long) when it has not run."""
    _need_root_and_tools()
    built = subprocess.run([str(REPO / "kernel" / "build"), "--deb"], capture_output=True, text=True,
                           timeout=7200, check=False)
    if built.returncode != 0:
        pytest.fail(f"kernel/build --deb failed:\n{built.stderr[-3000:]}")
    return [Path(line) for line in built.stdout.splitlines() if line.endswith(".deb")]
