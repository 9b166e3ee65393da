"""The commands `make demo` and `make bench` run import with the Makefile's
PYTHONPATH (eval and kernel only, not defenses): a base module that pulled
in the defence simulators broke `make demo` once (stop 20)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def makefile_pythonpath() -> str:
    for line in (REPO / "Makefile").read_text().splitlines():
        if line.startswith("export PYTHONPATH"):
            return line.split(":=", 1)[1].strip().replace("$(CURDIR)", str(REPO))
    raise AssertionError("Makefile exports no PYTHONPATH")


@pytest.mark.parametrize("module", ["braid_eval.demo", "braid_eval.demo_failover", "braid_eval.bench_sched"])
def test_make_targets_import_with_the_makefiles_path(module: str) -> None:
    run = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                         timeout=120, check=False, env={"PYTHONPATH": makefile_pythonpath(), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
