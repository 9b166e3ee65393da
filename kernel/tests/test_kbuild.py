"""The build machinery: broken patches and missing tools fail with names;
dropped config options are caught. These use the real source tree and build
lock but never compile (a broken series fails before that)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import kbuild


@pytest.fixture
def patch_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the real series that a test may break."""
    d = tmp_path / "patches"
    shutil.copytree(kbuild.PATCH_DIR, d)
    monkeypatch.setattr(kbuild, "PATCH_DIR", d)
    monkeypatch.setattr(kbuild, "SERIES_FILE", d / "series")
    return d


BROKEN = """\
From: braid test <test@localhost>
Subject: [PATCH] deliberately broken

--- a/net/mptcp/sched.c
+++ b/net/mptcp/sched.c
@@ -1,3 +1,3 @@
-this line is not in sched.c
+so the patch cannot apply
 nor is this one
"""


def test_broken_patch_fails_naming_the_patch(patch_dir: Path) -> None:
    (patch_dir / "9999-broken-on-purpose.patch").write_text(BROKEN)
    with (patch_dir / "series").open("a") as series:
        series.write("9999-broken-on-purpose.patch\n")
    with pytest.raises(kbuild.BuildError, match="9999-broken-on-purpose.patch does not apply"):
        kbuild.ensure_kernel()


def test_series_entry_without_file_is_named(patch_dir: Path) -> None:
    (patch_dir / "series").write_text("0001-not-there.patch\n")
    with pytest.raises(kbuild.BuildError, match="0001-not-there.patch.*missing"):
        kbuild.read_series()


def test_missing_tool_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(kbuild.REQUIRED_TOOLS, "braid-no-such-tool", "braid-tool-package")
    with pytest.raises(kbuild.BuildError, match="install: .*braid-tool-package"):
        kbuild.check_dependencies()


def test_dropped_config_option_is_reported(tmp_path: Path) -> None:
    config = tmp_path / ".config"
    config.write_text("CONFIG_MPTCP=y\n# CONFIG_NET_SCH_NETEM is not set\n")
    frag = tmp_path / "frag.config"
    frag.write_text("CONFIG_MPTCP=y\nCONFIG_NET_SCH_NETEM=y\n")
    with pytest.raises(kbuild.BuildError, match="CONFIG_NET_SCH_NETEM=y"):
        kbuild.verify_config(config, [frag])


def test_build_hash_changes_with_patches(tmp_path: Path) -> None:
    p = tmp_path / "0001-x.patch"
    p.write_text("a")
    h1 = kbuild.build_hash("v", [p], ["CONFIG_X=y"])
    p.write_text("b")
    assert kbuild.build_hash("v", [p], ["CONFIG_X=y"]) != h1
    assert kbuild.build_hash("v", [p], ["CONFIG_X=y"]) == kbuild.build_hash("v", [p], ["CONFIG_X=y"])


def test_a_tree_with_a_branch_checked_out_is_refused_not_reset(tmp_path: Path) -> None:
    """The build resets its source tree; someone's branch there (and the
    edits not yet committed on it) must survive a build started by mistake."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "f.c").write_text("pristine\n")
    git("add", "f.c")
    git("commit", "-q", "-m", "pristine")
    git("tag", "pristine")
    git("checkout", "-q", "-b", "braid-dev")
    (tmp_path / "f.c").write_text("work in progress\n")
    with pytest.raises(kbuild.BuildError, match="branch braid-dev checked out"):
        kbuild.apply_series(tmp_path, [])
    assert (tmp_path / "f.c").read_text() == "work in progress\n"
    git("checkout", "-q", "-f", "--detach", "pristine")
    kbuild.apply_series(tmp_path, [])  # the build's own detached tree is reset as before
    assert (tmp_path / "f.c").read_text() == "pristine\n"


def test_a_freshly_unpacked_source_takes_the_series(tmp_path: Path) -> None:
    """The first build on a machine unpacks the source and applies the
    series at once: the tree it unpacks must be one the build may reset."""
    import subprocess

    tree = tmp_path / "linux-source"
    tree.mkdir()
    (tree / "f.c").write_text("pristine\n")
    tarball = tmp_path / "linux-source.tar.xz"
    subprocess.run(["tar", "-cJf", str(tarball), "-C", str(tmp_path), "linux-source"], check=True)
    src = kbuild.prepare_source(tmp_path / "cache", "1.0", tarball)
    (src / "f.c").write_text("left over from a build\n")
    kbuild.apply_series(src, [])
    assert (src / "f.c").read_text() == "pristine\n"


FAKE_MAKE = """#!/bin/sh
for f in a b c d; do echo "  CC      $f.o"; done
echo "  LD      vmlinux"
echo "dpkg-deb: building package 'linux-image-6.12-braid' in '../linux-image-6.12-braid.deb'."
"""


def test_compile_reports_files_eta_and_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The compile prints status lines (n/N of the last build's count, an
    ETA) and a line per stage on stderr, not make's output; stdout stays
    for the image's path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(FAKE_MAKE)
    (bin_dir / "make").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(kbuild, "REPORT_EVERY_S", 0.0)
    obj = tmp_path / "obj"
    obj.mkdir()
    (obj / ".braid-object-count").write_text("8")
    kbuild.compile_kernel(tmp_path, obj, "marker", 2, "1")
    out, err = capsys.readouterr()
    assert out == ""
    assert "kernel: compiling with 2 jobs (~8 files, as last time)" in err
    assert "compiling: 4/8 files ~50%" in err and "ETA ~" in err
    assert "kernel: linking vmlinux" in err
    assert "kernel: packaging linux-image-6.12-braid (" in err
    assert "kernel: compiled 4 files" in err
    assert "  CC " not in err


def test_compile_status_without_an_estimate() -> None:
    assert kbuild.compile_status(10, 0, 42.9) == "compiling: 10 files, 42s elapsed"
    assert kbuild.compile_status(100, 400, 60) == "compiling: 100/400 files ~25%, 60s elapsed, ETA ~180s"
