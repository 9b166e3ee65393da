"""kernel/vm's guest script: what a command in braid's VM inherits."""

from __future__ import annotations

import os
import shutil
import subprocess
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
    assert qemu_opts()[:2] == ["-cpu", vmrun.GUEST_CPU]


def qemu_opts() -> list[str]:
    """The options braid adds to virtme-ng's qemu command line."""
    image = KernelImage(bzimage=Path("bzImage"), config=Path("config"), build_hash="0" * 64)
    cmd = vmrun.vng_command(image, "true", 2, "2G", [])
    [opts] = [arg.removeprefix("--qemu-opts=") for arg in cmd if arg.startswith("--qemu-opts=")]
    return opts.split()


def test_serial_devices_get_only_the_ports_they_carry() -> None:
    """virtme-ng gives each stream a virtio-serial-pci device of its own
    with one port (read from the installed virtme-ng: a change fails here);
    braid caps every such device at two ports, the console's reserved port
    0 and that one."""
    import virtme.architectures as virtme_arch
    import virtme.commands.run as virtme_run

    assert virtme_arch.get("x86_64").virtio_dev_type("serial") == "virtio-serial-pci"
    source = Path(virtme_run.__file__).read_text()
    one_port = source[source.index("def add_serial_port"):].split("\n\n")[0]
    assert one_port.count('virtio_dev_type("serial")') == one_port.count("virtserialport,name=") == 1
    opts = qemu_opts()
    assert opts[opts.index("-global") + 1] == f"virtio-serial-pci.max_ports={vmrun.SERIAL_PORTS}"
    assert vmrun.SERIAL_PORTS == 2


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare(1) for a private mount namespace")
def test_guest_runs_only_braids_pth_file(tmp_path: Path) -> None:
    """The guest's prelude covers site-packages' .pth files (run here in a
    mount namespace of its own): braid's editable one reads as this
    checkout's source roots, any other as empty, and the files underneath
    are untouched."""
    site = tmp_path / "site-packages"
    scratch = tmp_path / "scratch"
    site.mkdir()
    scratch.mkdir()
    ours = site / "__editable__.braid-0.1.0.pth"
    theirs = site / "zz_hook.pth"
    ours.write_text("import __editable___braid_0_1_0_finder\n")
    theirs.write_text("import os; os.environ['HOOKED'] = '1'\n")
    script = vmrun.guest_pth_prelude(site, scratch) + f"cat {ours}; echo ---; cat {theirs}"
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                         capture_output=True, text=True, check=True, timeout=30)
    listed, _, hooked = out.stdout.partition("---\n")
    assert listed.split() == [str(vmrun.REPO_DIR / d) for d in vmrun.PACKAGE_ROOTS]
    assert hooked == "" and out.stderr == ""
    assert ours.read_text() == "import __editable___braid_0_1_0_finder\n"
    assert theirs.read_text().startswith("import os")


def test_guest_finds_every_package_braid_installs() -> None:
    """The roots the guest lists in place of the editable finder are the
    checkout's package roots as pyproject.toml keeps them (pytest's
    pythonpath), and each package in its package-dir sits under one."""
    import tomllib

    tool = tomllib.loads((vmrun.REPO_DIR / "pyproject.toml").read_text())["tool"]
    assert sorted(vmrun.PACKAGE_ROOTS) == sorted(tool["pytest"]["ini_options"]["pythonpath"])
    for package, where in tool["setuptools"]["package-dir"].items():
        assert str(Path(where).parent) in vmrun.PACKAGE_ROOTS, package
    for root in vmrun.PACKAGE_ROOTS:
        assert (vmrun.REPO_DIR / root).is_dir(), root


def test_guest_marks_that_it_started_before_anything_else(tmp_path: Path) -> None:
    """The guest script's first step creates the started mark: run on this
    machine (not braid's kernel), it marks, then refuses the kernel."""
    image = KernelImage(bzimage=tmp_path / "bzImage", config=tmp_path / "config", build_hash="0" * 64)
    started = tmp_path / "started"
    script = vmrun.guest_script(["true"], image, tmp_path, started)
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == vmrun.WRONG_KERNEL_STATUS
    assert started.exists()


def test_a_vm_that_never_started_its_guest_is_booted_again(tmp_path: Path) -> None:
    """A boot that stops before the guest's mark (qemu failing on start) is
    tried again, once; one whose guest started is not, whatever its
    status, and neither is one that timed out."""
    image = KernelImage(bzimage=tmp_path / "bzImage", config=tmp_path / "config", build_hash="0" * 64)
    boots, started = tmp_path / "boots", tmp_path / "started"

    def boot(shell: str, timeout_s: float = 30) -> tuple[int, int]:
        boots.unlink(missing_ok=True)
        started.unlink(missing_ok=True)
        status = vmrun.boot_until_started(["sh", "-c", f"echo >> {boots}; {shell}"], image, ["cmd"],
                                          timeout_s, started)
        return status, len(boots.read_text().splitlines())

    assert boot("exit 255") == (255, 2)
    # the second boot's guest starts: its status is the run's
    assert boot(f"if [ -e {started}.once ]; then : > {started}; exit 0; fi; : > {started}.once; exit 255") == (0, 2)
    assert boot(f": > {started}; exit 3") == (3, 1)
    assert boot("sleep 5", timeout_s=0.5) == (vmrun.TIMEOUT_STATUS, 1)
