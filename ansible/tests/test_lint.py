"""ansible-lint (production profile) and ansible-playbook --syntax-check on every playbook."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
import yaml
from backstop import backstop

from ansible_run import ANSIBLE_DIR

PLAYBOOKS = ["site.yml", "validate.yml", "client.yml", "proxy.yml"]


def _env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def test_ansible_lint_production_profile() -> None:
    proc = subprocess.run(
        ["ansible-lint", "--profile", "production", "--nocolor"],
        cwd=ANSIBLE_DIR, env=_env(), capture_output=True, text=True, timeout=backstop(300), check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook: str) -> None:
    proc = subprocess.run(
        ["ansible-playbook", "--syntax-check", playbook],
        cwd=ANSIBLE_DIR, env=_env(), capture_output=True, text=True, timeout=backstop(120), check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_pythonpath_in_the_playbooks() -> None:
    """braid's tools run as console scripts of its wheel from the targets' venv (and the validators
    from build-artifacts' venv): no play, task, template or variable sets PYTHONPATH."""
    files = [*ANSIBLE_DIR.glob("*.yml"), *(ANSIBLE_DIR / "tasks").rglob("*"), *(ANSIBLE_DIR / "roles").rglob("*")]
    offenders = [str(f.relative_to(ANSIBLE_DIR)) for f in files if f.is_file() and "PYTHONPATH" in f.read_text()]
    assert offenders == []


SHARED_DEFAULTS = ANSIBLE_DIR / "roles" / "braid" / "defaults" / "main.yml"


def _loads_shared_defaults(play: dict[str, Any]) -> bool:
    for task in [*(play.get("pre_tasks") or []), *(play.get("tasks") or [])]:
        if task.get("ansible.builtin.import_tasks") == "tasks/validate.yml":
            return True
        if (task.get("ansible.builtin.import_role") or {}).get("name") == "braid":
            return True
    return False


def _role_text(play: dict[str, Any]) -> str:
    """What the play runs of its roles: whole roles, or the task files it includes."""
    texts = []
    for entry in play.get("roles") or []:
        role = ANSIBLE_DIR / "roles" / (entry["role"] if isinstance(entry, dict) else entry)
        texts += [f.read_text() for f in role.rglob("*.y*ml") if "defaults" not in f.parts]
    for task in play.get("tasks") or []:
        use = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role")
        if use:
            role = ANSIBLE_DIR / "roles" / use["name"]
            name = use.get("tasks_from", "main")
            texts.append((role / "tasks" / (name if name.endswith(".yml") else f"{name}.yml")).read_text())
    return "\n".join(texts)


@pytest.mark.parametrize("playbook", ["client.yml", "proxy.yml"])
def test_plays_that_read_shared_settings_load_their_defaults(playbook: str) -> None:
    """A play whose roles read a shared setting (roles/braid/defaults: braid_start_services, ...)
    must import the braid role (tasks/validate.yml does) to have its default: role defaults do not
    outlive their play, and no role depends on braid. Without it the play fails on an undefined
    variable unless the inventory happens to set it."""
    shared = yaml.safe_load(SHARED_DEFAULTS.read_text())
    plays = yaml.safe_load((ANSIBLE_DIR / playbook).read_text())
    missing = [play["name"] for play in plays
               if any(name in _role_text(play) for name in shared) and not _loads_shared_defaults(play)]
    assert not missing, f"{playbook}: plays that read shared settings without their defaults: {missing}"
