"""The product names features, not the work that made them.

Code, output, tests and docs say what a thing does: never an issue or
work-stop number, nor a kernel change by its place in the series (which
changes whenever the series is reordered). The series itself
(kernel/patches, kernel/upstream) is exempt: `git format-patch` numbers
its files and subjects."""

from __future__ import annotations

import re
from pathlib import Path

from checkout import REPO, checkout_files

PROCESS_WORDS = re.compile(r"\b(issues?|stops?|(kernel )?patch(es)?) #?\d+", re.IGNORECASE)
EXEMPT = ("kernel/patches/", "kernel/upstream/")


def tracked_text_files() -> list[Path]:
    files = []
    for name in checkout_files():
        path = REPO / name
        if name.startswith(EXEMPT):
            continue
        if b"\0" in path.read_bytes()[:4096]:
            continue  # binary
        files.append(path)
    return files


def test_no_issue_stop_or_patch_numbers() -> None:
    found = []
    for path in tracked_text_files():
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if PROCESS_WORDS.search(line):
                found.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()[:120]}")
    assert not found, "name the feature instead:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for() -> None:
    # built here so that this file does not trip its own check
    for text in (f"see issue {18}", f"(stop {22})", f"kernel patch {14}", f"patches {1}-12",
                 f"Issue #{3}"):
        assert PROCESS_WORDS.search(text), text
    for text in ("the stop-loss", "patch the series", "an issue with 18 pages", "PATCH v2"):
        assert not PROCESS_WORDS.search(text), text
