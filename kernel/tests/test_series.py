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
