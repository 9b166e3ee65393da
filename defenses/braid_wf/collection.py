"""Where ``wf collect`` puts its loads and how a batch's captures become
traces, whatever carried the loads (braid-proxy on the standard testbed,
or Tor in Tor mode's private network).

A condition's loads go to ``OUT/<label>/``: ``wan1/`` and ``wan2/`` hold
what each network's observer captured of each load, ``all/`` both merged
(the load as one path would carry it), ``loads.jsonl`` one line per load
(the loader's result, the file name, the condition), ``collection.json``
how the loads were made (:func:`describe`). A load whose ``all`` trace
exists is done: a collection resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from braid_eval.progress import Progress
from braid_wf.trace import Trace, trace_from_packets, write_trace

if TYPE_CHECKING:
    from braid_testbed.capture import WanCapture

# Unmonitored load n is corpus site UNMONITORED_BASE + n, whatever --sites
# is, so a dataset can grow its monitored sites later (resuming with a
# larger --sites) without a monitored site ever being one of its
# unmonitored ones. (Datasets before 2026-11-26 used --sites + n.)
UNMONITORED_BASE = 100_000
# A load's trace runs until this long after its last object arrived: the
# padding that follows the last data (braid-proxy's padding_idle, 1 s) is
# part of what the observer sees. At most TAIL_OF_GAP of the pause before
# the next load (collect's --gap-ms, 1.5 s), which must not leak in.
TRACE_TAIL_S = 1.2
TAIL_OF_GAP = 0.8
# A load that fails (a request the browser gave up, a stream tor closed)
# is loaded again after the rest of the collection, this many times in all.
ATTEMPTS = 3


# What a dataset's loads must share: a collection resumed with any of these
# changed would mix two corpora in one directory.
SAME_FOR_EVERY_LOAD = ("condition", "loader", "host", "links", "one_connection", "seed", "profile")
# What a collection.json written before a field existed meant by its absence.
BEFORE_THE_FIELD = {"profile": "small"}


def links_description(rate_mbit: float | None, delay_ms: float = 0.0) -> str:
    """collection.json's ``links``: each network's emulated link, or
    "unshaped" (``rate_mbit`` None: the host's kernel, no netem)."""
    return "unshaped" if rate_mbit is None else f"{rate_mbit:g} Mbit/s, {delay_ms:g} ms one way"


def link_rate_mbit(how: dict[str, Any]) -> float | None:
    """Each network's link rate in a collection.json (``how``), as
    links_description wrote it; None when its links were unshaped or it
    does not say."""
    rate, _, unit = str(how.get("links", "")).partition(",")[0].partition(" ")
    try:
        return float(rate) if unit == "Mbit/s" else None
    except ValueError:
        return None


def describe(root: Path, how: dict[str, Any]) -> None:
    """Write ``root``'s collection.json: ``how`` (condition, loader, links,
    ...) and the kernel that carries the loads. A resumed collection must
    load as the first did (SAME_FOR_EVERY_LOAD): anything else is refused,
    the corpus's sizes may grow."""
    path = root / "collection.json"
    if path.exists():
        before = BEFORE_THE_FIELD | json.loads(path.read_text())
        changed = [k for k in SAME_FOR_EVERY_LOAD if k in before and before[k] != how.get(k)]
        if changed:
            raise SystemExit(f"{root}: its loads were collected with " + ", ".join(
                f"{k} {before[k]!r}" for k in changed) + f", not {', '.join(repr(how.get(k)) for k in changed)}; "
                "collect into a new --out")
    path.write_text(json.dumps({**how, "kernel": platform.release()}, indent=1) + "\n")


def description(data: Path) -> dict[str, Any] | None:
    """The collection.json of the collection ``data`` (its ``all``, ``wan1``
    or ``wan2`` directory, or its root) belongs to, a field it predates as
    BEFORE_THE_FIELD; None for a dataset that ``wf collect`` did not make."""
    for path in (data / "collection.json", data.parent / "collection.json"):
        if path.exists():
            found: dict[str, Any] = BEFORE_THE_FIELD | json.loads(path.read_text())
            return found
    return None


def load_name(site: int, instance: int) -> str:
    """A load's file name: ``site-instance``, or ``n`` for unmonitored load n."""
    return f"{site}-{instance}" if site < UNMONITORED_BASE else str(site - UNMONITORED_BASE)


def check_numbering(meta: Path) -> None:
    """Refuse to resume a dataset whose unmonitored loads were numbered
    after its monitored sites (the old scheme): their names would now mean
    other corpus sites."""
    if not meta.exists():
        return
    for line in meta.read_text().splitlines():
        r = json.loads(line)
        if "-" not in r["file"] and r["site"] != UNMONITORED_BASE + int(r["file"]):
            raise SystemExit(f"{meta.parent}: its unmonitored loads are numbered after the monitored "
                             f"sites (load {r['file']} is site {r['site']}), not from {UNMONITORED_BASE}; "
                             "collect into a new --out")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A condition's collection: its directories, every load it holds when
    complete, those still to load, and how far past a load's end its
    trace runs."""

    label: str
    root: Path
    loads: list[tuple[int, int]]
    todo: list[tuple[int, int]]
    tail_s: float

    def directory(self, part: str) -> Path:
        """``wan1``, ``wan2`` or ``all``."""
        return self.root / part


def not_collected(root: Path, loads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Those of ``loads`` whose trace is not in ``root``'s ``all`` yet."""
    return [(s, i) for s, i in loads if not (root / "all" / load_name(s, i)).exists()]


def plan(out: Path, label: str, sites: int, instances: int, unmonitored: int, gap_ms: int) -> Plan:
    """Make ``OUT/label``'s directories and list the loads not yet collected."""
    root = out / label
    for part in ("wan1", "wan2", "all"):
        (root / part).mkdir(parents=True, exist_ok=True)
    loads = [(s, i) for i in range(instances) for s in range(sites)]
    loads += [(UNMONITORED_BASE + n, 0) for n in range(unmonitored)]
    check_numbering(root / "loads.jsonl")
    return Plan(label, root, loads, not_collected(root, loads), min(TRACE_TAIL_S, TAIL_OF_GAP * gap_ms / 1000))


def record(p: Plan, results: Iterable[dict[str, Any]], captures: tuple[WanCapture, WanCapture], clients: set[str],
           port: int, segment: int, meta: dict[str, Any], log: Callable[[str], None]) -> int:
    """Each successful load of a batch as its traces on both networks and
    merged, from the batch's captures (``clients``: the client's addresses,
    ``port``: the relay's, ``segment``: the wire's MSS), and its line in
    loads.jsonl with ``meta``; returns how many. A failed load is logged
    and recorded nothing."""
    collected = 0
    with open(p.root / "loads.jsonl", "a") as out:
        for r in results:
            if not r["ok"]:
                why = f" ({r['error']})" if r.get("error") else ""
                log(f"load {r['name']} failed{why}")
                continue
            name = load_name(r["site"], r["instance"])
            parts = [trace_from_packets(cap.packets, clients, r["start"], r["end"] + p.tail_s,
                                        port=port, segment=segment) for cap in captures]
            for w, part in enumerate(parts, start=1):
                write_trace(part, p.directory(f"wan{w}") / name)
            times = np.concatenate([t.times for t in parts])
            sizes = np.concatenate([t.sizes for t in parts])
            order = np.argsort(times, kind="stable")
            write_trace(Trace(times[order], sizes[order]), p.directory("all") / name)
            out.write(json.dumps({**r, "file": name, "condition": p.label, **meta}) + "\n")
            collected += 1
    return collected


# A batch's loads through the relay: the loader's process and its results.
Loader = Callable[[list[tuple[int, int]]], tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]]


