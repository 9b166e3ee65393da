"""The patch series is clean and kernel/series-added matches what it adds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import kbuild

KERNEL = Path(kbuild.__file__).resolve().parent


def added_files(patch: Path) -> dict[str, str]:
    """Files a patch creates, with their full content."""
    files: dict[str, str] = {}
    current: list[str] | None = None
    name = ""
    for line in patch.read_text().splitlines():
        if m := re.match(r"diff --git a/(\S+) b/", line):
            name, current = m[1], None
        elif line == "new file mode 100644":
            current = []
            files[name] = ""
        elif line == "-- ":  # format-patch signature: end of the diff
            current = None
        elif current is not None and line.startswith("+") and not line.startswith("+++"):
            current.append(line[1:])
            files[name] = "\n".join(current) + "\n"
    return files


def series_added_files(tmp: Path) -> dict[str, str]:
    """The files the series creates, as they stand after its last patch
    (a later patch may change a file an earlier one created)."""
    names: list[str] = []
    for patch in kbuild.read_series():
        names += [n for n in added_files(patch) if n not in names]
        touched = [n for n in names if f"diff --git a/{n} b/{n}" in patch.read_text()]
        if not touched:
            continue
        include = [f"--include={n}" for n in touched]
        subprocess.run(["git", "apply", *include, str(patch)], cwd=tmp, check=True,
                       capture_output=True, text=True)
    return {n: (tmp / n).read_text() for n in names}


def test_kernel_src_matches_the_series(tmp_path: Path) -> None:
    """kernel/series-added holds exactly the files the series adds, byte for byte
    (the userspace harness tests these copies)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    added = series_added_files(tree)
    ours = {str(p.relative_to(KERNEL / "series-added")): p.read_text()
            for p in (KERNEL / "series-added").rglob("*") if p.is_file()}
    assert set(ours) == set(added)
    for name, text in ours.items():
        assert text == added[name], f"kernel/series-added/{name} differs from the series"


def test_checkpatch_strict_is_clean() -> None:
    src = kbuild.current_source_tree()
    if not (src / "scripts" / "checkpatch.pl").exists():
        pytest.skip("kernel source not unpacked yet (kernel/build unpacks it)")
    proc = subprocess.run([str(KERNEL / "checkpatch")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


UPSTREAM = KERNEL / "upstream"


def upstream_patches() -> list[Path]:
    return sorted(UPSTREAM.glob("*.patch"))


@pytest.mark.parametrize("patch", upstream_patches(), ids=lambda p: p.name[:4])
def test_upstream_fix_applies_alone_and_is_clean(patch: Path, tmp_path: Path) -> None:
    """Each fix written for upstream applies to the pristine tree without
    braid's series, and checkpatch --strict finds nothing but the Fixes id,
    which a tree without upstream's history cannot resolve."""
    src = kbuild.current_source_tree()
    if not (src / "scripts" / "checkpatch.pl").exists():
        pytest.skip("kernel source not unpacked yet (kernel/build unpacks it)")
    assert "\nFixes: " in patch.read_text(), "an upstream fix names the commit it fixes"
    # A private index: the check reads the pristine commit, never the work tree.
    env = {"GIT_INDEX_FILE": str(tmp_path / "index"), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "read-tree", "pristine"], cwd=src, env=env, check=True)
    applied = subprocess.run(["git", "apply", "--cached", "--check", str(patch)], cwd=src,
                             env=env, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    proc = subprocess.run([str(src / "scripts" / "checkpatch.pl"), "--strict", "--no-tree",
                           "--quiet", str(patch)], capture_output=True, text=True)
    findings = [line for line in proc.stdout.splitlines()
                if re.match(r"(ERROR|WARNING|CHECK):", line)]
    assert all("Unknown commit id" in line for line in findings), proc.stdout
