"""kernel/vm's guest script: what a command in braid's VM inherits."""

from __future__ import annotations

from pathlib import Path

import pytest

import vmrun
from kbuild import KernelImage


def test_guest_gets_the_hosts_commit_and_braid_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Results made in the guest name the checkout's commit as the host
    reads it (in the guest git stats every file over 9p and once timed
    out: every experiment said "braid unknown")."""
    monkeypatch.setenv("BRAID_COMMIT", "abc1234-dirty")
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    image = KernelImage(bzimage=tmp_path / "bzImage", config=tmp_path / "config", build_hash="0" * 64)
    script = vmrun.guest_script(["python3", "-c", "pass"], image, tmp_path)
    assert "export BRAID_COMMIT=abc1234-dirty;" in script
    assert "UNRELATED_SETTING" not in script
    # braid's modules are found in the guest without a PYTHONPATH on the host
    monkeypatch.delenv("PYTHONPATH", raising=False)
    script = vmrun.guest_script(["python3", "-m", "braid_eval.demo"], image, tmp_path)
    assert f"export PYTHONPATH={vmrun.REPO_DIR}/eval:" in script
    assert vmrun.checkout_commit() not in ("", "unknown")


def test_guest_root_is_virtme_ngs_9p_mount_with_a_cache(tmp_path: Path) -> None:
    """The rootflags braid appends are virtme-ng's own (read from the
    installed virtme-ng, so that an upgrade which changes them fails here)
    plus cache=loose, and come after virtme-ng's on the command line
    (the kernel takes the last)."""
    import virtme.commands.run as virtme_run

    source = Path(virtme_run.__file__).read_text()
    theirs = [part for part in source.split('"') if part.startswith("rootflags=") and "9p2000.L" in part]
    assert theirs, "virtme-ng no longer passes 9p rootflags"
    assert {f"{flags},cache=loose" for flags in theirs} == {vmrun.ROOT_9P_FLAGS}
    assert source.index("kernelargs.extend(args.kopt)") > source.index(theirs[0]), \
        "virtme-ng puts the options it is given before its own rootflags"
    image = KernelImage(bzimage=tmp_path / "bzImage", config=tmp_path / "config", build_hash="0" * 64)
    cmd = vmrun.vng_command(image, "true", 2, "2G", [tmp_path])
    assert cmd[cmd.index("--append") + 1] == vmrun.ROOT_9P_FLAGS
    assert "--force-9p" in cmd


def test_guest_cpu_model_replaces_virtme_ngs_max() -> None:
    """virtme-ng asks for ``-cpu max`` under TCG and adds --qemu-opts after
    its own arguments (read from the installed virtme-ng: an upgrade that
    changes either fails here); qemu keeps the last -cpu, braid's."""
    import virtme.architectures as virtme_arch
    import virtme.commands.run as virtme_run

    assert '"-cpu", "max"' in Path(virtme_arch.__file__).read_text()
    source = Path(virtme_run.__file__).read_text()
    assert source.index("qemuargs.extend(args.qemu_opts)") > source.index("qemuargs.extend(arch.qemuargs("), \
        "virtme-ng puts --qemu-opts before its own -cpu"
    image = KernelImage(bzimage=Path("bzImage"), config=Path("config"), build_hash="0" * 64)
    cmd = vmrun.vng_command(image, "true", 2, "2G", [])
    assert f"--qemu-opts=-cpu {vmrun.GUEST_CPU}" in cmd
