"""`make demo` and `make bench` work from a clean checkout.

The demo's failover pane once needed a validator that only `make test`
built, and nobody saw it because every machine that ran the demo had run
the tests first. The first test builds what scripts/demo builds in a copy
of the checkout holding only what git tracks (nothing built, nothing left
by a test) and asks each pane whether it can run there. The others import
each target's modules with the PYTHONPATH its entry point sets (a base
module that pulled in the defence simulators broke `make demo` once)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import REPO, checkout_files


def exported_pythonpath(text: str, root: Path) -> str:
    """The PYTHONPATH a Makefile or shell script exports, with its repository root put in."""
    m = re.search(r"^export PYTHONPATH\s*:?=\s*\"?([^\"\n]+)", text, re.M)
    assert m, "no PYTHONPATH exported"
    return m.group(1).replace("$(CURDIR)", str(root)).replace("$here", str(root))


def clean_copy(dest: Path) -> Path:
    """The files git tracks or would track (the working tree's, so an
    uncommitted change is tested too), and nothing it ignores."""
    for name in checkout_files():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, dest / name)
    return dest


@pytest.mark.skipif(not shutil.which("go") or not shutil.which("pkg-config") or os.geteuid() != 0,
                    reason="needs root, go and the plugin's build dependencies (scripts/install-deps)")
def test_demo_builds_what_its_panes_need_from_a_clean_checkout(tmp_path: Path) -> None:
    tree = clean_copy(tmp_path / "braid")
    env = dict(os.environ, BRAID_DEMO_PREPARE_ONLY="1", BRAID_DEMO_SKIP_DEPS="1")
    built = subprocess.run(["scripts/demo"], cwd=tree, env=env, capture_output=True, text=True,
                           timeout=600, check=False)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    path = exported_pythonpath((tree / "scripts" / "demo").read_text(), tree)
    # The failover pane's own list of what it needs; the VM pane needs braid-proxy.
    asked = subprocess.run(
        [sys.executable, "-c", "from braid_eval.experiments.failover import missing_prerequisite as m; "
         "print(m() or '')"],
        cwd=tree, env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True,
        timeout=120, check=True)
    assert asked.stdout.strip() == "", asked.stdout
    assert (tree / "out" / "proxy-bin" / "braid-proxy").is_file()


@pytest.mark.parametrize(("entry", "module"), [
    ("scripts/demo", "braid_eval.demo"),
    ("scripts/demo", "braid_eval.demo.failover"),
    ("Makefile", "braid_eval.bench.sched"),
])
def test_make_targets_import_with_their_pythonpath(entry: str, module: str) -> None:
    path = exported_pythonpath((REPO / entry).read_text(), REPO)
    run = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                         timeout=120, check=False, env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
