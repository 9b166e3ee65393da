"""The documentation points at things that exist, and every command it names answers --help.

Three guarantees, each checked per file or per command so that a failure
names what to fix:

* every relative link in a Markdown file (``[text](target)`` or a
  reference definition) resolves to a file or directory of the checkout,
  relative to the Markdown file, and a ``#anchor`` into a Markdown file
  matches one of its headings (GitHub's slugs);
* every repository path a Markdown file cites in backticks
  (``eval/braid_eval/experiments/failover.py``, ``kernel/vm``, or ``internal/pt``
  relative to proxy/README.md) exists. Only a token that reads as a path
  into the checkout is held to this: no spaces or placeholders, a first
  component that is a top-level directory or a directory beside the
  Markdown file, and not a path git ignores (out/, build outputs);
* every Python command-line entry point (a module or script with an
  argparse ``__main__``, a package's ``__main__.py``, a python launcher)
  and each of its sub-commands exits 0 on ``--help`` and prints a usage
  line, run the way the docs run it (``python3 -m braid_wf.cli``,
  ``kernel/vm``). The Go binaries are left to the Go tests: they need a
  build.

Everything a Markdown file says is checked against what git tracks or would
track (the working tree's files, not those ignored), so a path that only a
build or a run leaves behind does not pass. The kernel's patch series
(kernel/patches, kernel/upstream) is exempt: it quotes the kernel tree."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePosixPath

import pytest
from checkout import REPO, checkout_files

EXEMPT = ("kernel/patches/", "kernel/upstream/")
# A --help that runs longer than this is doing work before it parses its arguments.
HELP_TIMEOUT_S = 30


@functools.cache
def checkout_set() -> frozenset[str]:
    """checkout_files(), for membership tests."""
    return frozenset(checkout_files())


@functools.cache
def checkout_dirs() -> frozenset[str]:
    """Every directory that holds one of checkout_files(), relative to the root ("" is the root)."""
    dirs = {""}
    for name in checkout_files():
        dirs.update(str(parent) for parent in PurePosixPath(name).parents if str(parent) != ".")
    return frozenset(dirs)


@functools.cache
def top_level_dirs() -> frozenset[str]:
    return frozenset(name.split("/", 1)[0] for name in checkout_files() if "/" in name)


def ignored(paths: Iterable[str]) -> set[str]:
    """Those of paths (relative to the root) that git ignores: generated, so no doc can be wrong about them."""
    listed = "\0".join(paths)
    if not listed:
        return set()
    run = subprocess.run(["git", "check-ignore", "-z", "--stdin"], cwd=REPO, input=listed.encode() + b"\0",
                         capture_output=True, check=False, timeout=60)
    assert run.returncode in (0, 1), run.stderr.decode()  # 1: none of them is ignored
    return set(filter(None, run.stdout.decode().split("\0")))


def markdown_files() -> list[str]:
    return sorted(name for name in checkout_files() if name.endswith(".md") and not name.startswith(EXEMPT))


def normalized(path: PurePosixPath) -> str | None:
    """path (relative to the root) with "." and ".." folded, or None when it leaves the checkout."""
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def exists(path: str, directory: bool = False) -> bool:
    return path in checkout_dirs() or (not directory and path in checkout_set())


# ---------------------------------------------------------------------------------------------
# Reading Markdown


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A code span may wrap onto the next line but not across a blank line (that ends the paragraph).
CODE_SPAN = re.compile(r"(?<!`)`((?:[^`\n]|\n(?![ \t]*\n))+)`(?!`)")
LINK = re.compile(r"\[(?:[^\]\n]|\n(?![ \t]*\n))*\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*<?([^\s<>]+)>?", re.M)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)=[\"']([^\"']+)[\"']", re.I)


@functools.cache
def prose(name: str) -> str:
    """The file's text with fenced code blocks blanked out, line for line, so line numbers hold."""
    lines = (REPO / name).read_text().split("\n")
    fence = ""
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip():
                fence = ""
            lines[i] = ""
        elif m:
            fence = m.group(1)
            lines[i] = ""
    return "\n".join(lines)


