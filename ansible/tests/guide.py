"""docs/deploy.md as the deployment tests run it: its "Checking it works"
commands, and its manual path's marked blocks.

The guide marks each block of its manual, package-based path that an
operator runs or writes with an HTML comment (invisible when rendered)
right before the block::

    <!-- manual step 2: client proxy -->
    ```sh
    ...
    ```
    <!-- manual step 3: client > /etc/braid/gateways.conf -->
    ```ini
    ...

``step N`` orders the blocks as the package section lists the steps (blocks
of one step run in the guide's order); the hosts are ``client`` (the client
box) and ``proxy``; ``> PATH`` makes the block a file's content. In a block
run on several hosts, a command whose comment is ``# client box`` or
``# proxy`` runs only there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ansible_run import REPO
from booted import BootedSystem

GUIDE = REPO / "docs" / "deploy.md"
HOSTS = ("client", "proxy")
_MARK = re.compile(r"^(?P<indent>\s*)<!-- manual step (?P<step>\d+): (?P<hosts>[a-z ]+?)(?: > (?P<path>/\S+))? -->$")
# A command's trailing comment naming the one host it is for.
_HOST_COMMENT = re.compile(r"#\s*(client box|proxy)\s*$")
_HOST_OF_COMMENT = {"client box": "client", "proxy": "proxy"}


@dataclass(frozen=True)
class ManualBlock:
    step: int
    hosts: tuple[str, ...]
    path: str | None  # a file's content, or commands (None)
    text: str

    def commands_for(self, host: str) -> str:
        """The block's commands that ``host`` runs (continued lines kept together)."""
        commands: list[list[str]] = []
        for line in self.text.splitlines():
            if commands and commands[-1][-1].endswith("\\"):
                commands[-1].append(line)
            else:
                commands.append([line])
        kept = []
        for command in commands:
            named = _HOST_COMMENT.search(command[-1])
            if named is None or _HOST_OF_COMMENT[named[1]] == host:
                kept.extend(command)
        return "\n".join(kept) + "\n"


def manual_blocks(text: str | None = None) -> list[ManualBlock]:
    """The guide's marked blocks in step order."""
    lines = (GUIDE.read_text() if text is None else text).splitlines()
    blocks = []
    for i, line in enumerate(lines):
        mark = _MARK.match(line)
        if mark is None:
            if "<!-- manual step" in line:
                raise ValueError(f"docs/deploy.md:{i + 1}: a manual step mark this test cannot read: {line!r}")
            continue
        indent = mark["indent"]
        if not lines[i + 1].startswith(indent + "```"):
            raise ValueError(f"docs/deploy.md:{i + 1}: the mark is not right before a fenced block")
        body = []
        for inner in lines[i + 2:]:
            if inner.strip() == "```":
                break
            body.append(inner[len(indent):])
        hosts = tuple(mark["hosts"].split())
        if not set(hosts) <= set(HOSTS):
            raise ValueError(f"docs/deploy.md:{i + 1}: unknown host in {hosts}")
        blocks.append(ManualBlock(int(mark["step"]), hosts, mark["path"], "\n".join(body) + "\n"))
    return sorted(blocks, key=lambda b: b.step)


def guide_checks() -> list[str]:
    """The commands of docs/deploy.md's "Checking it works" block, comments dropped:
    what the guide tells an operator to run on a client box."""
    text = GUIDE.read_text()
    section = text[text.index("## Checking it works"):]
    block = section[section.index("```sh\n") + 6:section.index("\n```", section.index("```sh\n"))]
    commands = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if c and not c.startswith("#")]


def gateway_states(box: BootedSystem) -> dict[str, bool]:
    """gwsteer's status file on a booted client box: up or not, per gateway id."""
    out = box.run("cat", "/run/braid/gateways.json").stdout
    return {g["id"]: g["up"] for g in json.loads(out)["gateways"]} if out else {}


def read_block_file(blocks: list[ManualBlock], host: str, path: str) -> str:
    """The content the guide gives ``path`` on ``host``."""
    return next(b.text for b in blocks if b.path == path and host in b.hosts)


def write_block_file(root: Path, path: str, text: str) -> None:
    """Write a file as an operator's editor does (root's, 0644)."""
    target = root / path.lstrip("/")
    target.write_text(text)
    target.chmod(0o644)