def collect_batches(p: Plan, batch: int, captures: Callable[[], tuple[WanCapture, WanCapture]], load: Loader,
                    clients: set[str], port: int, segment: int, meta: dict[str, Any], log: Callable[[str], None],
                    diagnosis: Callable[[], str] = str) -> int:
    """``p``'s loads still to do, ``batch`` at a time: each batch loaded by
    ``load`` while both networks' ``captures()`` run, then recorded
    (:func:`record`), with a progress line and an ETA per batch. The loads
    that failed are loaded again after the others, up to ATTEMPTS times
    in all; returns how many failed every time (a later run with the same
    directory tries them again). A loader that fails without any result
    ends the collection, with ``diagnosis()`` (what the relay logged) in
    the error."""
    progress = Progress(f"{p.label}:", len(p.loads), done=len(p.loads) - len(p.todo), sink=log)
    todo = p.todo
    for attempt in range(1, ATTEMPTS + 1):
        if attempt > 1 and todo:
            log(f"{p.label}: loading the {len(todo)} failed load(s) again (attempt {attempt} of {ATTEMPTS})")
        for b in range(0, len(todo), batch):
            caps = captures()
            with caps[0], caps[1]:
                proc, results = load(todo[b : b + batch])
            collected = record(p, results, caps, clients, port, segment, meta, log)
            for cap in caps:
                cap.cleanup()
            progress.step("loads", n=collected)
            if proc.returncode != 0 and not results:
                raise RuntimeError(f"loader failed: {proc.stderr.strip()[-600:]}\n{diagnosis()}".rstrip())
        todo = not_collected(p.root, todo)
    if todo:
        log(f"{p.label}: {len(todo)} load(s) failed {ATTEMPTS} times "
            f"({', '.join(load_name(s, i) for s, i in todo[:5])}); run the same collection again to retry them")
    return len(todo)