def without_code_spans(text: str) -> str:
    """text with each code span blanked (newlines kept), so a link quoted as code is not followed."""
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lower-cased, punctuation dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@functools.cache
def anchors(name: str) -> frozenset[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    lines = prose(name).split("\n")
    for i, line in enumerate(lines):
        found.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        if m:
            heading = m.group(1)
        elif i + 1 < len(lines) and SETEXT.match(lines[i + 1]) and line.strip() and not line.lstrip().startswith("|"):
            heading = line.strip()  # a line underlined with === or ---
        else:
            continue
        slug = github_slug(heading)
        # GitHub numbers repeated headings: intro, intro-1, intro-2.
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(found)


# ---------------------------------------------------------------------------------------------
# Links


def link_targets(name: str) -> list[tuple[int, str]]:
    text = without_code_spans(prose(name))
    found = [(line_of(text, m.start()), m.group(1)) for m in LINK.finditer(text)]
    found += [(line_of(text, m.start()), m.group(1)) for m in REFERENCE.finditer(text)]
    return sorted(found)


def broken_link(name: str, target: str) -> str | None:
    """Why target, linked from the Markdown file name, does not resolve; None when it does."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
        return None  # http:, https:, mailto:: not this checkout's business
    path, _, anchor = target.partition("#")
    if path.startswith("/"):
        resolved = normalized(PurePosixPath(path.lstrip("/")))
    elif path:
        resolved = normalized(PurePosixPath(name).parent / path)
    else:
        resolved = name
    if resolved is None:
        return "leaves the checkout"
    if not exists(resolved, directory=path.endswith("/")):
        return f"{resolved} does not exist"
    if anchor and resolved.endswith(".md") and resolved in checkout_set() and anchor not in anchors(resolved):
        return f"{resolved} has no heading #{anchor}"
    return None


@pytest.mark.parametrize("name", markdown_files())
def test_relative_links_resolve(name: str) -> None:
    broken = []
    for lineno, target in link_targets(name):
        why = broken_link(name, target)
        if why:
            broken.append(f"{name}:{lineno}: ({target}): {why}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_what_counts_as_a_broken_link() -> None:
    heading = sorted(anchors("README.md"))[0]
    for fine in ("kernel/README.md", "kernel/", "./eval", f"README.md#{heading}", "https://example.org/nosuch",
                 "mailto:someone@example.org"):
        assert broken_link("README.md", fine) is None, fine
    assert broken_link("proxy/README.md", f"../README.md#{heading}") is None
    assert broken_link("README.md", "nosuch.md") == "nosuch.md does not exist"
    assert broken_link("README.md", "README.md/") == "README.md does not exist"  # a file is not a folder
    assert broken_link("README.md", "#no-such-heading") == "README.md has no heading #no-such-heading"
    assert broken_link("README.md", "../elsewhere") == "leaves the checkout"
    assert broken_link("README.md", "out/summary.md") == "out/summary.md does not exist"  # generated


def test_links_are_read_from_prose_only() -> None:
    text = "a [link](a.md) and `[code](b.md)` and [ref]: c.md\n\n[wrapped\ntext](d.md \"title\")"
    assert [m.group(1) for m in LINK.finditer(without_code_spans(text))] == ["a.md", "d.md"]


# ---------------------------------------------------------------------------------------------
# Cited paths

# Placeholders (<name>), globs, variables, brace lists, URLs, options and absolute or home paths
# are not paths into the checkout.
NOT_A_PATH = re.compile(r"[\s<>*?$%{}\[\]|='\"]|://|^[-~/]")


def cited_path(token: str) -> str | None:
    """The repository path a code span may cite (a suffix such as :42 or ::test dropped), or None."""
    token = token.strip().rstrip(".,;)")
    token = token.split(":", 1)[0]
    if "/" not in token or NOT_A_PATH.search(token):
        return None
    return token.removeprefix("./")


def citations(name: str) -> list[tuple[int, str]]:
    text = prose(name)
    found = []
    for m in CODE_SPAN.finditer(text):
        path = cited_path(m.group(1))
        if path:
            found.append((line_of(text, m.start()), path))
    return found


def readings(name: str, path: str) -> list[str]:
    """The repository paths a citation in name could mean: from the root and from the file's folder."""
    here = PurePosixPath(name).parent
    bases = [here] if path.startswith("../") else [PurePosixPath(), here]
    return [p for p in (normalized(base / path.rstrip("/")) for base in bases) if p is not None]


def meant_as_path(name: str, path: str) -> bool:
    """Whether a citation that resolves nowhere reads as a path into the checkout (and so is stale)."""
    first = path.split("/", 1)[0]
    here = str(PurePosixPath(name).parent)
    beside = first if here == "." else f"{here}/{first}"
    return first == ".." or first in top_level_dirs() or beside in checkout_dirs()


@pytest.mark.parametrize("name", markdown_files())
def test_cited_paths_exist(name: str) -> None:
    unresolved = []
    for lineno, path in citations(name):
        options = readings(name, path)
        if any(exists(p, directory=path.endswith("/")) for p in options):
            continue
        if meant_as_path(name, path):
            unresolved.append((lineno, path, options))
    # Asked with and without a trailing slash: a pattern such as /ansible/artifacts/ matches only
    # directories, and git cannot tell that a path that is not there would be one.
    asked = {p: (p, f"{p}/") for _, _, options in unresolved for p in options}
    generated = ignored(q for both in asked.values() for q in both)
    missing = [f"{name}:{lineno}: `{path}`" for lineno, path, options in unresolved
               if not any(generated.intersection(asked[p]) for p in options)]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize(("token", "expected"), [
    ("eval/braid_eval/experiments/failover.py:missing_prerequisite", "eval/braid_eval/experiments/failover.py"),
    ("tests/host/test_wf.py::test_x", "tests/host/test_wf.py"),
    ("./cmd/braid-pt", "cmd/braid-pt"),
    ("kernel/", "kernel/"),
    ("kernel/vm run", None),
    ("inventory/<yours>/hosts.yml", None),
    ("roles/*/tasks/validate.yml", None),
    ("/etc/braid/gateways.conf", None),
    ("~/.cache/braid/kernel", None),
    ("https://example.org/a/b", None),
    ("braid", None),
    ("proxy/contrib/braid-openvpn@.service", "proxy/contrib/braid-openvpn@.service"),
    ("PYTHONPATH=eval:kernel", None),
])
def test_what_counts_as_a_cited_path(token: str, expected: str | None) -> None:
    assert cited_path(token) == expected


def test_a_stale_citation_is_caught_and_a_foreign_one_is_not() -> None:
    assert meant_as_path("proxy/README.md", "internal/nosuch")  # proxy/internal exists
    assert meant_as_path("README.md", "eval/nosuch.py")
    assert meant_as_path("proxy/openvpn/README.md", "../nosuch")
    assert not meant_as_path("kernel/README.md", "net/mptcp/sched_hywf.c")  # the kernel's tree, not ours
    assert not meant_as_path("README.md", "hywf/all")  # a scheduler and a scope
    assert readings("proxy/openvpn/README.md", "../contrib/x") == ["proxy/contrib/x"]
    assert "out/summary.md" in ignored(["out/summary.md", "eval/README.md"])


def test_github_slugs() -> None:
    assert github_slug("Quick start") == "quick-start"
    assert github_slug("`kernel/vm`: run a command in braid's kernel") == "kernelvm-run-a-command-in-braids-kernel"
    assert github_slug("E3 (failover, host kernel)") == "e3-failover-host-kernel"
    assert github_slug("See [the proxy](proxy/README.md)") == "see-the-proxy"


# ---------------------------------------------------------------------------------------------
# --help

MAIN_GUARD = re.compile(r"^if __name__ == [\"']__main__[\"']:", re.M)
SUBCOMMANDS = re.compile(r"\{([\w,-]+)\}\s+\.\.\.(?!\])")


@dataclass(frozen=True)
class Cli:
    name: str  # how the docs run it
    argv: tuple[str, ...]
    pythonpath: tuple[str, ...]


def base_pythonpath() -> tuple[str, ...]:
    """What pytest puts on the path (pyproject.toml): what the repository's scripts export too."""
    with (REPO / "pyproject.toml").open("rb") as f:
        return tuple(tomllib.load(f)["tool"]["pytest"]["ini_options"]["pythonpath"])


def package_root(directory: PurePosixPath) -> PurePosixPath:
    while (REPO / directory / "__init__.py").is_file():
        directory = directory.parent
    return directory


LAUNCHES = re.compile(r"^from (\S+) import main\b", re.M)


def python_clis() -> list[Cli]:
    base = base_pythonpath()
    found = []
    launched = set()  # modules a launcher or a __main__.py runs: asked once, the way the docs run them
    for name in sorted(checkout_files()):
        if name.startswith(EXEMPT):
            continue
        path = PurePosixPath(name)
        if path.suffix == ".py":
            text = (REPO / name).read_text(errors="replace")
            package = (REPO / path.parent / "__init__.py").is_file()
            if path.name == "__main__.py" and package:
                # A package run with -m: a CLI when the package parses arguments somewhere.
                if not any("argparse" in p.read_text(errors="replace") for p in (REPO / path.parent).glob("*.py")):
                    continue
                module_path = path.parent
                launched.update(LAUNCHES.findall(text))
            elif MAIN_GUARD.search(text) and "argparse" in text:
                module_path = path.with_suffix("")
            else:
                continue
            if package:
                root = package_root(path.parent)
                module = ".".join(module_path.relative_to(root).parts)
                found.append(Cli(f"python3 -m {module}", (sys.executable, "-m", module),
                                 tuple(dict.fromkeys((str(root), *base)))))
            else:
                found.append(Cli(name, (sys.executable, name), base))
        elif not path.suffix:
            # Extension-less scripts (kernel/vm, mptcpd-plugins/gwsteer-cli): those written in Python
            # that parse arguments or launch a module's main().
            head = (REPO / name).read_bytes()[:4096]
            if not head.startswith(b"#!") or b"python" not in head.split(b"\n", 1)[0]:
                continue
            text = (REPO / name).read_text(errors="replace")
            launched.update(LAUNCHES.findall(text))
            if "argparse" in text or LAUNCHES.search(text):
                found.append(Cli(name, (sys.executable, name), base))
    return [cli for cli in found if cli.argv[1:2] != ("-m",) or cli.argv[2] not in launched]


def run_help(argv: tuple[str, ...], pythonpath: tuple[str, ...]) -> tuple[int | None, str]:
    """argv's exit status (None on timeout) and its output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(REPO / p) for p in pythonpath),
               PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    # A session of its own, so that a CLI that ignores --help and starts work (a kernel build)
    # is stopped with everything it started.
    with subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
        try:
            out, _ = proc.communicate(timeout=HELP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return None, out
    return proc.returncode, out


@functools.cache
def help_outputs() -> dict[str, list[tuple[str, int | None, str]]]:
    """Each CLI's runs: (command line, status, output) for --help and each sub-command's --help.

    Run all at once, a few at a time: each is a Python start-up, and run one by one they
    would take most of this file's time."""
    clis = python_clis()
    workers = max(2, os.cpu_count() or 2)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        tops = list(pool.map(lambda c: run_help((*c.argv, "--help"), c.pythonpath), clis))
        subs = [(cli, sub) for cli, (_, out) in zip(clis, tops, strict=True)
                for m in SUBCOMMANDS.finditer(out.split("\n\n", 1)[0]) for sub in m.group(1).split(",")]
        sub_runs = list(pool.map(lambda cs: run_help((*cs[0].argv, cs[1], "--help"), cs[0].pythonpath), subs))
    results: dict[str, list[tuple[str, int | None, str]]] = {
        cli.name: [(f"{cli.name} --help", *top)] for cli, top in zip(clis, tops, strict=True)}
    for (cli, sub), run in zip(subs, sub_runs, strict=True):
        results[cli.name].append((f"{cli.name} {sub} --help", *run))
    return results


@pytest.mark.parametrize("cli", [c.name for c in python_clis()])
def test_help_runs(cli: str) -> None:
    failed = []
    for command, status, out in help_outputs()[cli]:
        if status is None:
            failed.append(f"{command}: still running after {HELP_TIMEOUT_S} s\n{out[-2000:]}")
        elif status != 0 or "usage" not in out.lower():
            failed.append(f"{command}: exit {status}\n{out[-2000:]}")
    assert not failed, "\n\n".join(failed)


def test_the_clis_the_docs_name_are_found() -> None:
    names = {c.name for c in python_clis()}
    for cli in ("python3 -m braid_eval.experiments.failover", "python3 -m braid_wf", "python3 -m braid_tor",
                "python3 -m braid_openvpn", "kernel/build", "kernel/vm", "mptcpd-plugins/gwsteer-cli"):
        assert cli in names, cli


def test_sub_commands_are_read_from_usage() -> None:
    usage = "usage: python3 -m braid_wf [-h]\n       {quick,evaluate,synth}\n       ...\n\nmore"
    assert [m.group(1) for m in SUBCOMMANDS.finditer(usage)] == ["quick,evaluate,synth"]
    # an option's choices are not sub-commands
    assert not SUBCOMMANDS.search("usage: x [--mode {upload,download}] [--out OUT]")
