"""Run braid's playbooks against throwaway root filesystems (the chroot connection).

The converge and invalid-inventory tests share this: build the controller's
artifacts once (``ansible/build-artifacts``), write an inventory whose hosts
are directories, run a playbook and read its recap::

    inventory = write_inventory(tmp / "inv.yml", {"box1": client_root}, {"relay": proxy_root}, artifacts)
    result = run_playbook("site.yml", inventory)
    assert result.ok and result.changed("box1") == 0
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backstop import backstop

ANSIBLE_DIR = Path(__file__).resolve().parent.parent
REPO = ANSIBLE_DIR.parent
# A converge of both roots takes ~1 min on the shared 2-core machine.
PLAYBOOK_TIMEOUT_S = backstop(600)
# "fatal: [box1]: FAILED! => ...", "failed: [box1 -> localhost] (item=...) => ..."
_FAILURE = re.compile(r"^(?:fatal|failed): \[([^\]\s]+)")
_RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@dataclass
class PlaybookResult:
    returncode: int
    output: str
    # host -> {"ok", "changed", "unreachable", "failed"} from the PLAY RECAP
    recap: dict[str, dict[str, int]]

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def changed(self, host: str) -> int:
        return self.recap[host]["changed"]

    def failures(self, host: str) -> str:
        """The failure reports of ``host`` (each from its "fatal:" line to the next blank line)."""
        blocks: list[list[str]] = []
        mine = False
        for line in self.output.splitlines():
            match = _FAILURE.match(line)
            if match:
                mine = match.group(1) == host
                if mine:
                    blocks.append([])
            elif not line.strip():
                mine = False
            if mine:
                blocks[-1].append(line)
        return "\n\n".join("\n".join(block) for block in blocks)


def build_artifacts(out: Path) -> Path:
    """Build braid-proxy and gwsteer on the controller into ``out`` (as operators do)."""
    subprocess.run([str(ANSIBLE_DIR / "build-artifacts"), str(out)], check=True, timeout=backstop(600),
                   stdout=subprocess.DEVNULL)
    return out


def chroot_host(root: Path, **host_vars: Any) -> dict[str, Any]:
    """Inventory entry of a host that is a root filesystem directory."""
    return {"ansible_host": str(root), "ansible_connection": "community.general.chroot", **host_vars}


def write_inventory(
    path: Path,
    clients: dict[str, dict[str, Any]],
    proxies: dict[str, dict[str, Any]],
    group_vars: dict[str, Any],
) -> Path:
    """Write a YAML (JSON is YAML) inventory with the two groups braid's playbooks use."""
    inventory = {
        "all": {"vars": group_vars},
        "braid_clients": {"hosts": clients},
        "braid_proxies": {"hosts": proxies},
    }
    path.write_text(json.dumps(inventory, indent=2))
    return path


def run_playbook(
    playbook: str, inventory: Path, timeout: float = PLAYBOOK_TIMEOUT_S, extra_env: dict[str, str] | None = None,
) -> PlaybookResult:
    """Run one of braid's playbooks; return its exit status, output and recap.

    ``extra_env`` overrides Ansible settings for this run (ANSIBLE_* variables
    win over ansible.cfg).
    """
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        # The controller's own temporary files stay out of the user's home.
        "ANSIBLE_LOCAL_TEMP": str(inventory.parent / "ansible-tmp"),
        **(extra_env or {}),
    })
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(ANSIBLE_DIR / playbook)],
        cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )
    output = proc.stdout + proc.stderr
    recap = {
        m.group(1): {"ok": int(m.group(2)), "changed": int(m.group(3)),
                     "unreachable": int(m.group(4)), "failed": int(m.group(5))}
        for m in _RECAP.finditer(output)
    }
    return PlaybookResult(proc.returncode, output, recap)
