"""Progress of long work where the amount of it is known: one line on
stderr per finished step, with n/N, the time so far and an ETA.

Experiments, benchmarks and WF collection run for minutes to hours; a
command silent that long looks hung. The lines go to stderr, so what a
command prints on stdout (its report, JSON) stays clean::

    progress = Progress("e1", total=12)
    for point in points:
        ...
        progress.step(f"{name} {goodput:.2f} Mbit/s")
    # e1 [3/12] lossless 9.41 Mbit/s (1 min 02 s, ETA 3 min 06 s)

The ETA is the mean time per step so far times the steps left, counting
only the steps this run did (``done`` may start above zero when earlier
runs did part of the work).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def eta(done: int, total: int, elapsed: float) -> str:
    """``ETA 3 min 05 s`` after ``done`` of ``total`` steps took ``elapsed``
    seconds; ``ETA unknown`` before the first step."""
    if done <= 0:
        return "ETA unknown"
    return f"ETA {duration(elapsed / done * max(0, total - done))}"


class Progress:
    """n/N, elapsed time and ETA of ``total`` steps, one line per step."""

    def __init__(self, prefix: str, total: int, *, done: int = 0, quiet: bool = False, every: float = 0.0,
                 sink: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.prefix, self.total, self.done, self.quiet = prefix, total, done, quiet
        self.sink = sink  # a command's own logger (its timestamps); stderr if None
        self.clock = clock
        self.started = clock()
        self.every = every  # seconds between step lines, for many short steps
        self._printed = -every
        self._first = done  # steps done before this run: not in the rate

    def line(self, msg: str = "") -> str:
        """The line for the state now (what :meth:`step` prints)."""
        elapsed = self.clock() - self.started
        left = (f", {eta(self.done - self._first, self.total - self._first, elapsed)}"
                if self.done < self.total else "")
        head = f"{self.prefix} " if self.prefix else ""
        return (f"{head}[{self.done}/{self.total}]{' ' + msg if msg else ''} "
                f"({duration(elapsed)}{left})")

    def step(self, msg: str = "", n: int = 1) -> None:
        """Count ``n`` steps done and print their line (unless quiet, or
        ``every`` seconds have not passed since the last; the last step's
        line always prints)."""
        self.done += n
        now = self.clock()
        if now - self._printed >= self.every or self.done >= self.total:
            self._printed = now
            self.say(self.line(msg))

    def say(self, text: str) -> None:
        """A line of its own (a stage, a warning) on the same stream."""
        if self.quiet:
            return
        if self.sink:
            self.sink(text)
        else:
            print(text, file=sys.stderr, flush=True)
