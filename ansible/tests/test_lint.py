"""ansible-lint (production profile) and ansible-playbook --syntax-check on every playbook."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_run import ANSIBLE_DIR

PLAYBOOKS = ["site.yml", "validate.yml", "client.yml", "proxy.yml"]


def _env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def test_ansible_lint_production_profile() -> None:
    proc = subprocess.run(
        ["ansible-lint", "--profile", "production", "--nocolor"],
        cwd=ANSIBLE_DIR, env=_env(), capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook: str) -> None:
    proc = subprocess.run(
        ["ansible-playbook", "--syntax-check", playbook],
        cwd=ANSIBLE_DIR, env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_pythonpath_in_the_playbooks() -> None:
    """braid's tools run as console scripts of its wheel from the targets' venv (and the validators
    from build-artifacts' venv): no play, task, template or variable sets PYTHONPATH."""
    files = [*ANSIBLE_DIR.glob("*.yml"), *(ANSIBLE_DIR / "tasks").rglob("*"), *(ANSIBLE_DIR / "roles").rglob("*")]
    offenders = [str(f.relative_to(ANSIBLE_DIR)) for f in files if f.is_file() and "PYTHONPATH" in f.read_text()]
    assert offenders == []
