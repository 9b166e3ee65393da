"""braid's Python is one installable distribution.

In a fresh virtual environment (the system's site-packages visible for the
third-party dependencies, no PYTHONPATH), ``pip install -e .`` of the
checkout must give every package from the checkout and every console
script a working ``--help`` and ``--version``: what a user who installs braid gets, without
the PYTHONPATH the test suite sets."""

from __future__ import annotations

import ast
import os
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def clean_env() -> dict[str, str]:
    """The caller's environment without what would hide a missing package."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with braid installed editable from this checkout: its bin/."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, system_site_packages=True, with_pip=False)
    # pip comes from the system's site-packages and installs into the
    # interpreter that runs it: the venv's. No build isolation: setuptools
    # is the system's too (requirements.txt), so this needs no network.
    r = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "--no-build-isolation", "-e", str(REPO)],
                       capture_output=True, text=True, timeout=300, env=clean_env(), cwd=root, check=False)
    assert r.returncode == 0, f"pip install -e . failed:\n{r.stdout}\n{r.stderr}"
    return root / "bin"


def test_every_package_comes_from_the_checkout(installed: Path) -> None:
    packages = PROJECT["tool"]["setuptools"]["packages"]
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    print(importlib.import_module(name).__file__)"
    r = subprocess.run([str(installed / "python"), "-c", code, *packages], capture_output=True, text=True,
                       timeout=120, env=clean_env(), cwd=installed, check=False)
    assert r.returncode == 0, r.stderr
    files = [Path(line) for line in r.stdout.splitlines()]
    assert len(files) == len(packages)
    for name, file in zip(packages, files, strict=True):
        assert file.is_relative_to(REPO), f"{name} imported from {file}, not from the checkout"


@pytest.mark.parametrize("script", sorted(PROJECT["project"]["scripts"]))
def test_console_script_answers_help(installed: Path, script: str) -> None:
    r = subprocess.run([str(installed / script), "--help"], capture_output=True, text=True, timeout=60,
                       env=clean_env(), cwd=installed, check=False)
    assert r.returncode == 0 and "usage" in r.stdout.lower(), f"{script} --help:\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("script", sorted(PROJECT["project"]["scripts"]))
def test_console_script_names_its_version(installed: Path, script: str) -> None:
    r = subprocess.run([str(installed / script), "--version"], capture_output=True, text=True, timeout=60,
                       env=clean_env(), cwd=installed, check=False)
    assert r.returncode == 0, f"{script} --version:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.split()[-1] == PROJECT["project"]["version"], f"{script} --version: {r.stdout!r}"


def test_no_module_is_left_outside_the_distribution() -> None:
    """Each folder holding an ``__init__.py`` under the product's component
    folders is a package the distribution lists (a subpackage left out of
    ``packages`` is not installed), or test code."""
    setuptools = PROJECT["tool"]["setuptools"]
    mapped = {REPO / path: name for name, path in setuptools["package-dir"].items()}
    loose = []
    for init in REPO.glob("*/**/__init__.py"):
        pkg = init.parent
        if any(part in ("tests", "out", ".cache", "upstream") for part in pkg.relative_to(REPO).parts):
            continue
        names = [".".join([name, *pkg.relative_to(root).parts]) for root, name in mapped.items()
                 if pkg == root or pkg.is_relative_to(root)]
        if not names or names[0] not in setuptools["packages"]:
            loose.append(str(pkg.relative_to(REPO)))
    assert not loose, f"packages missing from pyproject.toml's [tool.setuptools] packages: {loose}"


def package_files() -> list[Path]:
    return sorted(f for path in PROJECT["tool"]["setuptools"]["package-dir"].values()
                  for f in (REPO / path).rglob("*.py"))


def test_no_library_imports_tests_or_edits_sys_path() -> None:
    """The distribution stands alone: none of its modules imports a test
    helper (a module in a tests/ folder) or reaches one by editing
    sys.path; tests import the library, never the other way round."""
    test_modules = {f.stem for f in REPO.glob("**/tests/*.py") if ".git" not in f.parts}
    found = []
    for f in package_files():
        tree = ast.parse(f.read_text(), str(f))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{f.relative_to(REPO)}:{getattr(node, 'lineno', '?')}: imports {name} (a test helper)"
                      for name in names if name.split(".")[0] in test_modules]
            if isinstance(node, ast.Attribute) and node.attr == "path" and \
                    isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{f.relative_to(REPO)}:{node.lineno}: uses sys.path")
    assert not found, "\n".join(found)
